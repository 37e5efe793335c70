"""Specs for the jagged family's 1-D segment ops: slicing.py (``jagged_slice`` and its
gradient, ``jagged_slice_forward``), select.py (``masked_select_jagged_1d``,
``jagged_1d_to_truncated_values``), accumulate.py (``jagged_acc_weights_and_counts``,
``jagged_hash_size_cumsum``) and pack.py (``pack_segments``, ``_v2`` with its gradient,
``pack_segments_backward``).

Inputs: B = 0..6 segments of 0..6 values (empty segments and truncation frequent), values of
every dtype upstream takes, contiguous or sliced; int32 / int64 lengths where upstream takes
both; starts in ``[0, len]`` (one example in eight past it: upstream raises, ours too); masks
true only inside the rows (upstream leaves the outputs of true entries past them
uninitialised, ours refuses them: tests/fbgemm/jagged/); ``jagged_slice_forward`` with
``fill_zeros`` (without it upstream leaves rows unwritten); ``pack_segments_backward`` with
``sum(lengths) == total_length`` and no truncation (upstream leaves other rows uninitialised).
Not drawn: negative lengths or lengths past the values (upstream reads out of bounds; ours
refuses by name).  Oracle: upstream, exact (copies), ``jagged_acc_weights_and_counts`` at
float32 rounding (another order of adds); ``jagged_hash_size_cumsum``, which has no CPU kernel,
a loop over the features from the CUDA kernel's math.  Budgets: the ops' entries, the
``int32_lengths`` / ``int32`` / ``cast`` / ``presence_mask`` paths where drawn.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, TensorView, Tol
from conformance.specs.fbgemm.jagged.inputs import DTYPES, EXACT, FLOATS, real

F = torch.ops.fbgemm
I32, I64 = torch.int32, torch.int64
SUMS = Compare({torch.float32: Tol(rtol=1e-5, atol=1e-5)})


def _gen(draw: st.DrawFn) -> torch.Generator:
    return torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))


def _lengths(draw: st.DrawFn, most_b: int = 6) -> list[int]:
    return draw(st.lists(st.integers(0, 6), min_size=0, max_size=most_b))


def _values(draw: st.DrawFn, n: int, dtype: torch.dtype, g: torch.Generator) -> Any:
    base = (torch.randn(2 * n + 1, generator=g) * 4).to(dtype)
    if draw(st.booleans()):
        return base[:n].clone()
    return TensorView(base, lambda t: t[1::2], "sliced [1::2]")


def _path_lengths(lengths: torch.Tensor) -> str | None:
    return "int32_lengths" if lengths.dtype == I32 else None


@st.composite
def _slice_inputs(draw: st.DrawFn) -> dict[str, Any]:
    g, lens = _gen(draw), _lengths(draw)
    start = [draw(st.integers(0, n)) for n in lens]
    if lens and draw(st.integers(0, 7)) == 0:
        start[0] = lens[0] + 1  # upstream: "start should be <= len"
    dtype = draw(st.sampled_from(DTYPES))
    return {
        "x_values": _values(draw, sum(lens), dtype, g),
        "x_lengths": torch.tensor(lens, dtype=I64),
        "start": torch.tensor(start, dtype=I64),
        "slice_length": draw(st.integers(0, 7)),
    }


@st.composite
def _slice_grad_inputs(draw: st.DrawFn) -> dict[str, Any]:
    kw = draw(_slice_inputs())
    kw["x_values"] = real(kw["x_values"]).float()
    kw["start"] = torch.minimum(kw["start"], kw["x_lengths"])
    return kw


@st.composite
def _slice_forward_inputs(draw: st.DrawFn) -> dict[str, Any]:
    g, lens = _gen(draw), _lengths(draw)
    out_lens = [draw(st.integers(0, 6)) for _ in lens]
    src = [draw(st.integers(0, n)) for n in lens]
    tgt = [draw(st.integers(0, n)) for n in out_lens]
    return {
        "x_values": _values(draw, sum(lens), draw(st.sampled_from(DTYPES)), g),
        "x_lengths": torch.tensor(lens, dtype=I64),
        "src_start": torch.tensor(src, dtype=I64),
        "output_lengths": torch.tensor(out_lens, dtype=I64),
        "tgt_start": torch.tensor(tgt, dtype=I64),
        "num_output_rows": sum(out_lens) + draw(st.sampled_from([0, 0, 3])),
        "slice_length": draw(st.integers(-1, 7)),
        "fill_zeros": True,
    }


@st.composite
def _masked_inputs(draw: st.DrawFn) -> dict[str, Any]:
    g, lens = _gen(draw), _lengths(draw)
    n = sum(lens)
    extra = draw(st.sampled_from([0, 0, 2]))  # values and mask longer than the rows
    mask = torch.rand(n + extra, generator=g) < draw(st.sampled_from([0.0, 0.5, 1.0]))
    mask[n:] = False
    return {
        "values": _values(draw, n + extra, draw(st.sampled_from(DTYPES)), g),
        "lengths": torch.tensor(lens, dtype=draw(st.sampled_from([I32, I64]))),
        "mask": mask,
        "check_length": draw(st.booleans()),
    }


@st.composite
def _truncated_inputs(draw: st.DrawFn) -> dict[str, Any]:
    g, lens = _gen(draw), _lengths(draw)
    return {
        "values": _values(
            draw, sum(lens) + draw(st.sampled_from([0, 2])), draw(st.sampled_from(DTYPES)), g
        ),
        "lengths": torch.tensor(lens, dtype=draw(st.sampled_from([I32, I64]))),
        "max_truncated_length": draw(st.integers(0, 7)),
    }


@st.composite
def _acc_inputs(draw: st.DrawFn) -> dict[str, Any]:
    g, n, u = _gen(draw), draw(st.integers(0, 60)), draw(st.integers(1, 12))
    dtype = draw(st.sampled_from([torch.float32, torch.float16, torch.float64]))
    return {
        "weights": torch.randn(n, generator=g).to(dtype),
        "reverse_indices": torch.randint(
            0, u, (n + draw(st.sampled_from([0, 3])),), generator=g
        ).to(draw(st.sampled_from([I32, I64]))),
        "num_unique_indices": u + draw(st.sampled_from([0, 2])),
    }


@st.composite
def _hash_inputs(draw: st.DrawFn) -> dict[str, Any]:
    g, b, t = _gen(draw), draw(st.integers(1, 3)), draw(st.integers(0, 4))
    lens = [draw(st.integers(0, 4)) for _ in range(t * b + draw(st.integers(0, 1)))]
    dtype = draw(st.sampled_from([I32, I64]))
    offsets = torch.tensor([0, *torch.tensor(lens, dtype=I64).cumsum(0).tolist()], dtype=dtype)
    top = 2**40 if dtype == I64 and draw(st.booleans()) else 1000
    indices = torch.randint(0, top, (int(offsets[-1]),), generator=g).to(dtype)
    return {"offsets": offsets, "indices": indices, "batch_size": b}


def hash_size_cumsum_reference(
    offsets: torch.Tensor, indices: torch.Tensor, batch_size: int
) -> Any:
    """The CUDA kernel's math, feature by feature (Python ints)."""
    t = (offsets.numel() - 1) // batch_size
    sums = [0]
    for f in range(t):
        seg = indices[int(offsets[f * batch_size]) : int(offsets[(f + 1) * batch_size])].tolist()
        sums.append(sums[-1] + (max(seg) + 1 if seg else 0))
    dtype = offsets.dtype
    return torch.tensor(sums, dtype=dtype), torch.arange(t + 1, dtype=dtype)


