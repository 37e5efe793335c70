"""``hstu_attn_varlen_func`` and ``hstu_attn_qkvpacked_func`` with upstream's exact arguments
(pytorch/FBGEMM, fbgemm_gpu/experimental/hstu/hstu/cuda_hstu_attention.py): autograd Functions
over ``torch.ops.fbgemm.hstu_varlen_fwd_80`` / ``hstu_varlen_bwd_80``, whose npu kernels are the
HSTU tile program (``fbgemm_npu/native/fbgemm/hstu_varlen/varlen.py`` has the math and the layouts).

Gradients: q, k, v (qkv), and rab when ``has_drab`` (``[B, H_rab, max_seqlen_k,
max_seqlen_k]``, 0 where rab is never read).  Refused, with an error naming the function and the
argument: ``quant_mode`` other than -1 (upstream's FP8 modes 0-5 quantize on a Hopper GPU: no
FP8 matmul here), ``has_drab`` without ``rab``, contexts / targets with a window other than
``(-1, 0)`` (upstream's own ``AssertError``s), and the backward of a paged-KV call (upstream's
backward op takes no cache: the paged path is inference).
"""

from __future__ import annotations

from typing import Any

import torch

from fbgemm_npu.native.fbgemm.hstu_varlen._args import parse

__all__ = ["cuda_hstu_attn_varlen", "hstu_attn_qkvpacked_func", "hstu_attn_varlen_func"]

VARLEN = "hstu_attn_varlen_func"
PACKED = "hstu_attn_qkvpacked_func"


def _window(fn: str, window_size: Any) -> tuple[int, int]:
    try:
        left, right = (int(w) for w in window_size)
    except (TypeError, ValueError):
        raise ValueError(
            f"{fn}: argument 'window_size' must be a pair (left, right) of ints; got "
            f"{window_size!r}"
        ) from None
    return left, right


def _check(fn: str, a: dict[str, Any]) -> None:
    """Upstream's argument conditions and every metadata check of the op, naming ``fn``
    (host work only: the op checks again, naming itself)."""
    quant = a.get("quant_mode", -1)
    if quant is not None and quant != -1:
        raise ValueError(
            f"{fn}: argument 'quant_mode' {quant} is not supported: upstream's FP8 modes (0-5) "
            "quantize q / k / v for a Hopper GPU's FP8 matmuls, which have no npu kernel here; "
            "pass quant_mode=-1 (q's dtype: float16 / bfloat16 / float32)"
        )
    if a["has_drab"] and a["rab"] is None:
        raise ValueError(f"{fn}: argument 'has_drab' is True but 'rab' is None")
    left, right = _window(fn, a["window_size"])
    parse(
        fn, a["q"], a["k"], a["v"], a["cu_seqlens_q"], a["cu_seqlens_k"], a["seqused_q"],
        a["seqused_k"], a["max_seqlen_q"], a["max_seqlen_k"], a["scaling_seqlen"],
        a["num_contexts"], a["num_targets"], a["target_group_size"], left, right, a["alpha"],
        a["rab"], a["func"], a.get("kv_cache"), a.get("page_offsets"), a.get("page_ids"),
        a.get("last_page_lens"), build=False,
    )  # fmt: skip


# HstuAttnVarlenFunc.apply's arguments, in order (upstream's forward takes them so too)
NAMES = (
    "q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "seqused_q", "seqused_k", "max_seqlen_q",
    "max_seqlen_k", "scaling_seqlen", "num_contexts", "num_targets", "target_group_size",
    "window_size", "alpha", "rab", "has_drab", "func", "kv_cache", "page_offsets", "page_ids",
    "last_page_lens",
)  # fmt: skip
_SAVED = (
    "q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "seqused_q", "seqused_k", "num_contexts",
    "num_targets", "func",
)  # fmt: skip


