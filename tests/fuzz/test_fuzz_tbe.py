"""Hostile-input fuzz of the tbe family (fbgemm_npu/native/fbgemm/tbe/): whole TBE modules.

Each case runs the program ``fbgemm_npu.testing.fuzz_tbe:tbe_step`` -- upstream's
``SplitTableBatchedEmbeddingBagsCodegen`` built on the device of its tables, forward, then the
backward with the fused optimizer (EXACT_SGD or EXACT_ROWWISE_ADAGRAD) -- on npu and, as the
oracle, the same class on the CPU (upstream's CPU kernels), in the same ``BoundsCheckMode``
(FATAL, WARNING, IGNORE, NONE).  Outputs, every table and optimizer state after the step, the
repaired indices / offsets and the warning count must equal upstream's; where upstream raises,
ours must raise an error naming the op and the argument.  Comparing every table after the step
catches an index outside its table that reads or updates another table's rows.

Hostile input: negative indices (``-1`` included) and indices past their table (near 2**31 in
int32), offsets broken every way (decreasing, negative, past the end, not from 0, wrapped,
float), float / bool / uint8 indices or offsets, non-contiguous and expanded layouts, empty
batches, per-sample weights of the wrong length or dtype, and inputs on another device.
``bounds_check_indices`` is fuzzed directly too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import (
    INT32_MAX,
    bad_offsets,
    in_layout,
    lengths_to_offsets,
    seeded,
)
from fbgemm_npu.testing.fuzz_tbe import lookup_op

PROGRAM = "fbgemm_npu.testing.fuzz_tbe:tbe_step"
BOUNDS = "fbgemm::bounds_check_indices"
MODES = ("FATAL", "WARNING", "IGNORE", "NONE")
MODE_INT = {"FATAL": 0, "WARNING": 1, "IGNORE": 2, "NONE": 3}
OPTIMIZERS = ("EXACT_SGD", "EXACT_ROWWISE_ADAGRAD")
BAD_INDICES = ("negative", "minus_one", "past_table", "near_2_31")
BAD_DTYPES = (torch.float32, torch.float64, torch.bool, torch.uint8)
LAYOUTS = ("contiguous", "strided", "expanded", "offset")


def _specs(data: Any) -> list[tuple[int, int]]:
    n = data.draw(st.integers(1, 3), label="tables")
    rows = st.integers(1, 9)
    dims = st.sampled_from((4, 8, 12))  # upstream: a multiple of 4
    return [(data.draw(rows, label="rows"), data.draw(dims, label="dim")) for _ in range(n)]


def _batch(data: Any, specs: list[tuple[int, int]]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Valid int64 (indices, offsets) of B bags per table (B may be 0, bags may be empty)."""
    gen = seeded(data)
    B = data.draw(st.integers(0, 3), label="B")
    lengths = torch.randint(0, 4, (len(specs) * B,), generator=gen)
    idx = []
    for t, (rows, _) in enumerate(specs):
        n = int(lengths[t * B : (t + 1) * B].sum())
        idx.append(torch.randint(0, rows, (n,), generator=gen))
    return torch.cat(idx) if idx else torch.zeros(0, dtype=torch.int64), lengths, B


def _weights(data: Any, specs: list[tuple[int, int]]) -> torch.Tensor:
    total = sum(r * d for r, d in specs)
    return torch.rand(total, generator=seeded(data)) - 0.5