def _hash_op(**kw: Any) -> Any:
    """Ours on npu tensors; the reference on CPU tensors (upstream has no CPU kernel)."""
    if kw["offsets"].device.type == "cpu":
        return hash_size_cumsum_reference(**kw)
    return F.jagged_hash_size_cumsum(**kw)


def _pack_common(draw: st.DrawFn, dtypes: tuple[torch.dtype, ...]) -> dict[str, Any]:
    g, lens = _gen(draw), _lengths(draw)
    inner = draw(st.sampled_from([(), (2,), (3, 1)]))
    n = sum(lens) + draw(st.sampled_from([0, 0, 2]))
    t = (torch.randn(n, *inner, generator=g) * 4).to(draw(st.sampled_from(dtypes)))
    return {
        "t_in": t,
        "lengths": torch.tensor(lens, dtype=draw(st.sampled_from([I32, I64]))),
        "max_length": draw(st.integers(1, 7)),
    }


@st.composite
def _pack_inputs(draw: st.DrawFn) -> dict[str, Any]:
    return _pack_common(draw, (*FLOATS, I32))


@st.composite
def _pack_v2_inputs(draw: st.DrawFn, grad: bool = False) -> dict[str, Any]:
    kw = _pack_common(draw, (torch.float32,) if grad else (*FLOATS, I32, I64))
    if grad:  # every row read once: upstream's backward leaves unread rows uninitialised
        lens = kw["lengths"]
        kw["t_in"] = kw["t_in"][: int(lens.sum())]
        kw["max_length"] = max([1, *lens.tolist()])
    floating = kw["t_in"].dtype.is_floating_point
    kw["pad_minf"] = floating and draw(st.booleans())
    kw["return_presence_mask"] = draw(st.booleans())
    return kw


