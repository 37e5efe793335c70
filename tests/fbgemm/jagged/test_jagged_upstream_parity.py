"""Where the jagged family meets upstream's edges: inputs upstream accepts silently (we give its
result), padding values cast as upstream's x86 build casts them, and the forms upstream's CPU
kernels lack or refuse (CUDA-only ones, more layouts, the stacked outputs' views).

Expected values come from upstream's CPU kernels or from the loop reference of
``conformance.specs.fbgemm.jagged.elementwise`` (``walk``), never from our kernels.
"""

from __future__ import annotations

import platform

import pytest
import torch

import fbgemm_npu
from conformance.specs.fbgemm.jagged.elementwise import to_jagged_reference, walk
from fbgemm_npu.native.fbgemm.jagged._utils import _positions, checked_dense_index
from fbgemm_npu.testing.jagged_inputs import OFFSETS, VALUES, nested, to_npu

F = torch.ops.fbgemm
NPU = "npu"
_VC, _OC = VALUES, OFFSETS
_V, _O = VALUES.to(NPU), OFFSETS.to(NPU)


# ---- inputs upstream accepts silently: we give its result ----------------------------------------


@pytest.mark.parametrize(
    "offsets, note",
    [
        ([0, 3, 2, 5], "decreasing: row 1 has length -1, all padding"),
        ([0, 2, 3], "last offset below values.size(0): the tail is ignored"),
        ([0, 2, 2, 7], "last offset past values.size(0) but truncation never reads there"),
        ([1, 2, 2, 5], "first offset above 0"),
    ],
)
def test_odd_offsets_give_upstreams_result(offsets: list[int], note: str) -> None:
    o = torch.tensor(offsets)
    expected = F.jagged_to_padded_dense(_VC, [o], [3], -1.0)
    assert torch.equal(F.jagged_to_padded_dense(_V, [o.to(NPU)], [3], -1.0).cpu(), expected), note


def test_dense_to_jagged_decreasing_offsets_match_upstream_on_the_simulator() -> None:
    """Overlapping rows: upstream's last write wins; ours does on CPU (``index_put_`` applies
    writes in order there); on a device the winner is unspecified (documented in jagged.py)."""
    dense = torch.arange(9.0).view(3, 3, 1)
    o = torch.tensor([0, 3, 2, 5])
    expected = F.dense_to_jagged_forward(dense, [o])
    assert torch.equal(F.dense_to_jagged_forward(dense.to(NPU), [o.to(NPU)]).cpu(), expected)


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"),
    reason="upstream's int cast of NaN / out-of-range padding is C++ UB; we follow x86",
)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("pad", [float("nan"), 1e10, -1e30, 2.0**62 + 5, -2.9])
def test_integer_padding_cast_matches_the_x86_build(dtype: torch.dtype, pad: float) -> None:
    v = _VC.to(dtype)
    expected = F.jagged_to_padded_dense(v, [_OC], [3], pad)
    assert torch.equal(F.jagged_to_padded_dense(v.to(NPU), [_O], [3], pad).cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("pad", [1e10, -1e-30, 1.001, float("-inf"), 65519.0])
def test_float_padding_rounds_like_upstream(dtype: torch.dtype, pad: float) -> None:
    v = _VC.to(dtype)
    expected = F.jagged_to_padded_dense(v, [_OC], [3], pad)
    assert torch.equal(F.jagged_to_padded_dense(v.to(NPU), [_O], [3], pad).cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int32])
