"""Table-batched embeddings on npu train like upstream's TBE on the CPU.

Each test builds upstream's ``SplitTableBatchedEmbeddingBagsCodegen`` twice from the same
weights -- on the CPU (upstream's kernels: the oracle) and on npu (our kernels) -- runs the same
random batches through both, and compares outputs, weights and optimizer states, for the
optimizers upstream's CPU build runs (SGD, AdaGrad, rowwise AdaGrad with its counter and CowClip
modes, rowwise RMSprop-AR on the raw op), pooling modes, dtypes, VBE and shared tables.  The
optimizers and modes upstream's CPU cannot judge are ``test_tbe_optimizers_reference.py``.
Tolerances: fp32 1e-5 (SGD) / 1e-4 (adaptive optimizers); half precision: 1e-2 relative (one
half-precision rounding of a sum, see ``fbgemm_npu.native.fbgemm.tbe.forward``).
"""

from __future__ import annotations

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_embedding_configs import SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode

from fbgemm_npu.testing.tbe_inputs import (
    COUNTER_CASES,
    MIXED,
    NPU,
    ONE_D,
    assert_close,
    counter_regularization,
    host_layout,
    make_batches,
    rmsprop_ar_kwargs,
    rmsprop_ar_lookup,
    same_weights,
    train_step,
    training_tbe,
)


def compare_training(
    opt: O,
    specs: list[tuple[int, int]],
    *,
    style: str = "torchrec",
    steps: int = 2,
    B: int = 5,
    weighted: bool = False,
    idx_dtype: torch.dtype = torch.int64,
    tol: float = 1e-5,
    vbe: list[list[int]] | None = None,
    **kwargs: object,
) -> None:
    """Train the same TBE on the CPU (upstream) and on npu (ours, in ``style``) for ``steps``
    steps; after each, outputs, weights and optimizer states agree within ``tol``."""
    cpu = training_tbe(opt, specs, "cpu", **kwargs)
    npu = training_tbe(opt, specs, "npu", style, **kwargs)
    same_weights(cpu, npu)
    ftm = kwargs.get("feature_table_map")
    feature_specs = specs if ftm is None else [specs[t] for t in ftm]  # type: ignore[union-attr]
    batches = make_batches(feature_specs, B, steps, seed=7, weighted=weighted, vbe=vbe)
    for i, batch in enumerate(batches):
        o_cpu, _ = train_step(cpu, batch, "cpu", idx_dtype, grad_seed=i)
        o_npu, _ = train_step(npu, batch, "npu", idx_dtype, grad_seed=i)
        assert o_npu.device.type == "npu"
        assert o_npu.dtype == o_cpu.dtype and o_npu.shape == o_cpu.shape
        assert_close(o_npu, o_cpu, tol, f"output, step {i}")
        for t, (a, b) in enumerate(
            zip(cpu.split_embedding_weights(), npu.split_embedding_weights(), strict=True)
        ):
            assert_close(b, a, tol, f"weights of table {t}, step {i}")
        for t, (sa, sb) in enumerate(
            zip(cpu.split_optimizer_states(), npu.split_optimizer_states(), strict=True)
        ):
            for a, b in zip(sa, sb, strict=True):
                assert_close(b, a, tol, f"optimizer state of table {t}, step {i}")


@pytest.mark.parametrize("style", ["torchrec", "cuda_user"])
@pytest.mark.parametrize(
    ("opt", "tol"),
    [(O.EXACT_SGD, 1e-5), (O.EXACT_ADAGRAD, 1e-4), (O.EXACT_ROWWISE_ADAGRAD, 1e-4)],
)
def test_training_matches_upstream_cpu(opt: O, tol: float, style: str) -> None:
    compare_training(opt, MIXED, style=style, tol=tol)


