"""Jagged <-> padded dense: ``fbgemm::jagged_to_padded_dense`` (+ ``_forward``, ``_backward``),
``jagged_1d_to_dense``, ``jagged_2d_to_dense``, ``dense_to_jagged`` (+ ``_forward``) on npu.

Math (``k`` jagged dims, ``values`` of ``N`` rows, see ``_jagged_utils`` for the walk)::

    to_dense:  out[b, j_1..j_k, :] = values[row(b, j)]   if the walk reaches a row, else padding
    to_jagged: out[row(b, j), :]   = dense[b, j_1..j_k, :] for every such position; other rows 0

Rows longer than ``max_lengths`` are truncated, empty and decreasing rows are padding, exactly as
upstream's loops do.  Values: float32, float16, bfloat16, int32, int64 (upstream's dtypes, CPU and
CUDA alike); offsets: int32 or int64, one dtype for all jagged dims; 1 to 5 jagged dims.  ``values``
may be 1-D (no inner dim) or ``[N, ..., D]`` with size-1 middle dims, as upstream allows.

How: ``dense_index`` gives every dense position its value row (``k`` levels of arange / add /
compare / pair gather), padding positions point at a spare row; to_dense is then one
``index_select`` from ``values`` padded with one row of the padding value (``constant_pad_nd``),
to_jagged one ``index_put_`` into a zeroed output whose spare row absorbs the padding positions.

Launches per call (k = 1; each further jagged dim adds 7, and 2 more for its data check): 6
(arange, add, ge, masked_fill_, constant_pad_nd / zero_, index_select / index_put_), within
OPS.md's 8; the data check adds 5 (``floor_divide``, ``masked_fill_``, ``any``, ``logical_not``,
``_assert_async``; ``FBGEMM_NPU_VALIDATE=0`` drops it): 11.  A fused kernel would do the op and
its checks in 1-2 launches.  Syncs: 0, except
``dense_to_jagged`` without ``total_L`` (1: the output length is the data's ``offsets[-1].max()``,
as upstream reads it too).

Upstream registers autograd for ``jagged_to_padded_dense_forward``, ``jagged_1d_to_dense``,
``jagged_2d_to_dense`` and ``dense_to_jagged_forward``; the two composite ops
(``jagged_to_padded_dense``, ``dense_to_jagged``) are registered here too, so that a call on npu is
one dispatch and ``info`` lists them.  Gradients: to_dense's is ``jagged_to_padded_dense_backward``
(to_jagged of the incoming gradient), to_jagged's is ``jagged_to_padded_dense_forward`` of the
gradient with padding 0, as upstream's.

Rows that overlap (only decreasing offsets make them) are written by several positions; upstream's
loop lets the last one win, ours lets one of them win (the last on CPU and the simulator; on a
device ``index_put_`` does not order them).  Well-formed offsets never overlap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from fbgemm_npu.native._checks import check_ndim, validation_enabled
from fbgemm_npu.native.fbgemm.jagged._utils import (
    assert_no_bad,
    check_max_lengths,
    check_offsets,
    check_values,
    dense_index,
    numel_of,
    padding_scalar,
    write_bad,
)

__all__ = [
    "KERNELS",
    "dense_to_jagged_forward_npu",
    "dense_to_jagged_npu",
    "jagged_1d_to_dense_npu",
    "jagged_2d_to_dense_npu",
    "jagged_to_padded_dense_backward_npu",
    "jagged_to_padded_dense_forward_npu",
    "to_dense",
    "to_jagged",
]

_F = torch.ops.fbgemm
_J2D = "fbgemm::jagged_to_padded_dense"
_J2D_FWD = "fbgemm::jagged_to_padded_dense_forward"
_J2D_BWD = "fbgemm::jagged_to_padded_dense_backward"
_J1D = "fbgemm::jagged_1d_to_dense"
_J2D2 = "fbgemm::jagged_2d_to_dense"
_D2J = "fbgemm::dense_to_jagged"
_D2J_FWD = "fbgemm::dense_to_jagged_forward"

READ_CHECK = (
    "offsets point outside the values: a non-padding position would read a row < 0 or past the "
    "last one, or offsets[d + 1].numel() != offsets[d][-1] + 1"
)
WRITE_CHECK = (
    "offsets point outside the output: a position would write a row < 0 or >= the output's "
    "rows, or offsets[d + 1].numel() != offsets[d][-1] + 1"
)


def to_dense(
    op: str,
    values: torch.Tensor,
    offsets: Sequence[torch.Tensor],
    max_lengths: Sequence[int],
    padding_value: float,
    values_arg: str = "values",
    offsets_arg: str = "offsets",
) -> torch.Tensor:
    """Padded dense form of a jagged tensor: ``[B, *max_lengths]`` plus ``values``' inner dim.

    Checks its arguments and names them as ``values_arg`` / ``offsets_arg`` in errors.
    """
    values = check_values(op, values_arg, values)
    offsets = check_offsets(op, offsets_arg, offsets, values.device)
    lengths = check_max_lengths(op, "max_lengths", max_lengths, len(offsets))
    folded = values.dim() == 1
    n = values.size(0)
    inner = 1 if folded else values.size(-1)
    out_shape = (offsets[0].numel() - 1, *lengths, *(() if folded else (inner,)))
    if values.numel() == 0:
        _check_padding_fits(op, padding_value, values.dtype)
    pad_value = padding_scalar(padding_value, values.dtype)
    if numel_of(out_shape) == 0:
        return values.new_empty(out_shape)
    if values.numel() == 0:  # upstream fills the padding without looking at the offsets
        return values.new_full(out_shape, pad_value)
    if numel_of(values.shape[1:]) != inner:
        raise ValueError(
            f"{op}: argument '{values_arg}' of shape {tuple(values.shape)} must be 1-D or "
            f"[N, ..., D] with size-1 middle dims (upstream folds them into D)"
        )
    bad: list[torch.Tensor] | None = [] if validation_enabled() else None
    index = dense_index(offsets, lengths, n, bad)
    if index is None:
        assert_no_bad(op, bad, f"argument '{offsets_arg}': {READ_CHECK}")
        return values.new_full(out_shape, pad_value)
    rows, pad = index
    if bad is not None:
        bad.append(write_bad(rows, pad, n))
    assert_no_bad(op, bad, f"argument '{offsets_arg}': {READ_CHECK}")
    # Row n of the padded copy is the padding value: padding positions gather it, so no fill
    # pass over the (much larger) output is needed.
    if inner == 1:  # a 1-D gather: far faster than gathering [N, 1] rows of one element
        table = F.pad(values.reshape(n), (0, 1), value=pad_value)
    else:
        table = F.pad(values.reshape(n, inner), (0, 0, 0, 1), value=pad_value)
    return table.index_select(0, rows.reshape(-1)).view(out_shape)


def to_jagged(
    op: str,
    dense: torch.Tensor,
    offsets: Sequence[torch.Tensor],
    total: int,
    dense_arg: str,
    offsets_arg: str,
) -> torch.Tensor:
    """``[total, D]``: dense positions scattered to their value rows, zeros elsewhere.

    ``dense`` is ``[B, L_1..L_k, D]`` (arguments already checked).  Positions that share a row
    (only overlapping rows do) write one of their values.
    """
    d = dense.size(-1)
    if dense.numel() == 0:
        return dense.new_zeros((total, d))
    bad: list[torch.Tensor] | None = [] if validation_enabled() else None
    index = dense_index(offsets, dense.shape[1:-1], total, bad)
    what = f"argument '{offsets_arg}': {WRITE_CHECK}"
    if index is None:
        assert_no_bad(op, bad, what)
        return dense.new_zeros((total, d))
    rows, pad = index
    if bad is not None:
        bad.append(write_bad(rows, pad, total))
    assert_no_bad(op, bad, what)
    return scatter_rows(dense.reshape(-1, d), rows.reshape(-1), total)


def scatter_rows(src: torch.Tensor, rows: torch.Tensor, total: int) -> torch.Tensor:
    """``out[rows[i]] = src[i]`` into ``total + 1`` zero rows (the last absorbs padding), returned
    as the first ``total``.  2 launches (``zero_``, ``index_copy_`` / ``index_put_``)."""
    d = src.size(1)
    if d == 1:  # 1-D scatters are far faster than scatters of one-element rows
        out = src.new_zeros(total + 1)
        out.index_put_((rows,), src.view(-1))
        return out[:total].view(total, 1)
    out = src.new_zeros((total + 1, d))
    if rows.dtype == torch.int64:  # index_copy_ takes int64 only; it is the faster one on CPU
        return out.index_copy_(0, rows, src)[:total]
    return out.index_put_((rows,), src)[:total]


def jagged_to_padded_dense_forward_npu(
    values: torch.Tensor,
    offsets: list[torch.Tensor],
    max_lengths: Sequence[int],
    padding_value: float = 0.0,
) -> torch.Tensor:
    """``fbgemm::jagged_to_padded_dense_forward``: see the module docstring (11 launches, k=1)."""
    return to_dense(_J2D_FWD, values, offsets, max_lengths, padding_value)


def _check_padding_fits(op: str, padding_value: float, dtype: torch.dtype) -> None:
    """With no values upstream fills the output through c10's checked scalar conversion, which
    refuses a ``padding_value`` outside ``dtype``'s range (even for an empty output; infinities
    and NaN pass for float types, not for integers); ours checks the same on the host."""
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    if dtype.is_floating_point and not math.isfinite(padding_value):
        return
    if math.isfinite(padding_value) and info.min <= padding_value <= info.max:
        return
    raise ValueError(
        f"{op}: argument 'padding_value' ({padding_value}) cannot be converted to {dtype} "
        "without overflow (upstream raises the same when 'values' is empty)"
    )


def jagged_to_padded_dense_npu(
    values: torch.Tensor,
    offsets: list[torch.Tensor],
    max_lengths: Sequence[int],
    padding_value: float = 0.0,
) -> torch.Tensor:
    """``fbgemm::jagged_to_padded_dense`` (upstream: the forward op plus autograd)."""
    return to_dense(_J2D, values, offsets, max_lengths, padding_value)


def jagged_to_padded_dense_backward_npu(
    grad_output: torch.Tensor, offsets: list[torch.Tensor], total_L: int
) -> torch.Tensor:
    """``fbgemm::jagged_to_padded_dense_backward``: ``[total_L, D]`` (``[total_L]`` when
    ``grad_output`` has no inner dim), each value row the gradient of the position that reads it,
    zeros for rows no position reads (truncated or uncovered).  11 launches (k=1), 0 syncs."""
    op = _J2D_BWD
    grad = check_values(op, "grad_output", grad_output)
    offsets = check_offsets(op, "offsets", offsets, grad.device)
    k = len(offsets)
    if grad.dim() not in (k + 1, k + 2):
        raise ValueError(
            f"{op}: argument 'grad_output' must have {k + 1} or {k + 2} dims for {k} jagged "
            f"dim(s), got shape {tuple(grad.shape)}"
        )
    total = _check_total(op, total_L)
    folded = grad.dim() == k + 1
    dense = grad.unsqueeze(-1) if folded else grad
    _check_batch(op, "grad_output", dense, offsets)
    out = to_jagged(op, dense, offsets, total, "grad_output", "offsets")
    return out.squeeze(-1) if folded else out


def jagged_1d_to_dense_npu(
    values: torch.Tensor, offsets: torch.Tensor, max_sequence_length: int, padding_value: int
) -> torch.Tensor:
    """``fbgemm::jagged_1d_to_dense``: 1-D values -> ``[B, max_sequence_length]``."""
    _check_1d_args(values, offsets, max_sequence_length)
    return to_dense(_J1D, values, [offsets], [max_sequence_length], float(padding_value))


def jagged_2d_to_dense_npu(
    values: torch.Tensor, offsets: torch.Tensor, max_sequence_length: int
) -> torch.Tensor:
    """``fbgemm::jagged_2d_to_dense``: ``[B, max_sequence_length, D]``, padding 0."""
    return to_dense(_J2D2, values, [offsets], [max_sequence_length], 0.0)


def dense_to_jagged_forward_npu(
    dense: torch.Tensor, x_offsets: list[torch.Tensor], total_L: int | None = None
) -> torch.Tensor:
    """``fbgemm::dense_to_jagged_forward``: ``[total_L, D]`` jagged values of ``dense``.

    Without ``total_L`` the length is ``x_offsets[-1].max()``, read back to the host: 1 sync, the
    one the op's contract forces (upstream reads it the same way).  11 launches (k=1), 12 with
    the ``amax`` when ``total_L`` is None.
    """
    return _dense_to_jagged(_D2J_FWD, dense, x_offsets, total_L)


def dense_to_jagged_npu(
    dense: torch.Tensor, x_offsets: list[torch.Tensor], total_L: int | None = None
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``fbgemm::dense_to_jagged``: ``(dense_to_jagged_forward(...), x_offsets)``."""
    return _dense_to_jagged(_D2J, dense, x_offsets, total_L), list(x_offsets)


