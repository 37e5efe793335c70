"""Budgets of the quantize_float family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/quantize_float/test_quantize_float_budgets.py``
measures each.  No data checks and no syncs but the padded dequantize's, 0 AI-CPU launches: the
encodings use ``floor_divide`` / ``remainder`` / ``bitwise_and`` / ``bitwise_or`` on int32, no
shifts (docs/hardware.md).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # floor_divide (into a contiguous int32 buffer), add_, floor_divide_, the copy of the low
    # int16 halves into the bfloat16 output
    "fbgemm::FloatToBfloat16Quantized": Budget(launches=4, ai_cpu=0),
    # the int16 bits widened to int32, mul_ by 2**16
    "fbgemm::Bfloat16QuantizedToFloat": Budget(launches=2, ai_cpu=0),
    # _hfp8.encode: bitwise_and, clamp_max, floor_divide, remainder, add_, add_, floor_divide_,
    # remainder_, mul, round_, cast, lt, where, gt, lt, logical_and, remainder, where, lt,
    # bitwise_or, where (21); the uint8 cast.  ebits 7 (no mantissa bit): the parity is
    # constant, add in place of floor_divide + remainder + add_
    "fbgemm::FloatToHFP8Quantized": Budget(launches=22, ai_cpu=0, paths={"ebits7": 20}),
    # _hfp8.decode: cast, remainder, mul, add_, cast, mul_, lt, where, ge, neg, where
    "fbgemm::HFP8QuantizedToFloat": Budget(launches=11, ai_cpu=0),
    # the zero output, abs, nan_to_num_, amax, clamp_min_, add_, full_like, div_, the product,
    # _hfp8.encode (21), the copies of the codes and the scale bytes; half: the float32 cast
    "fbgemm::FloatToFP8RowwiseQuantized": Budget(launches=32, ai_cpu=0, paths={"half": 33}),
    # the scale bytes' copy, _hfp8.decode (11), div_; half: the cast to float16 / bfloat16
    "fbgemm::FP8RowwiseQuantizedToFloat": Budget(launches=13, ai_cpu=0, paths={"half": 14}),
    # the zero output, pad, isnan, cast, sum, cumsum, sub, 2 eq, logical_and, the pad columns
    # out of the kept mask (fill + copy), where (fill + where) + amax, the same + amin, sum,
    # eq, neg_, maximum, where (fill + where), full_like, add_, div_, the product,
    # _hfp8.encode (21), the codes' copy, the pad codes' fill, the scale copy, the tags (mul,
    # add_, floor_divide_, neg_, fill_) and their copy.  half: the float32 cast; one_row: the
    # tags by one sub (3 fewer); no_pad (ncols a multiple of row_dim): no pad-column fills
    "fbgemm::FloatToPaddedFP8RowwiseQuantized": Budget(
        launches=58, ai_cpu=0, paths={"half": 59, "one_row": 55, "no_pad": 55}
    ),
    # the scale and tag copies, _hfp8.decode (11), div_, the kept mask (clamp_min, rsub, lt),
    # the places (cumsum, sub_, lt, logical_and), the slots (mul, add, where with its fill, the
    # int64 cast), the zero buffer, index_copy_; half: the cast.  unsized (output_last_dim < 0):
    # the first row's tags read in one cat (the sync).  checks: the tags' amax, the kept counts'
    # amin / amax and the queued check's 5
    "fbgemm::PaddedFP8RowwiseQuantizedToFloat": Budget(
        launches=28,
        checks=8,
        syncs=0,
        syncs_unsized=1,
        ai_cpu=0,
        paths={"half": 29, "unsized": 29, "half_unsized": 30},
    ),
}
