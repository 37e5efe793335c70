"""Bad input to the permute family's later ops: an error naming the op and the argument, for the
metadata upstream checks and for the data upstream's kernels misread (an index past its list of
pieces, negative sizes: upstream reads or writes out of bounds, so the conformance suite cannot
run them).  Data errors read back with an output size raise at the call (``ValueError``); the
queued one (``recat_embedding_grad_output_mixed_D_batch``) at ``fbgemm_npu.check()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.native._pending import pending
from fbgemm_npu.testing.budgets import drain_checks

F = torch.ops.fbgemm
NPU = "npu"
T = torch.tensor
I32 = torch.int32


@pytest.fixture(autouse=True)
def no_leftover_checks() -> Any:
    drain_checks()
    yield
    left = pending()
    drain_checks()
    assert left == 0, f"{left} queued data check(s) left unread: call fbgemm_npu.check()"


def _raises(call: Callable[[], Any], op: str, arg: str, exc: type = Exception) -> None:
    with pytest.raises(exc, match=f"{op}.*{arg}") as info:
        call()
        fbgemm_npu.check()
    assert isinstance(info.value, (ValueError, RuntimeError))


def _d(*ts: Any) -> list[Any]:
    return [t.to(NPU) if isinstance(t, torch.Tensor) else t for t in ts]


SEQ = "permute_sequence_embeddings"
PERM, LENGTHS, EMB = T([1, 0], dtype=I32), T([[1, 2], [0, 3]]), torch.arange(6.0)
SEQUENCE_ERRORS = {
    "lengths_1d": ((PERM, LENGTHS.view(-1), EMB), "'lengths'"),
    "float_permute": ((PERM.float(), LENGTHS, EMB), "'permute'"),
    "float64_embeddings": ((PERM, LENGTHS, EMB.double()), "'embeddings'"),
    "none_embeddings": ((PERM, LENGTHS, None), "'embeddings'"),
    "permute_too_big": ((T([2, 0], dtype=I32), LENGTHS, EMB), "'permute'"),
    "permute_negative": ((T([-1], dtype=I32), LENGTHS, EMB), "'permute'"),
    "negative_length": ((PERM, T([[1, -2], [0, 3]]), EMB), "'lengths'"),
    "embeddings_too_short": ((PERM, LENGTHS, EMB[:5]), "embeddings.numel"),
}


@pytest.mark.parametrize("case", SEQUENCE_ERRORS, ids=str)
def test_permute_sequence_embeddings_errors(case: str) -> None:
    args, arg = SEQUENCE_ERRORS[case]
    _raises(lambda: F.permute_sequence_embeddings(*_d(*args)), SEQ, arg)


def test_permute_sequence_embeddings_mixed_devices() -> None:
    args = [PERM.to(NPU), LENGTHS, EMB.to(NPU)]
    _raises(lambda: F.permute_sequence_embeddings(*args), SEQ, "lengths")


BMM = "permute102_baddbmm_permute102"
BIAS, A, B = torch.randn(2, 5), torch.randn(3, 2, 4), torch.randn(2, 4, 5)
BADDBMM_ERRORS = {
    "int_dtype": ((BIAS, A.int(), B), "'A'"),
    "float64": ((BIAS.double(), A.double(), B.double()), "'bias'"),
    "mixed_dtypes": ((BIAS.half(), A, B), "bias"),
    "A_2d": ((BIAS, A[0], B), "'A'"),
    "B_k_mismatch": ((BIAS, A, torch.randn(2, 3, 5)), "'B'"),
    "batch_mismatch": ((BIAS, A, torch.randn(3, 4, 5)), "'B'"),  # upstream: baddbmm's error
    "bias_shape": ((BIAS.t().contiguous(), A, B), "'bias'"),
    "bias_3d": ((BIAS.view(2, 1, 5), A, B), "'bias'"),
    "none_bias": ((None, A, B), "'bias'"),
}


@pytest.mark.parametrize("case", BADDBMM_ERRORS, ids=str)
def test_permute102_baddbmm_permute102_errors(case: str) -> None:
    args, arg = BADDBMM_ERRORS[case]
    _raises(lambda: F.permute102_baddbmm_permute102(*_d(*args)), BMM, arg)


DUPLICATE_OPS = [
    "permute_duplicate_pooled_embs",
    "permute_duplicate_pooled_embs_split",
    "permute_duplicate_pooled_embs_auto_grad",
    "permute_duplicate_pooled_embs_auto_grad_split",
]
X, OFF, P = torch.randn(2, 10), T([0, 2, 5, 10]), T([2, 0, 0])
DUPLICATE_ERRORS = {
    "pooled_1d": ((X[0], OFF, P), "'pooled_embs'"),
    "int32_offsets": ((X, OFF.int(), P), "'offset_dim_list'"),
    "int32_permute": ((X, OFF, P.int()), "'permute_list'"),
    "empty_permute": ((X, OFF, P[:0]), "'permute_list'"),
    "empty_offsets": ((X, OFF[:0], P), "'offset_dim_list'"),
    "permute_past_the_pieces": ((X, OFF, T([4, 0])), "'permute_list'"),  # 4 pieces
    "permute_negative": ((X, OFF, T([0, -1])), "'permute_list'"),
    "none_offsets": ((X, None, P), "'offset_dim_list'"),
}


@pytest.mark.parametrize("case", DUPLICATE_ERRORS, ids=str)
@pytest.mark.parametrize("op", DUPLICATE_OPS)
def test_permute_duplicate_pooled_embs_errors(op: str, case: str) -> None:
    (x, off, perm), arg = DUPLICATE_ERRORS[case]
    _raises(lambda: getattr(F, op)(*_d(x, off, perm, OFF, P)), op, arg)


def test_permute_duplicate_pooled_embs_mixed_devices() -> None:
    op = "permute_duplicate_pooled_embs"
    _raises(lambda: F.permute_duplicate_pooled_embs(X.to(NPU), OFF, P, OFF, P), op, "offset_dim")


def test_duplicate_split_backward_with_lists_that_do_not_invert() -> None:
    """Upstream's autograd engine refuses the wrong-shaped gradient; ours names the lists."""
    op = "permute_duplicate_pooled_embs_auto_grad_split"
    x = X.to(NPU).requires_grad_()
    out = F.permute_duplicate_pooled_embs_auto_grad_split(x, *_d(OFF, P, OFF, P))
    with pytest.raises(RuntimeError, match=f"{op}.*'inv_offset_dim_list'"):
        out.sum().backward()


