"""The TBE lookups on awkward inputs, against upstream's CPU kernels: indices outside their
table in every BoundsCheckMode (with the data checks on and off), offsets and indices that are
strided views, and a second backward through a retained graph.

Indices outside ``[0, rows of their table)``: upstream's CPU lookups raise in every mode -- FATAL
in ``bounds_check_indices``, WARNING and IGNORE repair all but ``-1`` (a pruned row) there and the
lookup raises for ``-1``, NONE checks nothing before the lookup, which raises.  Ours raises where
upstream raises (the data checks on, the default); with them off (``FBGEMM_NPU_VALIDATE=0``) the
lookup clamps each index into its own table, so that an index never reads or updates another
table's rows: the result is upstream's on the clamped indices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode as BC
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    DenseTableBatchedEmbeddingBagsCodegen,
)

import fbgemm_npu
from fbgemm_npu.testing.tbe_inputs import NPU, assert_close, same_weights, training_tbe

SPECS = [(4, 4), (3, 4), (5, 8)]  # (rows, dim): table 1 sits between tables 0 and 2
MODES = [BC.FATAL, BC.WARNING, BC.IGNORE, BC.NONE]
LOOKUP_ERROR = "split_embedding_codegen_lookup_sgd_function_pt2: argument 'indices'"


def distinct_weights(tbe: Any) -> None:
    """Every row of every table different (row r of table t: ``100 t + r`` plus a ramp)."""
    with torch.no_grad():
        for t, w in enumerate(tbe.split_embedding_weights()):
            ramp = torch.arange(w.numel(), dtype=torch.float32).view(w.shape) / 100
            rows = torch.arange(w.size(0), dtype=torch.float32)[:, None]
            w.copy_((100 * t + rows + ramp).to(w.device))


def one_step(tbe: Any, dev: str, idx: torch.Tensor, off: torch.Tensor) -> object:
    """``(output, weights after the SGD step)`` on the CPU, or ``"raises"``."""
    try:
        out = tbe(idx.to(dev), off.to(dev))
        out.backward(torch.ones_like(out))
        fbgemm_npu.check()  # where a caller reads the result: the data checks deferred
    except RuntimeError:
        return "raises"
    weights = [w.detach().cpu().clone() for w in tbe.split_embedding_weights()]
    return out.detach().cpu(), weights


def twins(mode: BC, style: str = "torchrec") -> tuple[Any, Any]:
    cpu = training_tbe(O.EXACT_SGD, SPECS, "cpu", bounds_check_mode=mode)
    npu = training_tbe(O.EXACT_SGD, SPECS, NPU, style, bounds_check_mode=mode)
    distinct_weights(cpu)
    same_weights(cpu, npu)
    return cpu, npu


def assert_same_step(actual: object, expected: object, what: str) -> None:
    if expected == "raises" or actual == "raises":
        assert actual == expected, f"{what}: ours {actual!r}, upstream {expected!r}"
        return
    assert isinstance(actual, tuple) and isinstance(expected, tuple)
    assert_close(actual[0], expected[0], 1e-6, f"{what}: output")
    for t, (a, e) in enumerate(zip(actual[1], expected[1], strict=True)):
        assert_close(a, e, 1e-6, f"{what}: weights of table {t}")


def bad_batch(table: int, bad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """B = 1, one index per bag: row 1 of table 0, row 2 of table 2, ``bad`` in ``table``."""
    idx = torch.tensor([1, 1, 2])
    idx[table] = bad
    return idx, torch.tensor([0, 1, 2, 3])


BAD = [(1, -1), (1, -2), (1, 3), (1, 9), (0, -1), (2, 5)]  # (table, index)


@pytest.fixture
def validating(monkeypatch: pytest.MonkeyPatch) -> None:
    """The data checks at their default, on, whatever the environment says."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "1")


