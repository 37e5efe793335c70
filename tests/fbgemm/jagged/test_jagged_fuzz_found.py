"""Regression tests of what the jagged fuzz suite (tests/fuzz/test_fuzz_jagged.py) found: each a
bad input that crashed upstream, met an unclear error or a result unlike upstream's, now a clear
error naming the op and the argument (docs/design.md, rule 9).  Deterministic: the fuzz cases
shrunk to their essence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing.jagged_inputs import OFFSETS, VALUES, to_npu

F = torch.ops.fbgemm
NPU = "npu"
_V, _O = VALUES.to(NPU), OFFSETS.to(NPU)
J2D = "fbgemm::jagged_to_padded_dense_forward"  # the composite's errors name its forward op


def call_on_npu(call: Callable[[], Any]) -> Any:
    """Run ``call`` with npu as the default device of the tensors it builds inline."""
    with torch.device(NPU):
        return call()


def _i32(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32, device=NPU)


@pytest.mark.parametrize(
    "call, op, arg",
    [
        # int32 offsets whose row wraps: 8 - (-2**31 + 7) is positive in upstream's int
        # arithmetic, so upstream reads row 8 of 8 where the offsets say "decreasing: padding"
        (
            lambda: F.jagged_2d_to_dense(torch.ones(8, 3), _i32([0, 0, 3, 8, -(2**31) + 7]), 2),
            "fbgemm::jagged_2d_to_dense",
            "offsets",
        ),
        # int64 offsets past 2**31: upstream truncates them to int (this row becomes padding)
        (
            lambda: F.jagged_to_padded_dense(
                torch.ones(10, 1), [torch.tensor([0, 2**31 + 5])], [2], 0.0
            ),
            J2D,
            "offsets",
        ),
        # a negative offset ending a row no position reads: upstream's int arithmetic again
        (
            lambda: F.dense_to_jagged(torch.ones(2, 2, 1), [torch.tensor([0, 2, -5])], 4),
            "fbgemm::dense_to_jagged_forward",
            "x_offsets",
        ),
        # stacked: int64 lengths whose per-key offsets pass 2**31 (upstream truncates them)
        (
            lambda: F.stacked_jagged_2d_to_dense(
                torch.ones(10, 2), torch.tensor([[5, 2**31]]), [0, 10], [2], 0
            ),
            "fbgemm::stacked_jagged_2d_to_dense",
            "lengths",
        ),
        # bdvj forward, decreasing offsets: upstream's forward reads the row's first row (its
        # backward none), so there is no result to match; also with L = 0 (it reads v[:, 0])
        (
            lambda: F.batched_dense_vec_jagged_2d_mul(
                torch.ones(8, 1), torch.ones(12, 4), torch.tensor([0, 6, 3, 6, 10])
            ),
            "fbgemm::batched_dense_vec_jagged_2d_mul_forward",
            "a_offsets",
        ),
        (
            lambda: F.batched_dense_vec_jagged_2d_mul(
                torch.ones(4, 0), torch.ones(12, 4), torch.tensor([0, 6, 3, 6, 10])
            ),
            "fbgemm::batched_dense_vec_jagged_2d_mul_forward",
            "a_offsets",
        ),
    ],
)
def test_fuzz_found_data_errors(call: Callable[[], Any], op: str, arg: str) -> None:
    with pytest.raises(RuntimeError, match=rf"{op}: argument '{arg}'|{op}: arguments '{arg}'"):
        call_on_npu(call)
        fbgemm_npu.check()  # a deferred data check is read here


@pytest.mark.parametrize(
    "call, match",
    [
        # v without rows but B > 0: H = 0 heads (upstream divides by it: SIGFPE)
        (
            lambda: F.batched_dense_vec_jagged_2d_mul(
                torch.ones(0, 1), torch.ones(0, 1), torch.tensor([0, 0])
            ),
            r"batched_dense_vec_jagged_2d_mul_forward: B = 1 .* H >= 1 heads",
        ),
        # shapes that do not broadcast: named, not torch's "The size of tensor a ..."
        (
            lambda: F.jagged_dense_elementwise_add(torch.ones(5), [_O], torch.ones(3, 4, 3)),
            "jagged_dense_elementwise_add: arguments 'x_values' .* and 'y' .* do not broadcast",
        ),
        (
            lambda: F.jagged_dense_elementwise_mul(torch.ones(5, 3), [_O], torch.ones(3, 4, 2)),
            "jagged_dense_elementwise_mul: arguments 'x_values' .* and 'y' .* do not broadcast",
        ),
        (
            lambda: F.jagged_dense_dense_elementwise_add_jagged_output(
                torch.ones(111), [_O], torch.ones(3, 4, 3), torch.ones(3, 4, 3)
            ),
            "add_jagged_output: arguments 'x_values' .* and 'y_0' .* do not broadcast",
        ),
        # y's batch against the offsets' (was an index_copy_ error)
        (
            lambda: F.jagged_dense_elementwise_mul_backward(
                torch.ones(5, 3), [_O], torch.ones(4, 4, 3), torch.ones(5, 3)
            ),
            "jagged_dense_elementwise_mul_backward: argument 'y' has batch size 4",
        ),
        # size-1 middle dims are checked even when the output is empty, as upstream does
        (
            lambda: F.jagged_dense_elementwise_add(torch.ones(1, 18, 1), [_O], torch.ones(3, 0, 1)),
            r"argument 'x_values' of shape \(1, 18, 1\) must be 1-D or \[N, ..., D\]",
        ),
        # upstream's composites given None: their own kernels fail naming nothing
        (
            lambda: F.jagged_to_padded_dense(None, [_O], [2], 0.0),
            "fbgemm::jagged_to_padded_dense: argument 'values' must be a Tensor",
        ),
        (
            lambda: F.dense_to_jagged(None, [_O]),
            "fbgemm::dense_to_jagged: argument 'dense' must be a Tensor",
        ),
    ],
)
def test_fuzz_found_metadata_errors(call: Callable[[], Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call_on_npu(call)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: F.jagged_to_padded_dense(_V, [_O], [2**40], 0.0), "'max_lengths' = "),
        (
            lambda: F.jagged_to_padded_dense(torch.ones(0, 3), [_O[:1]], [2**62], 0.0),
            "'max_lengths' = ",
        ),
        (lambda: F.jagged_2d_to_dense(_V, _O, 2**40), "'max_sequence_length' = "),
        (lambda: F.dense_to_jagged(torch.ones(3, 3, 2), [_O], 2**40), "'total_L' = "),
        (lambda: F.jagged_to_padded_dense_backward(torch.ones(3, 1, 1), [_O], 2**40), "'total_L'"),
        (
            lambda: F.stacked_jagged_1d_to_dense(
                torch.ones(7), torch.tensor([[1, 2], [0, 4]]), [0, 3, 7], [2, 2**40], 0
            ),
            "'max_lengths_per_key'",
        ),
    ],
)
def test_fuzz_found_unallocatable_outputs_name_their_size(
    call: Callable[[], Any], match: str
) -> None:
    with pytest.raises(RuntimeError, match="cannot be allocated") as info:
        call_on_npu(call)
    assert match in str(info.value) and str(info.value).startswith("fbgemm::")


def test_fuzz_found_device_of_grad_output() -> None:
    with pytest.raises(RuntimeError, match="'grad_output' \\(cpu\\) and 'v' \\(npu:0\\)"):
        F.batched_dense_vec_jagged_2d_mul_backward(
            torch.ones(6, 3), torch.ones(6, 4, device=NPU), torch.ones(5, 6, device=NPU), _O
        )


def test_fuzz_found_backward_overlapping_rows_and_deep_levels() -> None:
    """bdvj's backward refuses decreasing offsets too (upstream assigns the products of rows that
    overlap, keeping one, where the gradient is their sum); and a level with no rows still has
    the levels below it checked (offsets[1][-1] = 2**31 - 1 against an offsets[2] of one entry:
    upstream refuses it)."""
    with pytest.raises(RuntimeError, match="batched_dense_vec_jagged_2d_mul_backward: argument"):
        F.batched_dense_vec_jagged_2d_mul_backward(
            *to_npu((torch.ones(8, 3), torch.ones(8, 2), torch.ones(9, 6))),
            torch.tensor([0, 3, 0, 8, 8], device=NPU),
        )
        fbgemm_npu.check()
    deep = to_npu([torch.tensor([0, 0]), torch.tensor([2**31 - 1]), torch.tensor([0])])
    with pytest.raises(RuntimeError, match="jagged_dense_elementwise_mul_forward: argument"):
        F.jagged_dense_elementwise_mul_forward(
            torch.ones(2, 1, device=NPU), deep, torch.ones(1, 1, 1, 1, 1, device=NPU)
        )
        fbgemm_npu.check()