def _fwd(a: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    left, right = _window(VARLEN, a["window_size"])
    return torch.ops.fbgemm.hstu_varlen_fwd_80(
        a["q"], a["k"], a["v"], a["cu_seqlens_q"], a["cu_seqlens_k"], a["seqused_q"],
        a["seqused_k"], a["max_seqlen_q"], a["max_seqlen_k"], a["scaling_seqlen"],
        a["num_contexts"], a["num_targets"], a["target_group_size"], left, right,
        float(a["alpha"]), a["rab"], a["func"], a.get("kv_cache"), a.get("page_offsets"),
        a.get("page_ids"), a.get("last_page_lens"),
    )  # fmt: skip


def _save(ctx: Any, a: dict[str, Any], rab_padded: torch.Tensor) -> None:
    """The backward's tensors by save_for_backward (rab as upstream's padded copy), the rest of
    the call as plain values."""
    ctx.save_for_backward(*(a[n] for n in _SAVED), rab_padded if a["rab"] is not None else None)
    ctx.sizes = {n: a[n] for n in ("max_seqlen_q", "max_seqlen_k", "scaling_seqlen", "alpha")}
    ctx.mask = (int(a["target_group_size"]), _window(VARLEN, a["window_size"]))
    ctx.has_drab, ctx.paged = bool(a["has_drab"]), a.get("kv_cache") is not None


def _bwd(ctx: Any, dout: torch.Tensor) -> tuple[torch.Tensor, ...]:
    saved = dict(zip((*_SAVED, "rab"), ctx.saved_tensors, strict=True))
    z = ctx.sizes
    group, (left, right) = ctx.mask
    return torch.ops.fbgemm.hstu_varlen_bwd_80(
        dout.contiguous(), saved["q"], saved["k"], saved["v"], saved["cu_seqlens_q"],
        saved["cu_seqlens_k"], saved["seqused_q"], saved["seqused_k"], z["max_seqlen_q"],
        z["max_seqlen_k"], z["scaling_seqlen"], None, None, None, saved["num_contexts"],
        saved["num_targets"], group, left, right, float(z["alpha"]), saved["rab"],
        ctx.has_drab, saved["func"], False,
    )  # fmt: skip


class HstuAttnVarlenFunc(torch.autograd.Function):
    """``hstu_attn_varlen_func``'s autograd, over the arguments :data:`NAMES`: grads of q, k, v
    and (``has_drab``) rab."""

    @staticmethod
    def forward(ctx: Any, *args: Any) -> torch.Tensor:  # type: ignore[override]
        a = dict(zip(NAMES, args, strict=True))
        out, rab_padded = _fwd(a)
        _save(ctx, a, rab_padded)
        return out

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        if ctx.paged:
            raise RuntimeError(
                f"{VARLEN}: argument 'kv_cache': a paged-KV call has no backward (upstream's "
                "backward op takes no cache: the paged path is for inference); run it under "
                "torch.no_grad()"
            )
        dq, dk, dv, drab = _bwd(ctx, dout)
        grads: list[torch.Tensor | None] = [None] * len(NAMES)
        grads[:3] = [dq, dk, dv]
        grads[NAMES.index("rab")] = drab if ctx.has_drab else None
        return tuple(grads)


class HstuAttnQKVPackedFunc(torch.autograd.Function):
    """``hstu_attn_qkvpacked_func``'s autograd over ``qkv`` and :data:`NAMES` past v: the
    gradient of ``qkv [L, 3, H, D]`` stacked from dq, dk, dv (1 launch), rab's with has_drab."""

    @staticmethod
    def forward(ctx: Any, qkv: torch.Tensor, *args: Any) -> torch.Tensor:  # type: ignore[override]
        a = dict(zip(NAMES[3:], args, strict=True))
        a.update(q=qkv[:, 0], k=qkv[:, 1], v=qkv[:, 2])
        out, rab_padded = _fwd(a)
        _save(ctx, a, rab_padded)
        return out

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        dq, dk, dv, drab = _bwd(ctx, dout)
        grads: list[torch.Tensor | None] = [None] * (len(NAMES) - 2)
        grads[0] = torch.stack((dq, dk, dv), 1)
        grads[NAMES.index("rab") - 2] = drab if ctx.has_drab else None
        return tuple(grads)


def hstu_attn_varlen_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    seqused_q: torch.Tensor | None,
    seqused_k: torch.Tensor | None,
    max_seqlen_q: int,
    max_seqlen_k: int,
    scaling_seqlen: int,
    num_contexts: torch.Tensor,
    num_targets: torch.Tensor,
    target_group_size: int = 1,
    window_size: tuple[int, int] = (-1, -1),
    alpha: float = 1.0,
    rab: torch.Tensor | None = None,
    has_drab: bool = False,
    kv_cache: torch.Tensor | None = None,
    page_offsets: torch.Tensor | None = None,
    page_ids: torch.Tensor | None = None,
    last_page_lens: torch.Tensor | None = None,
    func: torch.Tensor | None = None,
    quant_mode: int | None = -1,
) -> torch.Tensor:
    """HSTU attention of varlen q ``[total_q, H, D]`` against k / v ``[total_k, H_k, D]`` /
    ``[total_k, H_k, D_v]``; returns ``[total_q, H, D_v]`` (upstream's arguments and meaning:
    ``cu_seqlens_*`` ``[B + 1]`` int32 offsets, ``seqused_*`` ``[B]`` tokens used per segment
    (None: all), ``scaling_seqlen`` the output's divisor (-1: max_seqlen_q), ``num_contexts`` /
    ``num_targets`` ``[B]`` (causal only), ``window_size`` ``(-1, 0)`` causal / ``(-1, -1)``
    none / local, ``rab [B, H_rab, max_seqlen_k, max_seqlen_k]``, the paged KV cache
    ``kv_cache [pages, 2, page_size, H_k, D]`` with ``page_offsets`` / ``page_ids`` /
    ``last_page_lens``, ``func [H_f, n_func, >= total_q]`` int32 the arbitrary mask).  See the
    module docstring for what is refused."""
    a = dict(locals())
    _check(VARLEN, a)
    return HstuAttnVarlenFunc.apply(*(a[n] for n in NAMES))