@pytest.mark.parametrize("pad", [1e5, 1e40, 3e9, float("nan"), float("inf"), 65505.0])
@pytest.mark.parametrize("max_len", [0, 2])
def test_padding_out_of_range_with_no_values_raises_like_upstream(
    dtype: torch.dtype, pad: float, max_len: int
) -> None:
    """With empty values upstream converts the padding with c10's overflow check (and raises);
    ours must raise exactly then, naming the argument, and else give upstream's result."""
    v, o = torch.ones(0, 2, dtype=dtype), torch.tensor([0, 0])
    try:
        expected = F.jagged_to_padded_dense(v, [o], [max_len], pad)
    except RuntimeError:
        with pytest.raises(
            ValueError, match="jagged_to_padded_dense_forward: argument 'padding_value'"
        ):
            F.jagged_to_padded_dense(v.to(NPU), [o.to(NPU)], [max_len], pad)
        return
    got = F.jagged_to_padded_dense(v.to(NPU), [o.to(NPU)], [max_len], pad).cpu()
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)


# ---- beyond upstream's CPU kernels --------------------------------------------------------------


def test_jagged_output_rows_after_the_last_offset_are_uncovered_like_cuda() -> None:
    """x_values longer than the offsets: upstream CPU raises (it sizes the jagged y by the offsets),
    CUDA and ours leave the tail rows uncovered (y = 0 there)."""
    x = torch.arange(1.0, 8.0).view(7, 1)
    y = torch.full((3, 2, 1), 100.0)
    with pytest.raises(RuntimeError):
        F.jagged_dense_elementwise_add_jagged_output(x, [_OC], y)
    got = F.jagged_dense_elementwise_add_jagged_output(x.to(NPU), [_O], y.to(NPU))[0]
    assert torch.equal(got.cpu(), x + to_jagged_reference(y, [_OC], 7))


def test_transposed_dense_with_two_jagged_dims_is_accepted() -> None:
    """Upstream views the dense input as [B, -1, D] and raises when it cannot; ours copies."""
    v, offs = nested(3)
    dense = torch.randn(3, 3, 4, 3).permute(3, 2, 1, 0).contiguous().permute(3, 2, 1, 0)
    got = F.dense_to_jagged_forward(dense.to(NPU), to_npu(offs), v.size(0)).cpu()
    assert torch.equal(got, F.dense_to_jagged_forward(dense.contiguous(), offs, v.size(0)))


def test_five_jagged_dims_and_not_six() -> None:
    o = [torch.tensor([0, 1])] * 5
    v = torch.arange(1.0, 3.0).view(2, 1)
    expected = F.jagged_to_padded_dense(v[:1], o, [2] * 5, -1.0)
    assert torch.equal(
        F.jagged_to_padded_dense(v[:1].to(NPU), to_npu(o), [2] * 5, -1.0).cpu(), expected
    )
    with pytest.raises(ValueError, match="1 to 5 offsets tensors"):
        F.jagged_to_padded_dense(v.to(NPU), to_npu(o + o[:1]), [2] * 6, 0.0)


def test_walk_reference_agrees_with_upstream() -> None:
    """The loop reference used by the tests is itself checked against upstream."""
    v, offs = nested(5, seed=3)
    dense = F.jagged_to_padded_dense(v, offs, [3, 4], 0.0).view(-1, 3)
    pos, rows = walk(offs, [3, 4])
    assert torch.equal(dense[pos], v[rows])


def test_mul_gradient_with_mixed_dtypes() -> None:
    """Upstream's backward raises for float32 x half; ours returns the promoted gradients."""
    x = torch.arange(1.0, 6.0).view(5, 1).to(NPU).requires_grad_()
    y = torch.ones(3, 2, 1, dtype=torch.float16, device=NPU).requires_grad_()
    F.jagged_dense_elementwise_mul(x, [_O], y)[0].sum().backward()
    assert x.grad.dtype == torch.float32 and y.grad.dtype == torch.float16
    assert x.grad.cpu().view(-1).tolist() == [1.0, 1.0, 1.0, 1.0, 0.0]


