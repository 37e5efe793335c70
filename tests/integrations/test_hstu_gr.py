"""The generative-recommenders example (``python -m fbgemm_npu.examples.hstu_gr``): a small HSTU
trained 20 steps on npu with the mxrec ops (relative_attn_bias_time / _pos, hstu_jagged.equal and
their autograd) equals the same run on the CPU (our CPU kernels of the mxrec ops, torch's own
for the rest), step by step.

* the 20 npu losses equal the CPU losses within the example's stated tolerance
  (``torch.testing.assert_close``, ``ATOL + RTOL * |cpu|`` = 1e-5 + 1e-4 |loss|; not bit-equal:
  torch's layer_norm and silu backward decompose on the npu device, see the example's docstring),
  and the loss goes down (the last 5 steps' mean at least 5 % under the first 5's);
* the mxrec part of the model alone is bit-equal across the devices (bias, its weight gradient,
  an HSTU layer's attention forward and backward on the same inputs);
* every npu step is counted: fbgemm_npu's share has no AI-CPU launch, no sync and no stall, and
  its launches do not depend on the data (steps 1..19 launch the same count: ``max_seq_len`` is
  given, the tiles are fixed); the trace of step 0 has every mxrec op on our npu kernel and no
  float tensor leaving the device;
* the data has what the example claims: a user of 0 or 1 events and a full one in every step,
  query rows on action tokens, targets the next event's item, the same batches for the same seed.
"""

from __future__ import annotations

import contextlib
import io
import math

import pytest
import torch

from fbgemm_npu.examples import hstu_gr
from fbgemm_npu.testing.cost_910b import Cost

MX = torch.ops.mxrec


@pytest.fixture(scope="module")
def runs() -> tuple[hstu_gr.RunResult, hstu_gr.RunResult, str, bool]:
    """The example's own run and report, as ``main`` makes them: (npu, cpu, printed, passed)."""
    args = hstu_gr.parse_args([])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        npu, cpu = hstu_gr.run(args)
        passed = hstu_gr.report(args, npu, cpu)
    return npu, cpu, out.getvalue(), passed


def test_twenty_npu_losses_equal_the_cpu_losses(runs) -> None:
    npu, cpu, _, _ = runs
    assert len(npu.losses) == len(cpu.losses) == 20
    assert all(math.isfinite(x) for x in npu.losses)
    torch.testing.assert_close(
        torch.tensor(npu.losses, dtype=torch.float64),
        torch.tensor(cpu.losses, dtype=torch.float64),
        rtol=hstu_gr.RTOL,
        atol=hstu_gr.ATOL,
    )


def test_the_loss_goes_down(runs) -> None:
    losses = runs[0].losses
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.95 * first, losses
    assert hstu_gr.went_down(losses) and not hstu_gr.went_down(losses[::-1])


def test_no_ai_cpu_no_sync_no_stall_of_ours_in_any_step(runs) -> None:
    npu = runs[0]
    ours = [Cost(**c) for c in npu.ours]
    assert len(ours) == 20  # step 0 traced, 1..19 counted
    for step, c in enumerate(ours):
        assert (c.ai_cpu, c.syncs, c.stalls) == (0, 0, 0), (step, c)
        assert c.launches > 0, step  # the mxrec ops ran and were counted as ours
        assert c.launches < Cost(**npu.whole[step]).launches
    # the data changes every step, the launches do not (step 0 also fills index caches)
    assert len({c.launches for c in ours[1:]}) == 1, [c.launches for c in ours]


def test_step_zero_trace_has_every_mxrec_op_on_our_kernel(runs) -> None:
    npu = runs[0]
    assert npu.trace_ok, npu.trace_summary
    for op in ("hstu_jagged.equal", "relative_attn_bias_time", "relative_attn_bias_pos"):
        assert f"mxrec.{op} " in npu.trace_summary and "ours on npu" in npu.trace_summary, op
    assert "FALLBACK" not in npu.trace_summary and "ON CPU" not in npu.trace_summary


def test_the_command_prints_both_runs_and_passes(runs) -> None:
    npu, cpu, text, passed = runs
    lines = [line.split() for line in text.splitlines()]
    steps = [cols for cols in lines if cols and cols[0].isdigit() and "|" in cols]
    assert [int(cols[0]) for cols in steps] == list(range(20))
    for cols, a, b in zip(steps, npu.losses, cpu.losses, strict=True):
        assert (float(cols[1]), float(cols[2])) == (round(a, 6), round(b, 6)), cols
    assert passed and text.rstrip().endswith("PASSED"), text[-2000:]


def test_the_mxrec_part_is_bit_equal_across_devices() -> None:
    cfg = hstu_gr.GRConfig(steps=1)
    batch = hstu_gr.make_batches(cfg)[0]
    got = {}
    for dev in ("npu", "cpu"):
        torch.manual_seed(cfg.seed)
        model = hstu_gr.HSTUModel(cfg).to(dev)
        b = batch.to(torch.device(dev))
        bias = model.bias(b)  # both rab ops, the time weights differentiable
        (bias * torch.linspace(-1, 1, bias.size(-1), device=dev)).sum().backward()
        g = torch.Generator().manual_seed(1)
        t = batch.item_ids.numel() * 2
        q, k, v, grad = (torch.randn(t, cfg.heads, 16, generator=g) for _ in range(4))
        args = [x.to(dev).requires_grad_() for x in (q, k, v)]
        rab = bias[0].detach().contiguous().requires_grad_()
        out = MX.hstu_jagged.equal(
            *args, attn_bias=rab, mask_type=0, max_seq_len=cfg.max_seq_len,
            seq_offset=b.seq_offset, alpha=0.25,
        )  # fmt: skip
        out.backward(grad.to(dev))
        got[dev] = [bias, model.time_weights.grad, out, *(a.grad for a in args), rab.grad]
    for i, (a, c) in enumerate(zip(got["npu"], got["cpu"], strict=True)):
        assert a.device.type == "npu" and torch.equal(a.detach().cpu(), c.detach()), i


def test_the_batches_are_what_the_example_says() -> None:
    cfg = hstu_gr.GRConfig(steps=4)
    batches = hstu_gr.make_batches(cfg)
    again = hstu_gr.make_batches(cfg)
    for step, (b, b2) in enumerate(zip(batches, again, strict=True)):
        for name in ("item_ids", "action_ids", "seq_offset", "timestamps", "query_rows"):
            assert torch.equal(getattr(b, name), getattr(b2, name)), name
        off = b.seq_offset.long()
        lens = (off[1:] - off[:-1]).tolist()
        assert lens == b.past_valid_lens and all(n % 2 == 0 for n in lens)
        assert lens[0] == 2 * (step % 2) and lens[-1] == cfg.max_seq_len
        assert int(off[-1]) == 2 * b.item_ids.numel() == 2 * b.action_ids.numel()
        assert b.timestamps.shape == (cfg.batch_size, cfg.max_items)
        assert b.timestamps.dtype == torch.int32
        # a query row is the action token (odd) of an event whose user has a next event
        assert bool((b.query_rows % 2 == 1).all())
        seg = torch.searchsorted(off, b.query_rows, right=True) - 1
        assert bool((b.query_rows + 1 < off[seg + 1]).all())
        assert torch.equal(b.target_ids, b.item_ids[(b.query_rows + 1) // 2])
        assert b.query_rows.numel() == sum(max(n // 2 - 1, 0) for n in lens)
