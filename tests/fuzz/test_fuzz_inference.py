"""Hostile-input fuzz of the inference family (fbgemm_npu/native/fbgemm/inference/): the IntNBit
TBE lookup ``fbgemm::int_nbit_split_embedding_codegen_lookup_function`` and upstream's
``IntNBitTableBatchedEmbeddingBagsCodegen`` module around it (draws and the module program:
``fbgemm_npu/testing/inference_fuzz.py``).

Valid input (every weight type mixed per table, SUM / MEAN / NONE, weighted or not, int32 /
int64 indices and offsets in any layout, outputs FP32 / FP16 / BF16 and INT8 for NONE over INT8
tables, -1 indices, empty bags and batches; the module with row pruning by remapping array or
hash map) equals upstream's CPU kernels at the parity tolerances (float32 1e-5, float16 1e-3,
bfloat16 1e-2; tests/fbgemm/inference/test_inference_parity.py).  Invalid input -- indices
outside ``[-1, rows)``, offsets broken every way, wrong dtypes, ranks and lengths of the
layout tensors, ``total_D`` / ``D_offsets`` / ``weights_offsets`` that disagree, non-tensors,
bad enums, tensors on another device -- gets an error naming the op and the argument.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import (
    INT32_MAX,
    bad_offsets,
    in_layout,
    lengths_to_offsets,
    not_a_tensor,
    seeded,
)
from fbgemm_npu.testing.inference_fuzz import (
    draw_batch,
    draw_tables,
    op_kwargs,
    remapping,
    table_rows,
)

OP = "fbgemm::int_nbit_split_embedding_codegen_lookup_function"
PROGRAM = "fbgemm_npu.testing.inference_fuzz:module_forward"
LAYOUTS = ("contiguous", "strided", "expanded", "offset")
INT8 = 2  # SparseType code: the INT8 output of pooling NONE
TOL = {0: (1e-5, 1e-5), 1: (1e-3, 1e-3), 5: (1e-2, 1e-2), 2: (0.0, 0.0)}


def _valid(data: Any, pooling: int | None = None) -> tuple[dict, dict[str, Any]]:
    """A drawn layout and the op's kwargs of a valid batch in drawn dtypes and layouts."""
    tables = draw_tables(data, pooling)
    indices, lengths, _ = draw_batch(data, tables)
    dtype = data.draw(st.sampled_from((torch.int32, torch.int64)), label="index dtype")
    offsets = in_layout(data, lengths_to_offsets(lengths, dtype), LAYOUTS)
    weights = None
    if data.draw(st.booleans(), label="weighted"):
        weights = in_layout(data, torch.rand(indices.numel(), generator=seeded(data)), LAYOUTS)
    if tables["output"] == INT8:  # upstream's INT8 rows after a -1 are unwritten memory
        indices = indices.clamp_min(0)  # (test_inference_errors.py: ours writes zeros)
    indices = in_layout(data, indices.to(dtype), LAYOUTS)
    return tables, op_kwargs(tables, indices, offsets, weights)


def _op_case(tables: dict, kw: dict[str, Any], expect: str = "equal", names: tuple = (),
             label: str = "valid") -> Case:  # fmt: skip
    rtol, atol = TOL[tables["output"]]
    return Case(OP, (), kw, expect=expect, names=names, rtol=rtol, atol=atol, label=label)


@fuzz_test("inference")
def test_fuzz_inference_valid(data: Any) -> Case:
    """The lookup op on every drawn layout, pooling, output, index dtype and memory layout."""
    tables, kw = _valid(data)
    ty = "mixed" if len(set(tables["tys"])) > 1 else f"type {tables['tys'][0]}"
    return _op_case(tables, kw, label=f"valid pooling {tables['pooling']} {ty}")


@fuzz_test("inference")
def test_fuzz_inference_module(data: Any) -> Case:
    """Upstream's module on npu against itself on the CPU, with row pruning (index_remapping:
    the array form or the hash map) or without, weighted or not, int32 / int64 inputs."""
    tables = draw_tables(data, data.draw(st.sampled_from((0, 1)), label="pooling"))
    remap, original = (None, tables["rows"])
    how = data.draw(st.sampled_from(("none", "array", "hashmap")), label="pruning")
    if how != "none":
        remap, original = remapping(data, tables)
    # B >= 1 with pruning: upstream's CPU map (PrunedMapCPU) refuses an empty batch, which its
    # module on a device never looks up when no table is pruned
    min_B = 0 if how == "none" else 1
    indices, lengths, _ = draw_batch(data, tables, original, minus_one=False, min_B=min_B)
    # int64 indices with the hash map: upstream's module inserts int32 keys on every device
    # but the CPU and looks them up hashed as int64 (tests/fbgemm/inference/
    # test_inference_pruned.py): only its CPU form (PrunedMapCPU) answers right
    dtypes = (torch.int32,) if how == "hashmap" else (torch.int32, torch.int64)
    dtype = data.draw(st.sampled_from(dtypes), label="index dtype")
    psw = None
    if data.draw(st.booleans(), label="weighted"):
        psw = torch.rand(indices.numel(), generator=seeded(data))
    rtol, atol = TOL[tables["output"]]
    return Case(
        PROGRAM,
        (table_rows(tables), indices.to(dtype), lengths_to_offsets(lengths, dtype), psw, remap),
        {"tables": tables, "use_array": how != "hashmap"},
        rtol=rtol,
        atol=atol,
        label=f"module pruning {how}",
    )


