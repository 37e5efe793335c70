"""``fbgemm::keyed_jagged_index_select_dim1`` on npu (upstream: a CUDA-only op), forward and
backward.

A KeyedJaggedTensor's ``lengths`` hold ``num_batches`` blocks of ``batch_size`` segments (one block
per key), ``offsets = [0, cumsum(lengths)]``; the op selects samples ``indices`` of every key:
output segment ``n * len(indices) + j`` is input segment ``n * batch_size + indices[j]``.  As in
:mod:`.index_select`, output element ``r`` of output segment ``s`` reads
``values[r + d[s]]`` with ``d[s] = offsets[segment + 1] - (inclusive end of output segment s)``
(both segments have the same length), then one gather per output.

Semantics read from upstream's CUDA kernel: values of any dtype it dispatches (the ints,
float16/32/64, bfloat16), ``weights`` float (the same length as ``values``), ``lengths`` /
``offsets`` / ``indices`` int32 or int64 each; ``selected_lengths_sum`` must equal the selected
total (upstream truncates the values and weights to a smaller one, silently, and reads garbage
past a larger one: both refused, as the permutes' ``permuted_lengths_sum`` is); gradient for
``values`` only (upstream returns none for ``weights``).  Bad data (an index outside
``[0, batch_size)``, ``offsets`` that disagree with ``lengths``, pass ``values`` or wrap past
2**31, negative lengths, selected lengths whose int32 sum wraps) is refused by folded device
checks (``FBGEMM_NPU_VALIDATE=0`` skips them).

Launches: the selected segments (an ``add`` of a cached ``arange``'s strided view), the lengths
gather, a cumsum, a gather and a difference for ``d``, the row index (5:
:func:`~fbgemm_npu.native.fbgemm.index_select._utils.rows_gather_index`, no ``searchsorted`` or
``repeat_interleave``), one gather per output (weights add theirs); without
``selected_lengths_sum`` the size is read back to the host.  The cumsum is int32 (AI Core) where
the host bounds the selected sum below 2**31: by ``selected_lengths_sum``, else by
``len(indices) * values.numel()`` (each key's samples sum to at most ``values.numel()``); int64
(AI CPU on a 910B) above.  The backward launches ``zeros`` and
``index_add_``, the forward's gather index reused; without ``selected_lengths_sum`` the forward is
the op itself (traceable: its fake kernel sizes it) and the backward rebuilds the index first.
Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

import functools

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    DataChecks,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native.fbgemm.index_select import _utils as _u
from fbgemm_npu.native.fbgemm.index_select.index_select import VALUE_DTYPES

__all__ = ["KERNELS", "keyed_jagged_index_select_dim1_npu"]

KEYED_JAGGED_INDEX_SELECT_DIM1 = "fbgemm::keyed_jagged_index_select_dim1"

# keyed_jagged_index_select_dim1's CUDA kernel: AT_DISPATCH_ALL_TYPES_AND2(Half, BFloat16)
KEYED_VALUE_DTYPES: tuple[torch.dtype, ...] = (
    *VALUE_DTYPES,
    torch.float64,
    torch.int8,
    torch.uint8,
    torch.int16,
)
WEIGHT_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
)


def _keyed_select_index(
    values: torch.Tensor,
    lengths: torch.Tensor,
    offsets: torch.Tensor,
    indices: torch.Tensor,
    batch_size: int,
    selected_lengths_sum: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(gather index over ``values``, output lengths) of ``keyed_jagged_index_select_dim1``."""
    op = KEYED_JAGGED_INDEX_SELECT_DIM1
    checks = DataChecks(op)
    validate = validation_enabled()
    num_batches = lengths.numel() // batch_size
    k = indices.numel()
    idx = _u.index_range(checks, indices, batch_size, "indices")
    sel = _selected(lengths.numel(), batch_size, idx)
    out_lengths = lengths.index_select(0, sel)
    out_incl = torch.cumsum(out_lengths, 0, dtype=_scan_dtype(values, k, selected_lengths_sum))
    if validate and lengths.numel() > 0:
        steps = offsets[1:] - offsets[:-1]
        mismatch = torch.aminmax(steps - lengths)
        what = "arguments 'offsets' and 'lengths' must agree (offsets = [0, cumsum(lengths)])"
        checks.add(mismatch[0], 0, 0, what)
        checks.add(mismatch[1], 0, 0, what)
        checks.add(offsets[0], 0, 0, "argument 'offsets' must start at 0")
        checks.add(lengths.amin(), 0, None, "argument 'lengths' must be non-negative")
        # all of offsets, not its end alone: int32 offsets that pass 2**31 wrap to negative ones
        # whose steps still agree with the lengths
        low, high = torch.aminmax(offsets)
        what = f"argument 'offsets' must lie in [0, values.numel() ({values.numel()})]"
        checks.add(low, 0, None, what)
        checks.add(high, None, values.numel(), what)
    if num_batches * k == 0:
        if selected_lengths_sum not in (None, 0):
            raise ValueError(
                f"{op}: argument 'selected_lengths_sum' must be 0 for an empty "
                f"selection, got {selected_lengths_sum}"
            )
        checks.assert_on_device()
        return torch.zeros(0, dtype=torch.int64, device=values.device), out_lengths
    if validate:
        checks.add(out_incl.amin(), 0, None, _u.sum_fits("lengths[indices]", out_incl.dtype))
    d = offsets[1:].index_select(0, sel) - out_incl
    size_arg = "selected_lengths_sum"
    src = _u.select_rows_index(
        checks, d, out_incl, selected_lengths_sum, size_arg, n_src=values.numel(), exact=True
    )
    return src, out_lengths


