"""Jagged -> padded dense on npu: ``fbgemm::jagged_to_padded_dense_forward`` (which upstream's
composite ``jagged_to_padded_dense`` calls), ``jagged_1d_to_dense`` and ``jagged_2d_to_dense``.

The math, dtypes and program are in :mod:`.jagged` (the family's public face for the jagged <->
dense ops).  The gradient is ``jagged_to_padded_dense_backward`` (:mod:`.to_jagged`) of the
incoming gradient.  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from fbgemm_npu.native._autograd import below_autograd
from fbgemm_npu.native._checks import allocation_of, check_ndim, validation_enabled
from fbgemm_npu.native._index import tracing
from fbgemm_npu.native._triton import kernel_mode, use_triton
from fbgemm_npu.native._triton import mode as kernel_mode_now
from fbgemm_npu.native.fbgemm.jagged._utils import (
    READ_CHECK,
    check_max_lengths,
    check_offsets,
    check_values,
    checked_dense_index,
    fill_padding,
    numel_of,
    padding_scalar,
    record_or_run,
)

__all__ = [
    "KERNELS",
    "jagged_1d_to_dense_npu",
    "jagged_2d_to_dense_npu",
    "jagged_to_padded_dense_forward_npu",
    "jagged_to_padded_dense_npu",
    "to_dense",
    "triton_supported",
]

JAGGED_TO_PADDED_DENSE = "fbgemm::jagged_to_padded_dense"
JAGGED_TO_PADDED_DENSE_FORWARD = "fbgemm::jagged_to_padded_dense_forward"
JAGGED_1D_TO_DENSE = "fbgemm::jagged_1d_to_dense"
JAGGED_2D_TO_DENSE = "fbgemm::jagged_2d_to_dense"


def to_dense(
    op: str,
    values: torch.Tensor,
    offsets: Sequence[torch.Tensor],
    max_lengths: Sequence[int],
    padding_value: float,
    values_arg: str = "values",
    offsets_arg: str = "offsets",
    lengths_arg: str = "max_lengths",
) -> torch.Tensor:
    """Padded dense form of a jagged tensor: ``[B, *max_lengths]`` plus ``values``' inner dim.

    Checks its arguments and names them as ``values_arg`` / ``offsets_arg`` / ``lengths_arg``
    in errors (an output no memory holds names ``lengths_arg``).
    """
    values = check_values(op, values_arg, values)
    offsets = check_offsets(op, offsets_arg, offsets, values.device)
    lengths = check_max_lengths(op, lengths_arg, max_lengths, len(offsets))
    folded = values.dim() == 1
    inner = 1 if folded else values.size(-1)
    out_shape = (offsets[0].numel() - 1, *lengths, *(() if folded else (inner,)))
    if numel_of(values.shape[1:]) != inner:  # upstream refuses it, even for an empty output
        raise ValueError(
            f"{op}: argument '{values_arg}' of shape {tuple(values.shape)} must be 1-D or "
            f"[N, ..., D] with size-1 middle dims (upstream folds them into D)"
        )
    if values.numel() == 0:
        _check_padding_fits(op, padding_value, values.dtype)
    pad_value = padding_scalar(padding_value, values.dtype)
    with allocation_of(op, f"the output {out_shape} of '{lengths_arg}' = {lengths}"):
        if numel_of(out_shape) == 0:  # (an empty shape can still overflow its strides)
            return values.new_empty(out_shape)
        return _gathered(op, values, offsets, lengths, out_shape, pad_value, offsets_arg)


def _gathered(
    op: str,
    values: torch.Tensor,
    offsets: list[torch.Tensor],
    lengths: list[int],
    out_shape: tuple[int, ...],
    pad_value: int | float,
    offsets_arg: str,
) -> torch.Tensor:
    """:func:`to_dense` past its checks (arguments checked, ``out_shape`` not empty)."""
    n, inner = values.size(0), out_shape[-1] if values.dim() > 1 else 1
    if values.numel() == 0:  # upstream fills the padding without looking at the offsets
        return values.new_full(out_shape, pad_value)
    what = f"argument '{offsets_arg}': {READ_CHECK}"
    if use_triton(op, values.device, supported=triton_supported(values, offsets, lengths)):
        from fbgemm_npu.native.fbgemm.jagged._triton_dense import to_dense_triton

        check = validation_enabled()
        return to_dense_triton(
            op, values, offsets[0], lengths[0], out_shape, pad_value, check, what
        )
    index = checked_dense_index(op, offsets, lengths, n, what)
    if index is None:
        return values.new_full(out_shape, pad_value)
    rows, pad = index
    # Gather every position (padding ones read some row), then set the padding: no padded copy
    # of the values (an int64 constant_pad_nd runs on a 910B's AI CPU) and no pass over them.
    if inner == 1:  # a 1-D gather: far faster than gathering [N, 1] rows of one element
        out = values.reshape(n).index_select(0, rows.reshape(-1))
    else:
        out = values.reshape(n, inner).index_select(0, rows.reshape(-1))
    return fill_padding(out, pad.reshape(-1), pad_value).view(out_shape)


# The Triton kernels' dense length limit: 65535 grid blocks of at least 32 positions.
_TRITON_MAX_LENGTH = 65535 * 32


def triton_supported(
    x: torch.Tensor, offsets: Sequence[torch.Tensor], lengths: Sequence[int]
) -> bool:
    """Whether the fused Triton kernels (:mod:`._triton_dense`) serve a call on ``x`` (values or
    dense): one jagged dim, a dense length their grid holds, real tensors (a traced call, fake
    tensors, has no memory to launch on); the tensor program serves the rest."""
    return len(offsets) == 1 and lengths[0] <= _TRITON_MAX_LENGTH and not tracing(x, *offsets)


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


def jagged_to_padded_dense_forward_npu(
    values: torch.Tensor,
    offsets: list[torch.Tensor],
    max_lengths: Sequence[int],
    padding_value: float = 0.0,
) -> torch.Tensor:
    """``fbgemm::jagged_to_padded_dense_forward``: see :mod:`.jagged`."""
    return to_dense(JAGGED_TO_PADDED_DENSE_FORWARD, values, offsets, max_lengths, padding_value)


def jagged_to_padded_dense_npu(
    values: torch.Tensor,
    offsets: list[torch.Tensor],
    max_lengths: Sequence[int],
    padding_value: float = 0.0,
) -> torch.Tensor:
    """What ``fbgemm::jagged_to_padded_dense`` runs on npu, without the dispatcher (bench, tests).

    Upstream's op is ``CompositeImplicitAutograd``: it calls ``jagged_to_padded_dense_forward``,
    whose npu kernels these are.  We register no ``PrivateUse1`` kernel on it: torch would then
    treat the op as fused on npu, and ``torch.export(...).run_decompositions()`` would keep it
    where it decomposes on CPU.  Only :func:`composite_autograd` (see there).
    """
    return jagged_to_padded_dense_forward_npu(values, offsets, max_lengths, padding_value)


_ONE_DIM = {"lengths_arg": "max_sequence_length"}  # the 1-D / 2-D ops name their one length


def jagged_1d_to_dense_npu(
    values: torch.Tensor, offsets: torch.Tensor, max_sequence_length: int, padding_value: int
) -> torch.Tensor:
    """``fbgemm::jagged_1d_to_dense``: 1-D values -> ``[B, max_sequence_length]``."""
    op = JAGGED_1D_TO_DENSE
    check_ndim(op, "values", check_values(op, "values", values), (1,))
    check_ndim(op, "offsets", offsets, (1,))
    if max_sequence_length <= 0:
        raise ValueError(f"{op}: argument 'max_sequence_length' must be > 0")
    return to_dense(op, values, [offsets], [max_sequence_length], float(padding_value), **_ONE_DIM)


def jagged_2d_to_dense_npu(
    values: torch.Tensor, offsets: torch.Tensor, max_sequence_length: int
) -> torch.Tensor:
    """``fbgemm::jagged_2d_to_dense``: ``[B, max_sequence_length, D]``, padding 0."""
    return to_dense(JAGGED_2D_TO_DENSE, values, [offsets], [max_sequence_length], 0.0, **_ONE_DIM)


class _JaggedToPaddedDense(torch.autograd.Function):
    """d(out)/d(values): to_jagged of the gradient (``jagged_to_padded_dense_backward``)."""

    @staticmethod
    def forward(ctx, values, run, *offsets):  # type: ignore[override]
        ctx.save_for_backward(*offsets)
        ctx.values_shape = values.shape
        ctx.kernel = kernel_mode_now()  # autograd's device thread does not see it
        return below_autograd(run, values, list(offsets))

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        offsets = list(ctx.saved_tensors)
        with kernel_mode(ctx.kernel):  # the forward's selection
            g = torch.ops.fbgemm.jagged_to_padded_dense_backward(grad, offsets, ctx.values_shape[0])
        return (g.reshape(ctx.values_shape), None, *([None] * len(offsets)))


def _autograd(op: str, one_offsets: bool = False) -> Callable[..., torch.Tensor]:
    """The ``AutogradPrivateUse1`` kernel of the to-dense op ``op(values, offsets, *rest)``,
    differentiable in ``values``; ``one_offsets``: the op takes one offsets tensor, not a list."""
    name = op.split("::", 1)[1]

    def kernel(values: torch.Tensor, offsets: object, *rest: object) -> torch.Tensor:
        # looked up per call, not at import: the module imports without the op's schema
        # (bench/device_check.py runs the kernels on a GPU without fbgemm_gpu)
        packet = getattr(torch.ops.fbgemm, name)

        def run(v: torch.Tensor, o: list[torch.Tensor]) -> torch.Tensor:
            return packet(v, o[0] if one_offsets else o, *rest)

        listed = [offsets] if one_offsets else list(offsets)  # type: ignore[call-overload]
        return record_or_run(_JaggedToPaddedDense, values, run, listed)

    kernel.__name__ = f"{op.split('::', 1)[1]}_autograd_npu"
    return kernel


def composite_autograd(
    values: torch.Tensor,
    offsets: list[torch.Tensor],
    max_lengths: Sequence[int],
    padding_value: float = 0.0,
) -> torch.Tensor:
    """The ``AutogradPrivateUse1`` kernel of upstream's composite ``jagged_to_padded_dense``: what
    its ``CompositeImplicitAutograd`` kernel does (the forward op, autograd and all).  Ours only
    so that the family's argument guard runs first: ``values=None`` would otherwise reach
    upstream's composite, which fails with "tensor does not have a device" naming nothing.
    Autograd kernels do not keep exports from decomposing the op (only backend ones do)."""
    return torch.ops.fbgemm.jagged_to_padded_dense_forward(
        values, offsets, max_lengths, padding_value
    )


KERNELS = {
    JAGGED_TO_PADDED_DENSE: {"AutogradPrivateUse1": composite_autograd},
    JAGGED_TO_PADDED_DENSE_FORWARD: {
        "PrivateUse1": jagged_to_padded_dense_forward_npu,
        "AutogradPrivateUse1": _autograd(JAGGED_TO_PADDED_DENSE_FORWARD),
    },
    JAGGED_1D_TO_DENSE: {
        "PrivateUse1": jagged_1d_to_dense_npu,
        "AutogradPrivateUse1": _autograd(JAGGED_1D_TO_DENSE, one_offsets=True),
    },
    JAGGED_2D_TO_DENSE: {
        "PrivateUse1": jagged_2d_to_dense_npu,
        "AutogradPrivateUse1": _autograd(JAGGED_2D_TO_DENSE, one_offsets=True),
    },
}