@st.composite
def _pack_backward_inputs(draw: st.DrawFn) -> dict[str, Any]:
    g, lens = _gen(draw), _lengths(draw)
    length = max([1, *lens]) + draw(st.integers(0, 2))  # no truncation: every row written
    inner = draw(st.sampled_from([(), (2,)]))
    data = (torch.randn(len(lens), length, *inner, generator=g) * 4).to(
        draw(st.sampled_from(FLOATS))
    )
    return {
        "data": data,
        "lengths": torch.tensor(lens, dtype=draw(st.sampled_from([I32, I64]))),
        "total_length": sum(lens),
        "max_length": length,
    }


def _pack_budget(**kw: Any) -> BudgetUse:
    return BudgetUse(path=_path_lengths(kw["lengths"]))


def _v2_budget(**kw: Any) -> BudgetUse:
    # the paths are measured with int64 lengths; int32 lengths cost one launch less
    parts = ["int64_values"] if kw["t_in"].dtype == I64 else []
    parts += ["presence_mask"] if kw["return_presence_mask"] else []
    return BudgetUse(path="_".join(parts) or None)


def _select_budget(**kw: Any) -> BudgetUse:
    return BudgetUse(path=_path_lengths(kw["lengths"]))


def _acc_budget(**kw: Any) -> BudgetUse:
    return BudgetUse(path=None if kw["weights"].dtype == torch.float32 else "cast")


def _hash_budget(**kw: Any) -> BudgetUse:
    return BudgetUse(path="int32" if kw["offsets"].dtype == I32 else None)


def _named(fn: Any, **fixed: Any) -> Any:
    return lambda **kw: fn(**kw, **fixed)


SPECS = [
    OpSpec("jagged_slice", _named(F.jagged_slice), _slice_inputs(), EXACT),
    OpSpec(
        "jagged_slice[grad]",
        _named(F.jagged_slice),
        _slice_grad_inputs(),
        EXACT,
        backward=True,
        grad_inputs=("x_values",),
    ),
    OpSpec("jagged_slice_forward", _named(F.jagged_slice_forward), _slice_forward_inputs(), EXACT),
    OpSpec(
        "masked_select_jagged_1d",
        _named(F.masked_select_jagged_1d),
        _masked_inputs(),
        EXACT,
        budget=_select_budget,
    ),
    OpSpec(
        "jagged_1d_to_truncated_values",
        _named(F.jagged_1d_to_truncated_values),
        _truncated_inputs(),
        EXACT,
        budget=_select_budget,
    ),
    OpSpec(
        "jagged_acc_weights_and_counts",
        _named(F.jagged_acc_weights_and_counts),
        _acc_inputs(),
        SUMS,
        budget=_acc_budget,
    ),
    OpSpec("jagged_hash_size_cumsum", _hash_op, _hash_inputs(), EXACT, budget=_hash_budget),
    OpSpec("pack_segments", _named(F.pack_segments), _pack_inputs(), EXACT, budget=_pack_budget),
    OpSpec(
        "pack_segments_v2", _named(F.pack_segments_v2), _pack_v2_inputs(), EXACT, budget=_v2_budget
    ),
    OpSpec(
        "pack_segments_v2[grad]",
        _named(F.pack_segments_v2),
        _pack_v2_inputs(grad=True),
        EXACT,
        budget=_v2_budget,
        backward=True,
        grad_inputs=("t_in",),
    ),
    OpSpec(
        "pack_segments_backward",
        _named(F.pack_segments_backward),
        _pack_backward_inputs(),
        EXACT,
        budget=_pack_budget,
    ),
]