def _step_case(
    data: Any,
    specs: list[tuple[int, int]],
    indices: Any,
    offsets: Any,
    psw: Any,
    B: int,
    expect: str,
    names: tuple[str, ...],
    label: str,
    checked_by: str | Callable[[str], str] = "inputs",
) -> Case:
    """The step case; ``checked_by`` says which op must refuse the input where it is refused:
    ``"inputs"`` (dtypes, devices, lengths: bounds_check_indices, which the module runs first,
    unless the mode is NONE) or ``"values"`` (indices: bounds_check_indices in FATAL, else the
    lookup, which meets what WARNING and IGNORE leave, -1, and everything with NONE) or
    ``"lookup"`` (-1, a pruned row to ``bounds_check_indices`` in every mode), or a function
    of the mode that says it."""
    optimizer = data.draw(st.sampled_from(OPTIMIZERS), label="optimizer")
    mode = data.draw(st.sampled_from(MODES), label="mode")
    pooling = data.draw(st.sampled_from(("SUM", "MEAN")), label="pooling")
    # upstream's CPU backward of weighted MEAN leaves out the 1 / bag length its forward
    # applies (ours differentiates the forward: tests/fbgemm/tbe/test_tbe_optimizers_reference)
    weighted_mean = pooling == "MEAN" and psw is not None
    backward = not weighted_mean and data.draw(st.booleans(), label="backward")
    grad_seed = data.draw(st.integers(0, 2**16), label="grad seed") if backward else None
    if callable(checked_by):
        by_bounds = checked_by(mode) == BOUNDS
    else:
        by_bounds = checked_by != "lookup" and (
            mode == "FATAL" or (checked_by == "inputs" and mode != "NONE")
        )
    op = BOUNDS if by_bounds else lookup_op(optimizer)
    tensors = [t for t in (indices, offsets) if isinstance(t, torch.Tensor)]
    if mode in ("WARNING", "IGNORE") and any(_shares_memory(t) for t in tensors):
        # an expanded indices / offsets tensor cannot take bounds_check_indices' in-place
        # repairs: a clear error is the answer (upstream's CPU kernel never sees one here: the
        # oracle runs on contiguous copies)
        expect, names, op = "equal_or_error", ("indices", "offsets"), BOUNDS
    return Case(
        PROGRAM,
        (_weights(data, specs), indices, offsets, psw),
        {
            "specs": specs,
            "optimizer": optimizer,
            "mode": mode,
            "pooling": pooling,
            "grad_seed": grad_seed,
        },
        expect=expect,
        names=names,
        op_name=op,
        label=f"{label} {mode}",
        rtol=1e-5,
        atol=1e-5,
    )


def _shares_memory(t: torch.Tensor) -> bool:
    return torch._debug_has_internal_overlap(t) == 1


def _psw(data: Any, n: int) -> torch.Tensor | None:
    if not data.draw(st.booleans(), label="weighted"):
        return None
    return torch.rand(n, generator=seeded(data))


@fuzz_test("tbe")
def test_fuzz_tbe_valid(data: Any) -> Case:
    """Valid batches in every mode, optimizer, pooling, index dtype and layout: upstream's."""
    specs = _specs(data)
    indices, lengths, B = _batch(data, specs)
    dtype = data.draw(st.sampled_from((torch.int32, torch.int64)), label="index dtype")
    offsets = lengths_to_offsets(lengths, dtype)
    indices = in_layout(data, indices.to(dtype), LAYOUTS)
    offsets = in_layout(data, offsets, LAYOUTS)
    psw = _psw(data, indices.numel())
    return _step_case(data, specs, indices, offsets, psw, B, "equal", (), "valid")


@fuzz_test("tbe")
def test_fuzz_tbe_bad_indices(data: Any) -> Case:
    """Negative indices, -1, indices past their table (near 2**31 too): upstream's repair
    (WARNING, IGNORE) or its error, never another table's rows."""
    specs = _specs(data)
    indices, lengths, B = _batch(data, specs)
    if indices.numel() == 0:  # one bag of one index in the first table
        indices, B = torch.zeros(1, dtype=torch.int64), 1
        lengths = torch.tensor([1] + [0] * (len(specs) - 1))
    dtype = data.draw(st.sampled_from((torch.int32, torch.int64)), label="index dtype")
    how = data.draw(st.sampled_from(BAD_INDICES), label="bad index")
    at = data.draw(st.integers(0, indices.numel() - 1), label="at")
    bad = {
        "negative": -data.draw(st.integers(2, 2**20)),
        "minus_one": -1,
        "past_table": max(r for r, _ in specs) + data.draw(st.integers(0, 50)),
        "near_2_31": INT32_MAX - data.draw(st.integers(0, 10)),
    }[how]
    indices = indices.clone()
    indices[at] = bad
    offsets = lengths_to_offsets(lengths, dtype)
    indices = in_layout(data, indices.to(dtype), LAYOUTS)
    names, by = ("indices",), "lookup" if how == "minus_one" else "values"
    return _step_case(data, specs, indices, offsets, None, B, "equal_or_error", names, how, by)


def _offsets_refused_by(offsets: torch.Tensor, N: int, T: int) -> Callable[[str], str]:
    """Which op refuses broken ``offsets`` in a mode: bounds_check_indices a length other
    than ``B * T + 1`` (all but NONE) and, in FATAL, what it flags (a last offset other than
    ``N``, a bag starting below 0, past its end or ending past ``N``); the lookup the rest
    (a first offset above 0 passes every mode; WARNING / IGNORE repair the others; NONE)."""
    o = offsets.to(torch.int64).tolist()  # upstream casts float offsets to the indices' dtype
    bad_length = not o or (len(o) - 1) % T != 0
    flagged = bool(o) and (
        o[-1] != N or any(a < 0 or a > b or b > N for a, b in zip(o[:-1], o[1:], strict=True))
    )

    def op(mode: str) -> str:
        if mode != "NONE" and bad_length or mode == "FATAL" and flagged:
            return BOUNDS
        return "lookup"

    return op


