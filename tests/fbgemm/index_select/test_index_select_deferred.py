"""The index-select family stays memory-safe under deferred data checks (issue 10, round 2).

Under ``FBGEMM_NPU_VALIDATE=deferred`` a call whose data check failed keeps running on the bad
data: every gather / ``index_add_`` must stay inside its buffer (on a 910B an out-of-range index
is an AI-Core exception or silent corruption; on the simulator torch raises 'index out of range
in self').  So each bad call here must *return* (no exception from inside the kernel), and
``fbgemm_npu.check()`` (where a caller reads the result) must then raise naming the op and the
argument.  Sizes no valid call can reach (a ``selected_lengths_sum`` of 2**40, rows asked of an
empty source) are refused on the host before anything is queued, so no stale check is left
behind.  Each case was found by ``tests/fuzz/test_fuzz_index_select.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing.index_select_inputs import (
    INDICES,
    INPUT_OFFSETS,
    KEYED_LENGTHS,
    KEYED_OFFSETS,
    KEYED_VALUES,
    OUTPUT_OFFSETS,
    TABLES,
    VALUES,
    to_npu,
)

F = torch.ops.fbgemm
JIS, V2 = "jagged_index_select", "jagged_index_select_2d_forward_v2"
ADD, KEYED = "jagged_index_add_2d_forward_v2", "keyed_jagged_index_select_dim1"
BIS, GIS = "batch_index_select_dim0", "group_index_select_dim0"
KEYED_SUM = 5  # KEYED_LENGTHS' samples [0, 2] of both keys: 1 + 3 + 0 + 1


@pytest.fixture(autouse=True)
def deferred(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "deferred")
    fbgemm_npu.check()  # nothing left over from another test


def _keyed(selected_lengths_sum: int) -> tuple[Any, ...]:
    idx = torch.tensor([0, 2])
    return (KEYED_VALUES, KEYED_LENGTHS, KEYED_OFFSETS, idx, 3, None, selected_lengths_sum)


def _group(*indices: list[int]) -> tuple[Any, ...]:
    tables = [torch.arange(6.0).view(3, 2), torch.arange(12.0).view(4, 3)][: len(indices)]
    return (tables, [torch.tensor(i) for i in indices])


# id: (op, args (moved to npu), the argument the queued check names)
QUEUED: dict[str, tuple[str, tuple[Any, ...], str]] = {
    # the row index past values: was 'index out of range in self' from the gather
    "keyed_sum_too_small": (KEYED, _keyed(1), "selected_lengths_sum"),
    "keyed_sum_too_large": (KEYED, _keyed(KEYED_SUM + 1), "selected_lengths_sum"),
    "keyed_index_out_of_range": (
        KEYED,
        (KEYED_VALUES, KEYED_LENGTHS, KEYED_OFFSETS, torch.tensor([0, 7]), 3, None, 2),
        "indices",
    ),
    "jis_lengths_past_values_sized": (
        JIS,
        (VALUES, torch.tensor([1, 2, 30]), torch.tensor([2]), 3),
        "lengths",
    ),
    "jis_size_too_large": (JIS, (VALUES, torch.tensor([1, 2, 3]), INDICES, 8), "num_dense"),
    "v2_offsets_past_values_sized": (
        V2,
        (VALUES, INDICES, torch.tensor([1, 50, 100]), OUTPUT_OFFSETS, 7),
        "input_offsets",
    ),
    "v2_size_past_offsets": (V2, (VALUES, INDICES, INPUT_OFFSETS, OUTPUT_OFFSETS, 9), "num_dense"),
    # the destination index past the output: was an out-of-range index_add_
    "add_too_few_output_rows": (
        ADD,
        (torch.ones(7, 2), INDICES, OUTPUT_OFFSETS, INPUT_OFFSETS, 2, 7),
        "num_output_rows",
    ),
    "add_index_out_of_range": (
        ADD,
        (torch.ones(7, 2), torch.tensor([2, 0, 9]), OUTPUT_OFFSETS, INPUT_OFFSETS, 6, 7),
        "indices",
    ),
    "bis_index_out_of_range": (
        BIS,
        (TABLES, torch.tensor([0, 7, 1, 3, -4]), [2, 3], [3, 4], [2, 3], False),
        "indices",
    ),
    "bis_permuted_index_out_of_range": (
        BIS,
        (TABLES, torch.tensor([0, 9, 1, 3]), [2, 2], [3, 4], [2, 3], True),
        "indices",
    ),
    "gis_index_out_of_range": (GIS, _group([0, 5], [1, -1]), "indices_group"),
    "gis_one_member_out_of_range": (GIS, _group([7]), "indices_group"),
}


@pytest.mark.parametrize("case", list(QUEUED))
def test_bad_data_stays_in_bounds_and_raises_at_check(case: str) -> None:
    name, args, arg = QUEUED[case]
    getattr(F, name)(*to_npu(*args))  # returns: no launch left its buffers
    with pytest.raises(RuntimeError, match=rf"fbgemm::{name}: .*'{arg}"):
        fbgemm_npu.check()


@pytest.mark.parametrize("case", ["keyed_sum_too_small", "jis_lengths_past_values_sized"])
def test_backward_on_bad_data_stays_in_bounds(case: str) -> None:
    """The backward's ``index_add_`` reuses the forward's (clamped) gather index."""
    name, args, arg = QUEUED[case]
    placed = to_npu(*args)
    values = placed[0].clone().requires_grad_()
    out = getattr(F, name)(values, *placed[1:])
    out[0].sum().backward()
    assert values.grad is not None and values.grad.shape == values.shape
    with pytest.raises(RuntimeError, match=rf"fbgemm::{name}: .*'{arg}"):
        fbgemm_npu.check()


def test_group_backward_on_bad_indices_stays_in_bounds() -> None:
    tables, indices = to_npu(*_group([0, 5], [1, -1]))
    tables = [t.clone().requires_grad_() for t in tables]
    outs = F.group_index_select_dim0(tables, indices)
    sum(o.sum() for o in outs).backward()
    with pytest.raises(RuntimeError, match=rf"fbgemm::{GIS}: .*'indices_group"):
        fbgemm_npu.check()


# id: (op, args, the argument the host error names): sizes no valid call reaches, refused before
# anything is allocated or queued
HOST: dict[str, tuple[str, tuple[Any, ...], str]] = {
    # was 'out of host memory' from the row index's allocation, after the check was queued
    "keyed_sum_unallocatable": (KEYED, _keyed(2**40), "selected_lengths_sum"),
    "keyed_sum_of_empty_values": (
        KEYED,
        (
            torch.zeros(0),
            torch.zeros(3, dtype=torch.long),
            torch.zeros(4, dtype=torch.long),
            torch.tensor([0]),
            3,
            None,
            1,
        ),
        "selected_lengths_sum",
    ),
    # was 'index_select(): self indexing axis dim should be positive' (a gather from 0 rows)
    "v2_rows_of_empty_values": (
        V2,
        (torch.zeros(0, 2), torch.tensor([0]), torch.tensor([0]), torch.tensor([0]), 1),
        "num_dense_output_rows",
    ),
    "v2_unreachable_size": (V2, (VALUES, INDICES, INPUT_OFFSETS, OUTPUT_OFFSETS, 19), "num_dense"),
    "jis_rows_of_empty_values": (
        JIS,
        (torch.zeros(0, 2), torch.tensor([0]), torch.tensor([0]), 1),
        "num_dense_output_rows",
    ),
    "add_no_output_rows": (
        ADD,
        (torch.ones(7, 2), INDICES, OUTPUT_OFFSETS, INPUT_OFFSETS, 0, 7),
        "num_output_rows",
    ),
    "gis_rows_of_empty_member": (GIS, ([torch.zeros(0, 2)], [torch.tensor([0])]), "indices_group"),
    "gis_rows_of_empty_members": (
        GIS,
        ([torch.zeros(0, 2), torch.zeros(2, 2)], [torch.tensor([0]), torch.tensor([1])]),
        "indices_group",
    ),
}


@pytest.mark.parametrize("case", list(HOST))
def test_unreachable_sizes_refused_on_the_host(case: str) -> None:
    name, args, arg = HOST[case]
    with pytest.raises(ValueError, match=rf"fbgemm::{name}: .*'{arg}"):
        getattr(F, name)(*to_npu(*args))
    fbgemm_npu.check()  # nothing was queued: no stale check for the next call
