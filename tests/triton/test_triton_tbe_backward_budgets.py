"""The fused Triton TBE backward's launch budgets and fallbacks
(fbgemm_npu/native/fbgemm/tbe/_triton_backward.py; parity: test_triton_tbe_backward.py).

Budgets: the second training step's backward of a registered layout held exactly to the lookups'
``Budget.triton`` labels (budgets.py ``_TRITON_BACKWARD``), with the data checks off (the
backward has none; the entry's ``triton_checks`` is the forward's).  Fallbacks: ``auto`` runs the
tensor program; under ``kernel_mode("triton")`` the calls the kernel does not support do too.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode

from fbgemm_npu.native._triton import kernel_mode
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.tbe_inputs import (
    MIXED,
    NPU,
    counter_regularization,
    make_batches,
    training_tbe,
)

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")

KERNEL = "triton.tbe_backward_step"
MEAN, NONE = PoolingMode.MEAN, PoolingMode.NONE
RWA, SGD = O.EXACT_ROWWISE_ADAGRAD, O.EXACT_SGD


LOOKUPS = {
    O.EXACT_SGD: "sgd",
    O.EXACT_ADAGRAD: "adagrad",
    O.EXACT_ROWWISE_ADAGRAD: "rowwise_adagrad",
    O.ADAM: "adam",
    O.PARTIAL_ROWWISE_ADAM: "partial_rowwise_adam",
    O.LAMB: "lamb",
    O.PARTIAL_ROWWISE_LAMB: "partial_rowwise_lamb",
    O.LARS_SGD: "lars_sgd",
}
LABELS = {  # label -> (specs, module kwargs, weighted: True, or "grad" (psw requiring grad))
    "backward": ([(30, 8)], {}, False),
    "weighted_backward": ([(30, 8)], {}, True),
    "mean_backward": ([(30, 8)], {"pooling_mode": MEAN}, False),
    "sequence_backward": ([(30, 8)], {"pooling_mode": NONE}, False),
    "clipped_backward": ([(30, 8)], {"gradient_clipping": True, "max_gradient": 0.1}, True),
    # per-sample weights that require grad: their gradient by the tensor program first
    "weight_grad_backward": ([(30, 8)], {}, "grad"),
    "two_class_backward": ([(30, 4), (30, 8)], {}, False),
    # the tensor program's forward (monkeypatched below): its index matrices stacked first
    "tensor_forward_two_class_backward": ([(30, 4), (30, 8)], {}, False),
}


def _budget_case(opt: O, label: str) -> counters.Counter:
    """The second training step's backward of a registered layout, held to the Triton
    budget ``label`` (the forward under kernel_mode("triton") too: the backward selects as its
    forward did)."""
    from fbgemm_npu.split_table import register_tbe_layout
    from fbgemm_npu.testing.budgets import assert_triton_budget

    specs, kwargs, weighted = LABELS[label]
    tbe = training_tbe(opt, specs, NPU, "cuda_user", **kwargs)
    register_tbe_layout(tbe)
    op = f"fbgemm::split_embedding_codegen_lookup_{LOOKUPS[opt]}_function_pt2"
    counted = None
    for step, b in enumerate(make_batches(specs, 3, 2, seed=5, weighted=weighted)):
        psw = None if b.per_sample_weights is None else b.per_sample_weights.to(NPU)
        if psw is not None and weighted == "grad":
            psw.requires_grad_()
        with kernel_mode("triton"):
            out = tbe(b.indices.to(NPU), b.offsets.to(NPU), per_sample_weights=psw)
            grad = torch.ones_like(out)
            if step == 0:
                out.backward(grad)
                continue
        counted = assert_triton_budget(lambda: out.backward(grad), op, label)  # noqa: B023
    assert counted is not None
    return counted


@pytest.mark.parametrize("label", list(LABELS))
def test_rowwise_adagrad_triton_budget(label: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the backward has no data checks (its labels' triton_path_checks are 0): checks on
    if label.startswith("tensor_forward"):
        from fbgemm_npu.native.fbgemm.tbe import forward

        monkeypatch.setattr(forward, "_triton_supported", lambda *a, **k: False)
    c = _budget_case(RWA, label)
    assert c.launch_ops.count(KERNEL) == 1
    assert ("aten.stack.default" in c.launch_ops) == label.startswith("tensor_forward")


@pytest.mark.parametrize("opt", [o for o in LOOKUPS if o != RWA], ids=lambda o: LOOKUPS[o])
@pytest.mark.parametrize("validate", ["1", "0"])
def test_optimizer_triton_budget(opt: O, validate: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", validate)
    _budget_case(opt, "backward")
    if opt in (SGD, O.ADAM):
        _budget_case(opt, "two_class_backward")


def _backward_ops(tbe: Any, mode: str, **batch: Any) -> list[str]:
    """The launches of one training step's backward under kernel ``mode`` (the forward's too;
    per-sample weights require grad); ``batch``: :func:`make_batches` arguments."""
    b = make_batches(MIXED, 3, 1, seed=6, **batch)[0]
    psw = b.per_sample_weights
    with kernel_mode(mode):
        if psw is not None:
            psw = psw.to(NPU).requires_grad_()
        out = tbe(
            b.indices.to(NPU),
            b.offsets.to(NPU),
            per_sample_weights=psw,
            batch_size_per_feature_per_rank=b.batch_size_per_feature_per_rank,
        )
        with counters.count() as c:
            out.backward(torch.ones_like(out))
    assert c.launches > 0
    return c.launch_ops


def test_auto_runs_the_tensor_program() -> None:
    tbe = training_tbe(RWA, MIXED, NPU, "cuda_user")
    ops = _backward_ops(tbe, "auto")
    assert not [n for n in ops if n.startswith("triton.")], ops
    assert KERNEL in _backward_ops(tbe, "triton")


def test_unsupported_calls_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under kernel_mode("triton") the tensor program serves what the kernel does not: VBE,
    global weight decay, Adam's rowwise bias correction, an optimizer it lacks (the counter), D
    past its tile."""
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        GlobalWeightDecayDefinition,
        WeightDecayMode,
    )
    from fbgemm_gpu.tbe.config.optimizer_config import UserEnabledConfigDefinition

    from fbgemm_npu.native.fbgemm.tbe import backward

    gwd = {
        "weight_decay": 0.01,
        "weight_decay_mode": WeightDecayMode.DECOUPLE_GLOBAL,
        "global_weight_decay": GlobalWeightDecayDefinition(start_iter=0, lower_bound=0.0),
    }
    cases = [
        (training_tbe(SGD, MIXED, NPU, "cuda_user"), {"vbe": [[2, 1], [1, 2], [3, 0]]}),
        (training_tbe(RWA, MIXED, NPU, "cuda_user", **gwd), {}),
        (
            training_tbe(
                O.ADAM,
                MIXED,
                NPU,
                "cuda_user",
                extra_optimizer_config=UserEnabledConfigDefinition(
                    use_rowwise_bias_correction=True
                ),
            ),
            {},
        ),
        (
            training_tbe(
                RWA, MIXED, NPU, "cuda_user", **counter_regularization("counter_decouple")
            ),
            {},
        ),
    ]
    for tbe, call in cases:
        ops = _backward_ops(tbe, "triton", **call)
        assert KERNEL not in ops, ops
    monkeypatch.setattr(backward, "TRITON_MAX_D", 8)  # MIXED has D = 16
    ops = _backward_ops(training_tbe(SGD, MIXED, NPU, "cuda_user"), "triton")
    assert KERNEL not in ops, ops
