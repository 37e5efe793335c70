"""The TBE forward as one fused Triton kernel (the tensor program: :func:`.forward.tbe_forward`).

Math (upstream's ``split_embedding_codegen_forward``): bag ``k = t * B + b`` holds the indices
``indices[offsets[k] : offsets[k + 1]]`` of feature ``t``, whose table rows start at element
``weights_offsets[t]`` of the flat buffer, ``D_t`` wide; ``s_i`` the per-sample weights (1
unweighted), ``n_k`` the bag's length:

* SUM:  ``out[b, D_offsets[t] + d] = sum_i s_i * W[w_off_t + idx_i * D_t + d]``;
* MEAN: the SUM / ``max(n_k, 1)`` (an empty bag gives 0);
* NONE: ``out[i, d] = W[w_off_t + idx_i * D + d]``, one row per index (one D for every feature).

Every index is first clamped into its own table, ``[0, E_t)`` (the tensor program's rule: an
index outside it never reads another table's rows); indices past ``offsets[-1]`` belong to the
dummy feature ``T``, which reads row 0 of the first table class (as the tensor program).

Dtypes: weights fp32 / fp16 / bf16, per-sample weights fp32 / fp16 / bf16, both read as fp32 and
accumulated in fp32 (upstream's CPU and CUDA kernels do; the tensor program rounds to the
weights' dtype first); output fp32 / fp16 / bf16 (one rounding at the store); indices and
offsets int32 / int64 (positions in int32: ``L < 2**31``; rows and output elements in int64).

Grid: ``min(work, 65535)`` programs, 1-D, each looping over work items ``pid, pid + P, ...``
(programs beyond the core count run in waves on Ascend; the loop keeps the grid in its limit).
A work item is

* pooled modes, one bag ``(t, b)``: its indices in blocks of ``BLOCK_L``, its ``D_t`` columns
  in tiles of ``BLOCK_D`` (live tile ``BLOCK_L x BLOCK_D`` fp32 <= 16 KB), written whole
  (every output element is written: ``torch.empty``, no fill);
* a block of ``BLOCK_L`` indices (pooling NONE, and the autograd state of every mode): each
  index's bag by a binary search of ``offsets`` (no searchsorted, no sort), its feature
  ``bag // B``, the clamped index; NONE writes its row; with ``STATE`` it writes what the
  backward reads (:class:`.forward.ForwardState`: ``bag``, ``t`` and every class's index
  matrix ``rows[t, k] + idx * rows[t, m + k]`` with the gradient row ``+ (bag % B) * T_c`` of a
  pooled lookup), exactly the tensor program's values.

The data check (with ``FBGEMM_NPU_VALIDATE`` on): each program writes one int8 flag, 0 when one
of its bags holds an index outside its table or its offsets decrease, pass ``L`` or (bag 0) do
not start at 0; the caller reduces the flags with one ``all`` and queues it with the tensor
program's message.  Offsets are clamped into ``[0, L]`` before any read, so a call whose check
fails stays inside its buffers.

Launches: 1 (``triton.tbe_forward``), + 1 with the data checks on (the flags' ``all``); the
first call of a layout builds its device tables once (cached in the plan).

VBE (variable batch size per feature and rank, pooled): a bag's feature and rank come from a
binary search of its block over ``B_offsets[t] + B_offsets_rank_per_feature[t, r]`` (the block
ids of :mod:`.vbe`), its output from ``output_offsets_feature_rank[r * T + t] + b * D_t``
(stores masked to ``[0, output_size)``); the state gets each bag's output start (``row_starts``)
and the bag as the gradient row; a pre-allocated ``vbe_output`` is written in place.

Not supported (the tensor program serves them): global weight decay (``index_scale``), no bags,
pooling NONE with mixed dims (or with VBE), ``L`` or the bag count past ``2**31``.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from fbgemm_npu.native._checks import assert_on_device, validation_enabled
from fbgemm_npu.native._triton import launch
from fbgemm_npu.native._upload import upload
from fbgemm_npu.native.fbgemm.tbe._utils import TbePlan
from fbgemm_npu.native.fbgemm.tbe.forward import INDEX_CHECK, ForwardState, VbeArgs

__all__ = ["GRID_LIMIT", "forward_state", "tbe_forward_triton", "triton_tables"]

GRID_LIMIT = 65535  # one grid dim on Ascend (and a bound on the flags buffer)
_BLOCK_L = 32
_MAX_BLOCK_D = 128


@triton.jit
def _vbe_block(k, vbe_b, vbe_r, R1, n_blocks, n_iter):
    """VBE: the block id of bag(s) ``k``, ``#{j >= 1 : S[j] <= k}`` over the flattened block
    bounds ``S[t, r] = B_offsets[t] + B_offsets_rank_per_feature[t, r]`` (.vbe's docstring),
    by a binary search; with ``S[id]``, where the bag's block starts."""
    lo = k * 0 + 1
    hi = k * 0 + n_blocks
    for _ in range(n_iter):
        active = lo < hi
        mid = (lo + hi) // 2
        mid_c = tl.minimum(mid, n_blocks - 1)
        v = tl.load(vbe_b + mid_c // R1).to(tl.int64) + tl.load(vbe_r + mid_c).to(tl.int64)
        le = v <= k
        lo = tl.where(active & le, mid + 1, lo)
        hi = tl.where(active & (~le), mid, hi)
    bid = lo - 1
    return bid, tl.load(vbe_b + bid // R1).to(tl.int64) + tl.load(vbe_r + bid).to(tl.int64)


@triton.jit
def _bag_item(weights, indices, offsets, psw, out, feat, k, B, L, total_D, row_starts,
              vbe_b, vbe_r, vbe_o, R1, n_blocks, n_iter_v, out_size, T,
              MEAN: tl.constexpr, WEIGHTED: tl.constexpr, VBE: tl.constexpr,
              STATE: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr):  # fmt: skip
    """Pool bag ``k`` into its output columns; returns 1 when its data is valid."""
    if VBE:  # block (t, r): the output from output_offsets_feature_rank[r * T + t]
        bid, s_blk = _vbe_block(k, vbe_b, vbe_r, R1, n_blocks, n_iter_v)
        t = (bid + 1) // R1
        r = tl.maximum(tl.minimum(bid - t * R1, R1 - 2), 0)  # bad metadata: still an entry
    else:
        t = k // B
    w_off = tl.load(feat + t * 4)
    D = tl.load(feat + t * 4 + 1).to(tl.int32)
    col = tl.load(feat + t * 4 + 2)
    E = tl.load(feat + t * 4 + 3)
    start = tl.load(offsets + k).to(tl.int64)
    end = tl.load(offsets + k + 1).to(tl.int64)
    ok = (end >= start) & (end <= L) & ((k != 0) | (start == 0))
    start = tl.minimum(tl.maximum(start, 0), L)
    end = tl.minimum(tl.maximum(end, start), L)
    s32 = start.to(tl.int32)
    e32 = end.to(tl.int32)
    n_bad = tl.zeros([BLOCK_L], dtype=tl.int32)
    if VBE:
        o_start = tl.load(vbe_o + r * T + t) + (k - s_blk) * D
        # a bad layout never writes outside [0, output_size)
        lim = tl.where(o_start >= 0, out_size - o_start, 0)
        if STATE:
            tl.store(row_starts + k, o_start)
    else:
        o_start = (k - t * B).to(tl.int64) * total_D + col
        lim = total_D
    inv = 1.0 / tl.maximum(e32 - s32, 1).to(tl.float32)
    for d0 in range(0, D, BLOCK_D):
        cols = d0 + tl.arange(0, BLOCK_D)
        dmask = cols < D
        smask = dmask & (cols < lim)
        acc = tl.zeros([BLOCK_D], dtype=tl.float32)
        for l0 in range(s32, e32, BLOCK_L):
            pos = l0 + tl.arange(0, BLOCK_L)
            lmask = pos < e32
            idx = tl.load(indices + pos, mask=lmask, other=0).to(tl.int64)
            n_bad += (lmask & ((idx < 0) | (idx >= E))).to(tl.int32)
            safe = tl.minimum(tl.maximum(idx, 0), E - 1)
            rows = w_off + safe * D
            ptrs = weights + rows[:, None] + cols[None, :]
            vals = tl.load(ptrs, mask=lmask[:, None] & dmask[None, :], other=0.0).to(tl.float32)
            if WEIGHTED:
                s = tl.load(psw + pos, mask=lmask, other=0.0).to(tl.float32)
                vals = vals * s[:, None]
            acc += tl.sum(vals, axis=0)
        if MEAN:
            acc = acc * inv
        tl.store(out + o_start + cols, acc.to(out.dtype.element_ty), mask=smask)
    return ok & (tl.sum(n_bad, axis=0) == 0)


@triton.jit
def _index_item(weights, indices, offsets, out, feat, cls_tab, n_members, bag_out, t_out, mats,
                q, B, L, T, n_bags, n_iter, C, M, TAB_W, vbe_b, vbe_r, R1, n_blocks, n_iter_v,
                SEQ_D: tl.constexpr, NONE: tl.constexpr, STATE: tl.constexpr,
                GRAD_ROWS: tl.constexpr, VBE: tl.constexpr, BLOCK_L: tl.constexpr,
                BLOCK_D: tl.constexpr):  # fmt: skip
    """Indices ``q * BLOCK_L ...``: NONE's rows, the autograd state; returns 1 when valid."""
    pos = q * BLOCK_L + tl.arange(0, BLOCK_L)
    lmask = pos < L
    # bag = #{j >= 1 : offsets[j] <= pos}: a binary search (searchsorted(offsets[1:], right))
    lo = tl.zeros([BLOCK_L], dtype=tl.int32)
    hi = tl.zeros([BLOCK_L], dtype=tl.int32) + n_bags
    for _ in range(n_iter):
        active = lo < hi
        mid = (lo + hi) // 2
        v = tl.load(offsets + mid + 1, mask=active & lmask, other=0).to(tl.int64)
        le = v <= pos
        lo = tl.where(active & le, mid + 1, lo)
        hi = tl.where(active & (~le), mid, hi)
    bag = lo
    if VBE:  # the feature of the bag's block (T for the bag past the end)
        bid, _ = _vbe_block(bag, vbe_b, vbe_r, R1, n_blocks, n_iter_v)
        t = (bid + 1) // R1
    else:
        t = bag // B
    idx = tl.load(indices + pos, mask=lmask, other=0).to(tl.int64)
    E = tl.load(feat + t * 4 + 3, mask=lmask, other=1)
    D_t = tl.load(feat + t * 4 + 1, mask=lmask, other=0)
    bounded = (t < T) & (D_t > 0)  # zero-width features and the dummy read nothing: unbounded
    safe = tl.where(bounded | (t >= T), tl.minimum(tl.maximum(idx, 0), E - 1), idx)
    bad = lmask & bounded & ((idx < 0) | (idx >= E))
    ok = tl.sum(bad.to(tl.int32), axis=0) == 0
    if NONE:
        w_off = tl.load(feat + t * 4, mask=lmask, other=0)
        rows = w_off + safe * SEQ_D
        for d0 in range(0, SEQ_D, BLOCK_D):
            cols = d0 + tl.arange(0, BLOCK_D)
            m2 = lmask[:, None] & (cols < SEQ_D)[None, :]
            vals = tl.load(weights + rows[:, None] + cols[None, :], mask=m2, other=0.0)
            dst = out + pos.to(tl.int64)[:, None] * SEQ_D + cols[None, :]
            tl.store(dst, vals.to(out.dtype.element_ty), mask=m2)
        # the offsets of bags q * BLOCK_L ... (NONE has no bag items to check them)
        j = q * BLOCK_L + tl.arange(0, BLOCK_L)
        jm = j < n_bags
        a = tl.load(offsets + j, mask=jm, other=0).to(tl.int64)
        z = tl.load(offsets + j + 1, mask=jm, other=0).to(tl.int64)
        off_bad = jm & ((z < a) | (z > L) | ((j == 0) & (a != 0)))
        ok = ok & (tl.sum(off_bad.to(tl.int32), axis=0) == 0)
    if STATE:
        tl.store(bag_out + pos, bag, mask=lmask)
        tl.store(t_out + pos, t.to(t_out.dtype.element_ty), mask=lmask)
        grad_row = (bag - t * B).to(tl.int64)  # bag % B (0 for the dummy: bag = T * B)
        for c in range(C):
            row_tab = cls_tab + (c * (T + 1) + t).to(tl.int64) * TAB_W
            n_c = tl.load(n_members + c)
            for kk in range(M):
                base = tl.load(row_tab + kk, mask=lmask, other=0)
                mul = tl.load(row_tab + M + kk, mask=lmask, other=0)
                val = base + safe * mul
                if GRAD_ROWS:
                    val += tl.where(kk == 2, grad_row * n_c, 0)
                if VBE:  # the gradient row is the bag itself
                    val = tl.where(kk == 2, bag.to(tl.int64), val)
                tl.store(mats + (c * M + kk).to(tl.int64) * L + pos, val, mask=lmask)
    return ok


@triton.jit
def _tbe_forward_kernel(weights, indices, offsets, psw, out, feat, cls_tab, n_members,
                        bag_out, t_out, mats, flags, row_starts, vbe_b, vbe_r, vbe_o,
                        n_bag_items, n_items, B, L, T, n_bags, total_D, n_iter, C, M, TAB_W,
                        R1, n_blocks, n_iter_v, out_size,
                        SEQ_D: tl.constexpr, MEAN: tl.constexpr, NONE: tl.constexpr,
                        WEIGHTED: tl.constexpr, STATE: tl.constexpr, GRAD_ROWS: tl.constexpr,
                        VBE: tl.constexpr, CHECK: tl.constexpr, BLOCK_L: tl.constexpr,
                        BLOCK_D: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    ok = pid >= 0
    for w in range(pid, n_items, tl.num_programs(0)):
        if w < n_bag_items:
            ok = ok & _bag_item(weights, indices, offsets, psw, out, feat, w, B, L, total_D,
                                row_starts, vbe_b, vbe_r, vbe_o, R1, n_blocks, n_iter_v,
                                out_size, T, MEAN, WEIGHTED, VBE, STATE, BLOCK_L,
                                BLOCK_D)  # fmt: skip
        else:
            ok = ok & _index_item(weights, indices, offsets, out, feat, cls_tab, n_members,
                                  bag_out, t_out, mats, w - n_bag_items, B, L, T, n_bags,
                                  n_iter, C, M, TAB_W, vbe_b, vbe_r, R1, n_blocks, n_iter_v,
                                  SEQ_D, NONE, STATE, GRAD_ROWS, VBE, BLOCK_L,
                                  BLOCK_D)  # fmt: skip
    if CHECK:
        tl.store(flags + pid, ok.to(tl.int8))


def triton_tables(plan: TbePlan, device: torch.device) -> tuple[torch.Tensor, ...]:
    """The kernel's device tables of ``plan``, built on its first call and cached in the plan:
    ``feat [T + 1, 4]`` int64 (element offset of row 0, D, first output column, rows E per
    feature; the dummy feature ``T`` reads row 0 of the first class), the classes' index tables
    stacked ``[C, T + 1, 2 m + 2]`` and their member counts ``[C]``.  Launches (once): an
    upload, two multiply-adds per class, a stack, an upload."""
    key = ("triton_forward", device)
    hit = plan.vbe_cache.get(key)
    if hit is not None:
        return hit
    T = plan.T
    first = plan.classes[0].w_residue if plan.classes else 0
    host = [[0, plan.dims[t], plan.D_offsets[t], 0] for t in range(T)] + [[first, 0, 0, 1]]
    feat = upload(host, torch.int64, device)
    for cls in plan.classes:
        base, mul, hi = cls.fwd_rows[:, 0], cls.fwd_rows[:, 1], cls.fwd_rows[:, 3]
        feat[:, 0].add_(mul * (base * cls.D + cls.w_residue))
        feat[:, 3].add_(mul * (hi.clamp(max=1 << 62) + 1))
    if plan.classes:
        cls_tab = torch.stack([cls.rows for cls in plan.classes]).contiguous()
    else:
        cls_tab = torch.zeros((0,), dtype=torch.int64, device=device)
    n_members = upload([cls.n_members for cls in plan.classes] or [0], torch.int64, device)
    plan.vbe_cache[key] = (feat, cls_tab, n_members)
    return feat, cls_tab, n_members


def _pow2(n: int, cap: int) -> int:
    return min(max(triton.next_power_of_2(max(n, 1)), 16), cap)


def tbe_forward_triton(
    plan: TbePlan,
    weights: torch.Tensor,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    pooling_mode: int,
    indice_weights: torch.Tensor | None,
    output_dtype: torch.dtype,
    for_backward: bool,
    check: bool,
    vbe: VbeArgs | None = None,
) -> tuple[torch.Tensor, dict[str, Any], torch.Tensor | None]:
    """Run the kernel: ``(out, state tensors, flags)``.  ``state`` holds ``bag``, ``t``,
    ``mats`` (every class's ``[m, L]`` index matrix, views of one buffer) and, with ``vbe``,
    ``row_starts`` when ``for_backward``; ``flags`` (int8, one per program) when ``check``.
    Contiguous 1-D ``indices`` / ``offsets``; ``pooling_mode`` 0 SUM, 1 MEAN, 2 NONE."""
    device = weights.device
    L, n_bags, T = indices.numel(), offsets.numel() - 1, plan.T
    B = n_bags // T if vbe is None else -1
    feat, cls_tab, n_members = triton_tables(plan, device)
    none = pooling_mode == 2
    C = len(plan.classes) if for_backward else 0
    M = (cls_tab.size(2) - 2) // 2 if C else 0
    D = plan.dims[0] if none else 0
    block_d = _pow2(D if none else max(plan.dims, default=1), _MAX_BLOCK_D)
    if none:
        out = weights.new_empty((L, D), dtype=output_dtype)
    elif vbe is not None and vbe.out is not None:  # upstream's pre-allocated output: kept
        out = vbe.out  # where other lookups wrote
    elif vbe is not None:
        out = weights.new_empty((int(vbe.output_size),), dtype=output_dtype)
    else:
        out = weights.new_empty((B, plan.total_D), dtype=output_dtype)
    n_bag_items = 0 if none else n_bags
    n_index = triton.cdiv(L, _BLOCK_L) if (none or for_backward) else 0
    if none and check:  # NONE's index items check the offsets too: one per BLOCK_L bags
        n_index = max(n_index, triton.cdiv(n_bags, _BLOCK_L))
    n_items = n_bag_items + n_index
    grid = max(min(n_items, GRID_LIMIT), 1)
    state: dict[str, Any] = {}
    bag = t = mat_buf = rows = out  # placeholders for pointers the kernel does not touch
    if for_backward:
        bag = torch.empty(L, dtype=torch.int32, device=device)
        t = torch.empty(L, dtype=torch.int32 if vbe is None else torch.int64, device=device)
        mat_buf = torch.empty((C, M, L), dtype=torch.int64, device=device)
        state = {"bag": bag, "t": t, "mats": list(mat_buf.unbind(0))}
        if vbe is not None:
            rows = state["row_starts"] = torch.empty(n_bags, dtype=torch.int64, device=device)
    flags = torch.empty(grid, dtype=torch.int8, device=device) if check else None
    weighted = indice_weights is not None and not none
    if vbe is None:
        vb = vr = vo = out
        R1, out_size = 1, 0
    else:
        vb, vr, vo = vbe.B_offsets, vbe.B_offsets_rank_per_feature, vbe.output_offsets_feature_rank
        R1, out_size = vr.size(1), int(vbe.output_size)
        vr = vr.contiguous()
    n_blocks = T * R1
    launch("tbe_forward", _tbe_forward_kernel, (grid,),
           weights, indices, offsets, indice_weights if weighted else weights, out, feat,
           cls_tab, n_members, bag, t, mat_buf, out if flags is None else flags, rows, vb, vr, vo,
           n_bag_items, n_items, B, L, T, n_bags, plan.total_D, max(n_bags, 1).bit_length() + 1,
           C, M, 2 * M + 2, R1, n_blocks, max(n_blocks, 1).bit_length() + 1, out_size,
           SEQ_D=D, MEAN=pooling_mode == 1, NONE=none, WEIGHTED=weighted, STATE=for_backward,
           GRAD_ROWS=for_backward and not none and vbe is None, VBE=vbe is not None,
           CHECK=check, BLOCK_L=_BLOCK_L, BLOCK_D=block_d)  # fmt: skip
    return out, state, flags


def forward_state(
    op: str,
    plan: TbePlan,
    weights: torch.Tensor,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    pooling_mode: int,
    indice_weights: torch.Tensor | None,
    output_dtype: torch.dtype,
    for_backward: bool,
    vbe: VbeArgs | None = None,
) -> tuple[torch.Tensor, ForwardState]:
    """:func:`.forward.tbe_forward` on the fused kernel: the output and the state the backward
    reads (empty ``bag`` / ``t`` and no index matrices unless ``for_backward``); the data check
    queued with the tensor program's message.  Launches: 1, + 1 (``all``) with the checks on."""
    check = validation_enabled()
    iw = None if indice_weights is None else indice_weights.contiguous()
    out, st, flags = tbe_forward_triton(
        plan, weights, indices, offsets, pooling_mode, iw, output_dtype, for_backward, check, vbe
    )
    if flags is not None:
        assert_on_device(op, flags.all(), INDEX_CHECK)
    empty = indices.new_empty(0, dtype=torch.int32)
    bag, t, mats = st.get("bag", empty), st.get("t", empty), st.get("mats", [])
    B = (offsets.numel() - 1) // plan.T if vbe is None else -1
    return out, ForwardState(bag=bag, t=t, mats=mats, B=B, row_starts=st.get("row_starts"))
