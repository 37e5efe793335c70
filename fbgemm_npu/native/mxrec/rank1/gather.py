"""``mxrec::gather_for_rank1`` and ``mxrec::index_select_for_rank1_backward``: Rec SDK's
gather of a 1-D tensor and its gradient.

Schemas (Rec SDK, ``gather_for_rank1.cpp``; the backward's result as ``Tensor?[]``, see below)::

    gather_for_rank1(Tensor x, Tensor index) -> Tensor
    index_select_for_rank1_backward(Tensor grad, Tensor x, Tensor index) -> Tensor?[]

Forward: ``x`` ``[E]`` (``E >= 1``), ``index`` ``[N]`` int32 / int64 with values in ``[0, E)``::

    y[i] = x[index[i]]                                   (= torch.index_select(x, 0, index))

Backward: ``grad`` of any shape, ``index`` of the same shape, ``x`` ``[E]`` (only its shape and
dtype are read)::

    grad_x[e] = sum over i with index[i] == e of grad[i]          (a scatter-add, in float32)

returned as ``[grad_x, None]``: the second element, Rec SDK's ``grad_index``, is no gradient
(an index has none).  Rec SDK's ``Tensor[]`` cannot carry a ``None`` (torch refuses a list with
``None`` for ``Tensor[]``; its C++ returns an undefined tensor there), so our schema says
``Tensor?[]``, the one change to Rec SDK's text.

dtypes: ``x`` float16 / float32 (Rec SDK) and bfloat16; the backward's ``grad`` of ``x``'s
dtype (Rec SDK: float32 only), summed in float32 and returned in ``x``'s dtype.  Sizes: any
``E >= 1`` (Rec SDK caps ``E`` at 20480, a kernel tiling limit we do not share), any ``N``
(``N = 0``: an empty result).  An index outside ``[0, E)`` is clamped (memory safety) and
refused by a queued data check, as is a negative one (no Python-style wrap).

Autograd (PrivateUse1 and CPU): ``y`` is differentiable in ``x``; its backward is the backward
op.  Launches: forward 2 (the index ``clamp``, ``index_select``), checks 2 (``eq``, ``all``);
backward float32 3 (``clamp``, the float32 zero table, ``index_add_`` along dim 0), float16 /
bfloat16 5 (+ the float32 cast of ``grad`` and the cast back), checks 2.  No sync, no AI-CPU
launch on a 910B (float32 ``index_add_`` and ``index_select`` run on the AI Core).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    allocation_of,
    check_dtype,
    check_ndim,
    check_on_device,
    check_same_device,
    check_tensor,
    validation_enabled,
)

__all__ = ["GATHER_FOR_RANK1", "INDEX_SELECT_FOR_RANK1_BACKWARD", "KERNELS", "SCHEMAS"]

GATHER_FOR_RANK1 = "mxrec::gather_for_rank1"
INDEX_SELECT_FOR_RANK1_BACKWARD = "mxrec::index_select_for_rank1_backward"
SCHEMAS = {
    GATHER_FOR_RANK1: "gather_for_rank1(Tensor x, Tensor index) -> Tensor",
    INDEX_SELECT_FOR_RANK1_BACKWARD: "index_select_for_rank1_backward(Tensor grad, Tensor x, "
    "Tensor index) -> Tensor?[]",
}
X_DTYPES = (torch.float16, torch.float32, torch.bfloat16)


def _check_x(op: str, x: object) -> torch.Tensor:
    t = check_dtype(op, "x", check_ndim(op, "x", check_tensor(op, "x", x), (1,)), X_DTYPES)
    if t.numel() == 0:
        raise ValueError(f"{op}: argument 'x' must hold at least one element, got shape (0,)")
    return t


def _safe_index(op: str, index: torch.Tensor, size: int) -> torch.Tensor:
    """``index`` clamped into ``[0, size)`` (memory-safe under deferred checks) and a queued
    check that the clamp changed nothing (2 launches + 2 with the checks on)."""
    safe = index.clamp(0, size - 1)
    if validation_enabled():
        ok = torch.eq(safe, index).all()
        check_on_device(op, ok, f"argument 'index' must hold values in [0, {size})")
    return safe


def _check_forward(x: object, index: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Host checks (no launch): a non-empty 1-D float ``x``, a 1-D integer ``index``, one
    device."""
    op = GATHER_FOR_RANK1
    t = _check_x(op, x)
    i = check_ndim(op, "index", check_tensor(op, "index", index), (1,))
    check_dtype(op, "index", i, INDEX_DTYPES)
    check_same_device(op, x=t, index=i)
    return t, i


