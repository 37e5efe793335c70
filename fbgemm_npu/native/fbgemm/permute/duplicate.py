"""``fbgemm::permute_duplicate_pooled_embs`` (and ``_split``, ``_auto_grad``,
``_auto_grad_split``) on npu: ``permute_pooled_embs`` whose ``permute_list`` may repeat or drop
blocks, so the output width is data.

Upstream's CPU kernel (``permute_pooled_embedding_ops{,_split}_cpu.cpp``, ``allow_duplicates``)
cuts ``pooled_embs`` along dim 1 by ``torch.tensor_split`` at ``offset_dim_list[1:K]`` (``K =
offset_dim_list.numel()`` pieces; ``offset_dim_list[0]`` is not read) and concatenates the pieces
``permute_list`` names::

    out = cat([piece[p] for p in permute_list], dim=1),   piece[k] = x[:, c_k : max(c_k, c_{k+1})]

with ``c_0 = 0``, ``c_K = x.size(1)`` and ``c_k`` (``0 < k < K``) the cut ``offset_dim_list[k]``
as a slice reads it: a negative cut counts from the end, then each is clamped into ``[0,
x.size(1)]``; decreasing cuts give empty pieces.  Ours computes the same.  ``inv_offset_dim_list``
and ``inv_permute_list`` are not read by the forward (upstream's CPU kernel ignores them; its
CUDA kernel takes the width from ``inv_offset_dim_list[-1]``).  An empty ``pooled_embs`` is
returned unchecked as a fresh empty tensor (upstream returns the input itself).  Refused by name,
where upstream indexes past its list of pieces or fails inside ``cat``: ``permute_list`` entries
outside ``[0, K)``, an empty ``permute_list`` or ``offset_dim_list``.

Autograd, as upstream's: ``_auto_grad``'s backward raises (upstream: "permute_pooled_embs does
not support allow_duplicates in backward!"); ``_auto_grad_split``'s backward is the
non-autograd split op on the gradient with the inverse lists, ``grad = split(grad_out,
inv_offset_dim_list, inv_permute_list, offset_dim_list, permute_list)``, which must come back
with the input's shape (upstream's autograd engine refuses another; ours names the lists).  For a
true permutation with its inverse lists that is the exact gradient; for repeated blocks it is
upstream's formula, not a sum over the copies.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false

from fbgemm_npu.native._autograd import below_autograd
from fbgemm_npu.native._checks import (
    DataChecks,
    check_dtype,
    check_same_device,
    check_tensor,
    dynamic_size,
    validation_enabled,
)
from fbgemm_npu.native.fbgemm.permute._gather import index_dtype, segment_arange
from fbgemm_npu.native.fbgemm.pooled.pooled import check_index_dtypes, permute_variant

__all__ = [
    "KERNELS",
    "permute_duplicate_pooled_embs_npu",
    "permute_duplicate_pooled_embs_split_npu",
]

_F = torch.ops.fbgemm
DUPLICATE = "fbgemm::permute_duplicate_pooled_embs"
DUPLICATE_SPLIT = "fbgemm::permute_duplicate_pooled_embs_split"
DUPLICATE_AUTO_GRAD = "fbgemm::permute_duplicate_pooled_embs_auto_grad"
DUPLICATE_AUTO_GRAD_SPLIT = "fbgemm::permute_duplicate_pooled_embs_auto_grad_split"
Lists = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _check(op: str, pooled: torch.Tensor, off: object, perm: object, lists: Lists) -> None:
    """Metadata checks of a non-empty ``pooled_embs`` (no device work)."""
    if pooled.dim() < 2:
        raise RuntimeError(
            f"{op}: argument 'pooled_embs' must be at least 2-D [B_local][Sum_T_global(D)], "
            f"got shape {tuple(pooled.shape)}"
        )
    for name, t in (("offset_dim_list", off), ("permute_list", perm)):
        check_dtype(op, name, check_tensor(op, name, t), (torch.int64,))
        assert isinstance(t, torch.Tensor)
        if t.numel() == 0:
            raise ValueError(f"{op}: argument '{name}' must not be empty")
    check_same_device(
        op,
        pooled_embs=pooled,
        offset_dim_list=lists[0],
        permute_list=lists[1],
        inv_offset_dim_list=lists[2],
        inv_permute_list=lists[3],
    )


def _source_columns(op: str, width: int, off: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """The input column of each output column (module docstring), after one read of the output
    width that carries the data checks.

    Math: ``U = [c_0 .. c_K | 0, o_1 .. o_T]`` in one buffer (int32 while ``T * width < 2**31``,
    decided on the host), the pieces' ``(start, end)`` an overlapping view of ``c``; gathered at
    ``permute_list`` they give each output block's source start ``s_t`` and width ``w_t = max(0,
    end - start)``, ``o = cumsum(w)`` the output bounds, and the columns are the segment arange
    ``s_t + i`` over ``o`` (:func:`._gather.segment_arange`: no ``repeat_interleave``, no int64
    scan).  Launches: ``full``, the two zeros, ``lt``, ``add``, ``clamp_``, the copy of the cuts,
    the gather, ``sub``, ``clamp_``, ``cumsum``; the read (the sync); ``sub``, two
    ``index_add``, ``cumsum``.  Checks: ``aminmax`` of ``permute_list`` and its clamp (the gather
    stays in bounds), read with the width (a ``cat``).
    """
    k, t = off.numel(), perm.numel()
    dtype = index_dtype(t * width)  # every output bound is at most T * width
    buf = torch.full((k + t + 2,), width, dtype=dtype, device=off.device)
    buf.as_strided((2,), (k + 1,), buf.storage_offset()).zero_()  # c_0 and o_0
    if k > 1:  # the cuts as a slice reads them: negative from the end, clamped into the width
        cuts = off[1:k]
        buf[1:k].copy_(torch.add(cuts, cuts.lt(0), alpha=width).clamp_(0, width))
    checks = DataChecks(op)
    index = perm
    if validation_enabled():
        where = f"argument 'permute_list' must hold indices in [0, {k}) (len(offset_dim_list))"
        low, high = torch.aminmax(perm)
        checks.add(low, 0, None, where)
        checks.add(high, None, k - 1, where)
        index = perm.clamp(0, k - 1)  # the gather stays in bounds whatever the data
    spans = buf.as_strided((k, 2), (1, 1), buf.storage_offset())
    src = spans.index_select(0, index)  # (T, 2): each output block's source (start, end)
    bounds = buf[k + 1 :]
    widths = torch.sub(src[:, 1], src[:, 0]).clamp_(min=0)
    torch.cumsum(widths, 0, dtype=dtype, out=bounds[1:])
    total = checks.read_with([bounds[t]])[0]
    return segment_arange(src[:, 0], bounds, total)


def _permute(op: str, pooled_embs: object, *lists: torch.Tensor) -> torch.Tensor:
    pooled = check_tensor(op, "pooled_embs", pooled_embs)
    if pooled.numel() == 0:  # upstream returns the input itself, unchecked; a fresh empty one
        return torch.empty_like(pooled, memory_format=torch.contiguous_format)
    off, perm = lists[0], lists[1]
    _check(op, pooled, off, perm, lists)  # type: ignore[arg-type]
    src = _source_columns(op, pooled.size(1), off.reshape(-1), perm.reshape(-1))
    return pooled.index_select(1, src)


_DOC = (
    "Output = the pieces of ``pooled_embs`` (cut along dim 1 at ``offset_dim_list[1:]``) that "
    "``permute_list`` names, repeats and drops allowed; see the module docstring.  Any dtype, "
    "lists int64.  Launches: the source columns (``_source_columns``), their one read of the "
    "output width, the gather.  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md)."
)
permute_duplicate_pooled_embs_npu = permute_variant(DUPLICATE, _DOC, permute=_permute)
permute_duplicate_pooled_embs_split_npu = permute_variant(
    DUPLICATE_SPLIT,
    "``permute_duplicate_pooled_embs`` of the split build (same math, launches).",
    permute=_permute,
)
permute_duplicate_pooled_embs_auto_grad_npu = permute_variant(
    DUPLICATE_AUTO_GRAD,
    "PrivateUse1 of the auto_grad op (below autograd): the permute.",
    True,
    permute=_permute,
)
permute_duplicate_pooled_embs_auto_grad_split_npu = permute_variant(
    DUPLICATE_AUTO_GRAD_SPLIT,
    "PrivateUse1 of the auto_grad split op (below autograd).",
    True,
    permute=_permute,
)


class _DuplicateFunction(torch.autograd.Function):
    """Forward: ``op`` below autograd; backward: upstream's (module docstring)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        op: str,
        split: bool,
        pooled_embs: torch.Tensor,
        *lists: torch.Tensor,
    ) -> torch.Tensor:
        ctx.op, ctx.split, ctx.shape = op, split, pooled_embs.shape  # type: ignore[attr-defined]
        ctx.save_for_backward(*lists)
        return below_autograd(getattr(_F, op.split("::", 1)[1]), pooled_embs, *lists)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        op = ctx.op  # type: ignore[attr-defined]
        if not ctx.split:  # type: ignore[attr-defined]
            raise RuntimeError(
                f"{op}: no backward with duplicates, as upstream's ('permute_pooled_embs does not "
                "support allow_duplicates in backward!'); permute_duplicate_pooled_embs_auto_grad"
                "_split has one"
            )
        off, perm, inv_off, inv_perm = ctx.saved_tensors  # type: ignore[attr-defined]
        out = _F.permute_duplicate_pooled_embs_split(grad, inv_off, inv_perm, off, perm)
        shape = ctx.shape  # type: ignore[attr-defined]
        what = (
            f"{op}: the backward (the split permute of the gradient by arguments "
            "'inv_offset_dim_list' and 'inv_permute_list') must give the input's shape "
            f"{tuple(shape)}, got {tuple(out.shape)}: the inverse lists do not invert "
            "'offset_dim_list' / 'permute_list'"
        )
        # torch._check: a RuntimeError here, a runtime assert on a traced (data-dependent) width
        torch._check(out.dim() == len(shape), lambda: what)
        for got, want in zip(out.shape, shape, strict=True):
            torch._check(got == want, lambda: what)
        return None, None, out, None, None, None, None


