"""The permute family's index arithmetic (``native/fbgemm/permute/_gather.py``) against plain
Python references: the host's int32 / int64 decision, the cached steps, the source index of
permuted rows (empty rows, repeats, drops, trailing empties) in both dtypes, and the segment
arange of ``expand_into_jagged_permute`` wrapping as int32 does or passing 2**31 in int64.
"""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native._index import steps_cached
from fbgemm_npu.native.fbgemm.permute import _gather
from fbgemm_npu.testing.counters import count

NPU = "npu"


def test_index_dtype_is_decided_from_sizes() -> None:
    assert _gather.index_dtype(2**31 - 1, 0) == torch.int32
    assert _gather.index_dtype(5, 2**31 - 1) == torch.int32
    assert _gather.index_dtype(2**31, 5) == torch.int64
    assert _gather.index_dtype(5, 2**31) == torch.int64
    assert _gather.index_dtype() == torch.int32


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_steps_cached(dtype: torch.dtype) -> None:
    for n in (1, 5, 3000):  # growth past the first buffer
        got = steps_cached(n, torch.device(NPU), dtype)
        assert got.dtype == dtype and got.cpu().tolist() == [0] + [1] * (n - 1)
    with count() as c:
        steps_cached(2000, torch.device(NPU), dtype)
    assert c.launches == 0, c.summary()


def _rows_reference(lengths: torch.Tensor, perm: list[int]) -> list[int]:
    rows = lengths.tolist()
    starts, pos = [], 0
    for row in rows:
        starts.append(pos)
        pos += sum(row)
    return [starts[p] + i for p in perm for i in range(sum(rows[p]))]


ROWS = {
    "identity": ([[1, 2], [0, 3], [2, 1]], [0, 1, 2]),
    "empty_rows": ([[0, 0], [4, 1], [0, 0], [2, 0]], [2, 1, 0, 3, 2]),
    "repeats_drops": ([[3], [1], [2]], [2, 2, 0, 2]),
    "trailing_empty": ([[2, 2], [0, 0]], [0, 1, 1]),
    "all_empty": ([[0, 0], [0, 0]], [1, 0]),
}


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("case", list(ROWS))
def test_source_index_matches_a_loop(case: str, dtype: torch.dtype) -> None:
    lengths_list, perm_list = ROWS[case]
    lengths = torch.tensor(lengths_list)
    perm = torch.tensor(perm_list)
    expected = _rows_reference(lengths, perm_list)
    dev_lengths, dev_perm = lengths.to(NPU), perm.to(NPU)
    permuted = dev_lengths.index_select(0, dev_perm)
    bounds = _gather.row_bounds(dev_lengths, permuted, dtype)
    rows = (lengths.size(0), perm.numel(), lengths.size(1))
    for safe in (False, True):
        got = _gather.source_index(bounds.clone(), dev_perm, rows, len(expected), safe)
        assert got.dtype == dtype and got.cpu().tolist() == expected


def test_segment_arange_wraps_as_int32() -> None:
    """int32 starts near 2**31: the arange wraps mod 2**32, as upstream's int32 arithmetic."""
    starts = torch.tensor([2**31 - 2, 5, -(2**31)], dtype=torch.int32)
    bounds = torch.tensor([0, 4, 4, 6], dtype=torch.int32)
    got = _gather.segment_arange(starts.to(NPU), bounds.to(NPU), 6).cpu()
    wrapped = [(v + 2**31) % 2**32 - 2**31 for v in [2**31 - 2 + i for i in range(4)]]
    assert got.tolist() == [*wrapped, -(2**31), -(2**31) + 1]


def test_segment_arange_wide_passes_2_pow_31() -> None:
    starts = torch.tensor([2**40, 3, 2**33 - 1])
    bounds = torch.tensor([0, 2, 2, 5])
    with count() as c:
        got = _gather.segment_arange_wide(starts.to(NPU), bounds.to(NPU), 5).cpu()
    assert got.tolist() == [2**40, 2**40 + 1, 2**33 - 1, 2**33, 2**33 + 1]
    assert c.ai_cpu == 0, c.summary()
