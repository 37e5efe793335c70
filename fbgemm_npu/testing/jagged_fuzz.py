"""Drawn inputs and references of the jagged fuzz tests (``tests/fuzz/test_fuzz_jagged.py``).

:func:`draw_jagged` draws a well-formed jagged tensor (1 to 3 jagged dims, an empty batch, empty
rows, rows longer than their dense length, every value dtype, 1-D or ``[N, D]`` values, int32 or
int64 offsets); the ``*_call`` functions draw a valid call of each op group as ``(op, args,
kwargs)`` with contiguous CPU tensors (:func:`laid_out` gives them drawn strides; the harness
reproduces them on npu).  Valid means inside upstream's CPU contract, so that upstream's CPU
kernel is the oracle, except for the jagged-output ops given more value rows than the last
offset: upstream's CPU kernels refuse those (their CUDA kernels and ours leave the extra rows
uncovered, ``y = 0``) and the references below, built on upstream's CPU kernels, judge them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz_strategies import INT32_MAX, in_layout, lengths_to_offsets, seeded

__all__ = [
    "FLOATS",
    "INDEX",
    "VALUES",
    "Jagged",
    "dense_dense_add_reference",
    "draw_jagged",
    "elementwise_call",
    "fill",
    "laid_out",
    "matmul_call",
    "mul_reference",
    "add_jagged_output_reference",
    "call_write_call",
    "call_write_call_args",
    "dense_dense_add_forward_reference",
    "mul_forward_reference",
    "SIZED",
    "stacked_call",
    "to_dense_call",
    "to_jagged_call",
]

F = torch.ops.fbgemm
INDEX = (torch.int32, torch.int64)
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
VALUES = (*FLOATS, torch.int32, torch.int64)
# padding values every dtype stores the same way as upstream's x86 cast (no UB for the ints)
PADDINGS = (0.0, -1.0, 7.0, 2.5, -3.75, 1e5)
REF = "fbgemm_npu.testing.jagged_fuzz:"


@dataclass
class Jagged:
    """A jagged tensor: ``values`` rows, its offsets (one per jagged dim), dense lengths."""

    values: torch.Tensor
    offsets: list[torch.Tensor]
    lengths: list[int]

    @property
    def batch(self) -> int:
        return self.offsets[0].numel() - 1

    @property
    def rows(self) -> int:
        return int(self.offsets[-1][-1])


def fill(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Floats: multiples of 1/8 in [-8, 8) (exact in every float dtype, their products too);
    ints: anything in int32's range (values near 2**31 included), int64 wider still."""
    if dtype.is_floating_point:
        return (torch.randint(-64, 64, shape, generator=gen) / 8).to(dtype)
    hi = INT32_MAX if dtype == torch.int32 else 2**40
    return torch.randint(-hi - 1, hi, shape, generator=gen, dtype=torch.int64).to(dtype)


def draw_jagged(
    data: Any,
    dims: tuple[int, ...] = (1, 1, 2, 3),
    dtypes: tuple[torch.dtype, ...] = VALUES,
    one_d: bool | None = None,
    tail: int = 0,
) -> Jagged:
    """``tail`` (at most) value rows past the last offset, which no position reads."""
    gen = seeded(data)
    k = data.draw(st.sampled_from(dims), label="jagged dims")
    rows = data.draw(st.integers(0, 5), label="B")
    index = data.draw(st.sampled_from(INDEX), label="offsets dtype")
    offsets, lengths = [], []
    for level in range(k):
        top = 6 if level == k - 1 else 4
        offsets.append(lengths_to_offsets(torch.randint(0, top, (rows,), generator=gen), index))
        rows = int(offsets[-1][-1])
        lengths.append(data.draw(st.integers(0, 4), label=f"max_lengths[{level}]"))
    n = rows + data.draw(st.integers(0, tail), label="tail rows")
    dtype = data.draw(st.sampled_from(dtypes), label="values dtype")
    flat = data.draw(st.booleans(), label="1-D values") if one_d is None else one_d
    shape = (n,) if flat else (n, data.draw(st.integers(0, 3), label="D"))
    return Jagged(fill(gen, shape, dtype), offsets, lengths)


