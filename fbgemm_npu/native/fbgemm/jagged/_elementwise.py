"""Argument checks and steps the jagged-dense elementwise modules share (:mod:`.elementwise`,
:mod:`.jagged_output`): the dense inputs' shapes and devices, ``to_jagged`` of one of them, the
broadcast of the elementwise step and the copies of the offsets the jagged-output ops return.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._checks import check_ndim
from fbgemm_npu.native.fbgemm.jagged._utils import check_offsets, check_values
from fbgemm_npu.native.fbgemm.jagged.to_jagged import to_jagged

__all__ = ["broadcast", "dense_arg", "fresh_offsets", "jagged_args", "plus_jagged"]


def fresh_offsets(x_offsets: list[torch.Tensor]) -> list[torch.Tensor]:
    """The output offsets: a copy of each input offsets tensor (a ``clone`` per jagged dim).

    Upstream's kernels (its Meta ones too) return the input tensors themselves, but the schemas
    (``-> (Tensor, Tensor[])``) declare no alias and AOTAutograd refuses a custom op whose output
    is an input, so ours are copies (tests/core/test_opcheck.py states how the fake's aliasing
    then differs from ours).
    """
    return [o.clone() for o in x_offsets]


def dense_arg(op: str, arg: str, y: object, offsets: list[torch.Tensor]) -> torch.Tensor:
    """``y`` must be ``[B, L_1..L_k, D]`` for ``k`` jagged dims (on any device: see
    :func:`jagged_args`)."""
    y = check_values(op, arg, y)
    check_ndim(op, arg, y, (len(offsets) + 2,))
    if y.size(0) != offsets[0].numel() - 1:
        raise ValueError(
            f"{op}: argument '{arg}' has batch size {y.size(0)} but 'x_offsets[0]' describes "
            f"{offsets[0].numel() - 1} rows"
        )
    return y


def jagged_args(
    op: str, x_values: object, x_offsets: object, *dense: tuple[str, object]
) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """``x_values``, its offsets and the dense inputs ``(name, value)``, checked: one device."""
    x = check_values(op, "x_values", x_values)
    offsets = check_offsets(op, "x_offsets", x_offsets, x.device)
    ys = []
    for arg, y in dense:
        y = dense_arg(op, arg, y, offsets)
        if y.device != x.device:
            raise RuntimeError(
                f"{op}: arguments 'x_values' ({x.device}) and '{arg}' ({y.device}) must be on "
                "the same device"
            )
        ys.append(y)
    return x, offsets, ys


def plus_jagged(
    op: str, x_values: object, x_offsets: object, y: object
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x_values, to_jagged(y, T))`` checked, for the one-dense-input ops."""
    x, offsets, (y,) = jagged_args(op, x_values, x_offsets, ("y", y))
    jy = to_jagged(op, y, offsets, x.size(0), "y", "x_offsets")
    broadcast(op, x.shape, "x_values", jy.shape, "y")
    return x, jy


def broadcast(op: str, a: Sequence[int], a_arg: str, b: Sequence[int], b_arg: str) -> torch.Size:
    """The shape of ``a (op) b``: torch's broadcasting, as upstream's elementwise step (which
    broadcasts shapes that make little sense, e.g. 3-D ``x_values``), but a refusal naming the
    op and both arguments rather than torch's bare "The size of tensor a ..."; no launch."""
    try:
        return torch.broadcast_shapes(a, b)
    except RuntimeError:
        raise ValueError(
            f"{op}: arguments '{a_arg}' {tuple(a)} and '{b_arg}' ({tuple(b)} on the "
            "jagged / dense side) do not broadcast: they must share their inner dim D"
        ) from None
