"""Budgets of the quantize_mx family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/quantize_mx/test_quantize_mx_budgets.py``
measures each.  No checks, no syncs (upstream's CPU reference moves the shared exponents to the
host "for accuracy": ours builds the powers of two from their bits on the device), 0 AI-CPU
launches: bit fields by ``floor_divide`` / ``remainder`` / ``bitwise_and`` on int32, no shifts.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # abs, amax, eq, where (its fill), the exponent (rounding mode even: add, log2, floor),
    # sub_, clamp_, isnan, where, the int32 cast, _pow2 (add, mul, add, mul, ge, where), div,
    # the sign (lt, cast), the biased exponent (bitwise_and, floor_divide), the mantissa
    # (bitwise_and), the rounding steps (sub, eq, le, rsub, where, clamp_, add, where, where,
    # add, clamp_, pow, 2 floor_divide, add, gt, not, and, floor_divide, where, le, eq, and,
    # where, remainder, add, where, gt, where), the code (clamp_, mul_, add_, mul, add_), the
    # inf codes (eq, mul, where), the pack (mul, add), add, cat, masked_fill_, uint8 cast.
    # Paths: floor (floor / ceil and other modes: log2 and floor or ceil only) 73, stochastic
    # (randint, remainder_) 76, pad (the pad of a last dim not a multiple of the group) 75
    "fbgemm::quantize_mx": Budget(
        launches=74, ai_cpu=0, paths={"floor": 73, "stochastic": 76, "pad": 75}
    ),
    # the int32 cast, sub, eq, where (its fill), remainder, floor_divide, stack, index_select
    # (the LUT is uploaded once per device), _pow2 (6), mul
    "fbgemm::dequantize_mx": Budget(launches=16, ai_cpu=0),
}