def laid_out(data: Any, value: Any) -> Any:
    """``value`` (a tensor or a list of them) in drawn layouts."""
    if isinstance(value, list):
        return [laid_out(data, v) for v in value]
    return in_layout(data, value) if isinstance(value, torch.Tensor) else value


Call = tuple[str, tuple[Any, ...], dict[str, Any]]


def to_dense_call(data: Any) -> tuple[Call, Jagged]:
    """jagged_to_padded_dense (+ ``_forward``), jagged_1d_to_dense or jagged_2d_to_dense."""
    op = data.draw(st.sampled_from(("to_padded", "forward", "1d", "2d")), label="op")
    if op in ("1d", "2d"):
        j = draw_jagged(data, dims=(1,), one_d=op == "1d", tail=2)
        length = max(j.lengths[0], 1) if op == "1d" else j.lengths[0]
        if op == "1d":
            pad = data.draw(st.sampled_from((0, -1, 5)), label="padding_value")
            return ("fbgemm::jagged_1d_to_dense", (j.values, j.offsets[0], length, pad), {}), j
        return ("fbgemm::jagged_2d_to_dense", (j.values, j.offsets[0], length), {}), j
    j = draw_jagged(data, tail=2)
    name = "jagged_to_padded_dense" + ("_forward" if op == "forward" else "")
    kwargs = {}
    if data.draw(st.booleans(), label="padding given"):
        kwargs["padding_value"] = data.draw(st.sampled_from(PADDINGS), label="padding_value")
    return (f"fbgemm::{name}", (j.values, j.offsets, j.lengths), kwargs), j


def to_jagged_call(data: Any) -> tuple[Call, Jagged]:
    """dense_to_jagged (+ ``_forward``, ``total_L`` given or not) or the dense -> jagged
    gradient ``jagged_to_padded_dense_backward`` (``grad_output`` with or without inner dim)."""
    op = data.draw(st.sampled_from(("dense_to_jagged", "forward", "backward")), label="op")
    j = draw_jagged(data, one_d=True)
    gen = seeded(data)
    d = data.draw(st.integers(0, 3), label="D")
    dtype = data.draw(st.sampled_from(VALUES), label="dense dtype")
    total = j.rows + data.draw(st.integers(0, 2), label="total_L past the last offset")
    if op == "backward":
        folded = data.draw(st.booleans(), label="grad_output without inner dim")
        shape = (j.batch, *j.lengths, *(() if folded else (d,)))
        grad = fill(gen, shape, dtype)
        return ("fbgemm::jagged_to_padded_dense_backward", (grad, j.offsets, total), {}), j
    dense = fill(gen, (j.batch, *j.lengths, d), dtype)
    name = "dense_to_jagged" + ("_forward" if op == "forward" else "")
    kwargs = {"total_L": total} if data.draw(st.booleans(), label="total_L given") else {}
    return (f"fbgemm::{name}", (dense, j.offsets), kwargs), j


ELEMENTWISE = (
    "jagged_dense_elementwise_add",
    "jagged_dense_elementwise_mul",
    "jagged_dense_elementwise_mul_forward",
    "jagged_dense_elementwise_add_jagged_output",
    "jagged_dense_dense_elementwise_add_jagged_output",
    "jagged_dense_dense_elementwise_add_jagged_output_forward",
    "jagged_dense_elementwise_mul_backward",
)
# the ops whose upstream CPU kernel needs exactly as many value rows as the offsets reach
SIZED = {
    "jagged_dense_elementwise_mul": "mul_reference",
    "jagged_dense_elementwise_mul_forward": "mul_forward_reference",
    "jagged_dense_elementwise_add_jagged_output": "add_jagged_output_reference",
    "jagged_dense_dense_elementwise_add_jagged_output": "dense_dense_add_reference",
    "jagged_dense_dense_elementwise_add_jagged_output_forward": "dense_dense_add_forward_reference",
}


