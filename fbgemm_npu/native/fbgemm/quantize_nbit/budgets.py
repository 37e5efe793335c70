"""Budgets of the quantize_nbit family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/quantize_nbit/test_quantize_nbit_budgets.py``
measures each.  No data checks (every float row and every byte is valid input), no sync.

Paths: ``byte_codes`` is ``bit_rate`` 5..8 (one code per byte: no ``mul`` / ``sum`` packing);
``half`` a float16 input (its float32 cast) or a float16 / bfloat16 output (its cast).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# aminmax, the maximum's clamp_min; bias: half cast, float cast; sub, div, scale's half cast,
# eq, masked_fill_, float cast, reciprocal; sub, mul_, lt + where (its scalar 0 filled: fill_),
# round_, clamp_, int32 cast; pack: mul, sum, uint8 cast; stack, cat
_QUANTIZE = 24
_PACK = 2  # the pack's mul and sum (bit_rate <= 4)

BUDGETS: dict[str, Budget] = {
    "fbgemm::FloatToFusedNBitRowwiseQuantizedSBHalf": Budget(
        launches=_QUANTIZE, ai_cpu=0, paths={"byte_codes": _QUANTIZE - _PACK}
    ),
    # the float32 cast of the input first
    "fbgemm::HalfToFusedNBitRowwiseQuantizedSBHalf": Budget(
        launches=_QUANTIZE + 1, ai_cpu=0, paths={"byte_codes": _QUANTIZE + 1 - _PACK}
    ),
    "fbgemm::FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf": Budget(
        launches=_QUANTIZE,
        ai_cpu=0,
        paths={
            "half": _QUANTIZE + 1,
            "byte_codes": _QUANTIZE - _PACK,
            "half_byte_codes": _QUANTIZE + 1 - _PACK,
        },
    ),
    # no aminmax nor clamp_min; half: the input's and the bounds' float32 casts
    "fbgemm::FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfWithRowwiseMinMax": Budget(
        launches=_QUANTIZE - 2,
        ai_cpu=0,
        paths={
            "half": _QUANTIZE,
            "byte_codes": _QUANTIZE - 2 - _PACK,
            "half_byte_codes": _QUANTIZE - _PACK,
        },
    ),
    # clone of the scale / bias bytes, their float cast; codes: int32 cast, floor_divide,
    # remainder, float cast; addcmul
    "fbgemm::FusedNBitRowwiseQuantizedSBHalfToFloat": Budget(launches=7, ai_cpu=0),
    # the same and the float16 cast
    "fbgemm::FusedNBitRowwiseQuantizedSBHalfToHalf": Budget(launches=8, ai_cpu=0),
    "fbgemm::FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf": Budget(
        launches=7, ai_cpu=0, paths={"half": 8}
    ),
    "fbgemm::FusedNBitRowwiseQuantizedSBHalfFrontToFloatOrHalf": Budget(
        launches=7, ai_cpu=0, paths={"half": 8}
    ),
}
