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

Design (the issue's option (b), deterministic, no atomics): the tensor program's stable sort of
the de-duplication keys (row 1 of the class's index matrix: weights row + 1, 0 for indices of
other classes; ``backward.sort_keys``: a float32 cast and a sort below ``2**24`` rows) stays,
and ONE kernel does the rest: program ``p`` walks sorted positions ``j = p, p + P, ...``; a
position whose key differs from its predecessor's (and is not 0) starts a run: the program
sums the run's gradient rows in sorted -- that is index -- order (a ``while`` over the equal
keys that follow, reading each index's ``grad_output`` row through the index matrix, scaling
and clipping it in registers), then reads the row and its optimizer states, updates them in
fp32 and writes them back rounded to their dtypes (fp32 / fp16 / bf16 each).  Each touched row
is written by exactly one program, so there are no races and no atomics; the sums are the
tensor program's, in its order.

Grid: ``min(L, 65535)`` programs (1-D), each looping over its positions; tiles ``[BLOCK_D]``
fp32 (``BLOCK_D`` = next power of two >= D, at most 2048: a few 8 KB tiles live per program).
Index math: positions int32, table rows int64 as the index matrix holds them (pointer offsets
``row * D`` can pass 2**31).  Launches per class: the key cast, the sort (:func:`sort_keys`:
2; past ``2**24`` rows its radix passes) and this kernel: 3.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

from fbgemm_npu.native._triton import launch

__all__ = ["OPT_CODES", "MAX_D", "step_class_triton"]

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


@triton.jit
def _grad_row(
    go, go_s0, go_s1, mat, L, i, cols, Tc, D, d, dm, bag, offsets, iw, max_grad,
    POOLED: tl.constexpr, MEAN: tl.constexpr, WEIGHTED: tl.constexpr, CLIP: tl.constexpr,
):  # fmt: skip
    """Index ``i``'s scaled, clipped gradient row ``[BLOCK_D]`` (fp32)."""
    if POOLED:
        # row 2 of the index matrix: b * T_c + j (sample b, member j of the class)
        r = tl.load(mat + 2 * L + i)
        b = r // Tc
        col = tl.load(cols + (r - b * Tc) * D)  # the member's first output column
        base = b * go_s0 + col * go_s1
    else:  # pooling NONE: grad_output's row i is index i's
        base = i.to(tl.int64) * go_s0
    g = tl.load(go + base + d * go_s1, mask=dm, other=0.0).to(tl.float32)
    if CLIP:
        g = tl.minimum(tl.maximum(g, -max_grad), max_grad)
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
    return g


@triton.jit
def _tbe_backward_step(
    mat, perm, L, go, go_s0, go_s1, cols, Tc, bag, offsets, iw, max_grad,
    w, w_res, s0, s0_res, s1, s1_res, D,
    lr, eps, wd, b1, b2, k_bias, eps_c2, max_norm, eta, mom,
    OPT: tl.constexpr, WD_MODE: tl.constexpr, POOLED: tl.constexpr, MEAN: tl.constexpr,
    WEIGHTED: tl.constexpr, CLIP: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    d = tl.arange(0, BLOCK_D)
    dm = d < D
    for j0 in range(pid, L, nprog):
        i0 = tl.load(perm + j0)
        key = tl.load(mat + L + i0)
        prev_i = tl.load(perm + j0 - 1, mask=j0 > 0, other=0)
        prev_key = tl.load(mat + L + prev_i, mask=j0 > 0, other=-1)
        if (key != 0) & (key != prev_key):
            # the run of key: sorted positions j0, j0 + 1, ... while the key repeats
            acc = tl.zeros([BLOCK_D], tl.float32)
            j = j0
            kj = key
            i = i0
            while kj == key:
                acc += _grad_row(go, go_s0, go_s1, mat, L, i, cols, Tc, D, d, dm, bag, offsets,
                                 iw, max_grad, POOLED, MEAN, WEIGHTED, CLIP)  # fmt: skip
                j += 1
                i = tl.load(perm + j, mask=j < L, other=0)
                kj = tl.load(mat + L + i, mask=j < L, other=-1)
            g = acc
            w_off = w_res + tl.load(mat + i0) * D
            wv = tl.load(w + w_off + d, mask=dm, other=0.0).to(tl.float32)
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


def step_class_triton(
    call: Any, cls: Any, mat: torch.Tensor, state: Any, grad_output: torch.Tensor
) -> None:
    """One table class's backward and optimizer step in place (module docstring): the key
    sort, then one kernel.  ``call``: the :class:`.call.LookupCall` (its ``supported`` test is
    :func:`.backward.triton_backward_supported`)."""
    from fbgemm_npu.native.fbgemm.tbe.backward import sort_keys
    from fbgemm_npu.native.fbgemm.tbe.forward import POOLING_MEAN, POOLING_NONE

    L = mat.size(1)
    if L == 0:
        return
    mat = mat.contiguous()
    perm = sort_keys(mat[1], cls.key_bound)[1]
    a = call.step
    hp = a.get
    wd = hp("weight_decay")
    mode = int(hp("weight_decay_mode"))
    wd_mode = 0
    if call.optimizer == "rowwise_adagrad" and wd != 0.0:
        wd_mode = 1 if mode == 1 else (2 if mode in (2, 5) else 0)
    b1, b2, eps = hp("beta1"), hp("beta2"), hp("eps")
    k_bias, eps_c2 = 1.0, eps
    if call.optimizer in ("adam", "partial_rowwise_adam", "lamb", "partial_rowwise_lamb"):
        c1, c2 = 1.0 - b1**a.iter, 1.0 - b2**a.iter
        k_bias, eps_c2 = math.sqrt(c2) / c1, eps * math.sqrt(c2)
    states = [buf for buf, _ in call.states]
    s0 = states[0] if states else call.weights
    s1 = states[1] if len(states) > 1 else s0
    res = list(cls.state_residues) + [0, 0]
    pooled = call.pooling_mode != POOLING_NONE
    go = grad_output
    offsets = call.offsets.contiguous()
    iw = call.indice_weights.contiguous() if call.indice_weights is not None else perm
    block_d = triton.next_power_of_2(max(cls.D, 1))
    launch(
        "tbe_backward_step",
        _tbe_backward_step,
        (min(L, _MAX_PROGRAMS),),
        mat, perm, L, go, go.stride(0), go.stride(1), cls.cols, cls.n_members, state.bag,
        offsets, iw, float(call.max_gradient),
        call.weights, cls.w_residue, s0, res[0], s1, res[1], cls.D,
        float(a.lr), eps, wd, b1, b2, k_bias, eps_c2, hp("max_norm"), hp("eta"), hp("momentum"),
        OPT=OPT_CODES[call.optimizer], WD_MODE=wd_mode, POOLED=pooled,
        MEAN=pooled and call.pooling_mode == POOLING_MEAN,
        WEIGHTED=call.indice_weights is not None, CLIP=bool(call.gradient_clipping),
        BLOCK_D=block_d,
    )  # fmt: skip
