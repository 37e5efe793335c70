"""Specs of ``mxrec::relative_attn_bias_{pos,time,time_with_index,time_backward}``.

No upstream CPU kernel exists (the CPU kernel is ours), so every value is checked against a
float64 reference written from the math (the kernel modules' docstrings); the CPU side still
gives the error behaviour, shapes and dtypes.  Inputs: float16 / float32 tables, int32 / int64
timestamps (gaps up to 2**31), lengths past the table, one invalid example in ten (a dtype or a
shape).

Tolerances: pos and time gather or blend values, so float32 is near-exact; float16 one rounding.
A time bucket computed in float32 may differ from float64's where ``log|dt| / divisor`` lies
within float32 rounding of an integer; ``slack`` allows the neighbouring bucket's weight there.
The backward sums in float32: ``rtol`` relative to the sum of ``|grad|`` per bucket.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol

M = torch.ops.mxrec
TOL = {torch.float32: Tol(rtol=1e-5, atol=1e-6), torch.float16: Tol(rtol=2e-3, atol=1e-3)}


def pos_reference(rel_pos_bias: torch.Tensor, identity: torch.Tensor, past_valid_lens: list[int]):
    """float64: rows ``r >= p_i`` repeat row ``p_i``; ``x * (1 - id) + id * bias[0, 0]``."""
    x, ident = rel_pos_bias.double(), identity.double()
    n = x.size(0)
    outs = []
    for p in past_valid_lens:
        g = x.clone()
        if p < n:
            g[p:] = x[p]
        outs.append(g * (1 - ident) + ident * x[0, 0])
    return torch.stack(outs)


def _scaled_log(timestamps: torch.Tensor, divisor: float) -> torch.Tensor:
    t = timestamps.double()
    dt = (t[:, None, :] - t[:, :, None]).abs().clamp_min(1)
    return dt.log() / divisor


def buckets_reference(timestamps: torch.Tensor, w: int, divisor: float) -> torch.Tensor:
    """int64 ``min(trunc(log(max(|t_j - t_i|, 1)) / divisor), w - 1)``, ``(b, s, s)``."""
    return _scaled_log(timestamps, divisor).floor().clamp_max(w - 1).long()


def time_reference(
    timestamps: torch.Tensor, timestamps_weights: torch.Tensor, bucket_divisor: float
):
    """float64 ``(L, b, 2s, 2s)``: each item pair's 2x2 block holds ``w[l, bucket]``."""
    w = timestamps_weights.double()
    k = buckets_reference(timestamps, w.size(1), bucket_divisor)
    rab = w[:, k]  # (L, b, s, s)
    return rab.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)


def time_slack(timestamps: torch.Tensor, timestamps_weights: torch.Tensor, bucket_divisor: float):
    """Where float32 may round the scaled log across an integer: the neighbour's weight gap."""
    w = timestamps_weights.double()
    x = _scaled_log(timestamps, bucket_divisor)
    near = (x - x.round()).abs() < 1e-5 * x.clamp_min(1)
    k = x.floor().clamp_max(w.size(1) - 1).long()
    lo, hi = (k - 1).clamp(0, w.size(1) - 1), (k + 1).clamp(0, w.size(1) - 1)
    gap = torch.maximum((w[:, k] - w[:, lo]).abs(), (w[:, hi] - w[:, k]).abs()) * near
    return gap.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)


def backward_reference(
    rab_time_grad: torch.Tensor, bucket_timestamps: torch.Tensor, num_buckets: int
):
    """float64 ``(L, num_buckets)``: the sum of the gradient over each bucket's 2x2 blocks."""
    g = rab_time_grad.double()
    n, b, s2, _ = g.shape
    k = bucket_timestamps.long().repeat_interleave(2, 1).repeat_interleave(2, 2).reshape(-1)
    out = torch.zeros(n, num_buckets, dtype=torch.float64)
    return out.index_add_(1, k, g.reshape(n, -1))


