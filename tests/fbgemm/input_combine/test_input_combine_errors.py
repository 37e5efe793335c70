"""Bad input to the input_combine ops: each raises a ValueError / RuntimeError naming the op and
the argument, where upstream raises (its TORCH_CHECKs) or writes outside its buffers; the
device-flag check of the padding op is queued and raised at ``fbgemm_npu.check()``."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from fbgemm_npu.native._pending import check

F = torch.ops.fbgemm
NPU = "npu"
ERRORS = (ValueError, RuntimeError)


def _i(*v: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.tensor(v, dtype=dtype).to(NPU)


def _w(n: int = 0) -> torch.Tensor:
    return torch.rand(n).to(NPU)


IDX = [_i(1, 2, 3), _i(4, dtype=torch.int32)]
OFFS = [_i(0, 1, 3), _i(0, 1)]
LENS = [_i(1, 2), _i(1)]
W = [_w(), _w()]
FLAGS = torch.tensor([True, True])

# (op, args, the argument the message names)
BAD: dict[str, tuple[str, tuple[Any, ...], str]] = {
    "no tables": (
        "tbe_input_combine",
        ([], [], [], torch.tensor([], dtype=torch.bool).to(NPU)),
        "indices_list",
    ),
    "offsets count": ("tbe_input_combine", (IDX, OFFS[:1], W, FLAGS), "offsets_list"),
    "weights count": ("tbe_input_combine_with_length", (IDX, LENS, W[:1]), "per_sample_weights"),
    "float indices": (
        "tbe_input_combine_with_length",
        ([_w(3), IDX[1]], LENS, W),
        "indices_list[0]",
    ),
    "bool lengths": (
        "tbe_input_combine_with_length",
        (IDX, [LENS[0], torch.tensor([True]).to(NPU)], W),
        "lengths_list[1]",
    ),
    "2-D offsets": (
        "tbe_input_combine",
        (IDX, [OFFS[0].view(1, 3), OFFS[1]], W, FLAGS),
        "offsets_list[0]",
    ),
    "float64 weights": (
        "tbe_input_combine_with_length",
        (IDX, LENS, [torch.rand(3, dtype=torch.float64).to(NPU), W[1]]),
        "per_sample_weights[0]",
    ),
    "weights numel": (
        "tbe_input_combine",
        (IDX, OFFS, [_w(2), W[1]], FLAGS),
        "per_sample_weights[0]",
    ),
    "2-D weights": (
        "tbe_input_combine_with_length",
        (IDX, LENS, [_w(3).view(3, 1), W[1]]),
        "per_sample_weights[0]",
    ),
    "int flags": (
        "tbe_input_combine",
        (IDX, OFFS, W, torch.tensor([1, 1])),
        "include_last_offsets",
    ),
    "flags count": (
        "tbe_input_combine",
        (IDX, OFFS, W, torch.tensor([True])),
        "include_last_offsets",
    ),
    "2-D flags": (
        "padding_fused_tbe_input_combine",
        (IDX, OFFS, W, FLAGS.view(2, 1), 3),
        "include_last_offsets",
    ),
    "empty offsets": (
        "tbe_input_combine",
        (IDX, [_i(), OFFS[1]], W, torch.tensor([False, True])),
        "offsets_list[0]",
    ),
    "trim past indices": (
        "tbe_input_combine",
        (IDX, [_i(0, 1, 4), _i(0, 0)], W, FLAGS),
        "offsets_list[0]",
    ),
    "trim negative": (
        "tbe_input_combine",
        (IDX, [_i(0, 1, -2), OFFS[1]], W, FLAGS),
        "offsets_list[0]",
    ),
    "negative batch": ("padding_fused_tbe_input_combine", (IDX, OFFS, W, FLAGS, -1), "batch_size"),
    "too many offsets": (
        "padding_fused_tbe_input_combine",
        (IDX, OFFS, W, FLAGS, 0),
        "offsets_list[0]",
    ),
    "one offset, flag set": (
        "padding_fused_tbe_input_combine",
        (IDX, [_i(0), OFFS[1]], W, FLAGS, 3),
        "offsets_list[0]",
    ),
    "no offsets": (
        "padding_fused_tbe_input_combine",
        (IDX, [_i(), OFFS[1]], W, torch.tensor([False, False]), 3),
        "offsets_list[0]",
    ),
    "lengths past batch": (
        "padding_fused_tbe_input_combine_with_length",
        (IDX, LENS, W, 1),
        "lengths_list[0]",
    ),
    "negative batch, lengths": (
        "padding_fused_tbe_input_combine_with_length",
        (IDX, LENS, W, -2),
        "batch_size",
    ),
    "host tensor in a list": (
        "tbe_input_combine_with_length",
        ([IDX[0], _i(4).cpu()], LENS, W),
        "indices_list[1]",
    ),
    "host weights": (
        "padding_fused_tbe_input_combine_with_length",
        (IDX, LENS, [W[0], torch.rand(1)], 3),
        "per_sample_weights[1]",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_names_op_and_argument(name: str) -> None:
    op, args, arg = BAD[name]
    with pytest.raises(ERRORS, match=op) as info:
        getattr(F, op)(*args)
        check()
    assert arg in str(info.value)


@pytest.mark.parametrize("flags", [[True, True], [False, False]])
def test_padding_device_flags_out_of_range_are_queued(flags: list[bool]) -> None:
    """Flags on the device: table 0 with 1 offset and its flag set (no bag start), or with
    B + 2 offsets and its flag clear (B + 1 bag starts): upstream writes past its buffer."""
    offs = [_i(0), _i(0, 1)] if flags[0] else [_i(0, 1, 2, 3), _i(0, 1)]
    F.padding_fused_tbe_input_combine(IDX, offs, W, torch.tensor(flags).to(NPU), 2)
    with pytest.raises(RuntimeError, match="padding_fused_tbe_input_combine") as info:
        check()
    assert "include_last_offsets" in str(info.value)


def test_none_in_a_list_is_refused() -> None:
    with pytest.raises((ValueError, RuntimeError, TypeError), match="indices_list|Tensor"):
        F.tbe_input_combine_with_length([IDX[0], None], LENS, W)


def test_flags_on_another_device_are_refused() -> None:
    with pytest.raises(RuntimeError, match="include_last_offsets"):
        F.tbe_input_combine(IDX, OFFS, W, FLAGS.to("npu:1"))
