"""The input_combine ops on npu against upstream's CPU kernels: random per-table inputs (int32 /
int64 mixed, weights on some tables, ``include_last_offsets`` random or all set with padded
indices, flags on the host or on the device), results exact; and the one deviation (a trimmed
table whose last offset is 0) against the math."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native._pending import check
from fbgemm_npu.testing.op_samples_input_combine import Tables, tables

F = torch.ops.fbgemm
NPU = "npu"
SEEDS = range(12)


def _npu(ts: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.to(NPU) for t in ts]


def _same(want: tuple, got: tuple) -> None:
    check()
    for w, g in zip(want, got, strict=True):
        assert g.device.type == NPU
        assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
        assert torch.equal(g.cpu(), w), (g.cpu(), w)


def _cases(seed: int) -> Tables:
    return tables(seed, n_tables=1 + seed % 4, padded=seed % 3 == 0)


@pytest.mark.parametrize("flags_on", ["cpu", NPU])
@pytest.mark.parametrize("seed", SEEDS)
def test_combine_equals_upstream(seed: int, flags_on: str) -> None:
    a = _cases(seed)
    want = F.tbe_input_combine(a.indices, a.offsets, a.weights, a.include_last)
    got = F.tbe_input_combine(
        _npu(a.indices), _npu(a.offsets), _npu(a.weights), a.include_last.to(flags_on)
    )
    _same(want, got)


@pytest.mark.parametrize("seed", SEEDS)
def test_with_length_equals_upstream(seed: int) -> None:
    a = _cases(seed)
    want = F.tbe_input_combine_with_length(a.indices, a.lengths, a.weights)
    got = F.tbe_input_combine_with_length(_npu(a.indices), _npu(a.lengths), _npu(a.weights))
    _same(want, got)


@pytest.mark.parametrize("flags_on", ["cpu", NPU])
@pytest.mark.parametrize("extra", [0, 3])
@pytest.mark.parametrize("seed", SEEDS)
def test_padding_fused_equals_upstream(seed: int, extra: int, flags_on: str) -> None:
    a = tables(seed, n_tables=1 + seed % 4, min_batch=1)
    B = a.batch_size + extra
    want = F.padding_fused_tbe_input_combine(a.indices, a.offsets, a.weights, a.include_last, B)
    got = F.padding_fused_tbe_input_combine(
        _npu(a.indices), _npu(a.offsets), _npu(a.weights), a.include_last.to(flags_on), B
    )
    _same(want, got)


@pytest.mark.parametrize("extra", [0, 2])
@pytest.mark.parametrize("seed", SEEDS)
def test_padding_fused_with_length_equals_upstream(seed: int, extra: int) -> None:
    a = _cases(seed)
    B = a.batch_size + extra
    want = F.padding_fused_tbe_input_combine_with_length(a.indices, a.lengths, a.weights, B)
    got = F.padding_fused_tbe_input_combine_with_length(
        _npu(a.indices), _npu(a.lengths), _npu(a.weights), B
    )
    _same(want, got)


def test_padding_fused_batch_size_zero() -> None:
    """B = 0: one offset per call; a table then needs exactly one bag start (s_i = 1)."""
    idx = [torch.tensor([3, 4]), torch.tensor([5], dtype=torch.int32)]
    offs = [torch.tensor([0]), torch.tensor([0, 1])]
    w = [torch.empty(0), torch.empty(0)]
    flags = torch.tensor([False, True])
    want = F.padding_fused_tbe_input_combine(idx, offs, w, flags, 0)
    for on in ("cpu", NPU):
        got = F.padding_fused_tbe_input_combine(_npu(idx), _npu(offs), _npu(w), flags.to(on), 0)
        _same(want, got)
    lengths = [torch.empty(0, dtype=torch.int64)] * 2
    want = F.padding_fused_tbe_input_combine_with_length(idx, lengths, w, 0)
    got = F.padding_fused_tbe_input_combine_with_length(_npu(idx), _npu(lengths), _npu(w), 0)
    _same(want, got)


def test_combine_wraps_int64_values_as_upstream() -> None:
    """int64 indices and offsets past int32 keep their low 32 bits, as upstream's casts do."""
    idx = [torch.tensor([2**33 + 7, -(2**40) - 1, 5])]
    offs = [torch.tensor([0, 2**32 + 1, 3])]
    flags = torch.tensor([False])
    want = F.tbe_input_combine(idx, offs, [torch.empty(0)], flags)
    _same(want, F.tbe_input_combine(_npu(idx), _npu(offs), [torch.empty(0).to(NPU)], flags))


def test_non_contiguous_inputs_equal_upstream_on_copies() -> None:
    """Upstream refuses non-contiguous tensors; ours reads any strides (cat)."""
    a = tables(7, n_tables=2)
    base = [torch.stack([t, t], 1) for t in a.indices]
    idx = [b[:, 0] for b in base]
    want = F.tbe_input_combine_with_length(a.indices, a.lengths, a.weights)
    got = F.tbe_input_combine_with_length(
        [b.to(NPU)[:, 0] for b in base], _npu(a.lengths), _npu(a.weights)
    )
    assert not idx[0].is_contiguous() or idx[0].numel() <= 1
    _same(want, got)


def test_trimmed_table_with_last_offset_zero_follows_the_math() -> None:
    """Upstream keeps every index of a trimmed table whose last offset is 0 in place (its
    ``k > 0`` test) although its offsets count none: the indices then disagree with the offsets
    and weights.  Ours trims it like any other table: all its indices are padding."""
    idx = [torch.tensor([10, 11]), torch.tensor([20, 21, 22])]
    offs = [torch.tensor([0, 0]), torch.tensor([0, 2])]
    w = [torch.tensor([0.5, 0.25]), torch.tensor([1.5, 2.5, 3.5])]
    got = F.tbe_input_combine(_npu(idx), _npu(offs), _npu(w), torch.tensor([True, True]))
    check()
    assert got[0].cpu().tolist() == [20, 21, 10, 11, 22]
    assert got[1].cpu().tolist() == [0, 0, 2]
    assert got[2].cpu().tolist() == [1.5, 2.5, 1.0, 1.0, 1.0]


def test_padding_past_the_zeros_cache_limit_equals_upstream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch_size past ZEROS_CACHE_LIMIT takes fresh zeros (the limit lowered to 2 here)."""
    from fbgemm_npu.native.fbgemm.input_combine import _layout

    monkeypatch.setattr(_layout, "ZEROS_CACHE_LIMIT", 2)
    a = tables(3, n_tables=3, min_batch=1)
    B = a.batch_size + 2
    want = F.padding_fused_tbe_input_combine(a.indices, a.offsets, a.weights, a.include_last, B)
    got = F.padding_fused_tbe_input_combine(
        _npu(a.indices), _npu(a.offsets), _npu(a.weights), a.include_last.to(NPU), B
    )
    _same(want, got)
    want = F.padding_fused_tbe_input_combine_with_length(a.indices, a.lengths, a.weights, B)
    got = F.padding_fused_tbe_input_combine_with_length(
        _npu(a.indices), _npu(a.lengths), _npu(a.weights), B
    )
    _same(want, got)
