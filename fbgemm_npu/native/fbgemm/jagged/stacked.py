"""Stacked (keyed) jagged to dense: ``fbgemm::stacked_jagged_1d_to_dense`` and
``fbgemm::stacked_jagged_2d_to_dense`` on npu.

``lengths`` is ``[T, B]`` (T keys, B rows each).  Upstream, per key ``t``: the values slice
``values[offset_per_key[t]:offset_per_key[t + 1]]`` (ATen slice rules: negative bounds wrap, bounds
clamp to ``[0, N]``), offsets = complete cumsum of ``lengths[t]``, then ``jagged_to_padded_dense``
with ``max_lengths_per_key[t]``::

    out[t][b, j] = values[start_t + sum(lengths[t, :b]) + j]   if j < min(lengths[t, b], L_t)
                 = padding_value                               otherwise, or if slice t is empty

Reads run past the slice when the lengths say so (upstream does the same: the slice is a view);
reads past ``values`` itself raise.  Lists longer than ``T + 1`` / ``T`` are ignored, as upstream
does; shorter ones raise (upstream reads past the end of the vector).

How, for all keys at once: one ``[T, B, max(L_t)]`` grid.  The per-key slice starts and limits
(host data: the int lists) travel in one small host-to-device copy; ``cat`` + ``cumsum`` give every
row's start, ``minimum`` clips the lengths, and the arange / add / compare / fill / padded gather
of :func:`.to_dense.to_dense` build the grid.  Key ``t``'s output is the view ``grid[t, :, :L_t]``
(contiguous when every key has the same max length; a strided view otherwise: upstream's are
contiguous, the values are the same).  Launches: the copy, cat, cumsum, minimum, arange, add, ge,
masked_fill_, constant_pad_nd, index_select, whatever T and B, and the data check on top; over the
catalogue's target because the per-key slice starts and limits cost the copy, the cat and the
minimum.  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).

Values: float32, float16, bfloat16, int32, int64 (1-D for ``_1d``, 2-D for ``_2d``); lengths
int32 or int64.  Autograd: CUDA registers it for ``stacked_jagged_2d_to_dense`` (its
``StackedJagged2DToDenseGPUOp``), so we do; the CPU build records it through its inner ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    check_dtype,
    check_ndim,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native.fbgemm.jagged._utils import (
    READ_CHECK,
    assert_no_bad,
    check_values,
    padding_scalar,
    write_bad,
)

__all__ = ["KERNELS", "stacked_jagged_1d_to_dense_npu", "stacked_jagged_2d_to_dense_npu"]

_F = torch.ops.fbgemm
STACKED_JAGGED_1D_TO_DENSE = "fbgemm::stacked_jagged_1d_to_dense"
STACKED_JAGGED_2D_TO_DENSE = "fbgemm::stacked_jagged_2d_to_dense"


def _slice_bounds(lo: int, hi: int, n: int) -> tuple[int, int]:
    """ATen ``slice(0, lo, hi)`` bounds on a dim of size ``n``."""
    lo, hi = lo + n if lo < 0 else lo, hi + n if hi < 0 else hi
    lo, hi = min(max(lo, 0), n), min(max(hi, 0), n)
    return lo, max(lo, hi)


def _plan(
    op: str,
    values: object,
    lengths: object,
    offset_per_key: Sequence[int],
    max_lengths_per_key: Sequence[int],
    ndim: int,
) -> tuple[torch.Tensor, torch.Tensor, list[int], list[tuple[int, int]]]:
    """Checks; returns values, lengths, the per-key max lengths and slice bounds."""
    v = check_ndim(op, "values", check_values(op, "values", values), (ndim,))
    ln = check_dtype(
        op,
        "lengths",
        check_ndim(op, "lengths", check_tensor(op, "lengths", lengths), (2,)),
        INDEX_DTYPES,
    )
    if ln.device != v.device:
        raise RuntimeError(
            f"{op}: arguments 'values' ({v.device}) and 'lengths' ({ln.device}) must be on the "
            "same device"
        )
    t = ln.size(0)
    if len(offset_per_key) < t + 1 or len(max_lengths_per_key) < t:
        raise ValueError(
            f"{op}: 'offset_per_key' needs T + 1 = {t + 1} entries and 'max_lengths_per_key' T = "
            f"{t}, got {len(offset_per_key)} and {len(max_lengths_per_key)}"
        )
    maxl = [int(m) for m in max_lengths_per_key[:t]]
    for k, m in enumerate(maxl):
        if m < 0:
            raise ValueError(f"{op}: argument 'max_lengths_per_key[{k}]' must be >= 0, got {m}")
    n = v.size(0)
    bounds = [
        _slice_bounds(int(offset_per_key[k]), int(offset_per_key[k + 1]), n) for k in range(t)
    ]
    return v, ln, maxl, bounds


def _grid(
    op: str,
    values: torch.Tensor,
    lengths: torch.Tensor,
    maxl: list[int],
    bounds: list[tuple[int, int]],
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(rows, pad)`` on the ``[T, B, max(L_t)]`` grid; ``None`` when nothing can be read."""
    t, b = lengths.shape
    n = values.size(0)
    row_numel = values[:1].numel()  # elements per value row (0 when D == 0)
    # A key whose slice is empty is all padding upstream: its limit becomes 0.
    limits = [
        m if hi > lo and row_numel > 0 else 0 for m, (lo, hi) in zip(maxl, bounds, strict=True)
    ]
    if b == 0 or max(maxl) == 0 or max(limits) == 0 or n == 0:
        return None
    meta = torch.tensor([[lo for lo, _ in bounds], limits], dtype=lengths.dtype)
    meta = meta.to(lengths.device)  # one small host-to-device copy of the per-key constants
    # Row starts: an exclusive scan of each key's lengths, seeded with the key's slice start.
    starts = torch.cat([meta[0].unsqueeze(1), lengths[:, :-1]], dim=1).cumsum(
        1, dtype=lengths.dtype
    )
    clipped = torch.minimum(lengths, meta[1].unsqueeze(1))
    ar = torch.arange(max(maxl), dtype=lengths.dtype, device=lengths.device)
    idx = starts.unsqueeze(-1) + ar
    pad = ar >= clipped.unsqueeze(-1)
    rows = idx.masked_fill_(pad, n)  # padding positions read the spare row n
    if validation_enabled():
        bad = [write_bad(rows, pad, n)]
        assert_no_bad(op, bad, f"arguments 'lengths' / 'offset_per_key': {READ_CHECK}")
    return rows, pad


