"""Valid inputs of the sll family's ops (``fbgemm_npu/native/fbgemm/sll/``) for tests, budgets
and opcheck samples: ``sll_args(op, b, max_len, d, ...)`` builds one call's positional arguments
on CPU, in the layout upstream's own SLL flash attention uses (``x_offsets`` from random
lengths, square blocks of ``n_i**2`` values at their cumulative offsets)."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["OPS", "move", "sll_args"]

OPS = (
    "sll_jagged_dense_bmm",
    "sll_jagged_jagged_bmm",
    "sll_jagged_dense_elementwise_add",
    "sll_jagged_dense_elementwise_mul_jagged_out",
    "sll_dense_jagged_cat_jagged_out",
    "sll_jagged_self_substraction_jagged_out",
    "sll_array_jagged_bmm_jagged_out",
    "sll_jagged_jagged_bmm_jagged_out",
)


def _offsets(lengths: torch.Tensor, index: torch.dtype) -> torch.Tensor:
    return torch.cat([lengths.new_zeros(1), lengths.cumsum(0)]).to(index)


def sll_args(
    op: str,
    b: int,
    max_len: int,
    d: int,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    index: torch.dtype = torch.int64,
    cap: int | None = None,
) -> tuple[Any, ...]:
    """Positional arguments of ``torch.ops.fbgemm.<op>`` (CPU tensors): ``b`` sequences of
    0..``max_len`` rows, inner dims ``d``; ``cap`` the max_seq_len argument (default
    ``max_len``)."""
    g = torch.Generator().manual_seed(seed)
    n = torch.randint(0, max_len + 1, (b,), generator=g)
    o = _offsets(n, index)
    rows = int(n.sum())
    cap = max_len if cap is None else cap

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype)

    if op == "sll_jagged_dense_bmm":
        return (r(rows, d), r(b, d, d + 1), o, cap, True)
    if op == "sll_jagged_jagged_bmm":
        return (r(rows, d), r(rows, d + 1), o, cap, True)
    if op == "sll_jagged_dense_elementwise_add":
        return (r(rows, d), o, r(b, max_len, d), cap)
    if op == "sll_dense_jagged_cat_jagged_out":
        return (r(b), r(rows), o, cap)
    sq = n * n
    so = _offsets(sq, index)
    if op == "sll_jagged_dense_elementwise_mul_jagged_out":
        return (r(int(sq.sum())), r(max_len, max_len), n.to(index), so, cap)
    if op == "sll_jagged_self_substraction_jagged_out":
        sub = (n - 1).clamp(min=0) ** 2
        return (r(rows), o, _offsets(sub, index), cap)
    nl = n.to(index)
    if op == "sll_array_jagged_bmm_jagged_out":
        return (r(int(sq.sum())), r(rows, d), sq.to(index), so, nl, o, nl, o, cap, True)
    if op == "sll_jagged_jagged_bmm_jagged_out":
        return (r(rows, d), r(rows, d), nl, o, nl, o, sq.to(index), so, cap, True)
    raise KeyError(op)


def move(args: tuple[Any, ...], device: str) -> tuple[Any, ...]:
    """``args`` with every tensor on ``device``."""
    return tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
