"""Rec SDK's own FuXi goldens, transcribed (``cust_op/test/hstu_dense_forward_fuxi/torch/
test_hstu_forward_jagged_fuxi.py`` ``gloden_op_exec`` and ``cust_op/test/hstu_dense_backward_fuxi/
torch/test_hstu_dense_backward_fuxi.py`` ``golden_op_exec``): the same math as ``reference.py``
but computed the way Rec SDK's tests compute it, in the input dtype -- matmuls in q's dtype, the
silu, scale and mask in float32, scores and masked biases rounded to q's dtype before ``@ v``.

Rec SDK's tolerances (recsdk-ops.md section 3) are stated against these goldens, as
*fraction-allclose*: the fraction of elements with ``|ours - golden| > atol`` must stay below
``ratio`` (``cust_op/test/common/utils.py`` ``allclose``), with ``atol = ratio`` = 1e-4 (float32),
1e-3 (float16), 5e-3 (bfloat16): :data:`RECSDK_TOL`, :func:`fraction_close`.  The float64
reference stays the oracle of the exact math; these measure parity with Rec SDK's numbers.
Padded ``[B, S, N, D]`` tensors, one batched matmul (vectorised: a test golden, not a kernel).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812

__all__ = ["RECSDK_TOL", "fraction_close", "fuxi_backward_golden", "fuxi_golden"]

Tensor = torch.Tensor
RECSDK_TOL = {torch.float32: 1e-4, torch.float16: 1e-3, torch.bfloat16: 5e-3}


def fraction_close(a: Tensor, b: Tensor, atol: float, ratio: float) -> tuple[bool, float]:
    """Rec SDK's ``allclose``: ``(fraction of |a - b| > atol) < ratio``, and that fraction."""
    assert a.shape == b.shape, (a.shape, b.shape)
    frac = ((a.double().cpu() - b.double().cpu()).abs() > atol).double().mean().item()
    return frac < ratio, frac


def _dense(x: Tensor, off: list[int], s: int) -> Tensor:
    out = x.new_zeros(len(off) - 1, s, *x.shape[1:])
    for b in range(len(off) - 1):
        out[b, : off[b + 1] - off[b]] = x[off[b] : off[b + 1]]
    return out


def _jagged(x: Tensor, off: list[int]) -> Tensor:
    return torch.cat([x[b, : off[b + 1] - off[b]] for b in range(len(off) - 1)])


def _mask(mask: Tensor | None, mask_type: int, b: int, n: int, s: int) -> Tensor | None:
    """float32 ``[B, N, S, S]``: the tril tensor Rec SDK's tests build for type 0, the custom
    one for 3, None for 2."""
    if mask_type == 0:
        return torch.ones(b, n, s, s).tril()
    return None if mask_type == 2 else mask.float()  # type: ignore[union-attr]


def fuxi_golden(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    ts: Tensor | None,
    pos: Tensor | None,
    mask: Tensor | None,
    mask_type: int,
    s: int,
    silu_scale: float,
    off: list[int],
) -> Tensor:
    """Rec SDK's forward golden: jagged ``[T, C * N * D]`` in q's dtype."""
    dt, n = q.dtype, q.size(1)
    qd, kd, vd = (_dense(x, off, s) for x in (q, k, v))
    b = qd.size(0)
    m = _mask(mask, mask_type, b, n, s)
    attn = torch.matmul(qd.permute(0, 2, 1, 3), kd.permute(0, 2, 3, 1)).float()
    attn = F.silu(attn) * (1 / s if silu_scale == 0 else silu_scale)
    if m is not None:
        attn = attn * m
    vh = vd.permute(0, 2, 1, 3)
    parts = [torch.matmul(attn.to(dt), vh)]
    if ts is not None and pos is not None:
        for bias in (ts.unsqueeze(1).repeat(1, n, 1, 1), pos.unsqueeze(0).repeat(b, n, 1, 1)):
            bias = bias.float() if m is None else bias.float() * m
            parts.append(torch.matmul(bias.to(dt), vh))
    flat = [_jagged(p.permute(0, 2, 1, 3), off).reshape(q.size(0), -1) for p in parts]
    return torch.cat(flat, -1).to(dt)


def fuxi_backward_golden(
    grad: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    pos: Tensor | None,
    ts: Tensor | None,
    mask_type: int,
    s: int,
    silu_scale: float,
    off: list[int],
) -> tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor | None]:
    """Rec SDK's backward golden for jagged ``grad [T, N, D]`` (``[T, N, 3D]`` with biases):
    ``(dq, dk, dv, dpos [1, S, S], dts [B, S, S])`` in q's dtype (bias grads None without)."""
    dt, n, d = q.dtype, q.size(1), q.size(2)
    bias = pos is not None
    g_s, g_ts, g_pos = grad.split(d, dim=2) if bias else (grad, None, None)
    gd, qd, kd, vd = (_dense(x, off, s) for x in (g_s, q, k, v))
    b = qd.size(0)
    m = _mask(mask, mask_type, b, n, s)
    gh, qh, kh, vh = (x.permute(0, 2, 1, 3) for x in (gd, qd, kd, vd))
    qk = torch.matmul(qh, kh.transpose(2, 3)).float()
    gv = torch.matmul(gh, vh.transpose(2, 3)).float()
    scale = 1 / s if silu_scale == 0.0 else silu_scale
    mm = 1.0 if m is None else m
    score = (F.silu(qk) * scale * mm).to(dt)
    dv = torch.matmul(score.transpose(2, 3), gh)
    dpos = dts = None
    if bias:
        assert ts is not None and g_ts is not None and g_pos is not None
        gpos_d, gts_d = (_dense(x, off, s).permute(0, 2, 1, 3) for x in (g_pos, g_ts))
        bts = ts.float().view(b, 1, s, s).expand(b, n, s, s) * mm
        bpos = pos.float().view(1, 1, s, s).expand(b, n, s, s) * mm
        gpos_v, gts_v = (torch.matmul(x, vh.transpose(2, 3)) for x in (gpos_d, gts_d))
        if m is not None:
            gpos_v, gts_v = gpos_v * m.to(dt), gts_v * m.to(dt)
        dpos = gpos_v.sum(dim=1).sum(dim=0, keepdim=True).to(dt)
        dts = gts_v.sum(dim=1).to(dt)
        dv = dv + torch.matmul(bts.to(dt).transpose(2, 3), gts_d)
        dv = dv + torch.matmul(bpos.to(dt).transpose(2, 3), gpos_d)
    sig = torch.sigmoid(qk)
    ds = (gv * scale * mm * sig * (1 + qk * (1 - sig))).to(dt)
    dk = torch.matmul(ds.transpose(2, 3), qh)
    dq = torch.matmul(ds, kh)
    back = [_jagged(x.permute(0, 2, 1, 3), off) for x in (dq, dk, dv)]
    return back[0], back[1], back[2], dpos, dts
