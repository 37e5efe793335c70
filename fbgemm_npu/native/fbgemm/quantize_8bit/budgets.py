"""Budgets of the quantize_8bit family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/quantize_8bit/test_quantize_8bit_budgets.py``
measures each.  No data checks (every input byte is a valid encoding), no syncs; float64
``addcmul`` / casts assumed AI Core (docs/hardware.md lists none of them).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# aminmax, 2 clamp_ (upstream's FLT_MAX / -FLT_MAX start values), sub (range), div (scale),
# cat (scale, bias), the byte copy, add (range + eps), full + div (255 / that), sub, mul_,
# round_, nan_to_num_, the uint8 copy; float16: the float32 cast first (+1); an empty row
# (n == 0): 2 fills of upstream's start values
_QUANTIZE = Budget(launches=15, ai_cpu=0, paths={"half": 16, "empty_row": 2})
_QUANTIZE_FLOAT = Budget(launches=15, ai_cpu=0, paths={"empty_row": 2})
# the contiguous copy of the scale / bias bytes, their float64 cast, the data's float64 cast,
# addcmul (the FMA: one rounding), the cast to the output; float16 outputs: the float32 step
# first (+1); bfloat16: that, then past the row's 8-column blocks the int32 add of upstream's
# ties-away tail rounding and its own copy (+3; measured with a tail and a body: 7 with the
# tail only, 6 with none)
_DEQUANTIZE_FLOAT = Budget(launches=5, ai_cpu=0)

BUDGETS: dict[str, Budget] = {
    "fbgemm::FloatToFused8BitRowwiseQuantized": _QUANTIZE_FLOAT,
    "fbgemm::FloatToFused8BitRowwiseQuantizedOut": _QUANTIZE_FLOAT,
    "fbgemm::HalfToFused8BitRowwiseQuantized": Budget(
        launches=16, ai_cpu=0, paths={"empty_row": 2}
    ),
    "fbgemm::FloatOrHalfToFused8BitRowwiseQuantized": _QUANTIZE,
    "fbgemm::Fused8BitRowwiseQuantizedToFloat": _DEQUANTIZE_FLOAT,
    "fbgemm::Fused8BitRowwiseQuantizedToFloatOut": _DEQUANTIZE_FLOAT,
    "fbgemm::Fused8BitRowwiseQuantizedToHalf": Budget(launches=6, ai_cpu=0),
    "fbgemm::Fused8BitRowwiseQuantizedToBfloat16": Budget(launches=8, ai_cpu=0),
    "fbgemm::Fused8BitRowwiseQuantizedToFloatOrHalf": Budget(
        launches=5, ai_cpu=0, paths={"half": 6, "bfloat16": 8}
    ),
    # the tables' output starts (sub), their segment ids (clamp, index_add, cumsum), the valid
    # columns (ge, lt, logical_and_), each column's byte (add, clamp_), the scale / bias byte
    # columns (add, sub_, clamp_) and their gather, the float64 cast, the per-column gather
    # (clamp_, index_select), the data gather and cast, addcmul, the float32 cast, where (a
    # fill and where); float16: the cast (+1); T = 0: the zeros, no checks.  Checks (queued):
    # aminmax, add, ge, all and the queue's own 5
    "fbgemm::Fused8BitRowwiseQuantizedToFloatMixedDim": Budget(
        launches=22,
        checks=9,
        ai_cpu=0,
        paths={"half": 23, "no_tables": 1},
        path_checks={"no_tables": 0},
    ),
}