def _selected(n_segments: int, batch_size: int, indices: torch.Tensor) -> torch.Tensor:
    """The input segment of every output segment, ``n * batch_size + indices[j]`` (batch-major),
    int64: one ``add`` of the batches' first segments (a strided view of a cached ``arange``)."""
    base = arange_cached(n_segments, indices.device)[::batch_size]
    return (base.view(-1, 1) + indices.view(1, -1)).view(-1)


def _scan_dtype(
    values: torch.Tensor, n_indices: int, selected_lengths_sum: int | torch.SymInt | None
) -> torch.dtype:
    """The selected lengths' scan dtype from sizes (host): their sum is ``selected_lengths_sum``
    when given (checked), else at most ``n_indices * values.numel()`` (every key's lengths sum to
    at most ``values.numel()``, checked); int32 below 2**31."""
    if selected_lengths_sum is not None:
        return _u.scan_dtype(selected_lengths_sum)
    return _u.scan_dtype(max(n_indices, 1) * values.numel())


def _check_keyed_args(
    values: object,
    lengths: object,
    offsets: object,
    indices: object,
    batch_size: int,
    weights: object,
    selected_lengths_sum: int | None,
) -> None:
    op = KEYED_JAGGED_INDEX_SELECT_DIM1
    v = check_dtype(op, "values", check_tensor(op, "values", values), KEYED_VALUE_DTYPES)
    check_ndim(op, "values", v, (1,))
    lengths_t = _u.check_index_tensor(op, "lengths", lengths)
    offsets_t = _u.check_index_tensor(op, "offsets", offsets)
    _u.check_index_tensor(op, "indices", indices)
    if weights is not None:
        w = check_dtype(op, "weights", check_tensor(op, "weights", weights), WEIGHT_DTYPES)
        check_ndim(op, "weights", w, (1,))
        if w.numel() != v.numel():
            raise ValueError(
                f"{op}: argument 'weights' must have values' size ({v.numel()}), got {w.numel()}"
            )
    check_same_device(
        op, values=v, lengths=lengths_t, offsets=offsets_t, indices=indices, weights=weights
    )
    if offsets_t.numel() != lengths_t.numel() + 1:
        raise ValueError(
            f"{op}: argument 'offsets' must have lengths.numel() + 1 = "
            f"{lengths_t.numel() + 1} entries, got {offsets_t.numel()}"
        )
    if batch_size <= 0 or lengths_t.numel() % batch_size != 0:
        raise ValueError(
            f"{op}: argument 'batch_size' must be positive and divide "
            f"lengths.numel() ({lengths_t.numel()}), got {batch_size}"
        )
    _u.check_non_negative(op, "selected_lengths_sum", selected_lengths_sum)
    # every key's lengths sum to at most values.numel() (checked): 2**40 would be allocated
    n = indices.numel()
    _u.check_selected_size(
        op, "selected_lengths_sum", selected_lengths_sum, n, v.numel(), "values.numel()"
    )