def _stacked(
    op: str,
    values: object,
    lengths: object,
    offset_per_key: Sequence[int],
    max_lengths_per_key: Sequence[int],
    padding_value: int,
    ndim: int,
) -> tuple[list[torch.Tensor], tuple[torch.Tensor, torch.Tensor] | None, list[int]]:
    """The outputs, the grid index (for the backward) and the per-key max lengths."""
    v, ln, maxl, bounds = _plan(op, values, lengths, offset_per_key, max_lengths_per_key, ndim)
    t, b = ln.shape
    if t == 0:
        return [], None, maxl
    inner = () if ndim == 1 else (v.size(1),)
    pad_value = padding_scalar(float(padding_value), v.dtype)
    grid = _grid(op, v, ln, maxl, bounds)
    lmax = max(maxl)
    if grid is None:
        out = v.new_full((t, b, lmax, *inner), pad_value)
    else:
        rows, _ = grid
        if ndim == 1 or v.size(1) == 1:  # 1-D gathers are far faster than [N, 1] row gathers
            table = F.pad(v.reshape(v.size(0)), (0, 1), value=pad_value)
        else:
            table = F.pad(v, (0, 0, 0, 1), value=pad_value)
        out = table.index_select(0, rows.reshape(-1)).view(t, b, lmax, *inner)
    return [out[k, :, : maxl[k]] for k in range(t)], grid, maxl  # views: no launch per key


def stacked_jagged_1d_to_dense_npu(
    values: torch.Tensor,
    lengths: torch.Tensor,
    offset_per_key: list[int],
    max_lengths_per_key: list[int],
    padding_value: int,
) -> list[torch.Tensor]:
    """``fbgemm::stacked_jagged_1d_to_dense``: T tensors ``[B, L_t]`` (see module docstring)."""
    return _stacked(
        STACKED_JAGGED_1D_TO_DENSE,
        values,
        lengths,
        offset_per_key,
        max_lengths_per_key,
        padding_value,
        1,
    )[0]


