"""Padded dense -> jagged on npu: ``fbgemm::dense_to_jagged_forward`` (which upstream's composite
``dense_to_jagged`` calls) and ``jagged_to_padded_dense_backward``.

The math, dtypes and program are in :mod:`.jagged` (the family's public face for the jagged <->
dense ops).  The gradient of ``dense_to_jagged`` is ``jagged_to_padded_dense_forward``
(:mod:`.to_dense`) of the incoming gradient with padding 0.  Launches and syncs: ``BUDGETS`` in
``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._autograd import below_autograd
from fbgemm_npu.native._checks import allocation_of, check_ndim, validation_enabled
from fbgemm_npu.native._triton import kernel_mode, use_triton
from fbgemm_npu.native._triton import mode as kernel_mode_now
from fbgemm_npu.native.fbgemm.jagged._utils import (
    WRITE_CHECK,
    check_offsets,
    check_values,
    checked_dense_index,
    record_or_run,
)
from fbgemm_npu.native.fbgemm.jagged.to_dense import triton_supported

__all__ = [
    "KERNELS",
    "dense_to_jagged_forward_npu",
    "dense_to_jagged_npu",
    "jagged_to_padded_dense_backward_npu",
    "scatter_rows",
    "to_jagged",
]

JAGGED_TO_PADDED_DENSE_BACKWARD = "fbgemm::jagged_to_padded_dense_backward"
DENSE_TO_JAGGED = "fbgemm::dense_to_jagged"
DENSE_TO_JAGGED_FORWARD = "fbgemm::dense_to_jagged_forward"


def to_jagged(
    op: str,
    dense: torch.Tensor,
    offsets: Sequence[torch.Tensor],
    total: int,
    dense_arg: str,
    offsets_arg: str,
    total_arg: str = "'total_L'",
) -> torch.Tensor:
    """``[total, D]``: dense positions scattered to their value rows, zeros elsewhere.

    ``dense`` is ``[B, L_1..L_k, D]`` (arguments already checked).  Positions that share a row
    (only overlapping rows do) write one of their values.  An output no memory holds names
    ``total_arg``, what gave ``total``.
    """
    d = dense.size(-1)
    with allocation_of(op, f"the output of {total_arg} = {total} rows of {d}"):
        if dense.numel() == 0:
            return dense.new_zeros((total, d))
        what = f"argument '{offsets_arg}': {WRITE_CHECK}"
        lengths = list(dense.shape[1:-1])
        if use_triton(op, dense.device, supported=triton_supported(dense, offsets, lengths)):
            from fbgemm_npu.native.fbgemm.jagged._triton_dense import to_jagged_triton

            return to_jagged_triton(op, dense, offsets[0], total, validation_enabled(), what)
        index = checked_dense_index(op, offsets, dense.shape[1:-1], total, what, write=True)
        if index is None:
            return dense.new_zeros((total, d))
        rows, _ = index
        return scatter_rows(dense.reshape(-1, d), rows.reshape(-1), total)


def scatter_rows(src: torch.Tensor, rows: torch.Tensor, total: int) -> torch.Tensor:
    """``out[rows[i]] = src[i]`` into ``total + 1`` zero rows (the last absorbs padding; ``rows``
    int64 in ``[0, total]``), returned as the first ``total``: a ``zero_`` and an
    ``index_copy_`` (``index_put_`` for one-element rows)."""
    d = src.size(1)
    if d == 1:  # 1-D scatters are far faster than scatters of one-element rows
        out = src.new_zeros(total + 1)
        out.index_put_((rows,), src.view(-1))
        return out[:total].view(total, 1)
    return src.new_zeros((total + 1, d)).index_copy_(0, rows, src)[:total]


def jagged_to_padded_dense_backward_npu(
    grad_output: torch.Tensor, offsets: list[torch.Tensor], total_L: int
) -> torch.Tensor:
    """``fbgemm::jagged_to_padded_dense_backward``: ``[total_L, D]`` (``[total_L]`` when
    ``grad_output`` has no inner dim), each value row the gradient of the position that reads it,
    zeros for rows no position reads (truncated or uncovered)."""
    op = JAGGED_TO_PADDED_DENSE_BACKWARD
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


def dense_to_jagged_forward_npu(
    dense: torch.Tensor, x_offsets: list[torch.Tensor], total_L: int | None = None
) -> torch.Tensor:
    """``fbgemm::dense_to_jagged_forward``: ``[total_L, D]`` jagged values of ``dense``.

    Without ``total_L`` the length is ``x_offsets[-1].max()``, read back to the host: an ``amax``
    and its sync, the one the op's contract forces (upstream reads it the same way).
    """
    return _dense_to_jagged(DENSE_TO_JAGGED_FORWARD, dense, x_offsets, total_L)


def dense_to_jagged_npu(
    dense: torch.Tensor, x_offsets: list[torch.Tensor], total_L: int | None = None
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """What ``fbgemm::dense_to_jagged`` runs on npu, without the dispatcher (bench, tests):
    ``(dense_to_jagged_forward(...), x_offsets)``, upstream's ``CompositeImplicitAutograd``
    kernel.  Registered as ``jagged_to_padded_dense`` is (:mod:`.to_dense`): no ``PrivateUse1``
    kernel, so that exports decompose it as on CPU, and the input offsets it returns are upstream's
    composite's."""
    return dense_to_jagged_forward_npu(dense, x_offsets, total_L), list(x_offsets)


