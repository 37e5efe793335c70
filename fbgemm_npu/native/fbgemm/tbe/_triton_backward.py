"""The TBE backward fused with its optimizer step as one Triton kernel per table class.

Math (as :mod:`.backward` and :mod:`.optimizers`): index ``i`` of a class member contributes
``g_i = s_i * clip(grad_output[row(i), cols(i)])`` to its table row, ``s_i`` its per-sample
weight (1 unweighted) divided by its bag's length for MEAN, ``clip`` the clamp to
``[-max_gradient, max_gradient]`` with gradient clipping; a row hit several times gets the
sum of its ``g_i`` and is updated ONCE, as upstream's exact optimizers do:

* SGD: ``w -= lr g``;  AdaGrad: ``m += g^2; w -= lr g / (sqrt(m) + eps)``;
* rowwise AdaGrad: ``gg = g + wd w`` (L2), ``m += mean(gg^2)``, ``mult = lr / (sqrt(m) + eps)``,
  ``w = w (1 - mult wd) - mult g`` (L2) / ``w (1 - lr wd) - mult g`` (decoupled) /
  ``w - mult g``, then rows with ``||w|| > max_norm > 0`` scaled to ``max_norm``;
* Adam / partial rowwise Adam (second moment per row: ``mean(g^2)``): ``m1 = lerp(m1, g, 1 -
  b1)``, ``m2 = lerp(m2, g^2, 1 - b2)``, ``w = w (1 - lr wd) - lr k m1 / (sqrt(m2) + eps
  sqrt(c2))`` with ``c1 = 1 - b1^iter``, ``c2 = 1 - b2^iter``, ``k = sqrt(c2) / c1``;
* LAMB / partial rowwise LAMB: Adam's moments, ``r = k m1 / (sqrt(m2) + eps sqrt(c2)) + wd w``,
  ``w -= lr (||w|| / ||r||) r``;
* LARS-SGD: ``lr' = lr eta ||w|| / (||g|| + wd ||w||)``, ``m = mom m + lr' (g + wd w)``,
  ``w -= m``.

Design (the issue's option (b), deterministic, no atomics), for every table class at once:

1. ``_combined_keys`` (1 launch): each index's key over all classes, ``base_c + key_c`` where
   ``key_c`` (row 1 of class ``c``'s index matrix: weights row + 1, 0 for non-members) is not
   0, else 0 (indices past ``offsets[-1]``); ``base_c`` the sum of the earlier classes' key
   bounds, so a key names one (class, row);
2. its stable sort (:func:`.backward.sort_keys`: one float32 sort while the keys stay below
   ``2**24``, exact; past it the key is int64 and sorted by two 24-bit float digits);
3. ``_tbe_backward_step`` (1 launch): program ``p`` walks sorted positions ``j = p, p + P,
   ...``; a position whose key differs from its predecessor's (and is not 0) starts a run: the
   program finds the key's class (the last ``base_c`` below it), sums the run's gradient rows
   in sorted -- that is index -- order (a ``while`` over the equal keys that follow, reading each
   index's ``grad_output`` row through the class's index matrix, scaling and clipping it in
   registers), then reads the row and its optimizer states, updates them in fp32 and writes
   them back rounded to their dtypes (fp32 / fp16 / bf16 each).  Each touched row is written by
   exactly one program: no races, no atomics; the sums are the tensor program's, in its order.
   Per-sample weights that require grad get theirs in the same walk: index ``i``'s
   ``<clip(grad row), its row before the update>`` (/ length for MEAN, * its feature's
   ``feature_requires_grad``); the key kernel writes the zeros of indices of no class.

The classes' index matrices are read as one ``[C, m, L]`` buffer: the fused forward writes them
so (a view); the tensor program's separate matrices are stacked first (one launch more with two
classes or more).  Per-class parameters (key base, D, residues, member count, first output
column of each member) sit in a small device table built once per layout (cached in the plan).

Grid: ``min(L, 65535)`` programs (1-D), each looping over its positions (the key kernel: blocks
of 1024 indices, looped likewise); tiles ``[BLOCK_D]`` fp32 (``BLOCK_D`` = next power of two >=
the widest D, at most 2048: a few 8 KB tiles live per program).  Index math: positions int32,
table rows int64 as the index matrices hold them (pointer offsets ``row * D`` can pass 2**31).
Launches per call, whatever the number of classes: 3 (key, sort, step); + 1 (the stack) for
two or more classes of the tensor program's forward; keys past ``2**24``: the radix sort's 9 in
place of the sort's 1.  A row hit ``k`` times is summed by one program in ``k`` steps (upstream's
CUDA kernel splits long runs; a hot row is a serial tail here).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

from fbgemm_npu.native._triton import launch
from fbgemm_npu.native._upload import upload

__all__ = ["MAX_D", "OPT_CODES", "step_triton"]

# optimizer -> the kernel's OPT code (constexpr)
OPT_CODES = {
    "sgd": 0,
    "adagrad": 1,
    "rowwise_adagrad": 2,
    "adam": 3,
    "partial_rowwise_adam": 4,
    "lamb": 5,
    "partial_rowwise_lamb": 6,
    "lars_sgd": 7,
}
MAX_D = 2048
_MAX_PROGRAMS = 65535
_KEY_BLOCK = 1024


@triton.jit
def _grad_row(
    go, go_s0, go_s1, mat, L, i, col0, Tc, d, dm, bag, offsets, iw, max_grad,
    POOLED: tl.constexpr, MEAN: tl.constexpr, WEIGHTED: tl.constexpr, CLIP: tl.constexpr,
):  # fmt: skip
    """Index ``i``'s gradient row ``[BLOCK_D]`` (fp32): ``(scaled, clipped only, its bag's
    length for MEAN else 1)``; ``mat``: its class's index matrix, ``col0``: the class's
    members' first output columns."""
    if POOLED:
        # row 2 of the index matrix: b * T_c + j (sample b, member j of the class)
        r = tl.load(mat + 2 * L + i)
        b = r // Tc
        col = tl.load(col0 + (r - b * Tc))
        base = b * go_s0 + col * go_s1
    else:  # pooling NONE: grad_output's row i is index i's
        base = i.to(tl.int64) * go_s0
    g = tl.load(go + base + d * go_s1, mask=dm, other=0.0).to(tl.float32)
    if CLIP:
        g = tl.minimum(tl.maximum(g, -max_grad), max_grad)
    raw = g
    n = 1.0
    if MEAN:
        bg = tl.load(bag + i)
        n = tl.load(offsets + bg + 1) - tl.load(offsets + bg)
        n = tl.maximum(n, 1).to(tl.float32)
        if WEIGHTED:
            g = g * (tl.load(iw + i).to(tl.float32) / n)
        else:
            g = g * (1.0 / n)
    elif WEIGHTED:
        g = g * tl.load(iw + i).to(tl.float32)
    return g, raw, n


