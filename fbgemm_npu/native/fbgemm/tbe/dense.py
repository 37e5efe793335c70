"""``fbgemm::dense_embedding_codegen_lookup_function`` on npu.

DenseTableBatchedEmbeddingBagsCodegen keeps all tables in one flat ``nn.Parameter`` and trains it
with a standard torch optimizer, so this lookup's backward returns the dense gradient of that
parameter (the size of the tables, as upstream's does) instead of updating rows in place:
``grad[row of index i] += s_i * grad_output[bag of i, columns of its feature]``, accumulated with
``index_put_(accumulate=True)``.  The forward is :func:`.forward.tbe_forward`.

Launches of the backward per table class: zeros (once) + the gradient rows (2-3) + scale (0-3) +
member mask (1) + index_put_ (1); 0 syncs.
"""

from __future__ import annotations

from typing import Any

import torch

from fbgemm_npu.native.fbgemm.tbe._utils import class_view, get_plan
from fbgemm_npu.native.fbgemm.tbe.backward import _index_scale, grad_rows_unsorted
from fbgemm_npu.native.fbgemm.tbe.forward import VbeArgs, output_dtype_of, tbe_forward

__all__ = ["dense_lookup_autograd", "dense_lookup_forward"]

_OP = "fbgemm::dense_embedding_codegen_lookup_function"


def _vbe(B_offsets: Any, ofr: Any, brpf: Any, vbe_output_size: int) -> VbeArgs | None:
    if B_offsets is None:
        return None
    return VbeArgs(B_offsets, ofr, brpf, int(vbe_output_size))


class DenseLookupFunction(torch.autograd.Function):
    """Forward: the lookup; backward: the dense weights gradient."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        dev_weights: torch.Tensor,
        indice_weights: torch.Tensor | None,
        args: dict[str, Any],
    ) -> torch.Tensor:
        plan = get_plan(args["D_offsets"], args["weights_offsets"])
        vbe = args["vbe"]
        out, state = tbe_forward(
            _OP, plan, dev_weights.reshape(-1), args["indices"], args["offsets"],
            args["pooling_mode"], indice_weights, args["output_dtype"], vbe,
        )  # fmt: skip
        ctx.args, ctx.plan, ctx.state = args, plan, state
        ctx.dev_weights, ctx.indice_weights = dev_weights, indice_weights
        return out

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        args, plan, state = ctx.args, ctx.plan, ctx.state
        weights = ctx.dev_weights
        grad_w = None
        grad_iw = None
        mode, vbe = args["pooling_mode"], args["vbe"]
        if ctx.needs_input_grad[1] and ctx.indice_weights is not None:
            grad_iw = torch.zeros_like(ctx.indice_weights, dtype=torch.float32)
        if ctx.needs_input_grad[0]:
            grad_w = torch.zeros_like(weights).reshape(-1)
        scale = _index_scale(state, args["offsets"], mode, ctx.indice_weights)
        for cls, mat in zip(plan.classes, state.mats, strict=True):
            rows = grad_rows_unsorted(plan, cls, mat, grad_output, state, mode, vbe).float()
            member = (mat[1] > 0)[:, None]
            if grad_iw is not None:
                w_rows = class_view(weights.reshape(-1), cls.D, cls.w_residue).index_select(
                    0, mat[0]
                )
                dot = (rows * w_rows.float()).sum(1)
                if mode == 1:
                    dot = dot * _index_scale(state, args["offsets"], mode, None)
                grad_iw = torch.where(member[:, 0], dot, grad_iw)
            if grad_w is not None:
                if scale is not None:
                    rows = rows * scale[:, None]
                rows = torch.where(member, rows, 0).to(grad_w.dtype)
                class_view(grad_w, cls.D, cls.w_residue).index_put_(
                    (mat[0],), rows, accumulate=True
                )
        if grad_w is not None:
            grad_w = grad_w.view_as(weights)
        return grad_w, grad_iw, None


def _args(
    weights_offsets: torch.Tensor,
    D_offsets: torch.Tensor,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    pooling_mode: int,
    output_dtype: int,
    B_offsets: torch.Tensor | None,
    ofr: torch.Tensor | None,
    brpf: torch.Tensor | None,
    vbe_output_size: int,
) -> dict[str, Any]:
    return {
        "weights_offsets": weights_offsets,
        "D_offsets": D_offsets,
        "indices": indices,
        "offsets": offsets,
        "pooling_mode": int(pooling_mode),
        "output_dtype": output_dtype_of(_OP, int(output_dtype)),
        "vbe": _vbe(B_offsets, ofr, brpf, vbe_output_size),
    }


def dense_lookup_autograd(
    dev_weights: torch.Tensor,
    weights_offsets: torch.Tensor,
    D_offsets: torch.Tensor,
    total_D: int,
    max_D: int,
    hash_size_cumsum: torch.Tensor,
    total_hash_size_bits: int,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    pooling_mode: int,
    indice_weights: torch.Tensor | None,
    feature_requires_grad: torch.Tensor | None,
    output_dtype: int = 0,
    B_offsets: torch.Tensor | None = None,
    vbe_output_offsets_feature_rank: torch.Tensor | None = None,
    vbe_B_offsets_rank_per_feature: torch.Tensor | None = None,
    max_B: int = -1,
    max_B_feature_rank: int = -1,
    vbe_output_size: int = -1,
    mixed_D: bool = True,
) -> torch.Tensor:
    """AutogradPrivateUse1 kernel: the lookup with a dense weights gradient (see module doc)."""
    args = _args(
        weights_offsets, D_offsets, indices, offsets, pooling_mode, output_dtype, B_offsets,
        vbe_output_offsets_feature_rank, vbe_B_offsets_rank_per_feature, vbe_output_size,
    )  # fmt: skip
    return DenseLookupFunction.apply(dev_weights, indice_weights, args)


def dense_lookup_forward(
    dev_weights: torch.Tensor,
    weights_offsets: torch.Tensor,
    D_offsets: torch.Tensor,
    total_D: int,
    max_D: int,
    hash_size_cumsum: torch.Tensor,
    total_hash_size_bits: int,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    pooling_mode: int,
    indice_weights: torch.Tensor | None,
    feature_requires_grad: torch.Tensor | None,
    output_dtype: int = 0,
    B_offsets: torch.Tensor | None = None,
    vbe_output_offsets_feature_rank: torch.Tensor | None = None,
    vbe_B_offsets_rank_per_feature: torch.Tensor | None = None,
    max_B: int = -1,
    max_B_feature_rank: int = -1,
    vbe_output_size: int = -1,
    mixed_D: bool = True,
) -> torch.Tensor:
    """PrivateUse1 kernel: the forward alone."""
    args = _args(
        weights_offsets, D_offsets, indices, offsets, pooling_mode, output_dtype, B_offsets,
        vbe_output_offsets_feature_rank, vbe_B_offsets_rank_per_feature, vbe_output_size,
    )  # fmt: skip
    plan = get_plan(D_offsets, weights_offsets)
    out, _ = tbe_forward(
        _OP, plan, dev_weights.reshape(-1), indices, offsets, args["pooling_mode"],
        indice_weights, args["output_dtype"], args["vbe"], for_backward=False,
    )  # fmt: skip
    return out
