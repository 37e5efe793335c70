"""The HSTU attention tile program on a padded layout, shared by every HSTU op and interface.

Inputs are padded ``q [B, S_q, N_q, D_qk]``, ``k [B, S_k, N_k, D_qk]``, ``v [B, S_k, N_k, D_v]``
(rows past a sequence's length are zero), the key intervals of the call's mask
(:mod:`._spans`), an optional multiplicative mask and an optional bias.  For query rows
``r0:r1`` of every batch and head at once (a *tile*), with ``g = h // R`` (``R = N_q / N_k``,
GQA), bias head ``h // (N_q / N_b)`` and ``s`` the silu scale::

    qkb[b, h, i, j] = alpha * (q[b, i, h] . k[b, j, g] + bias[b, h', i, j])      (float32)
    P[b, h, i, j]   = silu(qkb) * s * V[b, h, i, j] * mask[b, h, i, j]            (q's dtype)
    out[b, i, h]    = sum_j P[b, h, i, j] v[b, j, g]

``V`` = the spans' visibility.  Backward (recsdk-ops.md 2.5), per tile, with
``dS = (dO . v) * s * V * mask * silu'(qkb) * alpha``::

    dv[b, j, g] += sum_{h in g, i} P dO       dk[b, j, g] += sum_{h in g, i} dS q
    dq[b, i, h]  = sum_j dS k[b, j, g]        dbias[b, h', i, j] = sum_{h -> h'} dS

How the launches stay few (docs/hardware.md: about 12 us each on a 910B):

* the layout ``[B, N_k, S, R, D]`` (the ``R`` query heads of a kv head next to each other in a
  row) makes a tile of q rows one strided ``bmm`` operand with no copy, against ``k^T`` and
  ``v`` transposed once per call; alpha is folded into that one copy of q (and of k for dq);
* invisible scores are overwritten with ``-1e4`` before the silu: ``silu(-1e4)`` and its
  derivative are exactly 0 in float32, so one ``masked_fill_`` masks the forward, ``P``, and
  ``dS`` at once (and an ``inf`` score outside the mask never turns into a NaN);
* the derivative is ``aten::silu_backward`` (one kernel), float32 scores ``scale`` folded into
  ``v`` (forward) and into ``dO`` (backward), and float32 ``dk`` / ``dv`` accumulate with
  ``baddbmm_``.

Nothing of size ``[B, N, S, S]`` is ever materialised (besides the bias gradient the contract
returns): a tile's scores are ``[B, N_q, t, S_k]`` with ``t`` from :func:`tile_rows`, so the
launches of a call are a fixed setup plus a fixed count per tile, for any ``B`` and ``N``.
dtypes float32, float16, bfloat16: matmuls in the input dtype, scores in float32, dk / dv
accumulated in float32.

Fused Triton kernels (``_triton_attention.py``: 1 launch forward, 2 backward, online over key
blocks, no score tile in memory) serve every op built on this program where
``native/_triton.use_triton`` picks them and :func:`triton_supported` holds; the tensor program
stays the reference and the fallback.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native._triton import use_triton
from fbgemm_npu.native.mxrec.hstu._spans import Spans

__all__ = [
    "TILE_ELEMENTS",
    "Problem",
    "attention_backward",
    "attention_forward",
    "invisible",
    "tile_rows",
    "triton_block",
    "triton_supported",
]

# float32 elements of one tile's scores: 4 Mi (16 MiB); a module attribute, so tests force tiles
TILE_ELEMENTS = 1 << 22
# the score of an invisible key: silu and silu' of it are 0 in float32 (sigmoid underflows)
_HIDDEN = -1.0e4


def tile_rows(batch: int, heads: int, s_max: int, s_keys: int | None = None) -> int:
    """Query rows per tile: the most with ``batch * heads * rows * s_keys <= TILE_ELEMENTS``
    (``s_keys``: the key rows, ``s_max`` unless given), at least 1 and at most ``s_max``.  Host
    arithmetic on sizes only."""
    per_row = max(1, batch * heads * (s_max if s_keys is None else s_keys))
    return max(1, min(s_max, TILE_ELEMENTS // per_row))


@dataclass
class Problem:
    """One call's padded operands and mask (see the module docstring)."""

    q: torch.Tensor  # [B, S_q, N_q, D_qk]
    k: torch.Tensor  # [B, S_k, N_k, D_qk]
    v: torch.Tensor  # [B, S_k, N_k, D_v]
    spans: Spans | None  # visible key intervals per query row; None: every key visible
    mask: torch.Tensor | None = None  # [B, N_q, >= S_q, >= S_k] multiplicative
    bias: torch.Tensor | None = None  # [B, N_b, >= S_q, >= S_k], N_q % N_b == 0
    scale: float = 1.0
    alpha: float = 1.0
    bias_grad: bool = True  # the backward returns dbias (False: FBGEMM's has_drab=False)
    op: str = "mxrec::hstu attention"  # named by the kernel selection's errors

    @property
    def ratio(self) -> int:
        return self.q.size(2) // self.k.size(2)

    def tiles(self) -> list[tuple[int, int]]:
        b, s, n = self.q.size(0), self.q.size(1), self.q.size(2)
        t = tile_rows(b, n, s, self.k.size(1))
        return [(r0, min(s, r0 + t)) for r0 in range(0, s, t)]