def stacked_jagged_2d_to_dense_npu(
    values: torch.Tensor,
    lengths: torch.Tensor,
    offset_per_key: list[int],
    max_lengths_per_key: list[int],
    padding_value: int = 0,
) -> list[torch.Tensor]:
    """``fbgemm::stacked_jagged_2d_to_dense``: T tensors ``[B, L_t, D]``."""
    return _stacked(
        STACKED_JAGGED_2D_TO_DENSE,
        values,
        lengths,
        offset_per_key,
        max_lengths_per_key,
        padding_value,
        2,
    )[0]


class _Stacked2D(torch.autograd.Function):
    """d(out_t)/d(values): each key's gradient scattered back to the rows it read (summed).

    Backward launches (independent of T): ``cat`` of the key gradients, one host-to-device copy
    of their grid positions and a gather (both skipped when all keys share one max length),
    ``zeros``, ``index_put_``.
    """

    @staticmethod
    def forward(ctx, values, lengths, offset_per_key, max_lengths_per_key, padding_value):  # type: ignore[override]
        outs, grid, maxl = _stacked(
            STACKED_JAGGED_2D_TO_DENSE,
            values,
            lengths,
            offset_per_key,
            max_lengths_per_key,
            padding_value,
            2,
        )
        ctx.grid, ctx.maxl, ctx.shape = grid, maxl, values.shape
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):  # type: ignore[override]
        n, d = ctx.shape
        ref = next(g for g in grads if g is not None)
        if ctx.grid is None:
            return (ref.new_zeros((n, d)), None, None, None, None)
        rows, _ = ctx.grid
        t, b, lmax = rows.shape
        blocks = [
            (g if g is not None else ref.new_zeros((b, m, d))).reshape(-1)
            for g, m in zip(grads, ctx.maxl, strict=True)
        ]
        flat = torch.cat(blocks).view(-1, d)
        tgt = rows.reshape(-1)  # padding positions hold the spare row n
        if any(m != lmax for m in ctx.maxl):
            pos = torch.cat(  # host-side: grid position of each gradient row, per key block
                [
                    ((k * b + torch.arange(b)).unsqueeze(1) * lmax + torch.arange(m)).reshape(-1)
                    for k, m in enumerate(ctx.maxl)
                ]
            )
            tgt = tgt.index_select(0, pos.to(tgt.device))
        grad_values = ref.new_zeros((n + 1, d))
        grad_values.index_put_((tgt,), flat, accumulate=True)
        return (grad_values[:n], None, None, None, None)


def _stacked_2d_autograd(
    values: torch.Tensor,
    lengths: torch.Tensor,
    offset_per_key: list[int],
    max_lengths_per_key: list[int],
    padding_value: int = 0,
) -> list[torch.Tensor]:
    if needs_grad(values):
        return list(
            _Stacked2D.apply(values, lengths, offset_per_key, max_lengths_per_key, padding_value)
        )
    return below_autograd(
        _F.stacked_jagged_2d_to_dense,
        values,
        lengths,
        offset_per_key,
        max_lengths_per_key,
        padding_value,
    )


def _stacked_meta(ndim: int) -> Callable[..., list[torch.Tensor]]:
    def meta(
        values: torch.Tensor,
        lengths: torch.Tensor,
        offset_per_key: list[int],
        max_lengths_per_key: list[int],
        padding_value: int = 0,
    ) -> list[torch.Tensor]:
        t = lengths.size(0)
        inner = () if ndim == 1 else (values.size(1),)
        return [
            values.new_empty((lengths.size(1), int(m), *inner)) for m in max_lengths_per_key[:t]
        ]

    return meta


KERNELS = {
    STACKED_JAGGED_1D_TO_DENSE: {
        "PrivateUse1": stacked_jagged_1d_to_dense_npu,
        "Meta": _stacked_meta(1),
    },
    STACKED_JAGGED_2D_TO_DENSE: {
        "PrivateUse1": stacked_jagged_2d_to_dense_npu,
        "AutogradPrivateUse1": _stacked_2d_autograd,
        "Meta": _stacked_meta(2),
    },
}