@pytest.mark.parametrize(
    ("case", "specs", "kwargs"),
    [
        ("mean", MIXED, {"pooling_mode": PoolingMode.MEAN}),
        ("sequence", ONE_D, {"pooling_mode": PoolingMode.NONE}),
        ("weighted", MIXED, {"weighted": True}),
        ("int32", MIXED, {"idx_dtype": torch.int32}),
        ("one_d", ONE_D, {}),
        ("fp16_weights", MIXED, {"weights_precision": SparseType.FP16, "tol": 1e-2}),
        ("fp16_output", MIXED, {"output_dtype": SparseType.FP16, "tol": 1e-2}),
        ("vbe", MIXED, {"vbe": [[2, 3], [1, 4], [5, 0]]}),
    ],
)
def test_modes_match_upstream_cpu(case: str, specs: list[tuple[int, int]], kwargs: dict) -> None:
    kwargs = dict(kwargs)
    kwargs.setdefault("tol", 1e-4)
    compare_training(O.EXACT_ROWWISE_ADAGRAD, specs, **kwargs)


def test_sgd_vbe_and_style_device_matches_upstream_cpu() -> None:
    compare_training(O.EXACT_SGD, MIXED, style="cuda_user", vbe=[[2, 3], [1, 4], [5, 0]])


@pytest.mark.parametrize("case", COUNTER_CASES)
def test_rowwise_adagrad_with_counter_matches_upstream_cpu(case: str) -> None:
    compare_training(
        O.EXACT_ROWWISE_ADAGRAD, MIXED, steps=3, tol=1e-4, **counter_regularization(case)
    )


@pytest.mark.parametrize("opt", [O.EXACT_SGD, O.EXACT_ROWWISE_ADAGRAD])
def test_two_digit_key_sort_matches_upstream_cpu(opt: O, monkeypatch: pytest.MonkeyPatch) -> None:
    """The backward's route for tables past 2**24 rows (two stable float sorts of 24-bit
    digits, :func:`fbgemm_npu.native.fbgemm.tbe.backward.sort_keys`), forced on small tables by
    lowering the host's threshold: the same training as upstream's, shared tables and VBE
    included (the keys themselves past 2**24 are test_tbe_routes.py's)."""
    from fbgemm_npu.native.fbgemm.tbe import backward

    monkeypatch.setattr(backward, "F32_EXACT", 0)
    compare_training(opt, MIXED, tol=1e-4, feature_table_map=[0, 0, 1, 2])
    compare_training(opt, MIXED, tol=1e-4, vbe=[[2, 3], [1, 4], [5, 0]])


@pytest.mark.parametrize("opt", [O.EXACT_SGD, O.EXACT_ADAGRAD, O.EXACT_ROWWISE_ADAGRAD])
def test_gradient_clipping_matches_upstream_cpu(opt: O) -> None:
    # upstream clips grad_output itself (before per-sample weights and de-duplication)
    compare_training(opt, MIXED, tol=1e-4, gradient_clipping=True, max_gradient=0.05, weighted=True)


@pytest.mark.parametrize("opt", [O.EXACT_SGD, O.EXACT_ROWWISE_ADAGRAD])
def test_shared_tables_match_upstream_cpu(opt: O) -> None:
    # two features read table 0: their rows are de-duplicated together (upstream CPU needs the
    # features of a shared table to be adjacent)
    compare_training(opt, MIXED, tol=1e-4, feature_table_map=[0, 0, 1, 2])


@pytest.mark.parametrize("pooling", [PoolingMode.SUM, PoolingMode.MEAN])
def test_per_sample_weight_gradient_matches_upstream_cpu(pooling: PoolingMode) -> None:
    cpu = training_tbe(O.EXACT_SGD, MIXED, "cpu", pooling_mode=pooling)
    npu = training_tbe(O.EXACT_SGD, MIXED, "npu", "cuda_user", pooling_mode=pooling)
    same_weights(cpu, npu)
    batch = make_batches(MIXED, 5, 1, seed=4, weighted=True)[0]
    frg = torch.tensor([1, 0, 1], dtype=torch.int32)
    grads = []
    for tbe, dev in ((cpu, "cpu"), (npu, "npu")):
        psw = batch.per_sample_weights.clone().to(dev).requires_grad_()
        out = tbe(
            batch.indices.to(dev),
            batch.offsets.to(dev),
            per_sample_weights=psw,
            feature_requires_grad=frg.to(dev),
        )
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(dev))
        grads.append(psw.grad)
    assert grads[1].device.type == "npu"
    assert_close(grads[1], grads[0], 1e-5, "per-sample weight gradient")