_TRITON_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def triton_block(p: Problem) -> int:
    """The Triton kernels' ``BLOCK_M = BLOCK_N``: 64 for head dims up to 64, 32 above (the live
    tiles of a program within ~64 KB of an Ascend core's 192 KB buffer at D = 128), at most the
    padded sequence rounded up to a power of two, at least 16 (``tl.dot``'s smallest tile)."""
    s = max(p.q.size(1), p.k.size(1), 1)
    return min(
        64 if max(p.q.size(3), p.v.size(3)) <= 64 else 32, max(16, 1 << (s - 1).bit_length())
    )


def triton_supported(p: Problem, grad: torch.Tensor | None = None) -> bool:
    """Whether the fused Triton kernels take ``p``: q / k / v (and ``grad``) of one dtype among
    float32 / float16 / bfloat16 (not float64: Ascend's cube has none), head dims 1..256 (one
    tile of a head row), bias / mask in those dtypes, spans of 1 or ``N_q`` heads and at most 8
    intervals (unrolled in the kernel), real tensors (not meta / fake).  Host checks of sizes
    only."""
    q, k, v = p.q, p.k, p.v
    dts = {t.dtype for t in (q, k, v, *(() if grad is None else (grad,)))}
    if len(dts) != 1 or q.dtype not in _TRITON_DTYPES or q.device.type == "meta":
        return False
    if not (0 < q.size(3) <= 256 and 0 < v.size(3) <= 256):
        return False
    if any(x is not None and x.dtype not in _TRITON_DTYPES for x in (p.bias, p.mask)):
        return False
    if isinstance(q, torch._subclasses.FakeTensor):
        return False
    sp = p.spans
    return sp is None or (sp.table.size(1) in (1, q.size(2)) and sp.table.size(3) <= 16)


def invisible(p: Problem, r0: int, r1: int) -> torch.Tensor | None:
    """``[B | 1, H_s, r1 - r0, S_k]`` bool, True where key ``j`` is not visible to query row
    ``i`` (None: all visible).  Launches: 1 per interval starting at key 0, 3 per other one,
    and 1 per interval after the first."""
    if p.spans is None:
        return None
    s_k = p.k.size(1)
    j = arange_cached(s_k, p.q.device, torch.int32)
    table = p.spans.table[:, :, r0:r1].unsqueeze(-2)  # [B, H, t, 1, 2K]
    out = None
    for n, lo_zero in enumerate(p.spans.lo_zero):
        hide = j >= table[..., 2 * n + 1]
        if not lo_zero:
            hide = hide | (j < table[..., 2 * n])
        out = hide if out is None else out & hide
    return out


def _rows(x: torch.Tensor, p: Problem) -> torch.Tensor:
    """``[B, N_q, t, S]``-shaped per-head tensor as ``[B, N_k, t, R, S]`` (a view)."""
    b, n, t, s = x.shape
    if n == 1:
        return x.view(b, 1, t, 1, s)
    return x.view(b, p.k.size(2), p.ratio, t, s).permute(0, 1, 3, 2, 4)