@pytest.mark.parametrize("maxl", [[2, 3], [3, 3], [2]])
def test_stacked_outputs_are_their_own_contiguous_tensors(maxl: list[int]) -> None:
    """Each key's output is its own contiguous tensor, as upstream's: no two share storage
    (the schema declares no alias), whatever the keys' max lengths."""
    ln = torch.tensor([[1, 2], [0, 3]])[: len(maxl)]
    v = torch.arange(12.0).view(6, 2)
    expected = F.stacked_jagged_2d_to_dense(v, ln, [0, 3, 6], maxl)
    got = F.stacked_jagged_2d_to_dense(v.to(NPU), ln.to(NPU), [0, 3, 6], maxl)
    storages = {t.untyped_storage().data_ptr() for t in got}
    assert len(storages) == len(got) and all(t.is_contiguous() for t in got)
    for g, e in zip(got, expected, strict=True):
        assert torch.equal(g.cpu(), e)


def test_stacked_meta_shapes() -> None:
    out = F.stacked_jagged_1d_to_dense(
        torch.empty(7, device="meta"),
        torch.empty(2, 4, dtype=torch.int64, device="meta"),
        [0, 3, 7],
        [2, 5],
        0,
    )
    assert [tuple(t.shape) for t in out] == [(4, 2), (4, 5)]


def test_int32_offsets_into_more_rows_than_int32_holds_build_an_int64_index() -> None:
    """Padding positions of a scatter point at the spare row, the row count: past 2**31 - 1 rows
    it does not fit int32 offsets, and the index is int64 (found by the fuzz suite: a
    dense_to_jagged of int32 offsets with total_L = 2**40 failed in masked_fill_ with "value
    cannot be converted to type int without overflow" instead of naming total_L)."""
    offsets = [torch.tensor([0, 2, 3], dtype=torch.int32, device=NPU)]
    index = checked_dense_index("fbgemm::op", offsets, [3], 2**31, "what", write=True)
    assert index is not None
    rows, pad = index
    assert rows.dtype == torch.int64
    assert rows[pad].eq(2**31).all() and rows[~pad].tolist() == [0, 1, 2]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("lengths", [[3], [2, 3]], ids=["one_dim", "two_dims"])
def test_rows_starting_near_2_to_31_keep_their_padding(
    dtype: torch.dtype, lengths: list[int]
) -> None:
    """A row starting at 2**31 - 1 (empty, or read past its end) is padding: ``start + j`` past
    2**31 must not wrap.  The int32 index did (its padding positions became rows < 0 and the
    data check refused the valid offsets); the index is int64 whatever the offsets' dtype."""
    big = 2**31 - 1
    if len(lengths) == 1:
        values, offsets = torch.arange(10.0).view(10, 1), [torch.tensor([0, big, big], dtype=dtype)]
    else:  # the second level's last row starts at 2**31 - 1 and is empty
        values = torch.arange(10.0).view(10, 1)
        offsets = [torch.tensor([0, 2], dtype=dtype), torch.tensor([0, big, big], dtype=dtype)]
    expected = F.jagged_to_padded_dense(values, offsets, lengths, -1.0)
    got = F.jagged_to_padded_dense(values.to(NPU), to_npu(offsets), lengths, -1.0)
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)
    dense = torch.randn(expected.shape)
    expected = F.dense_to_jagged(dense, offsets, 10)[0]
    got = F.dense_to_jagged(dense.to(NPU), to_npu(offsets), 10)[0]
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)
    fbgemm_npu.check()  # no data check failed either (they may be deferred)


def test_a_dense_length_past_the_cached_arange_builds_its_own() -> None:
    """Positions up to 2**16 read the shared cached arange; a longer max_length builds its own
    (one launch more) so that one huge call leaves no cache of its size behind, and the result
    is upstream's either way."""
    small, big = _positions(3, torch.device(NPU)), _positions(2**16 + 5, torch.device(NPU))
    assert small._base is not None and big._base is None
    values, offsets = torch.arange(6.0).view(6, 1), [torch.tensor([0, 2, 6])]
    expected = F.jagged_to_padded_dense(values, offsets, [2**16 + 5], -1.0)
    got = F.jagged_to_padded_dense(values.to(NPU), to_npu(offsets), [2**16 + 5], -1.0)
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)
    fbgemm_npu.check()