def hstu_attn_qkvpacked_func(
    qkv: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    seqused_q: torch.Tensor | None,
    seqused_k: torch.Tensor | None,
    max_seqlen_q: int,
    max_seqlen_k: int,
    scaling_seqlen: int = -1,
    num_contexts: torch.Tensor | None = None,
    num_targets: torch.Tensor | None = None,
    target_group_size: int | None = 1,
    window_size: tuple[int, int] = (-1, -1),
    alpha: float = 1.0,
    rab: torch.Tensor | None = None,
    has_drab: bool | None = False,
    func: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`hstu_attn_varlen_func` on ``qkv [total, 3, H, D]`` (q, k, v packed, one set of
    rows); returns ``[total, H, D]``, and the gradient of ``qkv`` in one piece."""
    a = dict(locals())
    if not isinstance(qkv, torch.Tensor) or qkv.dim() != 4 or qkv.size(1) != 3:
        shape = list(qkv.shape) if isinstance(qkv, torch.Tensor) else type(qkv).__name__
        raise ValueError(f"{PACKED}: argument 'qkv' must be [total, 3, H, D]; got {shape}")
    a["target_group_size"] = 1 if target_group_size is None else target_group_size
    a["has_drab"] = bool(has_drab)
    a.update(kv_cache=None, page_offsets=None, page_ids=None, last_page_lens=None)
    _check(PACKED, {**a, "q": qkv[:, 0], "k": qkv[:, 1], "v": qkv[:, 2]})
    return HstuAttnQKVPackedFunc.apply(qkv, *(a[n] for n in NAMES[3:]))


@torch.fx.wrap
def cuda_hstu_attn_varlen(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    seqused_q: torch.Tensor | None,
    seqused_k: torch.Tensor | None,
    max_seqlen_q: int,
    max_seqlen_k: int,
    scaling_seqlen: int,
    num_targets: torch.Tensor,
    window_size: tuple[int, int] = (-1, -1),
    alpha: float = 1.0,
    is_train: bool = True,
) -> torch.Tensor:
    """Upstream's entry point without rab and contexts (its name kept for code that calls it):
    :func:`hstu_attn_varlen_func` when training, the forward op alone otherwise."""
    if is_train:
        return hstu_attn_varlen_func(
            q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
            max_seqlen_k, scaling_seqlen, None, num_targets, 1, window_size, alpha,
        )  # type: ignore[arg-type]  # fmt: skip
    a = {
        "q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k,
        "seqused_q": seqused_q, "seqused_k": seqused_k, "max_seqlen_q": max_seqlen_q,
        "max_seqlen_k": max_seqlen_k, "scaling_seqlen": scaling_seqlen, "num_contexts": None,
        "num_targets": num_targets, "target_group_size": 1, "window_size": window_size,
        "alpha": alpha, "rab": None, "has_drab": False, "func": None,
    }  # fmt: skip
    _check(VARLEN, a)
    return _fwd(a)[0]
