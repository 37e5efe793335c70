"""The HSTU example (``python -m fbgemm_npu.examples.hstu``): a generative-recommenders-style model
on torchrec's EmbeddingCollection and Rec SDK's ops, sharded by DistributedModelParallel, trained
on npu, in 1 and 2 processes, against the same run on the CPU.

A tiny configuration (a global batch of 8 users of <= 8 events, D 16, 2 HSTU layers, 8 sampled
negatives, 8 steps, the tables row-wise sharded) trained by the example's own code
(``hstu.launch`` / ``hstu.report``, as the command runs them):

* every npu loss of every rank equals the CPU loss of that step (same seeds, weights, data and
  plan) within the example's ``ATOL + RTOL * |loss|`` (1e-5 + 1e-4 |loss|, the DLRM job's);
* 2 processes (4 users each: slices of the same global batch) learn what 1 process learns: the
  mean of the ranks' losses equals the 1-process loss at every step, within the same tolerance
  (no dropout: each rank draws masks of its own shapes);
* the loss goes down (the last 4 steps' mean at least 5 % under the first 4's);
* every npu step is counted on every rank: fbgemm_npu's share has no AI-CPU launch, no sync and
  no stall; each step's loss is read by ``fbgemm_npu.check``; the trace of step 0 has every
  fbgemm / mxrec op on our npu kernel (in_linear_silu, both rab ops, hstu_jagged, ln_mul or
  norm_multiply_dropout, the TBE) and no float tensor leaving the device;
* with dropout (``norm_multiply_dropout``, p = 0.2) the npu losses still equal the CPU's: the
  simulated npu draws the masks from the CPU's generator (on a real NPU that check is skipped:
  torch_npu's generator is another);
* the data split is what the example claims (rank slices of one global batch).
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.examples import hstu
from fbgemm_npu.examples.dlrm import within_tolerance
from fbgemm_npu.examples.hstu_model import FEATURES, HSTUConfig, batches
from fbgemm_npu.testing.cost_910b import Cost

STEPS = 8
GLOBAL_BATCH = 8
TINY = (
    f"--steps {STEPS} --max-items 8 --dim 16 --heads 2 --layers 2 --negatives 8 "
    "--num-items 50 --sharding-type row_wise --timeout 300"
).split()
Run = tuple[list[Any], str, bool, int]  # reports, printed text, passed, fbgemm_npu.check calls


def _run(extra: list[str], processes: int = 1) -> Run:
    """Launch the example as the CLI does; count ``fbgemm_npu.check`` calls (this process)."""
    present = torch.npu.device_count()
    if fbgemm_npu.device_kind() == "real" and processes > present:
        pytest.skip(f"{processes} processes need {processes} npu devices; this host has {present}")
    batch = ["--batch-size", str(GLOBAL_BATCH // processes), "--processes", str(processes)]
    args = hstu.parse_args(TINY + batch + extra)
    calls = []
    check = fbgemm_npu.check

    def counting(*scalars: torch.Tensor) -> Any:
        calls.append(len(scalars))
        return check(*scalars)

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        mp.setattr(fbgemm_npu, "check", counting)
        reports = hstu.launch(args)
        passed = hstu.report(args, reports)
    return sorted(reports, key=lambda r: r.rank), out.getvalue(), passed, len(calls)


@pytest.fixture(scope="module")
def one() -> Run:
    return _run(["--dropout", "0"])


@pytest.fixture(scope="module")
def two() -> Run:
    return _run(["--dropout", "0"], processes=2)


def _check_ranks(run: Run, world: int, block: str) -> None:
    reports, text, passed, _ = run
    assert [r.rank for r in reports] == list(range(world))
    for r in reports:
        where = f"rank {r.rank}"
        assert len(r.npu_losses) == len(r.cpu_losses) == STEPS, where
        assert within_tolerance(r.npu_losses, r.cpu_losses, hstu.ATOL, hstu.RTOL), (
            f"{where}: npu {r.npu_losses} vs cpu {r.cpu_losses}"
        )
        assert r.trace_ok, f"{where}\n{r.trace_summary}"
        for op in ("hstu_jagged.equal", "in_linear_silu", block, "relative_attn_bias_time",
                   "relative_attn_bias_pos"):  # fmt: skip
            assert f"mxrec.{op} " in r.trace_summary, (op, r.trace_summary)
        assert "split_embedding_codegen_lookup_rowwise_adagrad" in r.trace_summary
        assert "FALLBACK" not in r.trace_summary and "ON CPU" not in r.trace_summary
        assert not r.foreign, r.foreign
        assert r.steps == list(range(STEPS)), where  # step 0 traced, every other counted
        for step, (ours, whole) in enumerate(zip(r.step_costs, r.step_whole, strict=True)):
            c, w = Cost(**ours), Cost(**whole)
            assert (c.ai_cpu, c.syncs, c.stalls) == (0, 0, 0), (where, step, c)
            assert 0 < c.launches < w.launches, (where, step)
    assert passed and text.rstrip().endswith("PASSED"), text[-3000:]


def test_one_process_npu_losses_equal_the_cpu_losses_and_steps_are_clean(one: Run) -> None:
    _check_ranks(one, 1, "ln_mul")
    assert one[3] == 2 * STEPS  # fbgemm_npu.check(loss) once a step, npu and CPU runs


@pytest.mark.multiprocess
def test_two_processes_npu_losses_equal_the_cpu_losses_and_steps_are_clean(two: Run) -> None:
    _check_ranks(two, 2, "ln_mul")
    for r in two[0]:  # the item table row-wise over both ranks
        assert "row_wise" in r.plan and "npu:0" in r.plan and "npu:1" in r.plan, r.plan


@pytest.mark.multiprocess
def test_two_processes_learn_what_one_process_learns(one: Run, two: Run) -> None:
    single = one[0][0].npu_losses
    mean = hstu.global_losses(two[0])
    assert within_tolerance(mean, single, hstu.ATOL, hstu.RTOL), (mean, single)
    assert all(r.npu_losses != single for r in two[0])  # each rank saw half the batch
    assert within_tolerance(hstu.global_losses(two[0], "cpu"), one[0][0].cpu_losses)


def test_the_loss_goes_down(one: Run) -> None:
    losses = one[0][0].npu_losses
    first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
    assert last < 0.95 * first, losses
    assert hstu.went_down(losses) and not hstu.went_down(losses[::-1])


def test_the_command_says_which_device_and_prints_both_runs(one: Run) -> None:
    _, text, _, _ = one
    if fbgemm_npu.device_kind() == "simulated":
        assert "SIMULATED npu" in text
    assert "samples/s" in text and "max |npu - cpu|" in text and "dropout 0 (ln_mul)" in text
    rows = [line.split() for line in text.splitlines() if line.startswith("    ")]
    steps = [cols for cols in rows if len(cols) == 3 and cols[0].isdigit()]
    assert [int(cols[0]) for cols in steps] == list(range(STEPS))
    r = one[0][0]
    for cols, a, b in zip(steps, r.npu_losses, r.cpu_losses, strict=True):
        assert (float(cols[1]), float(cols[2])) == (round(a, 6), round(b, 6)), cols


def test_dropout_reproduces_on_the_cpu(one: Run) -> None:
    if fbgemm_npu.device_kind() == "real":
        pytest.skip("torch_npu's generator is not the CPU's: the masks differ (example docstring)")
    reports, text, passed, _ = _run(["--dropout", "0.2", "--steps", "3"])
    (r,) = reports
    assert "dropout 0.2 (norm_multiply_dropout)" in text
    assert "mxrec.norm_multiply_dropout " in r.trace_summary and "mxrec.ln_mul " not in text
    assert within_tolerance(r.npu_losses, r.cpu_losses, hstu.ATOL, hstu.RTOL)
    assert r.npu_losses[0] != one[0][0].npu_losses[0]  # the masks changed the loss
    assert passed, text[-2000:]


def test_table_and_column_wise_sharding_match_the_cpu_too() -> None:
    extra = ["--sharding-type", "all", "--steps", "3", "--dropout", "0", "--no-trace"]
    reports, text, passed, _ = _run(extra)
    assert [r.sharding_type for r in reports] == list(hstu.SHARDING_TYPES)
    for r in reports:
        assert r.sharding_type in r.plan and r.steps == [0, 1, 2], r.plan  # counted, untraced
        assert within_tolerance(r.npu_losses, r.cpu_losses, hstu.ATOL, hstu.RTOL), r
    assert passed, text[-2000:]


def test_ranks_get_slices_of_one_global_batch() -> None:
    cfg = HSTUConfig(batch_size=2, steps=3, max_items=6, num_items=30, negatives=4)
    whole = list(batches(HSTUConfig(**{**vars(cfg), "batch_size": 4})))
    halves = list(zip(batches(cfg, 0, 2), batches(cfg, 1, 2), strict=True))
    for step, (b, (b0, b1)) in enumerate(zip(whole, halves, strict=True)):
        full, parts = b.sparse.to_dict(), [p.sparse.to_dict() for p in (b0, b1)]
        for key in FEATURES:
            assert torch.equal(torch.cat([p[key].values() for p in parts]), full[key].values()), key
            assert torch.equal(torch.cat([p[key].lengths() for p in parts]), full[key].lengths())
        assert torch.equal(torch.cat([b0.timestamps, b1.timestamps]), b.timestamps)
        assert torch.equal(torch.cat([b0.hits, b1.hits]), b.hits)
        assert b0.past_valid_lens + b1.past_valid_lens == b.past_valid_lens
        assert b0.loss_scale == b1.loss_scale == 2 * b.loss_scale and b.users == 4
        lens = full["item"].lengths()
        assert lens[0] == step % 2 and lens[-1] == cfg.max_items
        assert torch.equal(b.seq_offset[1:].long(), (2 * lens).cumsum(0))
        # a query row is the action token of an event with a successor, its target that item
        items = full["item"].values()
        assert bool((b.query_rows % 2 == 1).all())
        assert torch.equal(full["target"].values(), items[(b.query_rows - 1) // 2 + 1])
        negatives = full["negative"].values().view(-1, cfg.negatives)
        assert torch.equal(b.hits, negatives == full["target"].values()[:, None])


def test_flags_and_dropout_default() -> None:
    args = hstu.parse_args([])
    assert (args.processes, args.sharding_type, args.dropout) == (1, "row_wise", None)
    for bad in (["--dim", "18"], ["--dim", "16", "--heads", "3"], ["--dropout", "1"],
                ["--layers", "0"], ["--sharding-type", "grid_shard"]):  # fmt: skip
        with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
            hstu.parse_args(bad)
    hstu._resolve_dropout(args, "simulated")
    assert args.dropout == hstu.DEFAULT_DROPOUT
    real = hstu.parse_args([])
    hstu._resolve_dropout(real, "real")
    assert real.dropout == 0.0  # the CPU check could not draw torch_npu's masks
    with pytest.raises(SystemExit, match="--no-cpu-check"):
        hstu._resolve_dropout(hstu.parse_args(["--dropout", "0.1"]), "real")
    unchecked = hstu.parse_args(["--no-cpu-check"])
    hstu._resolve_dropout(unchecked, "real")
    assert unchecked.dropout == hstu.DEFAULT_DROPOUT
    assert hstu.sharding_types(hstu.parse_args(["--sharding-type", "all"])) == list(
        hstu.SHARDING_TYPES
    )
