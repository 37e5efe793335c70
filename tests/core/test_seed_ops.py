"""Rec SDK's operator lists (``fbgemm_npu/seed_ops.py``): every seed operator is listed once,
what is named as serving it is registered, and ``info`` prints the table."""

from __future__ import annotations

import pytest

from fbgemm_npu._registry import REGISTRY
from fbgemm_npu.seed_ops import OUT_OF_SCOPE, SEED_OPS, seed_table

# The two seed documents' operator names (the Torch plugin's "Custom Operator" table, RecOps).
TORCH_LIST = {
    "asynchronous_complete_cumsum", "dense_to_jagged", "gather_for_rank1",
    "index_select_for_rank1_backward", "hstu_dense_forward", "hstu_dense_backward",
    "hstu_dense_forward_fuxi", "hstu_dense_backward_fuxi", "jagged_to_padded_dense",
    "permute_1D_sparse_data", "permute2d_sparse_data", "relative_attn_bias_pos",
    "relative_attn_bias_time", "relative_attn_bias_backward",
    "split_embedding_codegen_lookup_adagrad_function", "backward_codegen_adagrad_unweighted_exact",
    "disentangle_attention", "dense_embedding_codegen_lookup_function",
    "dense_embedding_codegen_lookup_function_grad",
}  # fmt: skip
RECOPS_LIST = {
    "concat_jagged_tensor", "concat_jagged_tensor_grad", "cust_op_by_addr",
    "disentangle_attention", "fused_lazy_adam", "fused_sgd", "gather_for_rank1",
    "hstu_dense_backward", "hstu_dense_backward_fuxi", "hstu_dense_forward",
    "hstu_dense_forward_fuxi", "hstu_backward_v2", "index_select_for_rank1_backward",
    "in_linear_silu", "in_linear_silu_backward", "lccl", "ln_mul", "multislice_concat",
    "norm_multiply_dropout", "norm_multiply_dropout_backward", "pcie_through",
    "relative_attn_bias_backward", "relative_attn_bias_pos", "relative_attn_bias_time",
    "reverse_sequence", "token_mixing",
}  # fmt: skip


def test_every_seed_operator_is_listed_once_with_its_lists() -> None:
    names = [s.name for s in SEED_OPS]
    assert len(names) == len(set(names))
    assert set(names) == TORCH_LIST | RECOPS_LIST
    for s in SEED_OPS:
        assert ("torch" in s.lists) == (s.name in TORCH_LIST), s.name
        assert ("recops" in s.lists) == (s.name in RECOPS_LIST), s.name
        assert bool(s.served_by) != (s.name in OUT_OF_SCOPE), s.name


ISSUE_11 = {
    "hstu_dense_forward", "hstu_dense_backward", "hstu_dense_forward_fuxi",
    "hstu_dense_backward_fuxi", "hstu_backward_v2", "relative_attn_bias_pos",
    "relative_attn_bias_time", "relative_attn_bias_backward",
}  # fmt: skip
FBGEMM_BOUND = {s.name for s in SEED_OPS if s.served_by and s.served_by[0].startswith("fbgemm::")}


@pytest.mark.parametrize("name", sorted(FBGEMM_BOUND | ISSUE_11))
def test_what_serves_a_seed_operator_is_registered(name: str) -> None:
    (s,) = [s for s in SEED_OPS if s.name == name]
    missing = [q for q in s.served_by if q not in REGISTRY.kernels]
    assert not missing, f"{name}: not registered: {missing}"


def test_every_seed_operator_is_covered() -> None:
    lines = seed_table(set(REGISTRY.kernels))
    assert not [line for line in lines if "not yet" in line]


def test_info_prints_the_seed_table(capsys: pytest.CaptureFixture[str]) -> None:
    from fbgemm_npu.__main__ import info

    assert info() == 0
    text = capsys.readouterr().out
    for s in SEED_OPS:
        assert f"  {s.name} " in text
    assert "out of scope" in text and "pcie_through" in text