def _dense_to_jagged(
    op: str, dense: torch.Tensor, x_offsets: list[torch.Tensor], total_L: int | None
) -> torch.Tensor:
    dense = check_values(op, "dense", dense)
    offsets = check_offsets(op, "x_offsets", x_offsets, dense.device)
    k = len(offsets)
    check_ndim(op, "dense", dense, (k + 2,))
    _check_batch(op, "dense", dense, offsets)
    if total_L is None:
        total = int(offsets[-1].max())  # the sync the contract forces
        if total < 0:
            raise ValueError(f"{op}: 'x_offsets[{k - 1}]' has a negative maximum ({total})")
    else:
        total = _check_total(op, total_L)
    return to_jagged(op, dense, offsets, total, "dense", "x_offsets")


def _check_total(op: str, total_L: int) -> int:
    total = int(total_L)
    if total < 0:
        raise ValueError(f"{op}: argument 'total_L' must be >= 0, got {total}")
    return total


def _check_batch(op: str, arg: str, dense: torch.Tensor, offsets: list[torch.Tensor]) -> None:
    if dense.size(0) != offsets[0].numel() - 1:
        raise ValueError(
            f"{op}: argument '{arg}' has batch size {dense.size(0)} but the offsets describe "
            f"{offsets[0].numel() - 1} rows (offsets[0].numel() - 1)"
        )