def _autograd(op: str, split: bool) -> Callable[..., torch.Tensor]:
    """The ``AutogradPrivateUse1`` kernel of the auto_grad op ``op`` (launches as its forward)."""

    def kernel(
        pooled_embs: torch.Tensor,
        offset_dim_list: torch.Tensor,
        permute_list: torch.Tensor,
        inv_offset_dim_list: torch.Tensor,
        inv_permute_list: torch.Tensor,
    ) -> torch.Tensor:
        check_index_dtypes(op, offset_dim_list, permute_list)
        lists = (offset_dim_list, permute_list, inv_offset_dim_list, inv_permute_list)
        return _DuplicateFunction.apply(op, split, pooled_embs, *lists)

    kernel.__name__ = f"{op.split('::', 1)[1]}_autograd"
    return kernel


def _fake(op: str) -> Callable[..., torch.Tensor]:
    """The fake / Meta kernel of ``op`` (upstream has none for the four ops): ``(B, n, *rest)``
    with the width ``n`` data-dependent; an empty input's own shape."""

    def kernel(
        pooled_embs: torch.Tensor,
        offset_dim_list: torch.Tensor,
        permute_list: torch.Tensor,
        inv_offset_dim_list: torch.Tensor,
        inv_permute_list: torch.Tensor,
    ) -> torch.Tensor:
        if op in (DUPLICATE_AUTO_GRAD, DUPLICATE_AUTO_GRAD_SPLIT):
            check_index_dtypes(op, offset_dim_list, permute_list)
        if guard_or_false(pooled_embs.numel() == 0):  # a traced gradient's width is unbacked
            return torch.empty_like(pooled_embs, memory_format=torch.contiguous_format)
        lists = (offset_dim_list, permute_list, inv_offset_dim_list, inv_permute_list)
        _check(op, pooled_embs, offset_dim_list, permute_list, lists)
        n = dynamic_size(op, "the widths of the pieces 'permute_list' picks")
        return pooled_embs.new_empty((pooled_embs.size(0), n, *pooled_embs.shape[2:]))

    kernel.__name__ = f"{op.split('::', 1)[1]}_fake"
    return kernel


KERNELS = {
    DUPLICATE: {"PrivateUse1": permute_duplicate_pooled_embs_npu},
    DUPLICATE_SPLIT: {"PrivateUse1": permute_duplicate_pooled_embs_split_npu},
    DUPLICATE_AUTO_GRAD: {
        "PrivateUse1": permute_duplicate_pooled_embs_auto_grad_npu,
        "AutogradPrivateUse1": _autograd(DUPLICATE_AUTO_GRAD, split=False),
    },
    DUPLICATE_AUTO_GRAD_SPLIT: {
        "PrivateUse1": permute_duplicate_pooled_embs_auto_grad_split_npu,
        "AutogradPrivateUse1": _autograd(DUPLICATE_AUTO_GRAD_SPLIT, split=True),
    },
}
for _op, _table in KERNELS.items():
    _table["Meta"] = _fake(_op)
