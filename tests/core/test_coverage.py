"""Upstream's CPU build op by op (``fbgemm_npu/coverage.py``): every op a CPU tensor can run is
served on npu, internal (with the served op that takes its place) or out of scope (with the
reason); an op a newer fbgemm_gpu adds that is neither fails here."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu import coverage as cov
from fbgemm_npu._registry import REGISTRY


def test_every_upstream_cpu_op_is_served_or_classified() -> None:
    assert not cov.coverage().unclassified, cov.coverage().unclassified


def test_the_groups_split_the_upstream_ops() -> None:
    c = cov.coverage()
    groups = [set(c.served), set(c.internal), set(c.out_of_scope), set(c.unclassified)]
    everything = set(cov.upstream_cpu_ops())
    assert sum(len(g) for g in groups) == len(everything)
    assert set().union(*groups) == everything


def test_a_served_op_is_classified_nowhere_else() -> None:
    """A served op that a rule still calls internal / out of scope is a stale entry."""
    for op in cov.coverage().served:
        assert cov.internal(op) is None, op
        assert cov.out_of_scope(op) is None, op


@pytest.mark.parametrize("op", sorted(cov.coverage().internal))
def test_what_an_internal_op_names_is_served(op: str) -> None:
    target = cov.internal(op)
    keys = REGISTRY.kernels.get(target, {})
    assert set(keys) & {"PrivateUse1", "AutogradPrivateUse1"}, f"{op} -> {target}: not served"


def test_named_entries_exist_upstream() -> None:
    """Every op the tables name explicitly is an op of the installed fbgemm_gpu (no stale name)."""
    everything = set(cov.upstream_cpu_ops())
    named = set(cov.DEVICE_FREE) | set(cov._INTERNAL) | set(cov._OUT_OF_SCOPE) | cov._QUANTIZED
    assert named <= everything, sorted(named - everything)


def test_an_op_a_newer_upstream_adds_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    new = "fbgemm::an_op_of_a_newer_fbgemm_gpu"
    ops = cov.upstream_cpu_ops()
    monkeypatch.setattr(cov, "upstream_cpu_ops", lambda: sorted([*ops, new]))
    assert new in cov.coverage().unclassified
    assert any(new in line for line in cov.coverage_lines())


def test_rules_name_the_serving_op() -> None:
    sgd = "fbgemm::split_embedding_codegen_lookup_sgd_function_pt2"
    assert cov.internal("fbgemm::split_embedding_backward_codegen_sgd_cpu") == sgd
    assert cov.internal("fbgemm::split_embedding_codegen_forward_weighted_vbe_pt2_wrapper") == sgd
    assert (
        cov.internal("fbgemm::split_embedding_nobag_backward_codegen_rowwise_adagrad_cpu")
        == "fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function_pt2"
    )
    assert cov.internal("fbgemm::split_embedding_codegen_lookup_adam_function_cpu") == (
        "fbgemm::split_embedding_codegen_lookup_adam_function_pt2"
    )
    assert cov.internal("fbgemm::split_embedding_codegen_lookup_approx_sgd_function_cpu") is None
    assert "approx_sgd" in cov.out_of_scope(
        "fbgemm::split_embedding_codegen_lookup_approx_sgd_function_cpu"
    )
    assert cov.internal("fbgemm::jagged_to_padded_dense") is None


def test_a_device_free_op_answers_with_fbgemm_npu_imported() -> None:
    assert isinstance(torch.ops.fbgemm.check_feature_gate_key("no_such_feature"), bool)


def test_info_lines_count_the_groups() -> None:
    lines = cov.coverage_lines()
    c = cov.coverage()
    assert f"{len(c.served)} served on npu" in lines[0]
    assert f"served ({len(c.served)}):" in lines
    assert any(line.startswith(f"internal ({len(c.internal)})") for line in lines)
    assert any(line.startswith(f"out of scope ({len(c.out_of_scope)})") for line in lines)