@fuzz_test("tbe")
def test_fuzz_tbe_bad_offsets(data: Any) -> Case:
    """Offsets broken every way, or of the wrong length."""
    specs = _specs(data)
    indices, lengths, B = _batch(data, specs)
    offsets = lengths_to_offsets(lengths)
    if data.draw(st.booleans(), label="wrong length"):
        how, offsets = "length", offsets[: max(offsets.numel() - 1, 0)]
    else:
        how, offsets = bad_offsets(data, offsets, indices.numel())
    if offsets.dtype == torch.int32:
        indices = indices.to(torch.int32)
    offsets = in_layout(data, offsets, LAYOUTS)
    by = _offsets_refused_by(offsets, indices.numel(), len(specs))
    names = ("offsets",)
    return _step_case(data, specs, indices, offsets, None, B, "equal_or_error", names, how, by)


@fuzz_test("tbe")
def test_fuzz_tbe_bad_dtypes_and_weights(data: Any) -> Case:
    """Float / bool / uint8 indices or offsets; per-sample weights of the wrong length or
    dtype."""
    specs = _specs(data)
    indices, lengths, B = _batch(data, specs)
    offsets = lengths_to_offsets(lengths)
    what = data.draw(st.sampled_from(("indices", "offsets", "psw_length", "psw_dtype")))
    psw = None
    if what == "indices":
        indices = indices.to(data.draw(st.sampled_from(BAD_DTYPES), label="dtype"))
    elif what == "offsets":
        offsets = offsets.to(data.draw(st.sampled_from(BAD_DTYPES), label="dtype"))
    elif what == "psw_length":
        extra = data.draw(st.sampled_from((1, 5)), label="extra")
        psw = torch.rand(max(indices.numel() + data.draw(st.sampled_from((-1, 1))) * extra, 0))
    else:
        dtype = data.draw(st.sampled_from((torch.float64, torch.float16, torch.int64)))
        psw = torch.ones(indices.numel(), dtype=dtype)
    names = ("per_sample_weights", "indice_weights", "weights") if "psw" in what else (what,)
    return _step_case(data, specs, indices, offsets, psw, B, "equal_or_error", names, what)


@fuzz_test("tbe")
def test_fuzz_tbe_mixed_devices(data: Any) -> Case:
    """indices, offsets or per-sample weights on the CPU or on npu:1 while the tables are on
    npu:0."""
    specs = _specs(data)
    indices, lengths, B = _batch(data, specs)
    offsets = lengths_to_offsets(lengths)
    psw = _psw(data, indices.numel())
    which = data.draw(st.sampled_from(("indices", "offsets", "psw")), label="which")
    where = data.draw(st.sampled_from(("cpu", "npu:1")), label="device")
    if which == "indices":
        indices = On(indices, where)
    elif which == "offsets":
        offsets = On(offsets, where)
    elif psw is not None:
        psw = On(psw, where)
    names = ("indices", "offsets", "per_sample_weights", "indice_weights", "weights")
    return _step_case(data, specs, indices, offsets, psw, B, "equal_or_error", names, "device")


@fuzz_test("tbe")
def test_fuzz_bounds_check_indices(data: Any) -> Case:
    """``bounds_check_indices`` directly, every mode: repaired in place as upstream repairs."""
    specs = _specs(data)
    indices, lengths, B = _batch(data, specs)
    offsets = lengths_to_offsets(lengths)
    label = "valid"
    if data.draw(st.booleans(), label="break offsets"):
        label, offsets = bad_offsets(data, offsets, indices.numel())
    if indices.numel() and data.draw(st.booleans(), label="break indices"):
        indices = indices.clone()
        indices[data.draw(st.integers(0, indices.numel() - 1))] = data.draw(
            st.sampled_from((-1, -7, 100, INT32_MAX))
        )
        label += " indices"
    if offsets.dtype == torch.int32:
        indices = indices.to(torch.int32)
    mode = data.draw(st.sampled_from(MODES), label="mode")
    rows = torch.tensor([r for r, _ in specs], dtype=torch.int64)
    warning = torch.zeros(1, dtype=torch.int64)
    psw = _psw(data, indices.numel())
    return Case(
        BOUNDS,
        (rows, indices, offsets, MODE_INT[mode], warning, psw),
        expect="equal_or_error",
        names=("indices", "offsets", "weights", "rows_per_table"),
        oracle="fbgemm_npu.testing.fuzz_tbe:bounds_check_none" if mode == "NONE" else None,
        label=f"{label} {mode}",
    )