@fuzz_test("inference")
def test_fuzz_inference_bad_indices(data: Any) -> Case:
    """An index below -1, past its table (its own; another table's row count), near 2**31."""
    tables, kw = _valid(data, data.draw(st.sampled_from((0, 1, 2)), label="pooling"))
    indices = kw["indices"].contiguous().clone()
    if indices.numel() == 0:
        return _op_case(tables, kw, label="valid no index")
    at = data.draw(st.integers(0, indices.numel() - 1), label="at")
    how = data.draw(st.sampled_from(("negative", "past_rows", "past_buffer", "near_2_31")))
    bad = {
        "negative": -data.draw(st.integers(2, 2**20)),
        "past_rows": max(tables["rows"]) + data.draw(st.integers(0, 5)),
        "past_buffer": kw["dev_weights"].numel() + data.draw(st.integers(0, 5)),
        "near_2_31": INT32_MAX - data.draw(st.integers(0, 10)),
    }[how]
    indices[at] = bad
    kw["indices"] = indices
    # past its table's rows but inside the padding up to the next table (tables start on
    # cache lines): upstream counts those rows as its own and reads them
    expect = "equal_or_error" if how == "past_rows" else "error"
    return _op_case(tables, kw, expect, ("indices",), label=f"bad index {how}")


def _usable(o: torch.Tensor, n: int, T: int) -> bool:
    """Offsets upstream reads right: no bag (``B = 0``: zeros), or the ``T B + 1`` it reads
    non-decreasing from 0 or more to ``n`` or less (indices outside the bags are ignored)."""
    B = (o.numel() - 1) // T
    v = o.to(torch.int64)[: T * B + 1]
    return B <= 0 or bool((v[1:] >= v[:-1]).all()) and bool(v[0] >= 0) and bool(v[-1] <= n)


@fuzz_test("inference")
def test_fuzz_inference_bad_offsets(data: Any) -> Case:
    """Offsets broken every way (decreasing, negative, past the end, not from 0, int32-wrapped,
    float), too short or too long, of another dtype than the indices or of rank 2."""
    tables, kw = _valid(data)
    if kw["output_dtype"] == INT8:  # upstream leaves INT8 rows outside the bags unwritten
        kw["output_dtype"] = tables["output"] = 0
    indices, offsets = kw["indices"].contiguous(), kw["offsets"].contiguous()
    n = indices.numel()
    how = data.draw(st.sampled_from(("broken", "short", "long", "rank", "mixed_dtype")))
    if how == "rank":
        kw["offsets"] = offsets.view(1, -1)
        return _op_case(tables, kw, "error", ("offsets",), label="offsets rank")
    if how == "mixed_dtype":  # upstream reads each in its own dtype: ours too, or refuses
        other = torch.int64 if offsets.dtype == torch.int32 else torch.int32
        kw["offsets"] = offsets.to(other)
        return _op_case(tables, kw, "equal_or_error", ("offsets", "indices"), label="mixed dtypes")
    if how in ("short", "long"):
        if 6 in tables["tys"]:  # a -1 moved into an FP8 table would stop upstream's FP8 kernel
            kw["indices"] = indices.clamp_min(0)
        # a length other than T B + 1: upstream reads the first (numel - 1) // T * T + 1 of them
        extra = torch.full((data.draw(st.integers(1, 3)),), n, dtype=offsets.dtype)
        kw["offsets"] = offsets[:-1] if how == "short" and offsets.numel() > 1 else \
            torch.cat([offsets, extra])  # fmt: skip
        # the bags move: an index may land in a table it is not a row of
        return _op_case(
            tables, kw, "equal_or_error", ("indices", "offsets"), label=f"offsets {how}"
        )
    label, broken = bad_offsets(data, offsets, n)
    if broken.dtype == torch.int32 and indices.dtype == torch.int64:
        kw["indices"] = indices.to(torch.int32)
    kw["offsets"] = in_layout(data, broken, LAYOUTS)
    if broken.is_floating_point() or not _usable(broken, n, len(tables["tys"])):
        return _op_case(tables, kw, "error", ("offsets",), label=f"offsets {label}")
    return _op_case(tables, kw, label=f"offsets valid {label}")