def _add_bias(qk: torch.Tensor, p: Problem, r0: int, r1: int) -> None:
    """``qk [B, N_k, t, R, S_k] += alpha * bias`` of the tile: one ``add_`` on views where the bias
    heads line up with the groups (``N_b`` 1 or ``N_q``, a bias head per ``R / n`` q heads of a
    group, or one per ``n`` whole groups), else after 1 ``index_select`` of the heads."""
    bias = p.bias[:, :, r0:r1, : p.k.size(1)]
    b, nb, t, s = bias.shape
    nq, nk, r = p.q.size(2), p.k.size(2), p.ratio
    g = nq // nb  # q heads per bias head
    if nb in (1, nq):
        qk.add_(_rows(bias, p), alpha=p.alpha)
    elif r % g == 0:  # bias head (kv group, r // g)
        src = bias.view(b, nk, r // g, t, s).permute(0, 1, 3, 2, 4).unsqueeze(4)
        qk.view(b, nk, t, r // g, g, s).add_(src, alpha=p.alpha)
    elif g % r == 0:  # bias head (kv group // (g / R))
        qk.view(b, nb, g // r, t, r, s).add_(bias.view(b, nb, 1, t, 1, s), alpha=p.alpha)
    else:
        heads = torch.div(arange_cached(nq, bias.device, torch.int32), g, rounding_mode="floor")
        qk.add_(_rows(bias.index_select(1, heads), p), alpha=p.alpha)


def _scores(
    p: Problem, qt: torch.Tensor, kt: torch.Tensor, r0: int, r1: int, zero: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``qkb [B, N_k, t, R, S_k]`` float32 of a tile with invisible entries at ``-1e4``, and the
    tile's custom mask with its invisible entries 0 (None without one: whatever a user's mask
    holds outside the sequences, a NaN there never meets the zero scores).  Launches: the
    matmul, the float32 cast (not for float32), the bias add, the mask (see :func:`invisible`)
    and its fill, the custom mask's ``where`` (``zero``: a 0-d 0 of its dtype, made once a
    call)."""
    b, nk, t, r, s = p.q.size(0), p.k.size(2), r1 - r0, p.ratio, p.k.size(1)
    qk = torch.matmul(qt.view(b, nk, t * r, -1), kt).view(b, nk, t, r, s)
    if qk.dtype != torch.float32:
        qk = qk.float()
    if p.bias is not None:
        _add_bias(qk, p, r0, r1)
    hide = invisible(p, r0, r1)
    if hide is not None:
        qk.masked_fill_(_rows(hide, p), _HIDDEN)
    if p.mask is None:
        return qk, None
    m = _rows(p.mask[:, :, r0:r1, :s], p)
    return qk, (m if hide is None else torch.where(_rows(hide, p), zero, m))


def _grouped(x: torch.Tensor, p: Problem, alpha: float = 1.0) -> torch.Tensor:
    """``[B, S, N_q, D]`` -> ``[B, N_k, S, R, D]`` contiguous, times ``alpha``: 1 launch."""
    b, s, n, d = x.shape
    src = x.view(b, s, p.k.size(2), p.ratio, d).permute(0, 2, 1, 3, 4)
    out = x.new_empty(b, p.k.size(2), s, p.ratio, d)
    return torch.mul(src, alpha, out=out) if alpha != 1.0 else out.copy_(src)


def _heads_major(x: torch.Tensor, factor: float = 1.0) -> torch.Tensor:
    """``[B, S, N, D]`` -> ``[B, N, S, D]`` contiguous, times ``factor``: 1 launch."""
    src = x.permute(0, 2, 1, 3)
    out = x.new_empty(src.shape)
    return torch.mul(src, factor, out=out) if factor != 1.0 else out.copy_(src)


class _TileMajor:
    """A padded output written tile by tile: tile ``n``'s rows are one contiguous block
    ``[B, N_k, t, R, D]`` of ``[n_tiles, ...]``, so its ``bmm`` writes there itself (``out=``, no
    copy); only a last, shorter tile is copied.  :meth:`result` is ``[B, S, N_q, D]``
    contiguous: 1 copy (2 when the last tile is shorter)."""

    def __init__(self, p: Problem, d: int, tiles: list[tuple[int, int]]) -> None:
        self.p, self.tiles = p, tiles
        self.t = tiles[0][1] - tiles[0][0] if tiles else 1
        b, nk, r = p.q.size(0), p.k.size(2), p.ratio
        self.buf = p.q.new_empty(len(tiles), b, nk, self.t, r, d)

    def write(self, n: int, a: torch.Tensor, b: torch.Tensor) -> None:
        """Tile ``n`` = ``bmm(a, b)``, ``a [B * N_k, t * R, K]``, ``b [B * N_k, K, D]``."""
        r0, r1 = self.tiles[n]
        block = self.buf[n]
        if r1 - r0 == self.t:
            torch.bmm(a, b, out=block.view(a.size(0), a.size(1), -1))
        else:
            block[:, :, : r1 - r0].copy_(
                torch.bmm(a, b).view(*block.shape[:2], r1 - r0, *block.shape[3:])
            )

    def result(self) -> torch.Tensor:
        nb, b, nk, t, r, d = self.buf.shape
        s = self.p.q.size(1)
        out = self.buf.new_empty(b, s, nk, r, d)
        full = s // t
        if full:
            out[:, : full * t].view(b, full, t, nk, r, d).copy_(
                self.buf[:full].permute(1, 0, 3, 2, 4, 5)
            )
        if full < nb:
            out[:, full * t :].copy_(self.buf[full, :, :, : s - full * t].permute(0, 2, 1, 3, 4))
        return out.view(b, s, nk * r, d)


def attention_forward(p: Problem) -> torch.Tensor:
    """Padded output ``[B, S_q, N_q, D_v]`` in q's dtype (rows past a length are 0), contiguous.
    Launches: 4 (5 with a custom mask or a shorter last tile) + 5 per tile (float32, causal) up
    to 12 (half precision, bias, context and targets): :meth:`Problem.tiles`, whatever ``B``
    and ``N``; the Triton path 1."""
    if use_triton(p.op, p.q.device, triton_supported(p)):
        from fbgemm_npu.native.mxrec.hstu._triton_attention import forward

        return forward(p)
    b, s, nk, dt = p.q.size(0), p.k.size(1), p.k.size(2), p.q.dtype
    fold = dt == torch.float32  # the scale rides on v: the same rounding as on the scores
    qg = _grouped(p.q, p, p.alpha)
    kt = p.k.permute(0, 2, 3, 1).contiguous()
    vh = _heads_major(p.v, p.scale if fold else 1.0).view(b * nk, s, -1)
    tiles = p.tiles()
    out = _TileMajor(p, p.v.size(3), tiles)
    zero = None if p.mask is None else p.mask.new_zeros(())
    for n, (r0, r1) in enumerate(tiles):
        qkb, m = _scores(p, qg[:, :, r0:r1], kt, r0, r1, zero)
        score = torch.nn.functional.silu(qkb, inplace=True)
        if m is not None:
            score.mul_(m)
        if not fold:
            score = torch.mul(score, p.scale, out=torch.empty_like(score, dtype=dt))
        out.write(n, score.view(b * nk, -1, s), vh)
    return out.result()


def attention_backward(
    p: Problem, grad: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Padded ``(dq, dk, dv, dbias)`` for the padded output gradient ``grad [B, S_q, N_q, D_v]``:
    dq / dk / dv in q's dtype and padded shapes, dbias ``[B, N_b, S_q, S_k]`` in the bias's
    dtype (None without a bias; 0 outside the visible entries).  Launches: 8 (+2 with a bias)
    + 10 per tile (float32, causal) up to 20; the Triton path 2."""
    if use_triton(p.op, p.q.device, triton_supported(p, grad)):
        from fbgemm_npu.native.mxrec.hstu._triton_attention import backward

        return backward(p, grad)
    b, s, nk, r, dt = p.q.size(0), p.k.size(1), p.k.size(2), p.ratio, p.q.dtype
    f32 = dt == torch.float32
    qg = _grouped(p.q, p, p.alpha)
    gg = _grouped(grad, p, p.scale)  # dO * s: its products with v and with P both need s
    kt = p.k.permute(0, 2, 3, 1).contiguous()
    ka = _heads_major(p.k, p.alpha)  # dq = dS @ (alpha k)
    vt = p.v.permute(0, 2, 3, 1).contiguous()
    tiles = p.tiles()
    dq = _TileMajor(p, p.q.size(3), tiles)
    zero = None if p.mask is None else p.mask.new_zeros(())
    dk = torch.zeros(b, nk, s, p.k.size(3), dtype=torch.float32, device=p.q.device)
    dv = torch.zeros(b, nk, s, p.v.size(3), dtype=torch.float32, device=p.q.device)
    db = None
    if p.bias is not None and p.bias_grad:
        db = torch.zeros(p.bias.shape, dtype=torch.float32, device=p.q.device)
    for n, (r0, r1) in enumerate(tiles):
        t = r1 - r0
        qt, gt = (
            qg[:, :, r0:r1].reshape(b * nk, t * r, -1),
            gg[:, :, r0:r1].reshape(b * nk, t * r, -1),
        )
        qkb, m = _scores(p, qg[:, :, r0:r1], kt, r0, r1, zero)
        dp = torch.matmul(gt, vt.view(b * nk, -1, s)).view(qkb.shape)
        if not f32:
            dp = dp.float()
        ds = torch.ops.aten.silu_backward(dp if m is None else dp * m, qkb)
        del dp  # three score-sized buffers at most: qkb becomes the silu in place
        score = torch.nn.functional.silu(qkb, inplace=True)
        if m is not None:
            score.mul_(m)
        if db is not None:
            _add_bias_grad(db, ds, p, r0, r1)
        score, ds = score.view(b * nk, t * r, s), ds.view(b * nk, t * r, s)
        if f32:
            dv.view(b * nk, s, -1).baddbmm_(score.transpose(1, 2), gt)
            dk.view(b * nk, s, -1).baddbmm_(ds.transpose(1, 2), qt)
        else:
            score, ds = score.to(dt), ds.to(dt)
            dv.view(b * nk, s, -1).add_(torch.bmm(score.transpose(1, 2), gt))
            dk.view(b * nk, s, -1).add_(torch.bmm(ds.transpose(1, 2), qt))
        dq.write(n, ds, ka.view(b * nk, s, -1))
    if db is not None:
        db = db.mul_(p.alpha).to(p.bias.dtype) if p.alpha != 1.0 else db.to(p.bias.dtype)
    dk, dv = dk.to(dt).permute(0, 2, 1, 3), dv.to(dt).permute(0, 2, 1, 3)
    return dq.result(), dk, dv, db


def _add_bias_grad(db: torch.Tensor, ds: torch.Tensor, p: Problem, r0: int, r1: int) -> None:
    """``db[:, :, r0:r1] = dS`` summed over the q heads of each bias head: 1 launch where each
    q head has its own, 2 where a bias head's q heads line up with the groups, else 3."""
    b, nk, t, r, s = ds.shape
    nb, nq = db.size(1), p.q.size(2)
    g = nq // nb
    rows = db[:, :, r0:r1, :s]
    if nb == nq:
        rows.view(b, nk, r, t, s).copy_(ds.permute(0, 1, 3, 2, 4))
    elif nb == 1:
        rows.copy_(ds.sum((1, 3)).unsqueeze(1))
    elif r % g == 0:
        part = ds.view(b, nk, t, r // g, g, s).sum(4)  # [B, N_k, t, R / g, S]
        rows.view(b, nk, r // g, t, s).copy_(part.permute(0, 1, 3, 2, 4))
    elif g % r == 0:
        rows.copy_(ds.view(b, nb, g // r, t, r, s).sum((2, 4)))
    else:
        per_head = ds.permute(0, 1, 3, 2, 4).reshape(b, nb, g, t, s)
        rows.copy_(per_head.sum(2))
