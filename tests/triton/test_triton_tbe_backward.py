"""The fused Triton TBE backward + optimizer step (fbgemm_npu/native/fbgemm/tbe/_triton_backward.py)
against the tensor program and the oracle, under Triton's interpreter.

Each parity test trains upstream's ``SplitTableBatchedEmbeddingBagsCodegen`` three times from the
same tables -- on npu under ``kernel_mode("triton")`` (the fused kernel), on npu under
``kernel_mode("tensor")`` (the tensor program), and the oracle: upstream's CPU module where its
CPU build runs the optimizer (SGD, AdaGrad, rowwise AdaGrad), else the float64 reference of
``conformance/specs/fbgemm/tbe/reference.py`` -- and compares outputs, weights and optimizer
states after each step; the Triton path must have run (one ``triton.tbe_backward_step`` launch
per step, whatever the number of table classes).  Batches repeat rows inside a bag and across
bags (de-duplication), hold empty bags, and come with int64 or int32 indices.  CPU tensors: our
registered autograd kernel called on a CPU module's lookups (torch.ops.fbgemm on the CPU
dispatches to upstream).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_embedding_configs import SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode

from conformance.specs.fbgemm.tbe.reference import RefTbe
from fbgemm_npu.native._triton import kernel_mode
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.tbe_inputs import (
    MIXED,
    NPU,
    ONE_D,
    assert_close,
    make_batches,
    same_weights,
    train_step,
    training_tbe,
)

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")

KERNEL = "triton.tbe_backward_step"
CPU_OPTIMIZERS = [O.EXACT_SGD, O.EXACT_ADAGRAD, O.EXACT_ROWWISE_ADAGRAD]
SUM, MEAN, NONE = PoolingMode.SUM, PoolingMode.MEAN, PoolingMode.NONE


def _fused_launches(c: counters.Counter) -> int:
    return sum(1 for n in c.launch_ops if n == KERNEL)


class _Reference:
    """The float64 reference as an oracle with the module's interface (weights, states)."""

    def __init__(self, opt: O, npu: Any, pooling: PoolingMode, lr: float, hp: dict) -> None:
        precision = npu.weights_precision
        self.ref = RefTbe(
            weights=[w.detach().to("cpu", torch.float64) for w in npu.split_embedding_weights()],
            feature_table_map=list(range(len(npu.split_embedding_weights()))),
            optimizer=opt,
            pooling=pooling,
            weights_dtype=precision.as_dtype(),
            output_dtype=torch.float32,
            lr=lr,
            hp={k: float(v) for k, v in hp.items()},
        )

    def step(self, batch: Any, grad: torch.Tensor) -> torch.Tensor:
        batch.grad_out = grad
        return self.ref.step(batch)

    def weights(self) -> list[torch.Tensor]:
        return self.ref.weights

    def states(self) -> list[list[torch.Tensor]]:
        return self.ref.optimizer_states()