LAYOUT_ARGS = ("weights_offsets", "D_offsets", "weights_tys", "weights_placements")
DTYPE_CHANGES = {
    "dev_weights": torch.float32,
    "uvm_weights": torch.int8,
    "weights_offsets": torch.int32,
    "D_offsets": torch.int64,
    "weights_tys": torch.int32,
    "weights_placements": torch.int64,
    "indices": torch.float32,
    "indice_weights": torch.float64,
}


def _bad_argument(data: Any, tables: dict, kw: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """Break one argument of ``kw`` in place; returns (label, the names an error may give)."""
    how = data.draw(st.sampled_from(("dtype", "object", "layout", "total_D", "enum", "device",
                                     "weights", "fp8", "bf16")), label="how")  # fmt: skip
    T = len(tables["tys"])
    if how == "dtype":
        arg = data.draw(st.sampled_from(sorted(DTYPE_CHANGES)), label="argument")
        weights = kw["indice_weights"]
        if arg == "indice_weights" and (weights is None or weights.numel() == 0
                                        or tables["pooling"] == 2):  # fmt: skip
            # one weight at least: an empty weights tensor of any dtype reads as unweighted
            kw[arg] = torch.ones(max(kw["indices"].numel(), 1), dtype=torch.float64)
            arg = "indice_weights" if tables["pooling"] != 2 else "pooling"
        if arg == "pooling":  # NONE reads no weights: a float64 weight changes nothing
            kw["pooling_mode"] = 7
            return "dtype pooling", ("pooling_mode",)
        kw[arg] = kw[arg].to(DTYPE_CHANGES[arg])
        return f"dtype {arg}", (arg,)
    if how == "object":
        arg = data.draw(st.sampled_from(("dev_weights", "indices", "offsets", *LAYOUT_ARGS)))
        kw[arg] = not_a_tensor(data)
        return f"object {arg}", (arg,)
    if how == "layout":  # the layout tensors disagree on T
        arg = data.draw(st.sampled_from(LAYOUT_ARGS), label="argument")
        t = kw[arg]
        kw[arg] = torch.cat([t, t[-1:]]) if data.draw(st.booleans()) or t.numel() < 2 else t[:-1]
        if arg == "weights_offsets":  # T is weights_offsets' length: the others disagree
            return f"length {arg}", (*LAYOUT_ARGS, "offsets", "total_D")
        return f"length {arg}", (arg,)
    if how == "total_D":
        if tables["pooling"] == 2:  # NONE's width is max_*_D: all zero is refused
            for k in ("max_int2_D", "max_int4_D", "max_int8_D", "max_float16_D",
                      "max_float32_D", "max_float8_D"):  # fmt: skip
                kw[k] = 0
            return "max_D zero", ("max_", "NONE")
        kw["total_D"] = kw["total_D"] + data.draw(st.sampled_from((-4, 4, 1)))
        return "total_D", ("total_D",)
    if how == "enum":
        arg = data.draw(st.sampled_from(("pooling_mode", "output_dtype")), label="argument")
        kw[arg] = data.draw(st.sampled_from((-1, 3, 4, 9)))
        return f"enum {arg}", (arg,)
    if how == "device":
        arg = data.draw(st.sampled_from(("dev_weights", "indices", "offsets", *LAYOUT_ARGS)))
        kw[arg] = On(kw[arg], data.draw(st.sampled_from(("cpu", "npu:1")), label="device"))
        return f"device {arg}", (arg, "dev_weights", "indices")
    if how == "weights":
        n = kw["indices"].numel()
        kw["indice_weights"] = torch.rand(n + data.draw(st.sampled_from((1, 3))))
        if tables["pooling"] == 2:
            kw["pooling_mode"] = 1
            kw["output_dtype"] = 0
        return "weights length", ("indice_weights",)
    if how == "fp8":
        kw["weights_tys"] = torch.full((T,), 6, dtype=torch.uint8)
        kw["fp8_exponent_bits"] = -1
        return "fp8 parameters", ("fp8_exponent_bits", "weights_tys", "D_offsets")
    # a BF16 table (SparseType 5): upstream's module cannot build one, its kernel has no case
    kw["weights_tys"] = torch.full((T,), 5, dtype=torch.uint8)
    return "bf16 weights", ("weights_tys",)


@fuzz_test("inference")
def test_fuzz_inference_bad_arguments(data: Any) -> Case:
    """Wrong dtypes, non-tensors, layout tensors of disagreeing lengths, a wrong total_D, bad
    enums, an argument on another device, weights of the wrong length, FP8 without its
    exponent parameters, BF16 weight tables."""
    tables, kw = _valid(data)
    kw = {k: v.contiguous() if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    label, names = _bad_argument(data, tables, kw)
    return _op_case(tables, kw, "error", names, label=label)