def test_set_learning_rate_and_state_dict_round_trip() -> None:
    opt = O.EXACT_ROWWISE_ADAGRAD
    cpu = training_tbe(opt, MIXED, "cpu")
    npu = training_tbe(opt, MIXED, "npu", "cuda_user")
    same_weights(cpu, npu)
    b0, b1, b2 = make_batches(MIXED, 4, 3, seed=12)
    for tbe, dev in ((cpu, "cpu"), (npu, "npu")):
        train_step(tbe, b0, dev, torch.int64, grad_seed=0)
        tbe.set_learning_rate(0.2)
        train_step(tbe, b1, dev, torch.int64, grad_seed=1)
    assert npu.get_learning_rate() == pytest.approx(0.2)
    restored = training_tbe(opt, MIXED, "npu", "cuda_user")
    restored.load_state_dict(npu.state_dict())
    restored.set_learning_rate(0.2)
    train_step(cpu, b2, "cpu", torch.int64, grad_seed=2)
    train_step(restored, b2, "npu", torch.int64, grad_seed=2)
    for a, b in zip(cpu.split_embedding_weights(), restored.split_embedding_weights(), strict=True):
        assert_close(b, a, 1e-4, "weights after restore")
    for sa, sb in zip(cpu.split_optimizer_states(), restored.split_optimizer_states(), strict=True):
        for a, b in zip(sa, sb, strict=True):
            assert_close(b, a, 1e-4, "optimizer states after restore")


def test_inference_forward_matches_training_forward() -> None:
    tbe = training_tbe(O.EXACT_ROWWISE_ADAGRAD, MIXED, "npu", "cuda_user")
    batch = make_batches(MIXED, 5, 1, seed=13)[0]
    idx, off = batch.indices.to(NPU), batch.offsets.to(NPU)
    with torch.no_grad():
        eval_out = tbe(idx, off)
    assert eval_out.grad_fn is None
    train_out = tbe(idx, off)
    assert train_out.grad_fn is not None
    assert torch.equal(eval_out.cpu(), train_out.detach().cpu())
    # the PrivateUse1 kernel (below autograd) computes the same forward
    with torch._C._AutoDispatchBelowAutograd():
        below = tbe(idx, off)
    assert torch.equal(below.cpu(), eval_out.cpu())


def test_bad_output_dtype_names_op_and_argument() -> None:
    with pytest.raises(ValueError, match="lookup_sgd_function_pt2: argument 'output_dtype'"):
        training_tbe(O.EXACT_SGD, MIXED, "npu", "cuda_user", output_dtype=SparseType.INT8)(
            torch.tensor([0], device=NPU), torch.tensor([0, 1, 1, 1], device=NPU)
        )


def test_rowwise_rmsprop_ar_op_matches_upstream_cpu() -> None:
    """The rowwise_rmsprop_ar pt2 op (no module in 1.8.0 builds it), torchrec's host layout."""
    g = torch.Generator().manual_seed(0)
    weights = torch.rand(960, generator=g)
    layouts = {dev: host_layout(MIXED, dev) for dev in ("cpu", "npu")}
    ours_w, ours_s = weights.to(NPU), [torch.zeros(95, device=NPU), torch.zeros(95, device=NPU)]
    cpu_s = [torch.zeros(95), torch.zeros(95)]
    for i, batch in enumerate(make_batches(MIXED, 4, 3, seed=2)):
        grad = torch.randn(4, 32, generator=g)
        outs = []
        for dev, w, s in (("cpu", weights, cpu_s), ("npu", ours_w, ours_s)):
            idx, off = batch.indices.to(dev), batch.offsets.to(dev)
            out = rmsprop_ar_lookup(**rmsprop_ar_kwargs(layouts[dev], w, s, idx, off, i + 1))
            out.backward(grad.to(dev))
            outs.append(out)
        assert_close(outs[1], outs[0], 1e-5, f"output, step {i}")
        assert_close(ours_w, weights, 1e-4, f"weights, step {i}")
        for s in range(2):
            assert_close(ours_s[s], cpu_s[s], 1e-4, f"state {s}, step {i}")