def keyed_jagged_index_select_dim1_npu(
    values: torch.Tensor,
    lengths: torch.Tensor,
    offsets: torch.Tensor,
    indices: torch.Tensor,
    batch_size: int,
    weights: torch.Tensor | None = None,
    selected_lengths_sum: int | None = None,
) -> list[torch.Tensor]:
    """Select samples ``indices`` of every key of a KeyedJaggedTensor (``lengths`` of
    ``num_batches * batch_size`` segments, ``offsets = [0, cumsum(lengths)]``).

    Returns ``[values, lengths]`` or ``[values, lengths, weights]``: output segment
    ``n * len(indices) + j`` is input segment ``n * batch_size + indices[j]``;
    ``selected_lengths_sum``, when given, must be the selected lengths' sum (checked on the
    device).
    Launches: see the module docstring; ``selected_lengths_sum`` None reads the size back to the
    host.  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    _check_keyed_args(values, lengths, offsets, indices, batch_size, weights, selected_lengths_sum)
    src, out_lengths = _keyed_select_index(
        values, lengths, offsets, indices, batch_size, selected_lengths_sum
    )
    out = [values.index_select(0, src), out_lengths]
    if weights is not None:
        out.append(weights.index_select(0, src))
    return out


def _keyed_src(
    lengths: torch.Tensor,
    offsets: torch.Tensor,
    indices: torch.Tensor,
    out_lengths: torch.Tensor,
    num_rows: int,
    *,
    batch_size: int,
) -> torch.Tensor:
    """The backward's gather index (the forward checked the data): :func:`_keyed_select_index`'s
    ``src``, the ``num_rows`` selected values (their sum: exact).  Launches: the selected segments
    (an ``add``), a cumsum, a gather and a difference, the row index (5), then the backward's
    ``zeros`` and ``index_add_``: 11 in all."""
    sel = _selected(lengths.numel(), batch_size, indices)
    out_incl = torch.cumsum(out_lengths, 0, dtype=_u.scan_dtype(num_rows))
    d = offsets[1:].index_select(0, sel) - out_incl
    return _u.rows_gather_index(d, out_incl, num_rows, clamp=False)


def _keyed_jagged_index_select_dim1_autograd(
    values: torch.Tensor,
    lengths: torch.Tensor,
    offsets: torch.Tensor,
    indices: torch.Tensor,
    batch_size: int,
    weights: torch.Tensor | None = None,
    selected_lengths_sum: int | None = None,
) -> list[torch.Tensor]:
    """AutogradPrivateUse1: differentiable in ``values`` (as upstream's CUDA op; ``weights`` get
    no gradient).  With ``selected_lengths_sum`` the kernel's program (no host read: it traces)
    computes the gather index, which the backward reuses.  Without, the size is read back: the
    forward is then the op below autograd (its fake kernel sizes a traced call) and the
    backward rebuilds the index (:func:`_keyed_src`)."""
    rest = (lengths, offsets, indices, batch_size, weights, selected_lengths_sum)
    if not needs_grad(values):
        return below_autograd(torch.ops.fbgemm.keyed_jagged_index_select_dim1, values, *rest)
    _check_keyed_args(values, lengths, offsets, indices, batch_size, weights, selected_lengths_sum)
    if selected_lengths_sum is not None:
        args = (values.detach(), lengths, offsets, indices, batch_size, selected_lengths_sum)
        src, out_lengths = below_autograd(_keyed_select_index, *args)
        extras = [out_lengths]
        if weights is not None:
            extras.append(below_autograd(torch.index_select, weights.detach(), 0, src))
        return list(_u.GatherRows.apply(values, src, *extras))

    def call(x: torch.Tensor) -> list[torch.Tensor]:
        return below_autograd(torch.ops.fbgemm.keyed_jagged_index_select_dim1, x, *rest)

    index = functools.partial(_keyed_src, batch_size=batch_size)
    return list(_u.SelectedRows.apply(values, call, index, (lengths, offsets, indices)))


KERNELS = {
    KEYED_JAGGED_INDEX_SELECT_DIM1: {
        "PrivateUse1": keyed_jagged_index_select_dim1_npu,
        "AutogradPrivateUse1": _keyed_jagged_index_select_dim1_autograd,
    },
}