def elementwise_call(data: Any) -> tuple[Call, Jagged, str | None]:
    """A jagged-dense elementwise op; returns the call, the jagged operand and the oracle
    (None: upstream's CPU kernel)."""
    name = data.draw(st.sampled_from(ELEMENTWISE), label="op")
    backward = name.endswith("_backward")
    # upstream's CPU mul backward: float32 and float16 (bfloat16 is CUDA's only)
    dtypes = (torch.float32, torch.float16) if backward else VALUES
    j = draw_jagged(data, dtypes=dtypes, one_d=False, tail=2)
    gen = seeded(data)
    d = j.values.size(1)
    y_dtype = j.values.dtype
    if not backward and data.draw(st.integers(0, 4), label="mixed dtypes") == 0:
        y_dtype = data.draw(st.sampled_from(dtypes), label="y dtype")
    y = fill(gen, (j.batch, *j.lengths, d), y_dtype)
    oracle = REF + SIZED[name] if name in SIZED and j.values.size(0) > j.rows else None
    if backward:
        grad = fill(gen, tuple(j.values.shape), j.values.dtype)
        return (f"fbgemm::{name}", (grad, j.offsets, y, j.values), {}), j, None
    if "dense_dense" in name:
        y_1 = y if data.draw(st.booleans(), label="y_1 is y_0") else fill(gen, y.shape, y.dtype)
        return (f"fbgemm::{name}", (j.values, j.offsets, y, y_1), {}), j, oracle
    return (f"fbgemm::{name}", (j.values, j.offsets, y), {}), j, oracle


def matmul_call(data: Any) -> Call:
    """batched_dense_vec_jagged_2d_mul (+ ``_forward``, ``_backward``): ``v [B*H, L]``,
    ``a_values [N, H*D]`` with rows longer and shorter than L."""
    name = data.draw(st.sampled_from(("", "_forward", "_backward")), label="op")
    gen = seeded(data)
    b, h = data.draw(st.integers(0, 4), label="B"), data.draw(st.integers(1, 3), label="H")
    length, d = data.draw(st.integers(0, 4), label="L"), data.draw(st.integers(0, 3), label="D")
    index = data.draw(st.sampled_from(INDEX), label="offsets dtype")
    offsets = lengths_to_offsets(torch.randint(0, 6, (b,), generator=gen), index)
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    n = int(offsets[-1]) + data.draw(st.integers(0, 2), label="tail rows")
    v = fill(gen, (b * h, length), dtype)
    a = fill(gen, (n, h * d), dtype)
    op = f"fbgemm::batched_dense_vec_jagged_2d_mul{name}"
    if name == "_backward":
        return op, (fill(gen, (b * h, d), dtype), v, a, offsets), {}
    return op, (v, a, offsets), {}


def stacked_call(data: Any) -> tuple[str, tuple[Any, ...], dict[str, Any], bool]:
    """stacked_jagged_1d/2d_to_dense: T keys of B rows, each key's slice where its lengths say
    or (``shifted``, the last item) anywhere in the values: a slice is a view, reads may run
    past it and past the values."""
    two = data.draw(st.booleans(), label="2-D")
    gen = seeded(data)
    t, b = data.draw(st.integers(0, 4), label="T"), data.draw(st.integers(0, 4), label="B")
    index = data.draw(st.sampled_from(INDEX), label="lengths dtype")
    lengths = torch.randint(0, 5, (t, b), generator=gen)
    okp = [0, *torch.cumsum(lengths.sum(1), 0).tolist()]
    n = okp[-1] + data.draw(st.integers(0, 3), label="tail rows")
    shifted = data.draw(st.integers(0, 3), label="shifted slices") == 0 and t > 0
    if shifted:
        # slices that do not follow the lengths: ATen slice rules (negative, past the end)
        okp = [int(x) for x in torch.randint(-3, n + 3, (t + 1,), generator=gen)]
    maxl = [int(m) for m in torch.randint(0, 6, (t,), generator=gen)]
    dtype = data.draw(st.sampled_from(VALUES), label="values dtype")
    shape = (n, data.draw(st.integers(1, 3), label="D")) if two else (n,)
    values = fill(gen, shape, dtype)
    pad = data.draw(st.sampled_from((0, -1, 3)), label="padding_value")
    op = f"fbgemm::stacked_jagged_{'2' if two else '1'}d_to_dense"
    return op, (values, lengths.to(index), okp, maxl, pad), {}, shifted


