"""Peak device memory of ``mxrec::hstu_jagged.equal`` forward + backward at ``S = 8192``.

One autograd step (``torch.ops.mxrec.hstu_jagged`` with ``max_seq_len`` given, then
``backward``) on the simulated npu device, ``B = 2, H = 2, D = 64`` float32, causal, jagged
lengths ``[8192, 512]``: the padded layout is ``S = 8192`` whatever the lengths, so one float32
score tensor ``[B, H, S, S]`` is 1 GiB.  The simulator's peak over the inputs
(``torch.npu.max_memory_allocated`` minus what was allocated before the call: the output, the
saved tensors, every temporary, the gradients) must stay under a quarter of it, 256 MiB
(measured 180 MiB with 16 MiB query tiles).  A full ``S = 8192`` step takes about 4 s here; the
seed's limit ``S = 20480`` runs in the benchmark (``python -m bench hstu --max-seq-len 20480``).

Launches: ``B = H = 4`` at ``S = 4096`` (lengths ``[4096, 512, 512, 512]``) has the same score
elements ``B * H * S * S`` and so the same query tiles (16 MiB of scores a tile: 128 rows of
``2 * 2 * 8192`` keys, or 64 rows of ``4 * 4 * 4096``; 64 tiles either way), and must launch
exactly as many kernels: every batch and head of a tile run at once.  (``B = 1`` or ``H = 1``
launch a few less, never more: some head / batch permutes are views there.)  0 syncs with
``max_seq_len`` given, 0 AI-CPU.  The short sequence's rows (output, dq, dk, dv) are checked
against the float64 reference, so the many-tile step is also right.
"""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu
from conformance.specs.mxrec.hstu.reference import hstu_jagged_reference
from fbgemm_npu.native._index import warm_caches
from fbgemm_npu.testing import counters

pytestmark = pytest.mark.skipif(
    fbgemm_npu.device_kind() == "none", reason="no npu device (tests/conftest.py switches it on)"
)

S, D = 8192, 64
SHORT = 512
SCORES = 2 * 2 * S * S * 4  # one float32 [B, H, S, S] at B = H = 2: 1 GiB (and B = H = 4, S / 2)
LIMIT = SCORES // 4  # 256 MiB


def _step(
    lengths: list[int], heads: int, s: int = S
) -> tuple[int, counters.Counter, tuple[torch.Tensor, ...], torch.Tensor]:
    """One forward + backward on npu: ``(peak extra bytes, its counts, (q, k, v, w), out)``."""
    g = torch.Generator().manual_seed(len(lengths) * heads)
    t = sum(lengths)
    q, k, v, w = (torch.randn(t, heads, D, generator=g) for _ in range(4))
    qn, kn, vn = (x.to("npu").requires_grad_() for x in (q, k, v))
    wn = w.to("npu")
    offsets = torch.tensor([0, *lengths]).cumsum(0).to("npu")
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    torch.npu.reset_peak_memory_stats()
    with counters.count() as c:
        out = torch.ops.mxrec.hstu_jagged(qn, kn, vn, max_seq_len=s, seq_offset=offsets)
        out.backward(wn)
    torch.npu.synchronize()
    peak = torch.npu.max_memory_allocated() - base
    grads = tuple(x.grad for x in (qn, kn, vn))
    assert all(gr is not None for gr in grads)
    return peak, c, (q, k, v, w, *grads), out.detach()


def test_s8192_forward_backward_peak_memory_and_launches() -> None:
    warm_caches("npu", 4 * S)  # the shared index caches' first fill is no launch of these calls
    peak, c, (q, k, v, w, dq, dk, dv), out = _step([S, SHORT], heads=2)
    print(f"S={S} B=2 H=2: peak {peak / 2**20:.1f} MiB of {SCORES >> 20}; {c.launches} launches")
    assert peak < LIMIT, f"peak {peak / 2**20:.1f} MiB over the inputs, limit {LIMIT / 2**20} MiB"
    assert c.syncs == 0 and c.ai_cpu == 0, (c.syncs, c.ai_cpu)

    # the short sequence against the float64 reference (the scale 1 / S of the padded layout)
    rows = slice(S, S + SHORT)
    x = [t[rows].double().requires_grad_() for t in (q, k, v)]
    ref = hstu_jagged_reference(*x, torch.tensor([0, SHORT]), max_seq_len=S)
    ref.backward(w[rows].double())
    for name, ours, want in zip(
        ("out", "dq", "dk", "dv"), (out, dq, dk, dv), (ref, *(t.grad for t in x)), strict=True
    ):
        got = ours[rows].cpu().double()
        tol = 1e-4 * (want.abs().max().item() + 1e-3)
        assert (got - want).abs().max().item() <= tol, name

    # B = H = 4 at S / 2: the same score elements and the same 64 tiles, the same launches
    peak4, c4, *_ = _step([S // 2, SHORT, SHORT, SHORT], heads=4, s=S // 2)
    print(f"S={S // 2} B=4 H=4: peak {peak4 / 2**20:.1f} MiB (the padded q / k / v twice as large)")
    assert c4.launches == c.launches, f"launches depend on B or H: {c.launches}, {c4.launches}"
    assert c4.syncs == 0 and c4.ai_cpu == 0