def gather_for_rank1(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """PrivateUse1 / CPU: ``x[index]``, ``[N]`` in ``x``'s dtype (2 launches, checks 2)."""
    t, i = _check_forward(x, index)
    return t.index_select(0, _safe_index(GATHER_FOR_RANK1, i, t.size(0)))


def _gather_meta(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    t, i = _check_forward(x, index)
    return t.new_empty((i.size(0),))


def _check_backward(
    grad: object, x: object, index: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Host checks (no launch): ``grad`` of ``x``'s dtype, ``index`` of its shape, integer."""
    op = INDEX_SELECT_FOR_RANK1_BACKWARD
    t = _check_x(op, x)
    g = check_dtype(op, "grad", check_tensor(op, "grad", grad), (t.dtype,))
    i = check_dtype(op, "index", check_tensor(op, "index", index), INDEX_DTYPES)
    if i.shape != g.shape:
        raise ValueError(
            f"{op}: argument 'index' must have the shape of 'grad' {tuple(g.shape)}, got "
            f"{tuple(i.shape)}"
        )
    check_same_device(op, grad=g, x=t, index=i)
    return g, t, i


def index_select_for_rank1_backward(
    grad: torch.Tensor, x: torch.Tensor, index: torch.Tensor
) -> list[torch.Tensor | None]:
    """PrivateUse1 / CPU: ``[grad_x [E], None]`` (3 launches in float32, 5 in half; checks 2)."""
    g, t, i = _check_backward(grad, x, index)
    op = INDEX_SELECT_FOR_RANK1_BACKWARD
    safe = _safe_index(op, i.reshape(-1), t.size(0))
    src = g.reshape(-1).to(torch.float32)  # no launch for float32
    with allocation_of(op, f"the float32 gradient table of 'x' ({t.size(0)} elements)"):
        table = torch.zeros(t.shape, dtype=torch.float32, device=t.device)
    table.index_add_(0, safe, src)
    return [table.to(t.dtype), None]


def _backward_meta(
    grad: torch.Tensor, x: torch.Tensor, index: torch.Tensor
) -> list[torch.Tensor | None]:
    _, t, _ = _check_backward(grad, x, index)
    return [torch.empty_like(t, memory_format=torch.contiguous_format), None]


class _Gather(torch.autograd.Function):
    """``x[index]``; the gradient of ``x`` by the backward op."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, index: torch.Tensor
    ) -> torch.Tensor:
        ctx.save_for_backward(x, index)
        return below_autograd(torch.ops.mxrec.gather_for_rank1, x, index)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, None]:
        x, index = ctx.saved_tensors
        if grad is None or not ctx.needs_input_grad[0]:
            return None, None
        backward = torch.ops.mxrec.index_select_for_rank1_backward
        return backward(grad.contiguous(), x, index)[0], None


def _gather_autograd(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """AutogradPrivateUse1 / AutogradCPU: recorded only when ``x`` needs a gradient."""
    if not needs_grad(x):
        return below_autograd(torch.ops.mxrec.gather_for_rank1, x, index)
    return _Gather.apply(x, index)


KERNELS = {
    GATHER_FOR_RANK1: {
        "PrivateUse1": gather_for_rank1,
        "CPU": gather_for_rank1,
        "AutogradPrivateUse1": _gather_autograd,
        "AutogradCPU": _gather_autograd,
        "Meta": _gather_meta,
    },
    INDEX_SELECT_FOR_RANK1_BACKWARD: {
        "PrivateUse1": index_select_for_rank1_backward,
        "CPU": index_select_for_rank1_backward,
        "Meta": _backward_meta,
    },
}