def compare_three(
    opt: O,
    specs: list[tuple[int, int]],
    *,
    oracle: str = "cpu",
    pooling: PoolingMode = SUM,
    weighted: bool = False,
    idx_dtype: torch.dtype = torch.int64,
    steps: int = 2,
    tol: float = 1e-4,
    self_tol: float = 1e-5,
    hp: dict | None = None,
    style: str = "cuda_user",
    **kwargs: Any,
) -> None:
    """Train on npu with the fused kernel, with the tensor program, and with the oracle
    (``"cpu"``: upstream's CPU module; ``"ref"``: the float64 reference); after each step the
    fused run's outputs, weights and states agree with the tensor program's within ``self_tol``
    and with the oracle's within ``tol``."""
    hp = dict(hp or {})
    lr = hp.pop("learning_rate", 0.05)
    tbe_hp = dict(hp)
    if "weight_decay_mode" in tbe_hp:
        from fbgemm_gpu.tbe.config.optimizer_config import WeightDecayMode

        tbe_hp["weight_decay_mode"] = WeightDecayMode(tbe_hp["weight_decay_mode"])
    build = dict(learning_rate=lr, pooling_mode=pooling, **tbe_hp, **kwargs)
    fused = training_tbe(opt, specs, NPU, style, **build)
    tensor = training_tbe(opt, specs, NPU, style, **build)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for w, (e, d) in zip(fused.split_embedding_weights(), specs, strict=True):
            w.copy_(torch.rand(e, d, generator=g) * 2 - 1)
    same_weights(fused, tensor)
    if oracle == "cpu":
        cpu = training_tbe(opt, specs, "cpu", **build)
        same_weights(fused, cpu)
    else:
        ref = _Reference(opt, fused, pooling, lr, hp)
    ftm = kwargs.get("feature_table_map")
    feature_specs = specs if ftm is None else [specs[t] for t in ftm]
    batches = make_batches(feature_specs, 5, steps, seed=11, weighted=weighted)
    for i, batch in enumerate(batches):
        with kernel_mode("tensor"):
            o_t, grad = train_step(tensor, batch, NPU, idx_dtype, grad_seed=i)
        with kernel_mode("triton"), counters.count() as c:
            o_f, _ = train_step(fused, batch, NPU, idx_dtype, grad_seed=i)
        assert _fused_launches(c) == 1, c.summary()  # one step kernel for every class
        if oracle == "cpu":
            o_o, _ = train_step(cpu, batch, "cpu", idx_dtype, grad_seed=i)
            w_o = cpu.split_embedding_weights()
            s_o = cpu.split_optimizer_states()
        else:
            o_o = ref.step(batch, grad)
            w_o, s_o = ref.weights(), ref.states()
        assert_close(o_f, o_t, self_tol, f"output vs tensor program, step {i}")
        assert_close(o_f.reshape(-1), o_o.reshape(-1), tol, f"output vs oracle, step {i}")
        w_f, w_t = fused.split_embedding_weights(), tensor.split_embedding_weights()
        for t in range(len(specs)):
            assert_close(w_f[t], w_t[t], self_tol, f"weights {t} vs tensor program, step {i}")
            assert_close(w_f[t], w_o[t], tol, f"weights {t} vs oracle, step {i}")
        s_f, s_t = fused.split_optimizer_states(), tensor.split_optimizer_states()
        assert len(s_f) == len(s_t) == len(s_o)  # SGD: none
        for t in range(len(s_f)):
            for s, (a, b, o) in enumerate(zip(s_f[t], s_t[t], s_o[t], strict=True)):
                assert_close(a, b, self_tol, f"state {s} of table {t} vs tensor, step {i}")
                assert_close(a.reshape(o.shape), o, tol, f"state {s} of table {t}, step {i}")


@pytest.mark.parametrize("opt", CPU_OPTIMIZERS, ids=lambda o: o.name)
@pytest.mark.parametrize(
    ("pooling", "weighted", "specs"),
    [(SUM, False, MIXED), (SUM, True, MIXED), (MEAN, False, MIXED), (NONE, False, ONE_D)],
    ids=["sum", "weighted_sum", "mean", "sequence"],
)
def test_step_matches_tensor_program_and_upstream_cpu(
    opt: O, pooling: PoolingMode, weighted: bool, specs: list[tuple[int, int]]
) -> None:
    compare_three(opt, specs, pooling=pooling, weighted=weighted)


SLOW = pytest.mark.slow
RWA, SGD = O.EXACT_ROWWISE_ADAGRAD, O.EXACT_SGD


@pytest.mark.parametrize(
    ("opt", "kwargs"),
    [
        (RWA, {"idx_dtype": torch.int32}),
        (RWA, {"weights_precision": SparseType.FP16, "tol": 1e-2, "self_tol": 2e-3}),
        pytest.param(
            SGD, {"weights_precision": SparseType.FP16, "tol": 1e-2, "self_tol": 2e-3}, marks=SLOW
        ),
        (RWA, {"output_dtype": SparseType.FP16, "tol": 1e-2, "self_tol": 1e-3}),
        (RWA, {"gradient_clipping": True, "max_gradient": 0.05, "weighted": True}),
        (SGD, {"gradient_clipping": True, "max_gradient": 0.05, "weighted": True}),
        # two features read table 0: their rows are de-duplicated together
        (SGD, {"feature_table_map": [0, 0, 1, 2]}),
    ],
    ids=["int32", "fp16_weights", "sgd_fp16_weights", "fp16_output", "clipping", "sgd_clipping",
         "shared_tables"],
)  # fmt: skip
def test_modes_match_tensor_program_and_upstream_cpu(opt: O, kwargs: dict) -> None:
    compare_three(opt, MIXED, **kwargs)


@pytest.mark.parametrize(
    ("opt", "hp"),
    [
        (O.ADAM, {"weight_decay": 0.01}),
        pytest.param(O.ADAM, {}, marks=SLOW),
        (O.PARTIAL_ROWWISE_ADAM, {"weight_decay": 0.01}),
        (O.LAMB, {"weight_decay": 0.01}),
        pytest.param(O.PARTIAL_ROWWISE_LAMB, {"weight_decay": 0.01}, marks=SLOW),
        (O.LARS_SGD, {"weight_decay": 0.01, "eta": 0.01}),
        (O.EXACT_ROWWISE_ADAGRAD, {"weight_decay": 0.1, "weight_decay_mode": 1}),
        pytest.param(RWA, {"weight_decay": 0.1, "weight_decay_mode": 2}, marks=SLOW),
        (O.EXACT_ROWWISE_ADAGRAD, {"max_norm": 0.5}),
    ],
    ids=["adam_wd", "adam", "partial_adam", "lamb", "partial_lamb", "lars", "rwa_L2",
         "rwa_decouple", "rwa_max_norm"],
)  # fmt: skip
def test_optimizers_match_tensor_program_and_reference(opt: O, hp: dict) -> None:
    compare_three(opt, MIXED, oracle="ref", hp=hp)


