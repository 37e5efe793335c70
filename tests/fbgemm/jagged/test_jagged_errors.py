"""The jagged family's bad inputs: an error that names the op and the argument (docs/design.md,
rule 9), never a crash or a silently wrong result.

Metadata errors (ranks, dtypes, list lengths) are ``ValueError``s raised on the host, with the
data checks on or off; data errors (offsets that would make upstream read or write out of
bounds, or disagree between jagged dims) are ``RuntimeError``s from the one device-side check,
which ``FBGEMM_NPU_VALIDATE=0`` turns off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing.counters import count
from fbgemm_npu.testing.jagged_inputs import OFFSETS, VALUES, jagged, to_npu

F = torch.ops.fbgemm
NPU = "npu"
# The bad-input lambdas build the rest of their inputs on npu (call_on_npu).
_V, _O = VALUES.to(NPU), OFFSETS.to(NPU)
# Upstream's composites jagged_to_padded_dense / dense_to_jagged run their forward ops (no kernel
# of ours on them: jagged.py), so their errors name the forward op, which upstream's do too.
J2D = "fbgemm::jagged_to_padded_dense_forward"


def call_on_npu(call: Callable[[], Any]) -> Any:
    """Run ``call`` with npu as the default device of the tensors it builds inline."""
    with torch.device(NPU):
        return call()


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: F.jagged_to_padded_dense(_V, [], [], 0.0),
            rf"{J2D}: argument 'offsets' must hold 1 to 5",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [_O] * 6, [1] * 6, 0.0),
            "argument 'offsets' must hold 1 to 5",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [_O.view(1, 4)], [2], 0.0),
            r"argument 'offsets\[0\]' must be 1-D",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [_O.float()], [2], 0.0),
            r"'offsets\[0\]' must have dtype int32 or int64",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [torch.tensor([0, 2, 3]), _O.int()], [2, 2], 0.0),
            r"argument 'offsets\[1\]' has dtype int32 but 'offsets\[0\]' has int64",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [torch.zeros(0, dtype=torch.int64)], [2], 0.0),
            r"argument 'offsets\[0\]' must have at least one entry",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V.double(), [_O], [2], 0.0),
            "argument 'values' must have dtype",
        ),
        (
            lambda: F.jagged_to_padded_dense(torch.tensor(1.0), [_O], [2], 0.0),
            "argument 'values' must have at least 1 dim",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V.view(5, 1, 1).expand(5, 2, 1), [_O], [2], 0.0),
            "argument 'values' of shape .* size-1 middle dims",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [_O], [2, 2], 0.0),
            "argument 'max_lengths' must have one entry per jagged dim",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [_O], [-1], 0.0),
            r"argument 'max_lengths\[0\]' must be >= 0",
        ),
        (
            lambda: F.jagged_1d_to_dense(_V, _O, 3, 0),
            "fbgemm::jagged_1d_to_dense: argument 'values' must be 1-D",
        ),
        (
            lambda: F.jagged_1d_to_dense(_V.view(-1), _O, 0, 0),
            "argument 'max_sequence_length' must be > 0",
        ),
        (
            lambda: F.jagged_to_padded_dense_backward(_V, [_O], -1),
            "argument 'total_L' must be >= 0",
        ),
        (
            lambda: F.jagged_to_padded_dense_backward(torch.zeros(4, 2), [_O], 5),
            "argument 'grad_output' has batch size 4",
        ),
        (
            lambda: F.dense_to_jagged(torch.zeros(3, 3), [_O]),
            "fbgemm::dense_to_jagged_forward: argument 'dense' must be 3-D",
        ),
        (
            lambda: F.dense_to_jagged(torch.zeros(2, 3, 1), [_O]),
            "argument 'dense' has batch size 2",
        ),
        (
            lambda: F.jagged_dense_elementwise_add(_V, [_O], torch.zeros(3, 2)),
            "argument 'y' must have 3 dims",
        ),
        (
            lambda: F.jagged_dense_elementwise_mul(_V, [_O], torch.zeros(2, 2, 1)),
            "argument 'y' has batch size 2",
        ),
        (
            lambda: F.jagged_dense_elementwise_mul_backward(
                torch.ones(5, 1), [_O], torch.ones(3, 2, 1).half(), _V
            ),
            "must share one dtype",
        ),
        (
            lambda: F.stacked_jagged_1d_to_dense(_V.view(-1), _O, [0, 5], [2], 0),
            "argument 'lengths' must be 2-D",
        ),
        (
            lambda: F.stacked_jagged_1d_to_dense(_V.view(-1), _O.view(2, 2), [0, 5], [2, 2], 0),
            "'offset_per_key' needs T \\+ 1 = 3 entries",
        ),
        (
            lambda: F.stacked_jagged_2d_to_dense(_V, _O.view(2, 2), [0, 2, 5], [2, -1], 0),
            r"argument 'max_lengths_per_key\[1\]' must be >= 0",
        ),
        (
            lambda: F.stacked_jagged_2d_to_dense(_V, _O.view(2, 2).float(), [0, 2, 5], [2, 2], 0),
            "argument 'lengths' must have dtype int32 or int64",
        ),
        (
            lambda: F.batched_dense_vec_jagged_2d_mul(torch.ones(5, 4), torch.ones(5, 6), _O),
            r"B = 3 \(a_offsets",
        ),
        (
            lambda: F.batched_dense_vec_jagged_2d_mul(torch.ones(6), torch.ones(5, 6), _O),
            "argument 'v' must be 2-D",
        ),
        (
            lambda: F.batched_dense_vec_jagged_2d_mul(
                torch.ones(6, 4), torch.ones(5, 6).half(), _O
            ),
            "arguments 'v' \\(float32\\) and 'a_values' \\(float16\\) must have the same dtype",
        ),
    ],
)
def test_metadata_errors_name_op_and_argument(call: Callable[[], Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call_on_npu(call)


_DATA_ERRORS = [
    # Reads past the values: a row reaching row 5 of 5 (upstream reads garbage).
    (
        lambda: F.jagged_to_padded_dense(_V, [torch.tensor([0, 2, 2, 7])], [4], 0.0),
        J2D,
        "offsets",
    ),
    # A negative offset (upstream reads before the buffer).
    (
        lambda: F.jagged_to_padded_dense(_V, [torch.tensor([-1, 2, 3])], [3], 0.0),
        J2D,
        "offsets",
    ),
    # Two jagged dims whose counts disagree: offsets[0] ends at 3, offsets[1] has 2 rows.
    (
        lambda: F.jagged_to_padded_dense(
            _V, [torch.tensor([0, 2, 3]), torch.tensor([0, 1, 5])], [2, 2], 0.0
        ),
        J2D,
        "offsets",
    ),
    # Writes past total_L (upstream writes out of bounds: heap corruption).
    (
        lambda: F.dense_to_jagged(torch.ones(3, 3, 1), [_O], 4),
        "fbgemm::dense_to_jagged_forward",
        "x_offsets",
    ),
    (
        lambda: F.jagged_to_padded_dense_backward(torch.ones(3, 3), [_O], 3),
        "fbgemm::jagged_to_padded_dense_backward",
        "offsets",
    ),
    # Jagged output: offsets reaching past x_values' rows.
    (
        lambda: F.jagged_dense_elementwise_mul(
            _V, [torch.tensor([0, 2, 2, 7])], torch.ones(3, 4, 1)
        ),
        "fbgemm::jagged_dense_elementwise_mul",
        "x_offsets",
    ),
    # Stacked: lengths summing past the values (key 1 reads rows 5..8 of 7).
    (
        lambda: F.stacked_jagged_1d_to_dense(
            torch.ones(7), torch.tensor([[1, 2], [0, 5]]), [0, 3, 7], [2, 5], 0
        ),
        "fbgemm::stacked_jagged_1d_to_dense",
        "lengths",
    ),
    (
        lambda: F.batched_dense_vec_jagged_2d_mul(
            torch.ones(3, 4), torch.ones(5, 6), torch.tensor([0, 2, 2, 9])
        ),
        "fbgemm::batched_dense_vec_jagged_2d_mul_forward",
        "a_offsets",
    ),
]
# Backward kernels given the same bad offsets (their checks are the forward's own: memory only).
_BAD_BACKWARDS = [
    lambda: F.jagged_dense_elementwise_mul_backward(
        torch.ones(5, 2), [torch.tensor([0, 2, 2, 9])], torch.ones(3, 4, 2), torch.ones(5, 2)
    ),
    lambda: F.batched_dense_vec_jagged_2d_mul_backward(
        torch.ones(3, 6), torch.ones(3, 4), torch.ones(5, 6), torch.tensor([0, 2, 2, 9])
    ),
]


@pytest.mark.parametrize("call, op, arg", _DATA_ERRORS)
def test_data_errors_name_op_and_argument(call: Callable[[], Any], op: str, arg: str) -> None:
    with pytest.raises(RuntimeError, match=rf"{op}: argument.* '{arg}'|{op}: arguments '{arg}'"):
        call_on_npu(call)
        fbgemm_npu.check()  # a deferred data check is read here


def test_device_mismatch_is_refused() -> None:
    v, o = to_npu(jagged(4, 3, 2))
    with pytest.raises(RuntimeError, match=r"'offsets\[0\]' is on cpu but the data is on npu:0"):
        F.jagged_to_padded_dense(v, [o.cpu()], [3], 0.0)
    with pytest.raises(RuntimeError, match=r"'offsets\[0\]' is on npu:1"):
        F.jagged_to_padded_dense(v, [o.to("npu:1")], [3], 0.0)
    with pytest.raises(RuntimeError, match="'x_values' \\(npu:0\\) and 'y' \\(cpu\\)"):
        F.jagged_dense_elementwise_add(v, [o], torch.zeros(4, 3, 2))
    with pytest.raises(RuntimeError, match="'values' \\(npu:0\\) and 'lengths' \\(cpu\\)"):
        F.stacked_jagged_2d_to_dense(v, torch.ones(1, 4, dtype=torch.int64), [0, 4], [2], 0)


def test_validation_off_skips_only_the_data_check(no_validation: None) -> None:
    """FBGEMM_NPU_VALIDATE=0 drops the data check (offsets are then trusted, as upstream trusts
    them); metadata errors remain."""
    with pytest.raises(ValueError, match="'max_lengths'"):
        F.jagged_to_padded_dense(_V, [_O], [2, 2], 0.0)
    with count() as c:
        F.jagged_to_padded_dense(_V, [_O], [2], 0.0)
    assert "aten._assert_async.msg" not in c.launch_ops


@pytest.mark.parametrize("call", [c for c, _, _ in _DATA_ERRORS] + _BAD_BACKWARDS)
def test_bad_offsets_stay_inside_every_tensor_with_the_checks_off(
    call: Callable[[], Any], no_validation: None
) -> None:
    """With the data check off (or deferred: read later), bad offsets give an unspecified result
    but never a read or write outside a tensor: gathers read clamped rows, scatters write a spare
    row (the simulator raises for an index out of range, as a device would fault)."""
    call_on_npu(call)


def test_stacked_backward_with_bad_lengths_stays_inside(no_validation: None) -> None:
    values = torch.ones(7, 2, device=NPU, requires_grad=True)
    lengths = torch.tensor([[1, 2], [0, 9]], device=NPU)
    outs = F.stacked_jagged_2d_to_dense(values, lengths, [0, 3, 7], [2, 5], 0)
    sum(o.sum() for o in outs).backward()
    assert values.grad is not None and values.grad.shape == values.shape


@pytest.mark.parametrize("dense", [torch.zeros(3, 3), torch.zeros(5, 3, 1), torch.zeros(3, 3, 1)])
def test_dense_to_jagged_checks_total_L_first_like_upstream(dense: torch.Tensor) -> None:
    """Upstream's CPU kernel refuses ``total_L < 0`` before it looks at ``dense`` (a wrong rank,
    a wrong batch size): so does ours (it checked the rank first, failing upstream's test)."""
    with pytest.raises(ValueError, match="total_L passed to dense_to_jagged_forward must be >= 0"):
        F.dense_to_jagged(dense, [OFFSETS], -1)
    ours = "dense_to_jagged_forward: argument 'total_L' must be >= 0"
    with pytest.raises(ValueError, match=ours):
        F.dense_to_jagged(dense.to(NPU), [_O], -1)