# ---- references: upstream's CPU formulation, ``x (op) dense_to_jagged_forward(y, T)`` -------
# (its CPU kernels size the jagged y by the offsets, ours and its CUDA ones by x's rows T: value
# rows past the offsets see y = 0; upstream's own dense_to_jagged_forward, given total_L = T,
# builds exactly that)


def _jagged(y: torch.Tensor, x_offsets: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    return F.dense_to_jagged_forward(y, x_offsets, x.size(0))


def mul_forward_reference(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor
) -> torch.Tensor:
    """``jagged_dense_elementwise_mul_forward``."""
    return x_values * _jagged(y, x_offsets, x_values)


def mul_reference(x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor) -> Any:
    """``jagged_dense_elementwise_mul``."""
    return mul_forward_reference(x_values, x_offsets, y), list(x_offsets)


def add_jagged_output_reference(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor
) -> Any:
    """``jagged_dense_elementwise_add_jagged_output``."""
    return x_values + _jagged(y, x_offsets, x_values), list(x_offsets)


def dense_dense_add_forward_reference(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y_0: torch.Tensor, y_1: torch.Tensor
) -> torch.Tensor:
    """``jagged_dense_dense_elementwise_add_jagged_output_forward`` (left to right)."""
    return x_values + _jagged(y_0, x_offsets, x_values) + _jagged(y_1, x_offsets, x_values)


def dense_dense_add_reference(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y_0: torch.Tensor, y_1: torch.Tensor
) -> Any:
    """``jagged_dense_dense_elementwise_add_jagged_output``."""
    return dense_dense_add_forward_reference(x_values, x_offsets, y_0, y_1), list(x_offsets)


# ---- a cache keyed on tensor data is never stale: call, write the offsets in place, call ---


def call_write_call(
    values: torch.Tensor,
    offsets: list[torch.Tensor],
    max_lengths: list[int],
    new_last: torch.Tensor,
    y: torch.Tensor,
) -> tuple[Any, ...]:
    """jagged_to_padded_dense and jagged_dense_elementwise_mul, then the last offsets overwritten
    in place with ``new_last`` (other rows, the same total), then both again: a result cached on
    the offsets tensor would be the first one again."""
    first = (F.jagged_to_padded_dense(values, offsets, max_lengths), _mul(values, offsets, y))
    offsets[-1].copy_(new_last)
    return first, (F.jagged_to_padded_dense(values, offsets, max_lengths), _mul(values, offsets, y))


def _mul(values: torch.Tensor, offsets: list[torch.Tensor], y: torch.Tensor) -> torch.Tensor:
    return F.jagged_dense_elementwise_mul_forward(values, offsets, y)


def call_write_call_args(data: Any) -> tuple[Any, ...]:
    """Arguments of :func:`call_write_call`: a jagged tensor whose last offsets are redrawn
    (the rows' lengths permuted: the same total, other rows)."""
    j = draw_jagged(data, one_d=False, dtypes=FLOATS)
    gen = seeded(data)
    last = j.offsets[-1]
    lengths = (last[1:] - last[:-1])[torch.randperm(last.numel() - 1, generator=gen)]
    new_last = lengths_to_offsets(lengths, last.dtype)
    y = fill(gen, (j.batch, *j.lengths, j.values.size(1)), j.values.dtype)
    return j.values, j.offsets, j.lengths, new_last, y
