"""Host side of the fused Triton HSTU attention: the tile program's :class:`Problem` in 1 launch
forward (``_triton_fwd.py``) and 2 backward (``_triton_bwd.py``), math in ``_attention.py``.

Imported only by ``_attention.attention_forward`` / ``attention_backward`` after
``use_triton(...)`` said yes (it imports triton); ``_attention.triton_supported`` says which
problems these kernels take (the rest runs the tensor program: float64, head dims over 256,
more than 8 key intervals a row, spans of other than 1 or ``N_q`` heads, ``B * N_q`` over
65535, meta / fake tensors).  Served so: every op on the tile program -- ``mxrec::hstu_jagged``
``.equal`` / ``.delta`` and their backwards, ``hstu_dense`` (+ backward), ``hstu_forward_v2`` /
``hstu_backward_v2``, ``hstu_paged``, ``fbgemm::hstu_varlen_fwd_80`` / ``bwd_80``; not
``mxrec::hstu_fuxi`` (its own program beside this one).  Their padded gathers, key intervals and
the gathers back stay tensor programs (the ops' setup: budgets.py ``triton``).

Block sizes: ``_attention.triton_block`` (64 rows for head dims up to 64, 32 above: the live
tiles of one program -- q, k, v, the accumulators, one score tile -- stay within ~64 KB of an
Ascend core's 192 KB unified buffer at D = 128); :data:`BLOCK` forces one (tests: several
blocks per sequence).  Grids: 1-D, ``min(work, 65535)`` programs (Ascend's launch takes no
more: coreDim), each looping over work items ``p, p + grid, ...``, an item being one block of
rows (keys for dk / dv) of one (batch, head): any ``B * N * S`` runs.  Outputs are
allocated with ``torch.empty`` (no launch): every kernel writes every element of its outputs.
"""

from __future__ import annotations

import torch
import triton

from fbgemm_npu.native._triton import interpreting, launch
from fbgemm_npu.native.mxrec.hstu._attention import Problem, triton_block
from fbgemm_npu.native.mxrec.hstu._triton_bwd import hstu_dkdv_kernel, hstu_dq_kernel
from fbgemm_npu.native.mxrec.hstu._triton_fwd import hstu_fwd_kernel

__all__ = ["BLOCK", "backward", "forward"]

BLOCK: int | None = None  # a power of two >= 16 forces BLOCK_M = BLOCK_N (tests)
# programs of a launch at most (Ascend's coreDim limit); each loops over its share of the work
MAX_PROGRAMS = 65535


def _work(blocks: int, groups: int) -> tuple[tuple[int], int, int]:
    """The 1-D grid and the kernel's ``N_BLK`` / ``N_WORK`` for ``blocks`` row blocks of each of
    ``groups`` (batch, head) pairs: work item ``w`` = block ``w % N_BLK`` of group ``w // N_BLK``
    (the blocks of one head next to each other: they share its k / v), program ``p`` takes items
    ``p, p + grid, ...``."""
    work = blocks * groups
    return (min(work, MAX_PROGRAMS),), blocks, work


def _blocks(p: Problem) -> dict[str, int | str]:
    block = BLOCK or triton_block(p)
    return {
        "BLOCK_M": block,
        "BLOCK_N": block,
        "BLOCK_DQK": max(16, triton.next_power_of_2(p.q.size(3))),
        "BLOCK_DV": max(16, triton.next_power_of_2(p.v.size(3))),
        # float32 as the tensor program's: no TF32 on a GPU's tensor cores (ignored elsewhere)
        "PREC": "ieee" if p.q.dtype == torch.float32 else "tf32",
        # the interpreter's tl.dot cannot take bfloat16 (_triton_fwd.hstu_fwd_kernel's note)
        "UP": p.q.dtype == torch.bfloat16 and interpreting(),
    }