def _dense_to_jagged(
    op: str, dense: torch.Tensor, x_offsets: list[torch.Tensor], total_L: int | None
) -> torch.Tensor:
    # total_L first, before any tensor is looked at: upstream's kernel checks it first, and
    # its tests expect that error for a call that is also wrong elsewhere
    total = None if total_L is None else _check_total(op, total_L)
    dense = check_values(op, "dense", dense)
    offsets = check_offsets(op, "x_offsets", x_offsets, dense.device)
    k = len(offsets)
    check_ndim(op, "dense", dense, (k + 2,))
    _check_batch(op, "dense", dense, offsets)
    if total is None:
        total = int(offsets[-1].max())  # the sync the contract forces
        if total < 0:
            raise ValueError(f"{op}: 'x_offsets[{k - 1}]' has a negative maximum ({total})")
        named = f"'x_offsets[{k - 1}]' (its maximum, total_L omitted)"
        return to_jagged(op, dense, offsets, total, "dense", "x_offsets", named)
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


class _DenseToJagged(torch.autograd.Function):
    """d(out)/d(dense): to_dense of the gradient with padding 0."""

    @staticmethod
    def forward(ctx, dense, run, *offsets):  # type: ignore[override]
        ctx.save_for_backward(*offsets)
        ctx.lengths = list(dense.shape[1:-1])
        ctx.kernel = kernel_mode_now()  # autograd's device thread does not see it
        return below_autograd(run, dense, list(offsets))

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        offsets = list(ctx.saved_tensors)
        with kernel_mode(ctx.kernel):  # the forward's selection
            g = torch.ops.fbgemm.jagged_to_padded_dense_forward(grad, offsets, ctx.lengths, 0.0)
        return (g, None, *([None] * len(offsets)))


def _dense_to_jagged_forward_autograd(
    dense: torch.Tensor, x_offsets: list[torch.Tensor], total_L: int | None = None
) -> torch.Tensor:
    def run(d: torch.Tensor, o: list[torch.Tensor]) -> torch.Tensor:
        return torch.ops.fbgemm.dense_to_jagged_forward(d, o, total_L)

    return record_or_run(_DenseToJagged, dense, run, x_offsets)


def _composite_autograd(
    dense: torch.Tensor, x_offsets: list[torch.Tensor], total_L: int | None = None
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The ``AutogradPrivateUse1`` kernel of upstream's composite ``dense_to_jagged``: its
    ``CompositeImplicitAutograd`` kernel's program, after the family's argument guard (see
    :func:`.to_dense.composite_autograd`)."""
    return torch.ops.fbgemm.dense_to_jagged_forward(dense, x_offsets, total_L), list(x_offsets)


KERNELS = {
    DENSE_TO_JAGGED: {"AutogradPrivateUse1": _composite_autograd},
    JAGGED_TO_PADDED_DENSE_BACKWARD: {"PrivateUse1": jagged_to_padded_dense_backward_npu},
    DENSE_TO_JAGGED_FORWARD: {
        "PrivateUse1": dense_to_jagged_forward_npu,
        "AutogradPrivateUse1": _dense_to_jagged_forward_autograd,
    },
}
