"""References for the sequence family's fuzz cases (``tests/fuzz/test_fuzz_sequence.py``):
``mxrec::multislice_concat`` and ``mxrec::reverse_sequence`` by Python slicing, written apart
from the kernels (float values in float64, cast back to the input's dtype)."""

from __future__ import annotations

import torch


def multislice_concat(input, concat_num, concat_size, slice_begin, slice_length):
    x = input.double() if input.is_floating_point() else input
    outs, j = [], 0
    for size in concat_size[:concat_num]:
        parts = []
        for _ in range(size):
            b, n = slice_begin[j], slice_length[j]
            parts.append(x[:, b:] if n == -1 else x[:, b : b + n])
            j += 1
        outs.append(torch.cat(parts, dim=1).to(input.dtype))
    return outs


def reverse_sequence(input: torch.Tensor, seq_lengths: torch.Tensor) -> torch.Tensor:
    x = input.double() if input.is_floating_point() else input
    rows = [torch.cat([x[b, :n].flip(0), x[b, n:]]) for b, n in enumerate(seq_lengths.tolist())]
    return (torch.stack(rows) if rows else x.clone()).to(input.dtype)
