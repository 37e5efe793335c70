"""``fbgemm::tbe_input_combine_with_length`` and
``fbgemm::padding_fused_tbe_input_combine_with_length`` on npu: per-table indices / lengths /
per-sample weights joined into one TBE input (int32 indices and lengths, float32 weights).

Semantics (fbgemm-gpu-cpu 1.8.0's CPU kernels, measured): ``indices = int32(cat(indices_list))``;
``lengths = int32(cat(lengths_list))``, or with ``batch_size = B`` each table's lengths at
``i * B`` and zeros after them (``[T * B]``); ``weights`` a table's own or ones per index, empty
when no table has weights.  Lengths are not read as values (no data check): upstream copies
them as they are.  A table of more than ``B`` lengths is refused by name (upstream writes past
its buffer).

Launches (``budgets.py``): one ``cat`` per output (the weights' only when some table has them),
each into a buffer of the output dtype; the zeros and ones are cached views.  No sync.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import allocation_of
from fbgemm_npu.native.fbgemm.input_combine._layout import (
    INT32_LIMIT,
    cat_into,
    check_lists,
    int32_zeros,
    weights_pieces,
)

__all__ = [
    "KERNELS",
    "padding_fused_tbe_input_combine_with_length_npu",
    "tbe_input_combine_with_length_npu",
]

WITH_LENGTH = "fbgemm::tbe_input_combine_with_length"
PADDING_WITH_LENGTH = "fbgemm::padding_fused_tbe_input_combine_with_length"


def _weights(
    per_sample_weights: list[torch.Tensor], numels: list[int], device: torch.device
) -> torch.Tensor:
    """The combined weights (one ``cat``), or an empty float32 tensor when no table has any."""
    if not any(w.numel() > 0 for w in per_sample_weights):
        return torch.empty(0, dtype=torch.float32, device=device)
    return cat_into(
        weights_pieces(per_sample_weights, numels, device), sum(numels), torch.float32, device
    )


def tbe_input_combine_with_length_npu(
    indices_list: list[torch.Tensor],
    lengths_list: list[torch.Tensor],
    per_sample_weights: list[torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(int32(cat(indices_list)), int32(cat(lengths_list)), weights float32)``: 2 or 3
    ``cat`` launches, no sync."""
    op = WITH_LENGTH
    device = check_lists(op, indices_list, lengths_list, per_sample_weights, "lengths_list")
    numels = [t.numel() for t in indices_list]
    indices = cat_into(list(indices_list), sum(numels), torch.int32, device)
    n_lengths = sum(t.numel() for t in lengths_list)
    lengths = cat_into(list(lengths_list), n_lengths, torch.int32, device)
    return indices, lengths, _weights(per_sample_weights, numels, device)


def padding_fused_tbe_input_combine_with_length_npu(
    indices_list: list[torch.Tensor],
    lengths_list: list[torch.Tensor],
    per_sample_weights: list[torch.Tensor],
    batch_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """As :func:`tbe_input_combine_with_length_npu`, table ``i``'s lengths at ``i * B`` of a
    ``[T * B]`` int32 buffer, zeros after them (cached views in the same ``cat``)."""
    op = PADDING_WITH_LENGTH
    device = check_lists(op, indices_list, lengths_list, per_sample_weights, "lengths_list")
    B = batch_size
    if B < 0:
        raise ValueError(f"{op}: argument 'batch_size' must be non-negative, got {B}")
    if B * len(indices_list) >= INT32_LIMIT:
        raise ValueError(f"{op}: batch_size * len(indices_list) must be below 2**31")
    for i, t in enumerate(lengths_list):
        if t.numel() > B:
            raise ValueError(
                f"{op}: argument 'lengths_list[{i}]' must hold at most batch_size ({B}) "
                f"lengths, got {t.numel()}"
            )
    numels = [t.numel() for t in indices_list]
    indices = cat_into(list(indices_list), sum(numels), torch.int32, device)
    with allocation_of(op, f"the lengths of batch_size = {B} per table"):
        zeros = int32_zeros(B, device)
        layout = [p for t in lengths_list for p in (t, zeros[: B - t.numel()])]
        lengths = cat_into(layout, B * len(lengths_list), torch.int32, device)
    return indices, lengths, _weights(per_sample_weights, numels, device)


def _padding_fake(
    indices_list: list[torch.Tensor],
    lengths_list: list[torch.Tensor],
    per_sample_weights: list[torch.Tensor],
    batch_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Meta (upstream registers none): sizes known from the shapes and ``batch_size``."""
    total = sum(t.numel() for t in indices_list)
    first = indices_list[0]
    weighted = any(w.numel() > 0 for w in per_sample_weights)
    return (
        first.new_empty(total, dtype=torch.int32),
        first.new_empty(batch_size * len(indices_list), dtype=torch.int32),
        first.new_empty(total if weighted else 0, dtype=torch.float32),
    )


KERNELS = {
    WITH_LENGTH: {"PrivateUse1": tbe_input_combine_with_length_npu},
    PADDING_WITH_LENGTH: {
        "PrivateUse1": padding_fused_tbe_input_combine_with_length_npu,
        "Meta": _padding_fake,
    },
}