@pytest.mark.parametrize("pooling", [MEAN, NONE], ids=["mean", "sequence"])
def test_adam_pooling_modes_match_reference(pooling: PoolingMode) -> None:
    specs = ONE_D if pooling == NONE else MIXED
    compare_three(O.ADAM, specs, oracle="ref", pooling=pooling, weighted=pooling == MEAN)


@pytest.mark.parametrize(
    ("opt", "precision", "tol", "style"),
    [
        (O.EXACT_ROWWISE_ADAGRAD, SparseType.BF16, 3e-2, "torchrec"),
        pytest.param(O.EXACT_SGD, SparseType.BF16, 3e-2, "torchrec", marks=SLOW),
        (O.ADAM, SparseType.FP16, 1e-2, "cuda_user"),
        (O.LAMB, SparseType.FP16, 1e-2, "cuda_user"),
    ],
    ids=["rwa_bf16", "sgd_bf16", "adam_fp16", "lamb_fp16"],
)
def test_half_precision_weights_match_reference(
    opt: O, precision: SparseType, tol: float, style: str
) -> None:
    # upstream's module builds bf16 tables only in torchrec's style (its CUDA style asks for a
    # bf16 cache), and that style refuses Adam / LAMB
    compare_three(
        opt, MIXED, oracle="ref", style=style, weights_precision=precision, tol=tol,
        self_tol=tol / 2,
    )  # fmt: skip


@contextmanager
def ours_on_cpu() -> Iterator[None]:
    """Route a CPU module's pt2 lookups to our registered autograd kernel (the CPU dispatch
    key would run upstream's)."""
    from fbgemm_npu.native.fbgemm.tbe.ops import KERNELS

    ns = torch.ops.fbgemm
    names = [q.removeprefix("fbgemm::") for q in KERNELS if q.endswith("_function_pt2")]
    real = {n: getattr(ns, n) for n in names}

    class Ours:
        def __init__(self, name: str) -> None:
            self.name = name

        def __call__(self, *args: Any, **kwargs: Any) -> torch.Tensor:
            return KERNELS[f"fbgemm::{self.name}"]["AutogradPrivateUse1"](*args, **kwargs)

        def __getattr__(self, attr: str) -> Any:
            return getattr(real[self.name], attr)

    for n in names:
        setattr(ns, n, Ours(n))
    try:
        yield
    finally:
        for n in names:
            setattr(ns, n, real[n])


@pytest.mark.parametrize(
    ("opt", "pooling"),
    [
        (RWA, SUM),
        (SGD, MEAN),
        (O.EXACT_ADAGRAD, MEAN),
        pytest.param(RWA, MEAN, marks=SLOW),
        pytest.param(SGD, SUM, marks=SLOW),
        pytest.param(O.EXACT_ADAGRAD, SUM, marks=SLOW),
    ],
    ids=["rwa_sum", "sgd_mean", "adagrad_mean", "rwa_mean", "sgd_sum", "adagrad_sum"],
)
def test_cpu_tensors_match_tensor_program_and_upstream(opt: O, pooling: PoolingMode) -> None:
    tbes = [training_tbe(opt, MIXED, "cpu", pooling_mode=pooling) for _ in range(3)]
    same_weights(tbes[0], tbes[1])
    same_weights(tbes[0], tbes[2])
    for i, batch in enumerate(make_batches(MIXED, 5, 2, seed=9, weighted=pooling == SUM)):
        with ours_on_cpu():
            with kernel_mode("triton"), counters.count("cpu") as c:
                train_step(tbes[0], batch, "cpu", torch.int64, grad_seed=i)
            assert _fused_launches(c) == 1, c.summary()
            with kernel_mode("tensor"), counters.count("cpu") as c:
                train_step(tbes[1], batch, "cpu", torch.int64, grad_seed=i)
            assert _fused_launches(c) == 0, c.summary()
        train_step(tbes[2], batch, "cpu", torch.int64, grad_seed=i)  # upstream
        for t in range(len(MIXED)):
            w = [x.split_embedding_weights()[t] for x in tbes]
            assert_close(w[0], w[1], 1e-5, f"weights {t} vs tensor program, step {i}")
            assert_close(w[0], w[2], 1e-4, f"weights {t} vs upstream CPU, step {i}")
            states = [x.split_optimizer_states() for x in tbes]
            for s, st in enumerate(zip(*(x[t] if x else [] for x in states), strict=True)):
                assert_close(st[0], st[1], 1e-5, f"state {s} of {t} vs tensor, step {i}")
                assert_close(st[0], st[2], 1e-4, f"state {s} of {t} vs upstream, step {i}")


