"""``fbgemm::dense_embedding_codegen_lookup_function`` on npu.

DenseTableBatchedEmbeddingBagsCodegen keeps all tables in one flat ``nn.Parameter`` and trains it
with a standard torch optimizer, so this lookup's backward returns the dense gradient of that
parameter (the size of the tables, as upstream's does) instead of updating rows in place:
``grad[row of index i] += s_i * grad_output[bag of i, columns of its feature]``, accumulated with
an ``index_add`` at dim 0 (AI Core for every float dtype; ``index_put_(accumulate=True)`` would
cast half-precision gradients whole to fp32 and back on a 910B).  The forward is
:func:`.forward.tbe_forward`.

Launches of the backward per table class: zeros (once), the gradient rows, the per-index scale (with
per-sample weights or MEAN), the member mask and the ``index_add``.  Launches and syncs:
``BUDGETS`` in ``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

from typing import Any

import torch

from fbgemm_npu.native.fbgemm.tbe._utils import TbePlan, class_view, get_plan, tracing
from fbgemm_npu.native.fbgemm.tbe.backward import accumulate_rows, grad_rows_unsorted, index_scale
from fbgemm_npu.native.fbgemm.tbe.call import check_lookup_inputs, named_args
from fbgemm_npu.native.fbgemm.tbe.forward import ForwardState, VbeArgs, output_dtype_of, tbe_forward
from fbgemm_npu.native.fbgemm.tbe.traced_backward import TracedDenseLookup, dense_forward

__all__ = [
    "DENSE_EMBEDDING_CODEGEN_LOOKUP_FUNCTION",
    "DenseLookupFunction",
    "dense_lookup_autograd",
    "dense_lookup_forward",
]

DENSE_EMBEDDING_CODEGEN_LOOKUP_FUNCTION = "fbgemm::dense_embedding_codegen_lookup_function"


class DenseLookupFunction(torch.autograd.Function):
    """Forward: the lookup; backward: the dense weights gradient."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        dev_weights: torch.Tensor,
        indice_weights: torch.Tensor | None,
        args: dict[str, Any],
    ) -> torch.Tensor:
        out, plan, state = _forward(args, dev_weights, indice_weights, for_backward=True)
        ctx.args, ctx.plan = args, plan
        state.save(ctx)  # freed after the backward unless the graph is retained
        ctx.dev_weights, ctx.indice_weights = dev_weights, indice_weights
        return out

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        args, plan, state = ctx.args, ctx.plan, ForwardState.saved(ctx)
        weights = ctx.dev_weights
        grad_w = None
        grad_iw = None
        mode, vbe = args["pooling_mode"], args["vbe"]
        if ctx.needs_input_grad[1] and ctx.indice_weights is not None:
            grad_iw = torch.zeros_like(ctx.indice_weights, dtype=torch.float32)
        if ctx.needs_input_grad[0]:
            grad_w = torch.zeros_like(weights).reshape(-1)
        if grad_output.numel() == 0:  # no bags: no index reaches a row
            return None if grad_w is None else grad_w.view_as(weights), grad_iw, None
        scale = index_scale(state, args["offsets"], mode, ctx.indice_weights)
        for cls, mat in zip(plan.classes, state.mats, strict=True):
            rows = grad_rows_unsorted(plan, cls, mat, grad_output, state, mode, vbe).float()
            member = (mat[1] > 0)[:, None]
            if grad_iw is not None:
                w_rows = class_view(weights.reshape(-1), cls.D, cls.w_residue).index_select(
                    0, mat[0]
                )
                dot = (rows * w_rows.float()).sum(1)
                if mode == 1:
                    dot = dot * index_scale(state, args["offsets"], mode, None)
                grad_iw = torch.where(member[:, 0], dot, grad_iw)
            if grad_w is not None:
                if scale is not None:
                    rows = rows * scale[:, None]
                rows = torch.where(member, rows, 0).to(grad_w.dtype)
                # index_add at dim 0, not index_put_(accumulate=True): a 910B casts a half
                # self whole to fp32 and back for the latter
                accumulate_rows(class_view(grad_w, cls.D, cls.w_residue), mat[0], rows)
        if grad_w is not None:
            grad_w = grad_w.view_as(weights)
        return grad_w, grad_iw, None


def _args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The lookup's arguments (upstream's schema) as the kernels use them."""
    op = DENSE_EMBEDDING_CODEGEN_LOOKUP_FUNCTION
    a = named_args(op, args, kwargs)
    vbe = None
    if a["B_offsets"] is not None:
        vbe = VbeArgs(
            a["B_offsets"],
            a["vbe_output_offsets_feature_rank"],
            a["vbe_B_offsets_rank_per_feature"],
            int(a["vbe_output_size"]),
        )
    check_lookup_inputs(
        op,
        a["dev_weights"],
        a["D_offsets"],
        a["indices"],
        a["offsets"],
        a["indice_weights"],
        vbe is not None,
        weights_arg="dev_weights",
    )
    return {
        "dev_weights": a["dev_weights"],
        "indice_weights": a["indice_weights"],
        "weights_offsets": a["weights_offsets"],
        "D_offsets": a["D_offsets"],
        "indices": a["indices"],
        "offsets": a["offsets"],
        "max_D": int(a["max_D"]),
        "total_D": int(a["total_D"]),
        "pooling_mode": int(a["pooling_mode"]),
        "output_dtype": output_dtype_of(op, int(a["output_dtype"])),
        "vbe": vbe,
    }


def _forward(
    args: dict[str, Any],
    dev_weights: torch.Tensor,
    indice_weights: torch.Tensor | None,
    for_backward: bool,
) -> tuple[torch.Tensor, TbePlan, ForwardState]:
    """The lookup of ``args`` in ``dev_weights``: ``(output, plan, forward state)``."""
    plan = get_plan(
        DENSE_EMBEDDING_CODEGEN_LOOKUP_FUNCTION,
        args["D_offsets"],
        args["weights_offsets"],
        weights_numel=dev_weights.numel(),
    )
    out, state = tbe_forward(
        DENSE_EMBEDDING_CODEGEN_LOOKUP_FUNCTION,
        plan,
        dev_weights.reshape(-1),
        args["indices"],
        args["offsets"],
        args["pooling_mode"],
        indice_weights,
        args["output_dtype"],
        args["vbe"],
        for_backward=for_backward,
    )
    return out, plan, state


def dense_lookup_autograd(*args: Any, **kwargs: Any) -> torch.Tensor:
    """AutogradPrivateUse1 kernel (upstream's schema): the lookup with a dense weights gradient
    (see the module docstring)."""
    a = _args(args, kwargs)
    if tracing(a["dev_weights"], a["D_offsets"], a["indices"]):
        return TracedDenseLookup.apply(a["dev_weights"], a["indice_weights"], a)
    return DenseLookupFunction.apply(a["dev_weights"], a["indice_weights"], a)


def dense_lookup_forward(*args: Any, **kwargs: Any) -> torch.Tensor:
    """PrivateUse1 kernel (upstream's schema): the forward alone."""
    a = _args(args, kwargs)
    if tracing(a["dev_weights"], a["D_offsets"], a["indices"]):
        return dense_forward(a, a["dev_weights"], a["indice_weights"], for_backward=False)[0]
    return _forward(a, a["dev_weights"], a["indice_weights"], for_backward=False)[0]
