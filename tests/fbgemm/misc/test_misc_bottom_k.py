"""``fbgemm::bottom_k_per_row`` on npu against upstream's CPU kernel: fixed and per-row ``k``,
``requires_unique`` (the first ``k`` distinct values met, sorted), 2-D and 3-D inputs, sorted
and unsorted rows, ``k = 0`` rows; upstream's errors (too few distinct values, a negative ``k``,
``k = 0`` fixed) with the same class, and what upstream reads out of bounds or leaves unwritten
refused by name."""

from __future__ import annotations

import pytest
import torch

F = torch.ops.fbgemm
NPU = "npu"


def _call(x: torch.Tensor, k_offsets: torch.Tensor, unique: bool) -> torch.Tensor:
    return F.bottom_k_per_row(x.to(NPU), k_offsets.to(NPU), unique)


@pytest.mark.parametrize("seed", range(60))
def test_equals_upstream(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    shape = [(3, 6), (2, 3, 5), (4, 1), (1, 7), (5, 9)][seed % 5]
    x = torch.randint(0, [3, 10, 1000][seed % 3], shape, generator=g)
    if seed % 4 == 0:
        x = x.sort(-1).values
    rows, cols = x.numel() // shape[-1], shape[-1]
    unique = bool(seed % 2)
    if seed % 3 == 0:
        k, start = int(torch.randint(1, cols + 1, (1,), generator=g)), seed % 4
        k_offsets = torch.tensor([start, start + k])
    else:
        ks = torch.randint(0, cols + 1, (rows,), generator=g)
        k_offsets = torch.cat([torch.zeros(1, dtype=torch.int64), ks.cumsum(0)])
    try:
        want = F.bottom_k_per_row(x, k_offsets, unique)
    except RuntimeError as exc:  # too few distinct values in a row: both raise
        assert "too skewed" in str(exc)
        with pytest.raises(RuntimeError, match="bottom_k_per_row: too skewed"):
            _call(x, k_offsets, unique)
        return
    got = _call(x, k_offsets, unique)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert torch.equal(got.cpu(), want)


def test_first_distinct_values_not_the_smallest() -> None:
    x = torch.tensor([[5, 3, 5, 1, 0, 3], [9, 9, 9, 1, 2, 0]])
    for unique in (False, True):
        want = F.bottom_k_per_row(x, torch.tensor([0, 2]), unique)
        assert torch.equal(_call(x, torch.tensor([0, 2]), unique).cpu(), want)
    assert torch.equal(
        _call(x, torch.tensor([0, 2]), True).cpu().view(-1), torch.tensor([3, 5, 1, 9])
    )


def test_transposed_input_and_output_is_not_a_view() -> None:
    x = torch.randint(0, 9, (6, 4)).t()
    want = F.bottom_k_per_row(x, torch.tensor([0, 2]), False)
    dev = x.to(NPU)
    got = F.bottom_k_per_row(dev, torch.tensor([0, 2]).to(NPU), False)
    assert torch.equal(got.cpu(), want)
    row = torch.arange(5).view(1, 5).to(NPU)
    out = F.bottom_k_per_row(row, torch.tensor([0, 5]).to(NPU), False)
    assert out.data_ptr() != row.data_ptr()


X = torch.tensor([[5, 3, 5, 1, 0, 3], [2, 2, 2, 2, 1, 0], [9, 8, 7, 6, 5, 4]])
UPSTREAM_RAISES = {
    "too few distinct": (X, torch.tensor([0, 4]), True, "too skewed"),
    "negative k": (X, torch.tensor([0, 2, 1, 3]), False, "k_offsets"),
    "fixed k = 0": (X, torch.tensor([0, 0]), False, "k"),
    "int32 input": (X.int(), torch.tensor([0, 2]), False, "input"),
    "int32 k_offsets": (X, torch.tensor([0, 2]).int(), False, "k_offsets"),
    "empty input": (X[:0], torch.tensor([0, 2]), False, "input"),
}


@pytest.mark.parametrize("name", list(UPSTREAM_RAISES))
def test_raises_where_upstream_raises(name: str) -> None:
    x, k_offsets, unique, words = UPSTREAM_RAISES[name]
    with pytest.raises(RuntimeError):
        F.bottom_k_per_row(x, k_offsets, unique)
    with pytest.raises(RuntimeError, match="bottom_k_per_row") as info:
        _call(x, k_offsets, unique)
    assert words in str(info.value)


REFUSED = {  # upstream reads past the row or leaves output memory unwritten
    "k past the row": (X, torch.tensor([0, 7]), False, "k_offsets"),
    "variable k past the row": (X, torch.tensor([0, 1, 9, 10]), False, "k_offsets"),
    "k_offsets not from 0": (X, torch.tensor([1, 2, 3, 4]), False, "k_offsets"),
    "k_offsets too long": (X, torch.tensor([0, 1, 3, 6, 7]), False, "k_offsets"),
    "k_offsets too short": (X, torch.tensor([0, 1, 3]), True, "k_offsets"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refuses_what_upstream_cannot_judge(name: str) -> None:
    x, k_offsets, unique, arg = REFUSED[name]
    with pytest.raises(RuntimeError, match="bottom_k_per_row") as info:
        _call(x, k_offsets, unique)
    assert arg in str(info.value)