def test_expanded_gradient_and_empty_batch() -> None:
    """``out.sum().backward()`` hands the backward a stride-0 gradient (read through its
    strides, no copy); a batch of empty bags touches no row."""
    opt = O.EXACT_ROWWISE_ADAGRAD
    tbes = [training_tbe(opt, MIXED, NPU, "cuda_user") for _ in range(2)]
    same_weights(tbes[0], tbes[1])
    batch = make_batches(MIXED, 5, 1, seed=2)[0]
    idx, off = batch.indices.to(NPU), batch.offsets.to(NPU)
    for tbe, m in zip(tbes, ("triton", "tensor"), strict=True):
        with kernel_mode(m), counters.count() as c:
            tbe(idx, off).sum().backward()
        assert _fused_launches(c) == (m == "triton"), c.summary()
    for a, b in zip(*(x.split_embedding_weights() for x in tbes), strict=True):
        assert_close(a, b, 1e-6, "weights after a stride-0 gradient")
    before = [w.detach().cpu().clone() for w in tbes[0].split_embedding_weights()]
    empty = torch.zeros(5 * len(MIXED) + 1, dtype=torch.int64, device=NPU)
    with kernel_mode("triton"):
        tbes[0](torch.zeros(0, dtype=torch.int64, device=NPU), empty).sum().backward()
    for a, b in zip(tbes[0].split_embedding_weights(), before, strict=True):
        assert torch.equal(a.detach().cpu(), b)


def test_keys_past_2_24_take_the_radix_sort(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables past 2**24 rows in all: the combined keys stay int64 and sort by two 24-bit float
    digits (:func:`fbgemm_npu.native.fbgemm.tbe.backward.sort_keys`), forced on small tables by
    lowering the host's threshold; shared tables de-duplicated together."""
    from fbgemm_npu.native.fbgemm.tbe import backward

    monkeypatch.setattr(backward, "F32_EXACT", 0)
    compare_three(RWA, MIXED, feature_table_map=[0, 0, 1, 2])


def test_tensor_program_forward_then_fused_backward(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tensor program's forward (its index matrices separate tensors, stacked for the
    kernel) followed by the fused backward: the same step."""
    from fbgemm_npu.native.fbgemm.tbe import forward

    monkeypatch.setattr(forward, "_triton_supported", lambda *a, **k: False)
    compare_three(O.ADAM, MIXED, oracle="ref", weighted=True)


@pytest.mark.parametrize("pooling", [SUM, MEAN], ids=["sum", "mean"])
def test_per_sample_weight_gradient_and_step(pooling: PoolingMode) -> None:
    """Per-sample weights that require grad: their gradient by the tensor program from the rows
    before the update, then the fused step; vs the tensor program and upstream's CPU module
    (whose weighted MEAN step leaves out 1 / length: its weights are compared for SUM only)."""
    cpu = training_tbe(RWA, MIXED, "cpu", pooling_mode=pooling)
    fused, tensor = (training_tbe(RWA, MIXED, NPU, "cuda_user", pooling_mode=pooling) for _ in "ab")
    same_weights(cpu, fused)
    same_weights(cpu, tensor)
    batch = make_batches(MIXED, 5, 1, seed=4, weighted=True)[0]
    frg = torch.tensor([1, 0, 1], dtype=torch.int32)
    grads, launches = [], []
    for tbe, dev, mode in ((cpu, "cpu", "auto"), (fused, NPU, "triton"), (tensor, NPU, "tensor")):
        psw = batch.per_sample_weights.clone().to(dev).requires_grad_()
        with kernel_mode(mode), counters.count() as c:
            out = tbe(
                batch.indices.to(dev),
                batch.offsets.to(dev),
                per_sample_weights=psw,
                feature_requires_grad=frg.to(dev),
            )
            g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
            out.backward(g.to(dev))
        grads.append(psw.grad)
        launches.append(_fused_launches(c))
    assert launches[1:] == [1, 0]
    assert_close(grads[1], grads[2], 1e-6, "per-sample weight gradient vs tensor program")
    assert_close(grads[1], grads[0], 1e-5, "per-sample weight gradient vs upstream CPU")
    for t in range(len(MIXED)):
        w = [x.split_embedding_weights()[t] for x in (cpu, fused, tensor)]
        assert_close(w[1], w[2], 1e-5, f"weights {t} vs tensor program")
        if pooling == SUM:
            assert_close(w[1], w[0], 1e-4, f"weights {t} vs upstream CPU")