@pytest.mark.usefixtures("validating")
@pytest.mark.parametrize("style", ["torchrec", "cuda_user"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_out_of_table_indices_match_upstream_cpu_in_every_mode(mode: BC, style: str) -> None:
    """With the data checks on, ours raises exactly where upstream's CPU raises (``-1`` in every
    mode, any bad index with NONE) and repairs as it repairs elsewhere."""
    for table, bad in BAD:
        cpu, npu = twins(mode, style)
        idx, off = bad_batch(table, bad)
        expected = one_step(cpu, "cpu", idx.clone(), off.clone())
        assert_same_step(one_step(npu, NPU, idx, off), expected, f"index {bad} in table {table}")


@pytest.mark.usefixtures("validating")
def test_the_lookup_error_names_op_and_argument() -> None:
    _, npu = twins(BC.NONE)
    idx, off = bad_batch(1, -1)
    with pytest.raises(RuntimeError, match=LOOKUP_ERROR):
        npu(idx.to(NPU), off.to(NPU))
        fbgemm_npu.check()


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_without_data_checks_an_index_stays_in_its_table(
    mode: BC, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``FBGEMM_NPU_VALIDATE=0``: where upstream raises, ours reads and updates the clamped row
    of the index's own table -- upstream's result on the clamped indices; no other table's row
    is read or written."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
    for table, bad in BAD:
        cpu, npu = twins(mode)
        idx, off = bad_batch(table, bad)
        if one_step(cpu, "cpu", idx.clone(), off.clone()) != "raises":
            continue  # repaired by the bounds check: the test above compares it
        if mode == BC.FATAL and bad != -1:
            # the bounds check's FATAL is its contract, data checks on or off
            assert one_step(npu, NPU, idx, off) == "raises"
            continue
        clamped = idx.clone()
        clamped[table] = min(max(bad, 0), SPECS[table][0] - 1)
        cpu, _ = twins(mode)
        expected = one_step(cpu, "cpu", clamped, off.clone())
        assert_same_step(one_step(npu, NPU, idx, off), expected, f"index {bad} in table {table}")


@pytest.mark.usefixtures("validating")
def test_dense_tbe_out_of_table_index_matches_upstream_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The dense TBE runs no bounds check: upstream's CPU lookup raises, ours too; without data
    checks ours reads the clamped row of the index's own table."""
    dense = [(r, d) for r, d in SPECS]
    cpu = DenseTableBatchedEmbeddingBagsCodegen(dense, use_cpu=True)
    npu = DenseTableBatchedEmbeddingBagsCodegen(dense)
    with torch.no_grad():
        cpu.weights.copy_(torch.arange(cpu.weights.numel(), dtype=torch.float32))
        npu.weights.copy_(cpu.weights)
    for table, bad in BAD:
        idx, off = bad_batch(table, bad)
        with pytest.raises(RuntimeError):
            cpu(idx, off)
        with pytest.raises(RuntimeError, match="dense_embedding_codegen_lookup_function"):
            npu(idx.to(NPU), off.to(NPU))
            fbgemm_npu.check()
        with monkeypatch.context() as m:
            m.setenv("FBGEMM_NPU_VALIDATE", "0")
            out = npu(idx.to(NPU), off.to(NPU))
        clamped = idx.clone()
        clamped[table] = min(max(bad, 0), SPECS[table][0] - 1)
        assert_close(out, cpu(clamped, off), 1e-6, f"index {bad} in table {table}")


def strided(values: list[int], fill: list[int], device: str) -> torch.Tensor:
    """``values`` as the even elements of a buffer on ``device`` whose odd ones are ``fill``: a
    strided view whose raw buffer starts with another plausible array."""
    buf = [x for pair in zip(values, fill + [0] * len(values), strict=False) for x in pair]
    return torch.tensor(buf, device=device)[::2]


# B = 2, 3 tables; the raw prefix of the offsets buffer, [0, 1, 2, 2, 3, 3, 4], is valid too
OFFSETS, OFFSETS_FILL = [0, 2, 3, 4, 6, 6, 7], [1, 2, 3, 3, 4, 5]
INDICES = [1, 2, 0, 2, 1, 0, 4]


@pytest.mark.parametrize("style", ["torchrec", "cuda_user"])
def test_strided_offsets_and_indices_match_upstream_cpu(style: str) -> None:
    """The kernels honour the strides of offsets and indices views."""
    cpu, npu = twins(BC.WARNING, style)
    steps = []
    for tbe, dev in ((cpu, "cpu"), (npu, NPU)):
        off = strided(OFFSETS, OFFSETS_FILL, dev)
        idx = strided(INDICES, [9] * len(INDICES), dev)
        assert not off.is_contiguous() and not idx.is_contiguous()
        steps.append(one_step(tbe, dev, idx, off))
    assert_same_step(steps[1], steps[0], "strided offsets and indices")


def test_dense_tbe_strided_offsets_match_upstream_cpu() -> None:
    dense = [(r, d) for r, d in SPECS]
    cpu = DenseTableBatchedEmbeddingBagsCodegen(dense, use_cpu=True)
    npu = DenseTableBatchedEmbeddingBagsCodegen(dense)
    with torch.no_grad():
        npu.weights.copy_(cpu.weights)
    outs = []
    for tbe, dev in ((cpu, "cpu"), (npu, NPU)):
        off = strided(OFFSETS, OFFSETS_FILL, dev)
        outs.append(tbe(torch.tensor(INDICES, device=dev), off))
    assert_close(outs[1], outs[0], 1e-6, "dense TBE, strided offsets")


def grads_twice(fn: Callable[[], torch.Tensor], w: torch.Tensor) -> list[torch.Tensor]:
    y = fn()
    loss = (y * y).sum()
    return [torch.autograd.grad(loss, w, retain_graph=True)[0] for _ in range(2)]


def test_second_backward_of_a_non_fused_lookup_gives_the_same_gradient() -> None:
    """Upstream's semantics on its CPU kernel (the dense TBE; upstream's CPU build has no NONE
    optimizer): a retained graph gives the same gradient twice.  Ours, for the dense TBE and the
    NONE optimizer's lookup, gives that gradient twice."""
    idx, off = torch.tensor([1, 2, 0, 2, 1, 1]), torch.tensor([0, 2, 3, 4, 6, 6, 6])
    one_d = [(4, 4), (3, 4), (5, 4)]  # NONE takes one D
    cpu = DenseTableBatchedEmbeddingBagsCodegen(one_d, use_cpu=True)
    with torch.no_grad():
        cpu.weights.copy_(torch.rand(cpu.weights.shape, generator=torch.Generator().manual_seed(0)))
    expected = grads_twice(lambda: cpu(idx, off), cpu.weights)
    assert torch.equal(expected[0], expected[1])
    dense = DenseTableBatchedEmbeddingBagsCodegen(one_d)
    with torch.no_grad():
        dense.weights.copy_(cpu.weights)
    for g in grads_twice(lambda: dense(idx.to(NPU), off.to(NPU)), dense.weights):
        assert_close(g, expected[0], 1e-6, "dense TBE gradient")
    none = training_tbe(O.NONE, one_d, NPU, "cuda_user")
    with torch.no_grad():
        none.weights_dev.copy_(cpu.weights.view(none.weights_dev.shape))
    lookup = lambda: none(idx.to(NPU), off.to(NPU), total_unique_indices=6)  # noqa: E731
    for g in grads_twice(lookup, none.weights_dev):
        g = g.to_dense() if g.is_sparse else g
        assert_close(g.reshape(-1), expected[0], 1e-6, "NONE optimizer gradient")


@pytest.mark.parametrize("opt", [O.EXACT_SGD, O.EXACT_ROWWISE_ADAGRAD, O.EXACT_ADAGRAD])
def test_second_backward_of_a_fused_lookup_steps_again_like_upstream_cpu(opt: O) -> None:
    """A fused optimizer applies its update in the backward: a second backward through the
    retained graph applies it again (on the weights and states as they are then), as upstream's
    CPU kernels do; without retain_graph the second backward raises, as upstream's does."""
    idx, off = torch.tensor([1, 2, 0, 2, 1, 1]), torch.tensor([0, 2, 3, 4, 6, 6, 6])
    steps = {}
    for dev in ("cpu", NPU):
        tbe = training_tbe(opt, SPECS, dev)
        distinct_weights(tbe)
        y = tbe(idx.to(dev), off.to(dev))
        loss = (y * y).sum() / 1000
        seen = []
        for _ in range(2):
            loss.backward(retain_graph=True)
            seen.append([w.detach().cpu().clone() for w in tbe.split_embedding_weights()])
        states = [s.detach().cpu().clone() for st in tbe.split_optimizer_states() for s in st]
        steps[dev] = (seen, states)
        loss.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()
    for i, (ours, theirs) in enumerate(zip(steps[NPU][0], steps["cpu"][0], strict=True)):
        for t, (a, e) in enumerate(zip(ours, theirs, strict=True)):
            assert_close(a, e, 1e-5, f"weights of table {t} after backward {i + 1}")
    for a, e in zip(steps[NPU][1], steps["cpu"][1], strict=True):
        assert_close(a, e, 1e-5, "optimizer state after two backwards")


def test_vbe_output_preallocated_is_written_and_trained_like_upstream_cpu() -> None:
    """Upstream's ``vbe_output`` / ``vbe_output_offsets`` (the merged VBE output of several
    lookups): ours ignored them and returned a fresh tensor.  Now the rows of rank ``r`` and
    feature ``t`` land at ``vbe_output_offsets[r, t]`` of the given buffer (the rest of it kept),
    which is returned; forward and the SGD step equal upstream's CPU module (whose CPU build
    refuses a pre-allocated output, so its compact VBE output is placed by hand)."""
    from fbgemm_npu.testing.tbe_inputs import make_batches

    specs, vbe = [(40, 8), (25, 16), (30, 8)], [[2, 3], [1, 4], [3, 1]]
    ours = training_tbe(O.EXACT_SGD, specs, NPU, style="cuda_user")
    ref = training_tbe(O.EXACT_SGD, specs, "cpu")
    same_weights(ref, ours)
    b = make_batches(specs, 4, 1, seed=3, weighted=False, vbe=vbe)[0]
    # rank-major merged layout with a gap of 5 before and 3 after this lookup's part
    starts, pos = [], 5
    for r in range(2):
        row = []
        for t, (_, d) in enumerate(specs):
            row.append(pos)
            pos += vbe[t][r] * d
        starts.append(row)
    buf = torch.full((pos + 3,), -7.0, device=NPU)
    out = ours(
        b.indices.to(NPU),
        b.offsets.to(NPU),
        batch_size_per_feature_per_rank=vbe,
        vbe_output=buf,
        vbe_output_offsets=torch.tensor(starts, device=NPU),
    )
    assert out.data_ptr() == buf.data_ptr() and out.shape == buf.shape
    expect = ref(b.indices, b.offsets, batch_size_per_feature_per_rank=vbe)
    got = out.detach().cpu()
    assert torch.equal(got[:5], torch.full((5,), -7.0))
    assert torch.equal(got[pos:], torch.full((3,), -7.0))
    assert_close(got[5:pos], expect.detach().view(-1), 1e-6, "forward")
    w = torch.linspace(-1.0, 1.0, pos - 5)
    (out[5:pos] * w.to(NPU)).sum().backward()
    (expect.view(-1) * w).sum().backward()
    fbgemm_npu.check()
    for x, y in zip(ref.split_embedding_weights(), ours.split_embedding_weights(), strict=True):
        assert_close(y, x, 1e-6, "weights after the step")
