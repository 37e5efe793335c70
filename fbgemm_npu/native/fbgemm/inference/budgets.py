"""Budgets of the inference family (see fbgemm_npu.native.family.Budget);
``tests/fbgemm/inference/test_inference_budgets.py`` measures each."""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # main path: two INT8 tables of one D, SUM, float32 output.  Slots by segment ids (clamp,
    # index_add, cumsum), slot feature (add, floor_divide), the plan row gather, clamp, row start
    # (addcmul), the byte window (add, clamp_, one index_select of q-byte granules), keep (ge), bag
    # (sub), target (add, where), the float32 buffer's zeros; INT8 decode (scale / bias cast,
    # byte cast, addcmul) and the index_add_.  Per type: FP32 decodes by a view (-3), FP16 by a cast
    # (-2), FP8 by the table gather (-1), INT4 / INT2 +2 (floor_divide, remainder); a type of
    # several D or among others +3 (lt, arange add, where), one D of several granules +1;
    # weights +1 (mul) per type; MEAN +5 (sub, clamp_min_, reciprocal, index_select, mul_); FP16
    # output +1, BF16 +3 (add, floor_divide, int16 cast: upstream's rounding, half away from zero);
    # NONE: no target or buffer, a where per type (its scalar zero filled once; +2 per type among
    # others: gt, logical_and).  checks: non_decreasing (2), the index bounds (ge, lt, logical_and,
    # all) and the queued check's 5.  uvm: a feature placed MANAGED reads uvm_weights, joined to
    # dev_weights by one cat (+1).  worst / nobag_worst: all six types with every extra, the
    # ceilings of any call (the conformance spec's).  no_index: bags but no index, upstream's
    # zeros (1) and the offsets' checks (7: non_decreasing, the two bounds, the queued check).
    # A layout not seen before reads its host values once (the module seeds them)
    "fbgemm::int_nbit_split_embedding_codegen_lookup_function": Budget(
        launches=20,
        checks=11,
        ai_cpu=0,
        paths={
            "fp32": 17,
            "fp16": 18,
            "int4": 22,
            "fp8": 19,
            "wide": 23,
            "weighted": 21,
            "mean": 25,
            "fp16_out": 21,
            "bf16_out": 23,
            "nobag": 17,
            "nobag_mixed": 42,
            "mixed": 50,
            "uvm": 21,
            "worst": 70,
            "nobag_worst": 50,
            "no_index": 1,
        },
        path_checks={"no_index": 7},
        target=12,
        note=(
            "the catalogue's 12 is per (weight type, D) group; a call pays 16 of its 20 once "
            "whatever its types (slots, the plan row, the byte window, the pooling buffer), then "
            "3-8 per type; a fused AI Core kernel (gather, decode and pool in local memory) "
            "would do the whole lookup in 1-2"
        ),
    ),
}
