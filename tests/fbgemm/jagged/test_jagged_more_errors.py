"""Bad input to the jagged family's slicing.py, select.py, accumulate.py and pack.py ops: a
ValueError / RuntimeError naming the op and the argument (data checks: at the op's own read, or
at ``fbgemm_npu.check()``), never a crash or a result upstream would not give; with the checks
off, bad data stays memory-safe."""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu

F = torch.ops.fbgemm
NPU = "npu"
I32, I64 = torch.int32, torch.int64
X = torch.arange(1.0, 11.0)
L = torch.tensor([3, 0, 4, 3])
S = torch.tensor([1, 0, 2, 3])
M = torch.ones(10, dtype=torch.bool)
Z4 = torch.zeros(4, dtype=I64)

BAD = {
    # jagged_slice
    "slice 2-D values": ("jagged_slice", (X.reshape(2, 5), L, S, 2), "x_values"),
    "slice float64": ("jagged_slice", (X.double(), L, S, 2), "x_values"),
    "slice int32 lengths": ("jagged_slice", (X, L.int(), S, 2), "x_lengths"),
    "slice int32 start": ("jagged_slice", (X, L, S.int(), 2), "start"),
    "slice short start": ("jagged_slice", (X, L, S[:3], 2), "start"),
    "slice negative length": ("jagged_slice", (X, L, S, -2), "slice_length"),
    "slice start past": ("jagged_slice", (X, L, torch.tensor([1, 0, 5, 3]), 2), "start"),
    "slice start negative": ("jagged_slice", (X, L, torch.tensor([-1, 0, 2, 3]), 2), "start"),
    "slice lengths past values": (
        "jagged_slice",
        (X, torch.tensor([3, 0, 4, 9]), S, 9),
        "x_lengths",
    ),
    "slice int64 wrap": (
        "jagged_slice",
        (X, torch.tensor([2**32 + 2, 0]), torch.tensor([0, 0]), 2),
        "x_lengths",
    ),
    # jagged_slice_forward
    "fwd short tgt": ("jagged_slice_forward", (X, L, S, L, S[:3], 10, 3, True), "tgt_start"),
    "fwd negative rows": ("jagged_slice_forward", (X, L, S, L, Z4, -1, 3, True), "num_output_rows"),
    "fwd writes past": ("jagged_slice_forward", (X, L, S, L, Z4, 4, 3, True), "output_lengths"),
    "fwd reads past": ("jagged_slice_forward", (X, L + 3, Z4, L + 3, Z4, 22, 9, True), "x_lengths"),
    "fwd negative tgt": ("jagged_slice_forward", (X, L, S, L, -S, 10, 3, True), "tgt_start"),
    "fwd negative lengths": (
        "jagged_slice_forward",
        (X, L, S, -L, Z4, 10, 3, True),
        "output_lengths",
    ),
    "fwd bool values": ("jagged_slice_forward", (X.bool(), L, S, L, S, 10, 3, True), "x_values"),
    # masked_select_jagged_1d
    "masked int mask": ("masked_select_jagged_1d", (X, L, M.int()), "mask"),
    "masked float lengths": ("masked_select_jagged_1d", (X, L.float(), M), "lengths"),
    "masked 2-D mask": ("masked_select_jagged_1d", (X, L, M.reshape(2, 5)), "mask"),
    "masked check_length": ("masked_select_jagged_1d", (X, L, M[:8], True), "mask"),
    "masked mask past rows": ("masked_select_jagged_1d", (X, torch.tensor([3, 0, 4]), M), "mask"),
    "masked no rows": ("masked_select_jagged_1d", (X, L[:0], M), "mask"),
    "masked short mask": ("masked_select_jagged_1d", (X, L, M[:8]), "lengths"),
    "masked negative lengths": (
        "masked_select_jagged_1d",
        (X, torch.tensor([3, -1, 4, 4]), M),
        "lengths",
    ),
    "masked float64 values": ("masked_select_jagged_1d", (X.double(), L, M), "values"),
    # jagged_1d_to_truncated_values
    "trunc negative": ("jagged_1d_to_truncated_values", (X, L, -1), "max_truncated_length"),
    "trunc 2-D": ("jagged_1d_to_truncated_values", (X, L.reshape(2, 2), 2), "lengths"),
    "trunc past values": ("jagged_1d_to_truncated_values", (X, L + 1, 9), "lengths"),
    "trunc negative lengths": ("jagged_1d_to_truncated_values", (X, -L, 2), "lengths"),
    "trunc int8": ("jagged_1d_to_truncated_values", (X.to(torch.int8), L, 2), "values"),
    # jagged_acc_weights_and_counts
    "acc id past": ("jagged_acc_weights_and_counts", (X, torch.arange(10), 5), "reverse_indices"),
    "acc negative id": (
        "jagged_acc_weights_and_counts",
        (X, -torch.arange(10), 10),
        "reverse_indices",
    ),
    "acc no ids": ("jagged_acc_weights_and_counts", (X, torch.arange(10), 0), "reverse_indices"),
    "acc short ids": ("jagged_acc_weights_and_counts", (X, torch.arange(8), 10), "reverse_indices"),
    "acc bf16": ("jagged_acc_weights_and_counts", (X.bfloat16(), torch.arange(10), 10), "weights"),
    "acc negative U": (
        "jagged_acc_weights_and_counts",
        (X[:0], torch.arange(0), -1),
        "num_unique_indices",
    ),
    # jagged_hash_size_cumsum
    "hash dtypes differ": ("jagged_hash_size_cumsum", (L.int(), X.long(), 1), "indices"),
    "hash batch 0": ("jagged_hash_size_cumsum", (torch.tensor([0, 2]), X.long(), 0), "batch_size"),
    "hash empty offsets": ("jagged_hash_size_cumsum", (L[:0], X.long(), 1), "offsets"),
    "hash past indices": (
        "jagged_hash_size_cumsum",
        (torch.tensor([0, 4, 12]), X.long(), 1),
        "offsets",
    ),
    "hash decreasing": (
        "jagged_hash_size_cumsum",
        (torch.tensor([0, 4, 2]), X.long(), 1),
        "offsets",
    ),
    "hash float": ("jagged_hash_size_cumsum", (L.float(), X, 1), "offsets"),
    # pack_segments / _v2 / _backward
    "pack max 0": ("pack_segments", (X, L, 0), "max_length"),
    "pack int64 values": ("pack_segments", (X.long(), L, 3), "t_in"),
    "pack float lengths": ("pack_segments", (X, L.float(), 3), "lengths"),
    "pack 2-D lengths": ("pack_segments", (X, L.reshape(2, 2), 3), "lengths"),
    "pack past rows": ("pack_segments", (X, torch.tensor([2, 0, 9]), 9), "lengths"),
    "pack negative": ("pack_segments", (X, torch.tensor([2, -1, 3]), 3), "lengths"),
    "pack int64 wrap": ("pack_segments", (X, torch.tensor([2**32 + 1, 0]), 3), "lengths"),
    "pack empty rows": ("pack_segments", (X[:0], torch.tensor([0, 2]), 3), "lengths"),
    "v2 int minf": ("pack_segments_v2", (X.int(), L, 3, True, False), "pad_minf"),
    "v2 float64": ("pack_segments_v2", (X.double(), L, 3), "t_in"),
    "bwd batch": ("pack_segments_backward", (X[:8].reshape(2, 2, 2), L, 10, 2), "data"),
    "bwd max_length": ("pack_segments_backward", (X[:8].reshape(4, 2), L, 10, 3), "max_length"),
    "bwd int data": ("pack_segments_backward", (X[:8].reshape(4, 2).int(), L, 10, 2), "data"),
    "bwd writes past": ("pack_segments_backward", (X[:8].reshape(4, 2), L, 4, 2), "lengths"),
    "bwd negative total": (
        "pack_segments_backward",
        (X[:8].reshape(4, 2), L, -1, 2),
        "total_length",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_names_op_and_argument(name: str) -> None:
    op, args, arg = BAD[name]
    dev = tuple(a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args)
    with pytest.raises((ValueError, RuntimeError), match=op) as info:
        getattr(F, op)(*dev)
        fbgemm_npu.check()  # a queued data check is raised here
    assert f"'{arg}'" in str(info.value), str(info.value)


NONE = {
    "jagged_slice": ((None, L, S, 2), "x_values"),
    "masked_select_jagged_1d": ((X, None, M), "lengths"),
    "pack_segments": ((None, L, 3), "t_in"),  # upstream's Autograd kernel read its size first
    "pack_segments_v2": ((None, L, 3), "t_in"),
    "pack_segments_backward": ((X.reshape(2, 5), None, 3, 5), "lengths"),
}


@pytest.mark.parametrize("op", list(NONE))
def test_none_is_refused_naming_op_and_argument(op: str) -> None:
    args, arg = NONE[op]
    with pytest.raises((ValueError, RuntimeError), match=op) as info:
        getattr(F, op)(*(a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args))
    assert f"'{arg}'" in str(info.value), str(info.value)


def test_mixed_devices_are_refused() -> None:
    with pytest.raises((ValueError, RuntimeError), match="jagged_slice"):
        F.jagged_slice(X.to(NPU), L, S.to(NPU), 2)


SAFE = {
    "slice": ("jagged_slice", (X, torch.tensor([3, 0, 4, 9]), S, 9)),
    "fwd": ("jagged_slice_forward", (X, L + 5, Z4, -L, -S, 7, 9, True)),
    "masked": ("masked_select_jagged_1d", (X, torch.tensor([7, -4, 20, 3]), M)),
    "trunc": ("jagged_1d_to_truncated_values", (X, torch.tensor([6, -9, 30]), 8)),
    "acc": ("jagged_acc_weights_and_counts", (X, torch.arange(10) - 5, 3)),
    "hash": ("jagged_hash_size_cumsum", (torch.tensor([3, 40, -9]), X.long(), 1)),
    "pack": ("pack_segments", (X, torch.tensor([7, -4, 20]), 6)),
    "bwd": ("pack_segments_backward", (X[:8].reshape(4, 2), torch.tensor([9, -3, 2, 5]), 3, 2)),
}


@pytest.mark.parametrize("name", list(SAFE))
def test_bad_data_with_the_checks_off_stays_in_bounds(name: str, no_validation: None) -> None:
    """Checks off: some result of the sizes the op computes, never a read or write outside."""
    op, args = SAFE[name]
    out = getattr(F, op)(*(a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args))
    assert all(
        t.device.type == NPU for t in (out if isinstance(out, tuple) else (out,)) if t is not None
    )
