"""Argument checks of FBGEMM's varlen HSTU attention (``fbgemm::hstu_varlen_fwd_80`` /
``_bwd_80`` and ``fbgemm_npu.experimental.hstu``): host-only metadata checks that name the op and
the argument, and the queued data checks (``native/_checks.py``: no sync per call).

:func:`parse` turns a call into a :class:`Call`: int32 offsets, the per-batch lengths
``L_q = seqused_q[b]`` (or the segment) and ``L_k``, the window as the tile program reads it,
the silu scale ``1 / scaling_seqlen`` (``-1``: ``1 / max_seqlen_q``), and the paged KV cache
(``kv_cache [P, 2, page, H_k, D]``, ``page_offsets [B + 1]``, ``page_ids``, ``last_page_lens
[B]``: all four or none).  Upstream's own conditions (pytorch/FBGEMM, hstu/cuda_hstu_attention.py
and the sm80 op) are kept: contexts and targets only with the causal window ``(-1, 0)``,
``target_group_size >= 1``, ``max_seqlen_q <= max_seqlen_k``, ``rab [B, H_rab, max_seqlen_k,
max_seqlen_k]``; wider than upstream: ``H % H_rab == 0`` (upstream: 1 or H), GQA, any head dims,
float32 as well as float16 / bfloat16.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    non_decreasing,
    validation_enabled,
)
from fbgemm_npu.native.mxrec.hstu._layout import check_qkv, to_int32

__all__ = ["Call", "data_checks", "parse"]

INDEX_DTYPES = (torch.int32, torch.int64)
I32 = torch.int32


@dataclass
class Call:
    """One call, checked (module docstring); tensors on q's device, indices int32."""

    op: str
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    cu_q: torch.Tensor  # [B + 1] int32
    cu_k: torch.Tensor
    lq: torch.Tensor  # [B] int32 queries used
    lk: torch.Tensor  # [B] int32 keys used
    s: int  # padded rows: max_seqlen_k (queries sit at their key positions)
    max_q: int
    scale: float
    alpha: float
    window: tuple[int, int]  # -1: unbounded
    num_contexts: torch.Tensor | None
    num_targets: torch.Tensor | None
    group: int
    rab: torch.Tensor | None
    func: torch.Tensor | None  # [H_f, n_func, >= q.size(0)] int32
    paged: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None
    seqused: tuple[torch.Tensor | None, torch.Tensor | None] = (None, None)

    @property
    def batch(self) -> int:
        return self.cu_q.numel() - 1


def _index(op: str, name: str, t: object, q: torch.Tensor, n: int | None) -> torch.Tensor:
    """A 1-D int32 / int64 index tensor of ``n`` elements (None: any) on q's device."""
    t = check_tensor(op, name, t)
    check_ndim(op, name, t, (1,))
    check_dtype(op, name, t, INDEX_DTYPES)
    if n is not None and t.numel() != n:
        raise ValueError(f"{op}: argument '{name}' must have {n} elements; got {t.numel()}")
    check_same_device(op, q=q, **{name: t})
    return t


def _i32(t: torch.Tensor | None) -> torch.Tensor | None:
    """int32, an int64 index saturated first (``to_int32``: ``2**32 + 3`` must not wrap to 3)."""
    return None if t is None else to_int32(t)


def _window(op: str, left: int, right: int, s: int) -> tuple[int, int]:
    """The kernel's reading: a negative side, or one past ``max_seqlen_k``, is unbounded."""
    return tuple(-1 if w < 0 or w >= s else int(w) for w in (left, right))  # type: ignore[return-value]


