"""Small inputs of the index-select family's tests, on the host (move them with :func:`to_npu`).

One jagged batch (``VALUES`` rows in segments of ``LENGTHS``, selected by ``INDICES``), one keyed
batch (two keys of batch 3), three tables back to back (``TABLES``) and one
``jagged_unique_indices`` call: small enough that a test reads its expected result by eye.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "HASH_SIZE_CUMSUM",
    "HASH_SIZE_OFFSETS",
    "INDICES",
    "INPUT_OFFSETS",
    "KEYED_LENGTHS",
    "KEYED_OFFSETS",
    "KEYED_VALUES",
    "LENGTHS",
    "OUTPUT_OFFSETS",
    "TABLES",
    "UNIQUE_INDICES",
    "UNIQUE_OFFSETS",
    "VALUES",
    "generator",
    "to_npu",
]

VALUES = torch.arange(12.0).view(6, 2)
LENGTHS = torch.tensor([1, 2, 3])
INDICES = torch.tensor([2, 0, 2])
# inclusive offsets, as jagged_index_select_2d_forward_v2 takes them
INPUT_OFFSETS, OUTPUT_OFFSETS = LENGTHS.cumsum(0), LENGTHS[INDICES].cumsum(0)
KEYED_VALUES = torch.arange(1.0, 12.0)
KEYED_LENGTHS = torch.tensor([1, 2, 3, 0, 4, 1])
KEYED_OFFSETS = torch.tensor([0, 1, 3, 6, 6, 10, 11])
TABLES = torch.arange(18.0)  # (3, 2) and (4, 3) tables back to back
HASH_SIZE_CUMSUM = torch.tensor([0, 10, 15, 30])
HASH_SIZE_OFFSETS = torch.tensor([0, 1, 2, 3])
UNIQUE_OFFSETS = torch.tensor([0, 2, 3, 3, 6, 7, 9])
UNIQUE_INDICES = torch.tensor([3, 3, 9, 1, 1, 4, 2, 14, 0])


def generator(seed: int) -> torch.Generator:
    """A host generator seeded with ``seed``."""
    return torch.Generator().manual_seed(seed)


def to_npu(*args: Any) -> list[Any]:
    """Each argument on the npu device: tensors and lists of tensors moved, the rest as given."""

    def move(a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            return a.to("npu")
        if isinstance(a, list) and a and isinstance(a[0], torch.Tensor):
            return [t.to("npu") for t in a]
        return a

    return [move(a) for a in args]
