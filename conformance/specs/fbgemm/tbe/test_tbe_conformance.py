"""TBE training conformance in pytest: upstream's TBE trained on npu (fbgemm_npu's kernels) equals
upstream's TBE trained on CPU, or the float64 reference where upstream's CPU build cannot run.

``CI_CASES`` (about 50 tiny cases, ~25 s) run by default; ``TBE_CONFORMANCE=full`` runs the full
matrix of :func:`conformance.specs.fbgemm.tbe.matrix.full_cases` instead (slow; the CLI
``python -m conformance.specs.fbgemm.tbe.matrix --full --report FILE.md`` prints a table).
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_embedding_configs import SparseType as S
from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode as BC
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode as P

import fbgemm_npu
from conformance.specs.fbgemm.tbe.cases import TbeCase, oracle_of
from conformance.specs.fbgemm.tbe.matrix import CI_CASES, full_cases
from conformance.specs.fbgemm.tbe.training import (
    build,
    compare,
    init_weights,
    make_batches,
    run_case,
    run_module,
    run_reference,
)

_CASES = full_cases() if os.environ.get("TBE_CONFORMANCE", "") == "full" else CI_CASES


def _param(case: TbeCase) -> object:
    return pytest.param(case, id=case.label().replace(" ", "-"))


@pytest.mark.parametrize("case", [_param(c) for c in _CASES])
def test_tbe_training(case: TbeCase) -> None:
    """3 steps on npu: outputs, weights and optimizer states equal the oracle's after each."""
    r = run_case(case)
    assert r.ok, f"{case.label()} vs {r.oracle}{' (' + r.note + ')' if r.note else ''}: {r.message}"


def test_matrix_covers_the_issue() -> None:
    """Every optimizer, pooling, dtype, index dtype, style and bounds mode appears in CI_CASES."""
    seen = {
        "optimizer": {c.optimizer for c in CI_CASES},
        "style": {c.style for c in CI_CASES},
        "pooling": {c.pooling for c in CI_CASES},
        "weights": {c.weights_precision for c in CI_CASES},
        "output": {c.output_dtype for c in CI_CASES},
        "index": {c.index_dtype for c in CI_CASES},
        "bounds": {c.bounds_check for c in CI_CASES},
        "oracle": {oracle_of(c) for c in CI_CASES},
    }
    want = {
        "optimizer": {
            O.EXACT_SGD,
            O.EXACT_ADAGRAD,
            O.EXACT_ROWWISE_ADAGRAD,
            O.ADAM,
            O.PARTIAL_ROWWISE_ADAM,
            O.LAMB,
            O.PARTIAL_ROWWISE_LAMB,
            O.LARS_SGD,
            O.NONE,
            O.EMAINPLACE_ROWWISE_ADAGRAD,
        },
        "style": {"cpu", "cuda"},
        "pooling": set(P),
        "weights": {S.FP32, S.FP16, S.BF16},
        "output": {S.FP32, S.FP16, S.BF16},
        "index": {torch.int32, torch.int64},
        "bounds": set(BC),
        "oracle": {"upstream", "reference"},
    }
    for axis, values in want.items():
        assert values <= seen[axis], f"{axis}: {values - seen[axis]} not covered"
    modes = {dict(c.opt).get("weight_decay_mode") for c in CI_CASES}
    assert {1, 2, 3, 4} <= {int(m) for m in modes if m is not None}
    assert any(c.gwd_start_iter is not None for c in CI_CASES)  # mode 5, DECOUPLE_GLOBAL
    assert any(c.vbe for c in CI_CASES) and any(c.weighted for c in CI_CASES)
    assert any(c.set_lr for c in CI_CASES) and any(c.state_dict_roundtrip for c in CI_CASES)
    assert any(len(set(c.dims)) > 1 for c in CI_CASES)


@pytest.mark.parametrize(
    "case",
    [
        TbeCase(O.EXACT_SGD, pooling=P.MEAN, vbe=True, bad_indices=True),
        TbeCase(O.EXACT_ADAGRAD, pooling=P.NONE, weights_precision=S.FP16, dims=(4, 4)),
        TbeCase(O.EXACT_ROWWISE_ADAGRAD, weighted=True, rows=(20, 30, 50), dims=(4, 8, 16)),
        TbeCase(O.EXACT_ROWWISE_ADAGRAD, output_dtype=S.FP16, set_lr=0.3),
    ],
    ids=lambda c: c.label().replace(" ", "-"),
)
def test_reference_agrees_with_upstream(case: TbeCase) -> None:
    """The float64 reference is itself checked against upstream's CPU TBE where both run."""
    assert oracle_of(case) == "upstream"
    batches = make_batches(case)
    upstream = run_module(case, "cpu", "cpu", batches)
    compare(case, run_reference(case, batches), upstream)