@st.composite
def pos_inputs(draw: st.DrawFn) -> dict[str, object]:
    s = draw(st.integers(1, 12))
    dtype = draw(st.sampled_from((torch.float32, torch.float16)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    bias = torch.randn(2 * s, 2 * s, generator=gen).to(dtype)
    ident = torch.eye(2 * s).repeat_interleave(1, 0).to(dtype)
    if draw(st.booleans()):  # Rec SDK's identity: the 2x2 item blocks on the diagonal
        ident = torch.eye(s).repeat_interleave(2, 0).repeat_interleave(2, 1).to(dtype)
    lens = draw(st.lists(st.integers(0, 2 * s + 3), min_size=1, max_size=5))
    if draw(st.integers(0, 9)) == 9:
        ident = ident.to(torch.float64 if dtype == torch.float32 else torch.float32)
    return {"rel_pos_bias": bias, "identity": ident, "past_valid_lens": lens}


@st.composite
def time_inputs(draw: st.DrawFn) -> dict[str, object]:
    b, s, n = draw(st.integers(1, 3)), draw(st.integers(1, 10)), draw(st.integers(1, 3))
    w_cols = draw(st.sampled_from((1, 9, 129)))
    dtype = draw(st.sampled_from((torch.float32, torch.float16)))
    tdt = draw(st.sampled_from((torch.int32, torch.int64)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    top = draw(st.sampled_from((10, 10**6, 2**31 - 1)))
    t = torch.randint(-top, top, (b, s), generator=gen, dtype=torch.int64).to(tdt)
    w = torch.randn(n, w_cols, generator=gen).to(dtype)
    if draw(st.integers(0, 9)) == 9:
        t = t.float()
    divisor = draw(st.sampled_from((0.301, 0.05, 1.0)))
    return {"timestamps": t, "timestamps_weights": w, "bucket_divisor": divisor}


@st.composite
def backward_inputs(draw: st.DrawFn) -> dict[str, object]:
    b, s, n = draw(st.integers(1, 3)), draw(st.integers(1, 8)), draw(st.integers(1, 3))
    nb = draw(st.sampled_from((1, 9, 129)))
    dtype = draw(st.sampled_from((torch.float32, torch.float16)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    g = torch.randn(n, b, 2 * s, 2 * s, generator=gen).to(dtype)
    k = torch.randint(0, nb, (b, s, s), generator=gen, dtype=torch.int32)
    if draw(st.integers(0, 9)) == 9:
        k = k[:, :, :-1] if s > 1 else k.float()
    return {"rab_time_grad": g, "bucket_timestamps": k, "num_buckets": nb}


def _backward_scale(rab_time_grad: torch.Tensor, bucket_timestamps: torch.Tensor, num_buckets: int):
    return backward_reference(rab_time_grad.abs(), bucket_timestamps, num_buckets)


def _time_path(timestamps: torch.Tensor, **_: object) -> str | None:
    return "int64" if timestamps.dtype == torch.int64 else None


SPECS = [
    OpSpec(
        name="relative_attn_bias_pos",
        op=lambda **kw: M.relative_attn_bias_pos(**kw),
        inputs=pos_inputs(),
        compare=Compare(TOL),
        budget=BudgetUse(op="mxrec::relative_attn_bias_pos"),
        reference=pos_reference,
    ),
    OpSpec(
        name="relative_attn_bias_time",
        op=lambda **kw: M.relative_attn_bias_time(**kw),
        inputs=time_inputs(),
        compare=Compare(TOL, slack=time_slack),
        budget=lambda **kw: BudgetUse(op="mxrec::relative_attn_bias_time", path=_time_path(**kw)),
        reference=time_reference,
    ),
    OpSpec(
        name="relative_attn_bias_time_with_index",
        op=lambda **kw: M.relative_attn_bias_time_with_index(**kw)[0],
        inputs=time_inputs(),
        compare=Compare(TOL, slack=time_slack),
        budget=lambda **kw: BudgetUse(
            op="mxrec::relative_attn_bias_time_with_index", path=_time_path(**kw)
        ),
        reference=time_reference,
    ),
    OpSpec(
        name="relative_attn_bias_time_backward",
        op=lambda **kw: M.relative_attn_bias_time_backward(**kw),
        inputs=backward_inputs(),
        compare=Compare(TOL, scale=_backward_scale),
        budget=BudgetUse(op="mxrec::relative_attn_bias_time_backward"),
        reference=backward_reference,
    ),
]