@triton.jit
def _combined_keys(mats, bases, out, iwg, L, C, ML, IW_GRAD: tl.constexpr, BLOCK: tl.constexpr):
    """``out[i] = base_c + mats[c, 1, i]`` for the class ``c`` whose key is not 0, else 0;
    ``iwg[i] = 0`` (the per-sample-weight gradient of indices of no class) with ``IW_GRAD``."""
    for q in range(tl.program_id(0), tl.cdiv(L, BLOCK), tl.num_programs(0)):
        offs = q * BLOCK + tl.arange(0, BLOCK)
        m = offs < L
        acc = tl.zeros([BLOCK], tl.int64)
        for c in range(C):
            k = tl.load(mats + c * ML + L + offs, mask=m, other=0)
            acc = tl.where(k != 0, k + tl.load(bases + c * 8), acc)
        tl.store(out + offs, acc.to(out.dtype.element_ty), mask=m)
        if IW_GRAD:
            tl.store(iwg + offs, tl.zeros([BLOCK], tl.float32), mask=m)


@triton.jit
def _tbe_backward_step(
    mats, keys, perm, L, C, ML, tab, col0s, go, go_s0, go_s1, bag, offsets, iw, max_grad,
    w, s0, s1, lr, eps, wd, b1, b2, k_bias, eps_c2, max_norm, eta, mom, iwg, feat, frg,
    OPT: tl.constexpr, WD_MODE: tl.constexpr, POOLED: tl.constexpr, MEAN: tl.constexpr,
    WEIGHTED: tl.constexpr, CLIP: tl.constexpr, IW_GRAD: tl.constexpr, FRG: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    """``keys``: the combined keys sorted, ``perm`` the sort's permutation; ``tab [C, 8]``
    int64 per class: key base, D, weights residue, state residues, member count, offset of its
    first columns in ``col0s``.  ``IW_GRAD``: ``iwg[i] = <clipped grad row, row before the
    update> / length (MEAN) * frg[feat[i]] (FRG)``, the per-sample-weight gradient."""
    d = tl.arange(0, BLOCK_D)
    for j0 in range(tl.program_id(0), L, tl.num_programs(0)):
        key = tl.load(keys + j0)
        prev_key = tl.load(keys + j0 - 1, mask=j0 > 0, other=-1)
        if (key != 0) & (key != prev_key):
            c = j0 * 0  # the key's class: the last whose base is below the key
            kk = key.to(tl.int64)
            for cc in range(1, C):
                if tl.load(tab + cc * 8) < kk:
                    c = cc
            row = tab + c * 8
            D = tl.load(row + 1)
            dm = d < D
            mat = mats + c * ML
            col0 = col0s + tl.load(row + 6)
            Tc = tl.load(row + 5)
            i0 = tl.load(perm + j0)
            w_off = tl.load(row + 2) + tl.load(mat + i0) * D
            wv = tl.load(w + w_off + d, mask=dm, other=0.0).to(tl.float32)
            # the run of key: sorted positions j0, j0 + 1, ... while the key repeats
            acc = tl.zeros([BLOCK_D], tl.float32)
            i = i0
            j = j0
            kj = key
            while kj == key:
                gs, raw, n = _grad_row(go, go_s0, go_s1, mat, L, i, col0, Tc, d, dm, bag,
                                       offsets, iw, max_grad,
                                       POOLED, MEAN, WEIGHTED, CLIP)  # fmt: skip
                acc += gs
                if IW_GRAD:
                    dot = tl.sum(raw * wv, 0) / n
                    if FRG:
                        dot = dot * tl.load(frg + tl.load(feat + i)).to(tl.float32)
                    tl.store(iwg + i, dot)
                j += 1
                i = tl.load(perm + j, mask=j < L, other=0)
                kj = tl.load(keys + j, mask=j < L, other=-1)
            g = acc
            s0_res = tl.load(row + 3)
            s1_res = tl.load(row + 4)
            if OPT == 0:
                wn = wv - lr * g
            elif OPT == 1:
                r0 = tl.load(mat + 3 * L + i0)  # state 0's row (rowwise: its element)
                p0 = s0 + s0_res + r0 * D + d
                m = tl.load(p0, mask=dm, other=0.0).to(tl.float32) + g * g
                tl.store(p0, m.to(s0.dtype.element_ty), mask=dm)
                wn = wv - lr * g / (tl.sqrt(m) + eps)
            elif OPT == 2:
                r0 = tl.load(mat + 3 * L + i0)
                gg = g
                if WD_MODE == 1:
                    gg = g + wd * wv
                m = tl.load(s0 + r0).to(tl.float32) + tl.sum(gg * gg, 0) / D
                tl.store(s0 + r0, m.to(s0.dtype.element_ty))
                inv = 1.0 / (tl.sqrt(m) + eps)
                if WD_MODE == 1:
                    mult = inv * lr
                    wn = wv * (1.0 - mult * wd) - mult * g
                elif WD_MODE == 2:
                    wn = wv * (1.0 - lr * wd) - lr * g * inv
                else:
                    wn = wv - lr * g * inv
                if max_norm > 0.0:
                    nrm = tl.sqrt(tl.sum(wn * wn, 0))
                    wn = wn * tl.minimum(max_norm / nrm, 1.0)
            elif OPT == 7:
                r0 = tl.load(mat + 3 * L + i0)
                p0 = s0 + s0_res + r0 * D + d
                wnorm = tl.sqrt(tl.sum(wv * wv, 0))
                gnorm = tl.sqrt(tl.sum(g * g, 0))
                adj = lr * eta * wnorm / (gnorm + wd * wnorm)
                m = mom * tl.load(p0, mask=dm, other=0.0).to(tl.float32) + adj * (g + wd * wv)
                tl.store(p0, m.to(s0.dtype.element_ty), mask=dm)
                wn = wv - m
            else:  # Adam / LAMB, full or rowwise second moment
                r0 = tl.load(mat + 3 * L + i0)
                r1 = tl.load(mat + 4 * L + i0)  # state 1's row
                p0 = s0 + s0_res + r0 * D + d
                m1 = tl.load(p0, mask=dm, other=0.0).to(tl.float32)
                m1 = m1 + (1.0 - b1) * (g - m1)
                tl.store(p0, m1.to(s0.dtype.element_ty), mask=dm)
                if (OPT == 4) | (OPT == 6):
                    v = tl.load(s1 + r1).to(tl.float32)
                    v = v + (1.0 - b2) * (tl.sum(g * g, 0) / D - v)
                    tl.store(s1 + r1, v.to(s1.dtype.element_ty))
                    ratio = m1 / (tl.sqrt(v) + eps_c2)
                else:
                    p1 = s1 + s1_res + r1 * D + d
                    m2 = tl.load(p1, mask=dm, other=0.0).to(tl.float32)
                    m2 = m2 + (1.0 - b2) * (g * g - m2)
                    tl.store(p1, m2.to(s1.dtype.element_ty), mask=dm)
                    ratio = m1 / (tl.sqrt(m2) + eps_c2)
                if OPT <= 4:
                    wn = wv * (1.0 - lr * wd) - (lr * k_bias) * ratio
                else:
                    r = k_bias * ratio + wd * wv
                    trust = tl.sqrt(tl.sum(wv * wv, 0)) / tl.sqrt(tl.sum(r * r, 0))
                    wn = wv - lr * trust * r
            tl.store(w + w_off + d, wn.to(w.dtype.element_ty), mask=dm)


def _class_table(plan: Any, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(tab [C, 8] int64, col0s, total key bound)`` of ``plan`` (see the step kernel), built
    from host values on the layout's first backward and cached in the plan (1 upload each)."""
    key = ("triton_backward", device)
    hit = plan.vbe_cache.get(key)
    if hit is not None:
        return hit
    rows, col0s, base = [], [], 0
    for cls in plan.classes:
        res = [*cls.state_residues, 0, 0]
        rows.append([base, cls.D, cls.w_residue, res[0], res[1], cls.n_members, len(col0s), 0])
        col0s.extend(plan.D_offsets[t] for t in cls.members)
        base += cls.key_bound
    out = (upload(rows, torch.int64, device), upload(col0s, torch.int64, device), base)
    plan.vbe_cache[key] = out
    return out


def _stacked(mats: list[torch.Tensor]) -> torch.Tensor:
    """The classes' index matrices as one ``[C, m, L]`` tensor: a view where they are slices
    of one buffer in class order (the fused forward's), else a stack (1 launch)."""
    first = mats[0]
    if len(mats) == 1:
        return first.contiguous()[None]
    m, L = first.shape
    same = all(
        x.is_contiguous()
        and x.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
        and x.storage_offset() == first.storage_offset() + c * m * L
        for c, x in enumerate(mats)
    )
    if same and first.is_contiguous():
        return first.as_strided((len(mats), m, L), (m * L, L, 1), first.storage_offset())
    return torch.stack(mats)


def step_triton(
    call: Any, plan: Any, state: Any, grad_output: torch.Tensor, iw_grad: bool = False
) -> torch.Tensor | None:
    """The backward and optimizer step of every class in place (module docstring): the
    combined keys, their sort, the step kernel; with ``iw_grad`` returns the per-sample-weight
    gradient ``[L]`` fp32 too (written by the same two kernels).  ``call``: the
    :class:`.call.LookupCall` (:func:`.backward.triton_backward` decided it is supported)."""
    from fbgemm_npu.native.fbgemm.tbe.backward import F32_EXACT, sort_keys
    from fbgemm_npu.native.fbgemm.tbe.forward import POOLING_MEAN, POOLING_NONE

    mats = _stacked(state.mats)
    C, m, L = mats.shape
    dev = mats.device
    iwg = torch.empty(L, dtype=torch.float32, device=dev) if iw_grad else None
    if L == 0:
        return iwg
    tab, col0s, bound = _class_table(plan, dev)
    keys = torch.empty(L, dtype=torch.float32 if bound <= F32_EXACT else torch.int64, device=dev)
    grid = (min(triton.cdiv(L, _KEY_BLOCK), _MAX_PROGRAMS),)
    launch("tbe_backward_keys", _combined_keys, grid, mats, tab, keys,
           keys if iwg is None else iwg, L, C, m * L,
           IW_GRAD=iw_grad, BLOCK=_KEY_BLOCK)  # fmt: skip
    keys, perm = sort_keys(keys, bound)
    a = call.step
    hp = a.get
    wd = hp("weight_decay")
    wd_mode = 0
    if call.optimizer == "rowwise_adagrad" and wd != 0.0:
        mode = int(hp("weight_decay_mode"))
        wd_mode = 1 if mode == 1 else (2 if mode in (2, 5) else 0)
    b1, b2, eps = hp("beta1"), hp("beta2"), hp("eps")
    k_bias, eps_c2 = 1.0, eps
    if call.optimizer in ("adam", "partial_rowwise_adam", "lamb", "partial_rowwise_lamb"):
        c1, c2 = 1.0 - b1**a.iter, 1.0 - b2**a.iter
        k_bias, eps_c2 = math.sqrt(c2) / c1, eps * math.sqrt(c2)
    states = [buf for buf, _ in call.states]
    s0 = states[0] if states else call.weights
    s1 = states[1] if len(states) > 1 else s0
    pooled = call.pooling_mode != POOLING_NONE
    go = grad_output
    offsets = call.offsets.contiguous()
    iw = call.indice_weights.contiguous() if call.indice_weights is not None else perm
    frg = call.feature_requires_grad if iw_grad else None
    frg = None if frg is None else frg.reshape(-1).contiguous()
    block_d = triton.next_power_of_2(max(max(cls.D for cls in plan.classes), 1))
    launch(
        "tbe_backward_step",
        _tbe_backward_step,
        (min(L, _MAX_PROGRAMS),),
        mats, keys, perm, L, C, m * L, tab, col0s, go, go.stride(0), go.stride(1), state.bag,
        offsets, iw, float(call.max_gradient), call.weights, s0, s1,
        float(a.lr), eps, wd, b1, b2, k_bias, eps_c2, hp("max_norm"), hp("eta"), hp("momentum"),
        perm if iwg is None else iwg, state.t, perm if frg is None else frg,
        OPT=OPT_CODES[call.optimizer], WD_MODE=wd_mode, POOLED=pooled,
        MEAN=pooled and call.pooling_mode == POOLING_MEAN,
        WEIGHTED=call.indice_weights is not None, CLIP=bool(call.gradient_clipping),
        IW_GRAD=iw_grad, FRG=frg is not None, BLOCK_D=block_d,
    )  # fmt: skip
    return iwg