def _side(p: Problem) -> tuple[list, list, dict[str, int | bool]]:
    """The spans / bias / mask pointers and their strides (a size-1 batch or head dim of the
    spans broadcasts: stride 0), the constexpr flags."""
    q, sp, bias, mask = p.q, p.spans, p.bias, p.mask
    ptrs, strides = [], []
    if sp is not None:
        t = sp.table
        strides += [t.stride(0) if t.size(0) > 1 else 0, t.stride(1) if t.size(1) > 1 else 0]
        strides += [t.stride(2)]
        ptrs.append(t)
    else:
        strides += [0, 0, 0]
        ptrs.append(q)
    for x in (bias, mask):
        ptrs.append(q if x is None else x)
        strides += [0, 0, 0, 0] if x is None else list(x.stride())
    flags = {
        "NSPAN": 1 if sp is None else sp.table.size(3) // 2,
        "HAS_SPANS": sp is not None,
        "HAS_BIAS": bias is not None,
        "HAS_MASK": mask is not None,
    }
    return ptrs, strides, flags


def _heads(p: Problem) -> tuple[int, int]:
    """``R`` (q heads per kv head) and ``GB`` (q heads per bias head)."""
    nq = p.q.size(2)
    return p.ratio, nq // (p.bias.size(1) if p.bias is not None else nq)


def forward(p: Problem) -> torch.Tensor:
    """Padded output ``[B, S_q, N_q, D_v]`` in q's dtype, contiguous: 1 launch."""
    q, k, v = p.q, p.k, p.v
    b, s_q, nq, dqk = q.shape
    s_k, dv = k.size(1), v.size(3)
    out = torch.empty(b, s_q, nq, dv, dtype=q.dtype, device=q.device)
    ptrs, strides, flags = _side(p)
    meta = _blocks(p)
    r, gb = _heads(p)
    grid, n_blk, n_work = _work(triton.cdiv(s_q, meta["BLOCK_M"]), b * nq)
    launch(
        "hstu_attention_fwd", hstu_fwd_kernel, grid, q, k, v, out, *ptrs,
        *q.stride(), *k.stride(), *v.stride(), *out.stride()[:3], *strides,
        nq, r, gb, s_q, s_k, dqk, dv, float(p.alpha), float(p.scale), n_blk, n_work,
        **flags, **meta,
    )  # fmt: skip
    return out


def backward(
    p: Problem, grad: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Padded ``(dq, dk, dv, dbias)`` as ``_attention.attention_backward`` gives them (dq / dk /
    dv contiguous in q's dtype, dbias of the bias's shape and dtype, contiguous, or None): 2
    launches."""
    q, k, v = p.q, p.k, p.v
    b, s_q, nq, dqk = q.shape
    s_k, nk, dv = k.size(1), k.size(2), v.size(3)
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dvv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    ptrs, strides, flags = _side(p)
    meta = _blocks(p)
    r, gb = _heads(p)
    tensors = (*q.stride(), *k.stride(), *v.stride(), *grad.stride())
    sizes = (s_q, s_k, dqk, dv)
    grid, n_blk, n_work = _work(triton.cdiv(s_k, meta["BLOCK_N"]), b * nk)
    launch(
        "hstu_attention_bwd_dkdv", hstu_dkdv_kernel, grid, q, k, v, grad, dk, dvv, *ptrs,
        *tensors, *dk.stride()[:3], *dvv.stride()[:3], *strides,
        nk, r, gb, *sizes, float(p.alpha), float(p.scale), n_blk, n_work, **flags, **meta,
    )  # fmt: skip
    db = scratch = None
    ne, db_r, db_c = nq, 0, 0
    if p.bias is not None and p.bias_grad:
        db = torch.empty(p.bias.shape, dtype=p.bias.dtype, device=q.device)
        ne, db_r, db_c = p.bias.size(1), p.bias.size(2), p.bias.size(3)
        if ne != nq:  # the float32 sum over the q heads sharing a bias head
            scratch = torch.empty(p.bias.shape, dtype=torch.float32, device=q.device)
    rows = max(s_q, db_r)
    db_strides = db.stride()[:3] if db is not None else (0, 0, 0)
    grid, n_blk, n_work = _work(triton.cdiv(rows, meta["BLOCK_M"]), b * ne)
    launch(
        "hstu_attention_bwd_dq", hstu_dq_kernel, grid,
        q, k, v, grad, dq, q if db is None else db, q if scratch is None else scratch, *ptrs,
        *tensors, *dq.stride()[:3], *strides, *db_strides,
        ne, nq // ne, r, gb, *sizes, db_r, db_c, float(p.alpha), float(p.scale), n_blk, n_work,
        **flags, HAS_DB=db is not None, SUM_HEADS=scratch is not None, **meta,
    )  # fmt: skip
    return dq, dk, dvv, db