def test_comparison_catches_a_wrong_update() -> None:
    """A one-element change of one weight, or a different learning rate, fails the comparison."""
    case = TbeCase(O.EXACT_SGD, steps=2)
    batches = make_batches(case)
    ours = run_module(case, "npu:0", "cuda", batches)
    expected = run_module(case, "cpu", "cpu", batches)
    compare(case, ours, expected)
    ours.weights[1][0][3, 2] += 1e-3
    with pytest.raises(AssertionError, match="step 1 weights of table 0"):
        compare(case, ours, expected)
    other = run_module(dataclasses.replace(case, lr=0.11), "npu:0", "cuda", batches)
    with pytest.raises(AssertionError, match="step 0 weights"):
        compare(case, other, expected)


@pytest.mark.parametrize("mode", [BC.FATAL, BC.V2_FATAL])
@pytest.mark.parametrize("style", ["cpu", "cuda"])
def test_fatal_bounds_check_raises_like_upstream(style: str, mode: BC) -> None:
    """(V2_)FATAL with an out-of-range index: upstream CPU raises, so does ours."""
    case = TbeCase(O.EXACT_SGD, style, bounds_check=mode, bad_indices=True, steps=1)
    batches = make_batches(case)
    with pytest.raises(Exception):  # noqa: B017 - upstream raises a RuntimeError from C++
        run_module(case, "cpu", "cpu", batches)
    with pytest.raises((RuntimeError, ValueError, IndexError)):
        out = run_module(case, "npu:0", style, make_batches(case))
        torch.npu.synchronize()  # an asynchronous device assert surfaces here
        fbgemm_npu.check()  # the deferred data checks (the default) surface here
        del out


def embedding_bag_outputs(
    case: TbeCase, device: str = "npu:0"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ours, torch's): the first forward of upstream's TBE on ``device`` and the same lookup
    done per feature by ``torch.nn.functional.embedding_bag`` (SUM / MEAN, per-sample weights
    with SUM only, as torch allows) on the CPU in float64."""
    if case.pooling == P.NONE or case.vbe or (case.weighted and case.pooling != P.SUM):
        raise ValueError("embedding_bag_outputs: pooled, non-VBE cases (weighted only with SUM)")
    batch = make_batches(case)[0]
    m = build(case, device, case.style)
    w0 = init_weights(case)
    for w, init in zip(m.split_embedding_weights(), w0, strict=True):
        w.copy_(init.to(w.dtype))
    psw = batch.per_sample_weights
    with torch.no_grad():
        ours = m(
            batch.indices.to(device=device, dtype=case.index_dtype),
            batch.offsets.to(device=device, dtype=case.index_dtype),
            None if psw is None else psw.to(device),
        )
    mode = "sum" if case.pooling == P.SUM else "mean"
    cols = []
    for f, t in enumerate(case.features):
        off = batch.offsets[f * case.batch : (f + 1) * case.batch + 1]
        lo, hi = int(off[0]), int(off[-1])
        cols.append(
            torch.nn.functional.embedding_bag(
                batch.indices[lo:hi],
                w0[t],
                off[:-1] - lo,
                mode=mode,
                per_sample_weights=None if psw is None else psw[lo:hi].to(torch.float64),
            )
        )
    return ours.to("cpu", torch.float64), torch.cat(cols, dim=1)


@pytest.mark.parametrize(
    "case",
    [
        TbeCase(O.EXACT_SGD, "cpu"),
        TbeCase(
            O.EXACT_ROWWISE_ADAGRAD, "cuda", pooling=P.MEAN, rows=(20, 30, 50), dims=(4, 8, 16)
        ),
        TbeCase(O.ADAM, "cuda", weighted=True, feature_table_map=(0, 1, 1)),
        TbeCase(O.EXACT_ADAGRAD, "cpu", weighted=True, index_dtype=torch.int32),
    ],
    ids=lambda c: c.label().replace(" ", "-"),
)
def test_forward_matches_nn_embedding_bag(case: TbeCase) -> None:
    """The first forward equals ``torch.nn.functional.embedding_bag`` per feature."""
    ours, torch_out = embedding_bag_outputs(case)
    torch.testing.assert_close(ours, torch_out, rtol=1e-5, atol=1e-6)