G = torch.randn(3, 10)
MIXED_D = "recat_embedding_grad_output_mixed_D"
RECAT_ERRORS = {
    "negative": ((G, [12, -2]), "'dim_sum_per_rank'"),  # upstream: heap corruption
    "sum_mismatch": ((G, [3, 4]), "'dim_sum_per_rank'"),
    "3d": ((G.view(3, 5, 2), [5]), "'grad_output'"),
    "bfloat16": ((G.bfloat16(), [10]), "'grad_output'"),
    "float64": ((G.double(), [10]), "'grad_output'"),
}


@pytest.mark.parametrize("case", RECAT_ERRORS, ids=str)
def test_recat_mixed_d_errors(case: str) -> None:
    args, arg = RECAT_ERRORS[case]
    _raises(lambda: F.recat_embedding_grad_output_mixed_D(*_d(*args)), MIXED_D, arg)


def test_recat_embedding_grad_output_errors() -> None:
    op = "recat_embedding_grad_output"
    g = torch.randn(3, 4, 2).to(NPU)
    _raises(lambda: F.recat_embedding_grad_output(g, [1, 2]), op, "'num_features_per_rank'")
    _raises(lambda: F.recat_embedding_grad_output(g, [5, -1]), op, "'num_features_per_rank'")
    _raises(lambda: F.recat_embedding_grad_output(g[0], [4]), op, "'grad_output'")


BATCH = "recat_embedding_grad_output_mixed_D_batch"
DIMS, STARTS = T([3, 0, 7]), T([0, 3, 3])
BATCH_ERRORS = {
    "int32_dims": ((G, DIMS.int(), STARTS), "'dim_sum_per_rank'"),
    "int32_starts": ((G, DIMS, STARTS.int()), "'cumsum_dim_sum_per_rank'"),
    "2d_dims": ((G, DIMS.view(1, 3), STARTS), "'dim_sum_per_rank'"),
    "short_starts": ((G, DIMS, STARTS[:2]), "'cumsum_dim_sum_per_rank'"),
    "no_ranks": ((G, DIMS[:0], STARTS[:0]), "'dim_sum_per_rank'"),
    "3d_grad": ((G.view(3, 5, 2), DIMS, STARTS), "'grad_output'"),
    # the data (queued checks): upstream reads and writes past its buffers or leaves garbage
    "sum_mismatch": ((G, T([3, 0, 6]), STARTS), "'dim_sum_per_rank'"),
    "negative_dim": ((G, T([5, -2, 7]), T([0, 5, 3])), "'dim_sum_per_rank'"),
    "starts_not_the_scan": ((G, DIMS, T([0, 2, 3])), "'cumsum_dim_sum_per_rank'"),
    "starts_not_from_0": ((G, DIMS, T([1, 4, 4])), "'cumsum_dim_sum_per_rank'"),
}


@pytest.mark.parametrize("case", BATCH_ERRORS, ids=str)
def test_recat_mixed_d_batch_errors(case: str) -> None:
    args, arg = BATCH_ERRORS[case]
    _raises(lambda: F.recat_embedding_grad_output_mixed_D_batch(*_d(*args)), BATCH, arg)


def test_recat_mixed_d_batch_bad_data_stays_in_bounds() -> None:
    """Before its queued check is read, a bad call writes only inside its output."""
    bad = _d(G, T([30, -20, 7]), T([-5, 40, 3]))
    out = F.recat_embedding_grad_output_mixed_D_batch(*bad)
    assert out.shape == (30,)
    with pytest.raises(RuntimeError, match=f"{BATCH}.*'dim_sum_per_rank'"):
        fbgemm_npu.check()