def _check_1d_args(values: torch.Tensor, offsets: torch.Tensor, max_sequence_length: int) -> None:
    check_ndim(_J1D, "values", check_values(_J1D, "values", values), (1,))
    check_ndim(_J1D, "offsets", offsets, (1,))
    if max_sequence_length <= 0:
        raise ValueError(f"{_J1D}: argument 'max_sequence_length' must be > 0")


# ----------------------------------------------------------------------------------- autograd
# Each autograd kernel runs the op's own npu kernel below autograd (so errors name the op the
# user called and the counters see it), wrapped in a Function whose backward calls the fbgemm
# backward op on npu: the npu path never depends on upstream's C++ autograd.

Run = Callable[[torch.Tensor, list[torch.Tensor]], torch.Tensor]


class _JaggedToPaddedDense(torch.autograd.Function):
    """d(out)/d(values): to_jagged of the gradient (``jagged_to_padded_dense_backward``)."""

    @staticmethod
    def forward(ctx, values, run, *offsets):  # type: ignore[override]
        ctx.save_for_backward(*offsets)
        ctx.values_shape = values.shape
        with torch._C._AutoDispatchBelowAutograd():
            return run(values, list(offsets))

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        offsets = list(ctx.saved_tensors)
        g = _F.jagged_to_padded_dense_backward(grad, offsets, ctx.values_shape[0])
        return (g.reshape(ctx.values_shape), None, *([None] * len(offsets)))


