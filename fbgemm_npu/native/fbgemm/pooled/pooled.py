"""Pooled embeddings: ``fbgemm::permute_pooled_embs`` (and ``_split``, ``_auto_grad``,
``_auto_grad_split``) on npu: reorder the feature blocks of a ``(B, sum(D))`` tensor along dim 1.

The permutation is a column gather: output column ``c`` = input column ``src[c]``, ``src`` derived
from the index lists with a fixed number of launches, the gather one ``index_select``.  The
regrouping ops of the family (``permute_multi_embedding``, ``regroup_keyed_tensor``,
``kt_regroup_arguments``) are in :mod:`.regroup`, the cross-device ones in :mod:`.merge`.

Semantics are upstream's CPU kernels' (fbgemm-gpu-cpu 1.8.0), measured: ``pooled_embs`` of rank
>= 2 and any dtype (upstream's CUDA kernel: float types only), permuted along dim 1;
``offset_dim_list`` and ``permute_list`` int64 (CUDA reads them as int64 too).  The ``T =
permute_list.numel()`` blocks are cut at ``offset_dim_list[1:T]``: its first and last entries are
not read, so a last offset other than ``pooled_embs.size(1)`` is accepted and ignored, as
upstream's CPU kernel does (its CUDA kernel reads ``offset_dim_list[0]`` as the first block's
start).  ``inv_offset_dim_list`` / ``inv_permute_list`` serve only the backward.  Upstream's
output width changes with invalid lists (duplicate or out-of-range permute entries, decreasing or
negative cut points); those are refused by one device check instead.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from fbgemm_npu.native._autograd import below_autograd
from fbgemm_npu.native._checks import (
    check_dtype,
    check_on_device,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, segment_ids

__all__ = [
    "KERNELS",
    "check_index_dtypes",
    "permute_variant",
    "permute_pooled_embs_npu",
    "permute_pooled_embs_split_npu",
    "sort_key_dtype",
]

_F = torch.ops.fbgemm
PERMUTE_POOLED_EMBS = "fbgemm::permute_pooled_embs"
PERMUTE_POOLED_EMBS_SPLIT = "fbgemm::permute_pooled_embs_split"
PERMUTE_POOLED_EMBS_AUTO_GRAD = "fbgemm::permute_pooled_embs_auto_grad"
PERMUTE_POOLED_EMBS_AUTO_GRAD_SPLIT = "fbgemm::permute_pooled_embs_auto_grad_split"


def _permute_src(
    op: str,
    pooled_embs: torch.Tensor,
    offset_dim_list: torch.Tensor,
    permute_list: torch.Tensor,
    inv_offset_dim_list: torch.Tensor,
    inv_permute_list: torch.Tensor,
) -> torch.Tensor:
    """Checks, then ``src`` (int64, ``(D,)``) of the block permutation; see the module docstring.

    Math: column ``i`` lies in block ``s(i) = #{1 <= j < T : offset_dim_list[j] <= i}``
    (``searchsorted(offset_dim_list[1:T], i, right=True)``, built as
    :func:`~fbgemm_npu.native._index.segment_ids`: an int32 ``index_add`` of ones at the cut
    points and an int32 ``cumsum``); block ``s`` goes to output position ``inv[s]`` with ``inv =
    argsort(permute_list)``; a stable sort of the columns by ``inv[s(i)]`` lists them in output
    order, so ``src`` is its argsort.  Both sorts take float32 keys (ranks ``< T``, exact for
    ``T < 2**24``: :func:`sort_key_dtype`), which a 910B sorts on its AI Core (integer keys go
    to its AI CPU, as ``searchsorted`` does); every index stays inside its buffer whatever the
    data (sort indices, clamped cut points), so a call whose check fails reads nothing outside.

    Launches: the permute's cast, sort, segment ids (clamp, index_add, cumsum), the ranks' cast,
    index_select, sort of the keys; one block: none (``src`` is a cached ``arange``).  The data
    check (``permute_list`` a permutation of ``0..T-1``: its sorted keys equal ``arange``; the cut
    points non-negative and non-decreasing: three comparisons into one bool buffer, ``all``;
    fewer comparisons for ``T < 3``, a single ``eq`` for ``T = 1``) is queued, every call (no
    plan is kept: a write to the lists that the version counter misses would leave it stale; see
    :mod:`._utils`).
    """
    pooled = pooled_embs
    if pooled.dim() < 2:
        raise ValueError(
            f"{op}: argument 'pooled_embs' must be at least 2-D [B_local][Sum_T_global(D)], "
            f"got shape {tuple(pooled.shape)}"
        )
    check_same_device(
        op,
        pooled_embs=pooled,
        offset_dim_list=offset_dim_list,
        permute_list=permute_list,
        inv_offset_dim_list=inv_offset_dim_list,
        inv_permute_list=inv_permute_list,
    )
    check_dtype(op, "offset_dim_list", offset_dim_list, (torch.int64,))
    check_dtype(op, "permute_list", permute_list, (torch.int64,))
    n_blocks = permute_list.numel()
    if n_blocks == 0:
        raise ValueError(f"{op}: argument 'permute_list' must not be empty")
    if offset_dim_list.numel() < n_blocks:
        raise ValueError(
            f"{op}: argument 'offset_dim_list' must have at least len(permute_list) = "
            f"{n_blocks} entries, got {offset_dim_list.numel()}"
        )
    width = pooled.size(1)
    return _derive_permute_src(op, width, offset_dim_list.reshape(-1), permute_list.reshape(-1))


FLOAT_EXACT = 2**24  # float32 holds every integer below it exactly


def sort_key_dtype(n_blocks: int) -> torch.dtype:
    """The dtype the block ranks are sorted in, decided on the host from ``T``: float32 (AI Core)
    while every rank ``< T`` is exact in it, int64 (a 910B's AI CPU) only for ``T >= 2**24``."""
    return torch.float32 if n_blocks < FLOAT_EXACT else torch.int64


def _derive_permute_src(op: str, width: int, off: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    n_blocks = perm.numel()
    dev = perm.device
    if n_blocks == 1:  # one block: the identity; the check is permute_list == [0]
        if validation_enabled():
            check_on_device(op, perm.eq(0).reshape(()), _permutation_message(n_blocks))
        return arange_cached(width, dev)
    key_dtype = sort_key_dtype(n_blocks)
    perm_sorted, inv = torch.sort(perm.to(key_dtype), stable=True)
    block = segment_ids(off[:n_blocks], width)  # searchsorted(off[1:T], i, right=True), int32
    if validation_enabled():
        n_mono = n_blocks - 2
        ok = torch.empty(n_blocks + 1 + n_mono, dtype=torch.bool, device=dev)
        torch.eq(perm_sorted, arange_cached(n_blocks, dev, key_dtype), out=ok[:n_blocks])
        torch.ge(off[1:2], 0, out=ok[n_blocks : n_blocks + 1])
        if n_mono:
            torch.ge(off[2:n_blocks], off[1 : n_blocks - 1], out=ok[n_blocks + 1 :])
        check_on_device(op, ok.all(), _permutation_message(n_blocks))
    return torch.sort(inv.to(key_dtype).index_select(0, block), stable=True).indices


def _permutation_message(n_blocks: int) -> str:
    return (
        f"argument 'permute_list' must be a permutation of 0..{n_blocks - 1} and "
        f"'offset_dim_list'[1:{n_blocks}] non-negative and non-decreasing"
    )


def _permute(op: str, pooled_embs: torch.Tensor, *lists: torch.Tensor) -> torch.Tensor:
    pooled = check_tensor(op, "pooled_embs", pooled_embs)
    if pooled.numel() == 0:
        # upstream (CPU and CUDA) returns an empty input itself, unchecked; a fresh empty
        # tensor instead (an allocation, no launch): no output aliases an input (opcheck)
        return torch.empty_like(pooled, memory_format=torch.contiguous_format)
    return pooled.index_select(1, _permute_src(op, pooled, *lists))


def permute_pooled_embs_npu(
    pooled_embs: torch.Tensor,
    offset_dim_list: torch.Tensor,
    permute_list: torch.Tensor,
    inv_offset_dim_list: torch.Tensor,
    inv_permute_list: torch.Tensor,
) -> torch.Tensor:
    """Output block ``t`` = input block ``permute_list[t]``, blocks cut along dim 1.

    Block ``s`` is columns ``[offset_dim_list[s], offset_dim_list[s + 1])`` (block 0 starts at 0,
    the last block ends at ``pooled_embs.size(1)``, as upstream's CPU kernel cuts them); an empty
    ``pooled_embs`` gives a fresh empty tensor, unchecked, as upstream does (which returns the
    input itself).  Any dtype; index lists
    int64.  Launches: the plan and its check, every call (see ``_permute_src``;
    ``FBGEMM_NPU_VALIDATE=0`` drops the check), then the ``index_select``.
    Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    lists = (offset_dim_list, permute_list, inv_offset_dim_list, inv_permute_list)
    return _permute(PERMUTE_POOLED_EMBS, pooled_embs, *lists)


def check_index_dtypes(op: str, offset_dim_list: object, permute_list: object) -> None:
    """The auto_grad ops check these first, even for an empty ``pooled_embs`` (as upstream)."""
    check_dtype(
        op, "offset_dim_list", check_tensor(op, "offset_dim_list", offset_dim_list), (torch.int64,)
    )
    check_dtype(op, "permute_list", check_tensor(op, "permute_list", permute_list), (torch.int64,))


def permute_variant(
    op: str,
    doc: str,
    check_lists: bool = False,
    permute: Callable[..., torch.Tensor] | None = None,
) -> Callable[..., torch.Tensor]:
    """The PrivateUse1 kernel of ``op``, an op of ``permute_pooled_embs``' schema: ``permute(op,
    pooled_embs, *lists)`` (this module's permute by default; the duplicate permutes pass their
    own); ``check_lists``: the index lists' dtypes are checked first (the auto_grad ops)."""
    run = _permute if permute is None else permute

    def kernel(
        pooled_embs: torch.Tensor,
        offset_dim_list: torch.Tensor,
        permute_list: torch.Tensor,
        inv_offset_dim_list: torch.Tensor,
        inv_permute_list: torch.Tensor,
    ) -> torch.Tensor:
        if check_lists:
            check_index_dtypes(op, offset_dim_list, permute_list)
        lists = (offset_dim_list, permute_list, inv_offset_dim_list, inv_permute_list)
        return run(op, pooled_embs, *lists)

    kernel.__name__ = f"{op.split('::', 1)[1]}_npu"
    kernel.__doc__ = doc
    return kernel


permute_pooled_embs_split_npu = permute_variant(
    PERMUTE_POOLED_EMBS_SPLIT,
    "``permute_pooled_embs`` of the split build (same math, launches and syncs).",
)
permute_pooled_embs_auto_grad_npu = permute_variant(
    PERMUTE_POOLED_EMBS_AUTO_GRAD,
    "PrivateUse1 of ``permute_pooled_embs_auto_grad`` (below autograd): the permute.",
    check_lists=True,
)
permute_pooled_embs_auto_grad_split_npu = permute_variant(
    PERMUTE_POOLED_EMBS_AUTO_GRAD_SPLIT,
    "PrivateUse1 of ``permute_pooled_embs_auto_grad_split`` (below autograd): the permute.",
    check_lists=True,
)


class _PermutePooledEmbsFunction(torch.autograd.Function):
    """Forward: ``op`` below autograd (our PrivateUse1 kernel); backward: the non-autograd
    ``base`` op with the inverse lists, upstream's formula: ``grad = base(grad_out,
    inv_offset_dim_list, inv_permute_list, offset_dim_list, permute_list)``."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        op: str,
        base: str,
        pooled_embs: torch.Tensor,
        offset_dim_list: torch.Tensor,
        permute_list: torch.Tensor,
        inv_offset_dim_list: torch.Tensor,
        inv_permute_list: torch.Tensor,
    ) -> torch.Tensor:
        ctx.base = base  # type: ignore[attr-defined]
        ctx.save_for_backward(offset_dim_list, permute_list, inv_offset_dim_list, inv_permute_list)
        lists = (offset_dim_list, permute_list, inv_offset_dim_list, inv_permute_list)
        return below_autograd(getattr(_F, op), pooled_embs, *lists)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        off, perm, inv_off, inv_perm = ctx.saved_tensors  # type: ignore[attr-defined]
        base = getattr(_F, ctx.base)  # type: ignore[attr-defined]
        return None, None, base(grad, inv_off, inv_perm, off, perm), None, None, None, None


def _autograd(op: str, base: str) -> Callable[..., torch.Tensor]:
    """The ``AutogradPrivateUse1`` kernel of the auto_grad permute ``op`` (launches as the
    forward op), its backward the non-autograd ``base`` op with the inverse lists."""
    name = op.split("::", 1)[1]

    def kernel(
        pooled_embs: torch.Tensor,
        offset_dim_list: torch.Tensor,
        permute_list: torch.Tensor,
        inv_offset_dim_list: torch.Tensor,
        inv_permute_list: torch.Tensor,
    ) -> torch.Tensor:
        check_index_dtypes(op, offset_dim_list, permute_list)
        lists = (offset_dim_list, permute_list, inv_offset_dim_list, inv_permute_list)
        return _PermutePooledEmbsFunction.apply(name, base, pooled_embs, *lists)

    kernel.__name__ = f"{name}_autograd"
    return kernel


permute_pooled_embs_auto_grad_autograd = _autograd(
    PERMUTE_POOLED_EMBS_AUTO_GRAD, "permute_pooled_embs"
)
permute_pooled_embs_auto_grad_split_autograd = _autograd(
    PERMUTE_POOLED_EMBS_AUTO_GRAD_SPLIT, "permute_pooled_embs_split"
)


def _permute_pooled_embs_meta(
    pooled_embs: torch.Tensor,
    offset_dim_list: torch.Tensor,
    permute_list: torch.Tensor,
    inv_offset_dim_list: torch.Tensor,
    inv_permute_list: torch.Tensor,
) -> torch.Tensor:
    """Meta of ``permute_pooled_embs_auto_grad_split`` (upstream has none): same shape."""
    return torch.empty_like(pooled_embs)


KERNELS = {
    PERMUTE_POOLED_EMBS: {"PrivateUse1": permute_pooled_embs_npu},
    PERMUTE_POOLED_EMBS_SPLIT: {"PrivateUse1": permute_pooled_embs_split_npu},
    PERMUTE_POOLED_EMBS_AUTO_GRAD: {
        "PrivateUse1": permute_pooled_embs_auto_grad_npu,
        "AutogradPrivateUse1": permute_pooled_embs_auto_grad_autograd,
    },
    PERMUTE_POOLED_EMBS_AUTO_GRAD_SPLIT: {
        "PrivateUse1": permute_pooled_embs_auto_grad_split_npu,
        "AutogradPrivateUse1": permute_pooled_embs_auto_grad_split_autograd,
        "Meta": _permute_pooled_embs_meta,
    },
}