def _rab(op: str, rab: object, q: torch.Tensor, batch: int, s: int, bwd: bool) -> torch.Tensor:
    """``rab [B, H_rab, S_k, S_k]`` (the backward also takes upstream's ``rab_padded``, its last
    dim rounded up to a multiple of 8), q's dtype and device, ``H % H_rab == 0``."""
    rab = check_tensor(op, "rab", rab)
    check_ndim(op, "rab", rab, (4,))
    heads = q.size(1)
    last_ok = rab.size(3) == s or (bwd and rab.size(3) == -(-s // 8) * 8)
    nr = rab.size(1)
    if rab.size(0) != batch or rab.size(2) != s or not last_ok or nr == 0 or heads % nr:
        raise ValueError(
            f"{op}: argument 'rab' must have shape [batch {batch}, H_rab, max_seqlen_k {s}, "
            f"max_seqlen_k {s}] with H_rab dividing the {heads} heads; got {list(rab.shape)}"
        )
    if rab.dtype != q.dtype:
        raise ValueError(f"{op}: argument 'rab' must have q's dtype {q.dtype}; got {rab.dtype}")
    check_same_device(op, q=q, rab=rab)
    return rab


def _func(op: str, func: object, q: torch.Tensor) -> torch.Tensor:
    """``func [H_f, n_func, >= total_q]`` int32, ``n_func`` odd, ``H % H_f == 0``."""
    func = check_tensor(op, "func", func)
    check_ndim(op, "func", func, (3,))
    check_dtype(op, "func", func, (I32,))
    hf, nf, rows = func.shape
    if hf == 0 or q.size(1) % hf or nf % 2 == 0 or rows < q.size(0):
        raise ValueError(
            f"{op}: argument 'func' must have shape [H_f dividing the {q.size(1)} heads, an odd "
            f"n_func, at least total_q = {q.size(0)} rows]; got {list(func.shape)}"
        )
    check_same_device(op, q=q, func=func)
    return func


def _paged(
    op: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, batch: int,
    kv_cache: object, page_offsets: object, page_ids: object, last_page_lens: object,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None:  # fmt: skip
    """The paged KV cache: all four arguments or none."""
    given = [x is not None for x in (kv_cache, page_offsets, page_ids, last_page_lens)]
    if not any(given):
        return None
    if not all(given):
        raise ValueError(
            f"{op}: arguments 'kv_cache', 'page_offsets', 'page_ids' and 'last_page_lens' go "
            "together (the paged KV cache); got only some of them"
        )
    cache = check_tensor(op, "kv_cache", kv_cache)
    check_ndim(op, "kv_cache", cache, (5,))
    want = [cache.size(0), 2, cache.size(2), k.size(1), k.size(2)]
    if list(cache.shape) != want or v.size(2) != k.size(2) or cache.size(2) == 0:
        raise ValueError(
            f"{op}: argument 'kv_cache' must have shape [pages, 2, page_size > 0, H_k {k.size(1)}, "
            f"D {k.size(2)}] (and v k's head dim); got {list(cache.shape)}"
        )
    if cache.dtype != q.dtype:
        raise ValueError(f"{op}: argument 'kv_cache' must have q's dtype; got {cache.dtype}")
    check_same_device(op, q=q, kv_cache=cache)
    if k.size(0) != q.size(0):
        raise ValueError(
            f"{op}: argument 'k' must have q's {q.size(0)} rows with a paged KV cache (the "
            f"target keys are the last num_targets rows of each q segment); got {k.size(0)}"
        )
    offs = _index(op, "page_offsets", page_offsets, q, batch + 1)
    ids = _index(op, "page_ids", page_ids, q, None)
    last = _index(op, "last_page_lens", last_page_lens, q, batch)
    return cache, offs, ids, last


def parse(
    op: str,
    q: object, k: object, v: object,
    cu_seqlens_q: object, cu_seqlens_k: object,
    seqused_q: object, seqused_k: object,
    max_seqlen_q: int, max_seqlen_k: int, scaling_seqlen: int,
    num_contexts: object, num_targets: object, target_group_size: int,
    window_size_left: int, window_size_right: int, alpha: float,
    rab: object, func: object,
    kv_cache: object = None, page_offsets: object = None, page_ids: object = None,
    last_page_lens: object = None, bwd: bool = False, build: bool = True,
) -> Call | None:  # fmt: skip
    """Every metadata check of a call (host work only), then the :class:`Call` (int32 casts of
    int64 indices and the lengths' subtractions: its only launches); None without ``build``
    (the Python API checks its call before the op does: errors name the function)."""
    q, k, v = check_qkv(op, q, k, v, 3, q_rows=False)
    if v.size(0) != k.size(0):
        raise ValueError(f"{op}: argument 'v' must have k's {k.size(0)} rows; got {v.size(0)}")
    cu_q = _index(op, "cu_seqlens_q", cu_seqlens_q, q, None)
    if cu_q.numel() < 1:
        raise ValueError(f"{op}: argument 'cu_seqlens_q' must have batch + 1 >= 1 elements")
    batch = cu_q.numel() - 1
    cu_k = _index(op, "cu_seqlens_k", cu_seqlens_k, q, batch + 1)
    for name, val in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if not isinstance(val, int) or isinstance(val, bool) or val < 0 or val >= 2**31:
            raise ValueError(f"{op}: argument '{name}' must be an int in [0, 2**31); got {val!r}")
    if max_seqlen_q > max_seqlen_k:
        raise ValueError(
            f"{op}: argument 'max_seqlen_q' ({max_seqlen_q}) must be <= max_seqlen_k "
            f"({max_seqlen_k}): the queries are the last keys of their sequence"
        )
    for name, val in (("scaling_seqlen", scaling_seqlen), ("target_group_size", target_group_size)):
        if not isinstance(val, int) or isinstance(val, bool):
            raise ValueError(f"{op}: argument '{name}' must be an int; got {val!r}")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        raise ValueError(f"{op}: argument 'alpha' must be a float; got {alpha!r}")
    if scaling_seqlen != -1 and scaling_seqlen <= 0:
        raise ValueError(
            f"{op}: argument 'scaling_seqlen' must be -1 (max_seqlen_q) or > 0; "
            f"got {scaling_seqlen}"
        )
    n = max_seqlen_q if scaling_seqlen == -1 else scaling_seqlen
    s = max_seqlen_k
    if batch * max(s, 1) >= 2**31:
        raise ValueError(f"{op}: batch x max_seqlen_k must be below 2**31; got {batch * s}")
    used_q = None if seqused_q is None else _index(op, "seqused_q", seqused_q, q, batch)
    used_k = None if seqused_k is None else _index(op, "seqused_k", seqused_k, q, batch)
    counts = {}
    for name, t in (("num_contexts", num_contexts), ("num_targets", num_targets)):
        counts[name] = None if t is None else _index(op, name, t, q, batch)
    window = _window(op, window_size_left, window_size_right, s)
    if any(t is not None for t in counts.values()) and (window_size_left, window_size_right) != (
        -1,
        0,
    ):
        raise ValueError(
            f"{op}: arguments 'num_contexts' / 'num_targets' need the causal window_size (-1, 0); "
            f"got ({window_size_left}, {window_size_right})"
        )
    if int(target_group_size) < 1:
        raise ValueError(
            f"{op}: argument 'target_group_size' must be >= 1; got {target_group_size}"
        )
    rab_t = None if rab is None else _rab(op, rab, q, batch, s, bwd)
    func_t = None if func is None else _func(op, func, q)
    if func_t is not None and any(t is not None for t in counts.values()):
        raise ValueError(
            f"{op}: argument 'func' (an arbitrary mask) replaces the context and target rules; "
            "pass num_contexts / num_targets as None with it"
        )
    paged = _paged(op, q, k, v, batch, kv_cache, page_offsets, page_ids, last_page_lens)
    if not build:
        return None
    cu_q, cu_k, used_q, used_k = (_i32(t) for t in (cu_q, cu_k, used_q, used_k))
    lq = cu_q[1:] - cu_q[:-1] if used_q is None else used_q
    lk = cu_k[1:] - cu_k[:-1] if used_k is None else used_k
    return Call(
        op, q, k, v, cu_q, cu_k, lq, lk, s, max_seqlen_q, 1.0 / n, float(alpha), window,
        _i32(counts["num_contexts"]), _i32(counts["num_targets"]), int(target_group_size),
        rab_t, func_t, paged, (used_q, used_k),
    )  # fmt: skip


def data_checks(c: Call) -> DataChecks | None:
    """The conditions only the data knows (queued by the caller: no sync): offsets start at 0,
    never decrease, end within their rows; ``seqused`` within its segment; ``L_q <=
    max_seqlen_q``, ``L_k <= max_seqlen_k``, ``L_q <= L_k``; ``0 <= num_contexts``, ``0 <=
    num_targets <= L_q``; paged: the cached tokens equal to ``L_k - num_targets`` (the pages'
    own conditions are queued by ``_paged.gather_pages``, into the same checks).  Returned for
    the caller to queue (``assert_on_device``) once every check is in; None when validation is
    off."""
    if not validation_enabled() or c.batch == 0:
        return None
    checks = DataChecks(c.op)
    paged = c.paged is not None
    rows_k = c.q.size(0) if paged else c.k.size(0)
    for name, cu, rows, what in (
        ("cu_seqlens_q", c.cu_q, c.q.size(0), "q.size(0)"),
        ("cu_seqlens_k", c.cu_k, None if paged else rows_k, "k.size(0)"),
    ):
        checks.add(cu[0], 0, 0, f"argument '{name}' must start at 0")
        checks.require(non_decreasing(cu), f"argument '{name}' must be non-decreasing")
        if rows is not None:
            checks.add(cu[-1], None, rows, f"argument '{name}' must end within {what} = {rows}")
    for name, used, cu in (
        ("seqused_q", c.seqused[0], c.cu_q),
        ("seqused_k", c.seqused[1], c.cu_k),
    ):
        if used is not None:
            checks.add(used.min(), 0, None, f"argument '{name}' must be >= 0")
            checks.add((used - (cu[1:] - cu[:-1])).max(), None, 0,
                       f"argument '{name}' must be <= its cu_seqlens segment")  # fmt: skip
    checks.add(c.lq.max(), None, c.max_q, f"query lengths must be <= max_seqlen_q {c.max_q}")
    checks.add(c.lk.max(), None, c.s, f"key lengths must be <= max_seqlen_k {c.s}")
    checks.add((c.lq - c.lk).max(), None, 0, "every query length must be <= its key length")
    if c.num_contexts is not None:
        checks.add(c.num_contexts.min(), 0, None, "argument 'num_contexts' must be >= 0")
    if c.num_targets is not None:
        nt = c.num_targets
        checks.add(nt.min(), 0, None, "argument 'num_targets' must be >= 0")
        checks.add((nt - torch.minimum(c.lq, c.lk)).max(), None, 0,
                   "argument 'num_targets' must be <= its query length")  # fmt: skip
    if c.paged is not None:  # the page data itself: gather_pages queues its checks
        cache, offs, _, last = c.paged
        offs, page = offs.to(I32), cache.size(2)
        pages = offs[1:] - offs[:-1]
        cached = torch.where(pages > 0, (pages - 1) * page + last.to(I32), 0)
        gap = cached - (c.lk - (c.num_targets if c.num_targets is not None else 0))
        what = (
            "the paged KV cache must hold L_k - num_targets tokens of each batch "
            "(page_offsets, last_page_lens and cu_seqlens_k disagree)"
        )
        checks.add(gap.min(), 0, None, what)
        checks.add(gap.max(), None, 0, what)
    return checks