class _DenseToJagged(torch.autograd.Function):
    """d(out)/d(dense): to_dense of the gradient with padding 0."""

    @staticmethod
    def forward(ctx, dense, run, *offsets):  # type: ignore[override]
        ctx.save_for_backward(*offsets)
        ctx.lengths = list(dense.shape[1:-1])
        with torch._C._AutoDispatchBelowAutograd():
            return run(dense, list(offsets))

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        offsets = list(ctx.saved_tensors)
        g = _F.jagged_to_padded_dense_forward(grad, offsets, ctx.lengths, 0.0)
        return (g, None, *([None] * len(offsets)))


def needs_grad(*tensors: torch.Tensor | None) -> bool:
    """Whether autograd must record this call."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _apply(
    fn: type[torch.autograd.Function], x: torch.Tensor, run: Run, offsets: list
) -> torch.Tensor:
    if needs_grad(x):
        return fn.apply(x, run, *offsets)
    with torch._C._AutoDispatchBelowAutograd():
        return run(x, list(offsets))


def _j2d_forward_autograd(
    values: torch.Tensor,
    offsets: list[torch.Tensor],
    max_lengths: Sequence[int],
    padding_value: float = 0.0,
) -> torch.Tensor:
    def run(v: torch.Tensor, o: list[torch.Tensor]) -> torch.Tensor:
        return _F.jagged_to_padded_dense_forward(v, o, max_lengths, padding_value)

    return _apply(_JaggedToPaddedDense, values, run, offsets)


def _j2d_autograd(
    values: torch.Tensor,
    offsets: list[torch.Tensor],
    max_lengths: Sequence[int],
    padding_value: float = 0.0,
) -> torch.Tensor:
    def run(v: torch.Tensor, o: list[torch.Tensor]) -> torch.Tensor:
        return _F.jagged_to_padded_dense(v, o, max_lengths, padding_value)

    return _apply(_JaggedToPaddedDense, values, run, offsets)


def _j1d_autograd(
    values: torch.Tensor, offsets: torch.Tensor, max_sequence_length: int, padding_value: int
) -> torch.Tensor:
    def run(v: torch.Tensor, o: list[torch.Tensor]) -> torch.Tensor:
        return _F.jagged_1d_to_dense(v, o[0], max_sequence_length, padding_value)

    return _apply(_JaggedToPaddedDense, values, run, [offsets])


def _j2d2_autograd(
    values: torch.Tensor, offsets: torch.Tensor, max_sequence_length: int
) -> torch.Tensor:
    def run(v: torch.Tensor, o: list[torch.Tensor]) -> torch.Tensor:
        return _F.jagged_2d_to_dense(v, o[0], max_sequence_length)

    return _apply(_JaggedToPaddedDense, values, run, [offsets])


def _d2j_forward_autograd(
    dense: torch.Tensor, x_offsets: list[torch.Tensor], total_L: int | None = None
) -> torch.Tensor:
    def run(d: torch.Tensor, o: list[torch.Tensor]) -> torch.Tensor:
        return _F.dense_to_jagged_forward(d, o, total_L)

    return _apply(_DenseToJagged, dense, run, x_offsets)


def _d2j_autograd(
    dense: torch.Tensor, x_offsets: list[torch.Tensor], total_L: int | None = None
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    def run(d: torch.Tensor, o: list[torch.Tensor]) -> torch.Tensor:
        return _F.dense_to_jagged(d, o, total_L)[0]

    return _apply(_DenseToJagged, dense, run, x_offsets), list(x_offsets)


KERNELS = {
    _J2D: {"PrivateUse1": jagged_to_padded_dense_npu, "AutogradPrivateUse1": _j2d_autograd},
    _J2D_FWD: {
        "PrivateUse1": jagged_to_padded_dense_forward_npu,
        "AutogradPrivateUse1": _j2d_forward_autograd,
    },
    _J2D_BWD: {"PrivateUse1": jagged_to_padded_dense_backward_npu},
    _J1D: {"PrivateUse1": jagged_1d_to_dense_npu, "AutogradPrivateUse1": _j1d_autograd},
    _J2D2: {"PrivateUse1": jagged_2d_to_dense_npu, "AutogradPrivateUse1": _j2d2_autograd},
    _D2J: {"PrivateUse1": dense_to_jagged_npu, "AutogradPrivateUse1": _d2j_autograd},
    _D2J_FWD: {
        "PrivateUse1": dense_to_jagged_forward_npu,
        "AutogradPrivateUse1": _d2j_forward_autograd,
    },
}
