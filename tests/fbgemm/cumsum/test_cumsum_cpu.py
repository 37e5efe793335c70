"""Our cumsum kernels, called directly on CPU tensors, against upstream's CPU kernels.

The kernels are device-generic tensor programs, so their math can be checked here without any npu
device; the dispatcher path on ``npu`` tensors and the launch budgets are tested with the simulated
device.  Integers must match upstream exactly (int32 overflow included); float32 within
assert_close's defaults; float16 / bfloat16 against a float64 reference, because upstream
accumulates in the half type itself and is the less accurate of the two.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fbgemm_npu  # noqa: F401  - imports upstream fbgemm_gpu (the oracle)
from fbgemm_npu.native.fbgemm.cumsum.cumsum import (
    CUMSUM_DTYPES,
    asynchronous_complete_cumsum_npu,
    asynchronous_exclusive_cumsum_npu,
    asynchronous_inclusive_cumsum_npu,
)

Kernel = Callable[[torch.Tensor], torch.Tensor]
OURS: dict[str, Kernel] = {
    "complete": asynchronous_complete_cumsum_npu,
    "exclusive": asynchronous_exclusive_cumsum_npu,
    "inclusive": asynchronous_inclusive_cumsum_npu,
}
KINDS = tuple(OURS)
EXACT_DTYPES = (torch.int32, torch.int64)
# Half types: ours rounds a float32 (or wider) running sum once per element, so it sits within a
# few units in the last place of the exact sum: 2**-10 relative for float16, 2**-7 for bfloat16.
HALF_TOLERANCE = {
    torch.float16: {"rtol": 2e-3, "atol": 1e-3},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 1e-2},
}
# What upstream raises for bad input (a failed TORCH_CHECK, or a dtype its dispatch lacks).
UPSTREAM_ERRORS = (RuntimeError, NotImplementedError)


def upstream(kind: str, t: torch.Tensor) -> torch.Tensor:
    return getattr(torch.ops.fbgemm, f"asynchronous_{kind}_cumsum")(t)


def reference(kind: str, t: torch.Tensor) -> torch.Tensor:
    """float64 reference of each op's math, independent of both implementations."""
    x = t.to(torch.float64)
    if kind == "complete":
        pad = x.new_zeros((*x.shape[:-1], 1))
        return torch.cat([pad, x.cumsum(-1)], dim=-1)
    flat = x.reshape(-1)
    inclusive = flat.cumsum(0)
    if kind == "inclusive":
        return inclusive.view(t.shape)
    return torch.cat([flat.new_zeros(min(1, flat.numel())), inclusive[:-1]]).view(t.shape)


def sample(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.rand(shape, generator=gen).to(dtype)  # positive: no cancellation
    return torch.randint(0, 100, shape, generator=gen, dtype=dtype)


def assert_matches_upstream(kind: str, t: torch.Tensor) -> None:
    expected = upstream(kind, t)
    actual = OURS[kind](t)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.is_contiguous()
    if t.dtype in EXACT_DTYPES:
        assert torch.equal(actual, expected), f"{kind}: {actual} != {expected}"
    elif t.dtype == torch.float32:
        torch.testing.assert_close(actual, expected)
    else:
        torch.testing.assert_close(
            actual.to(torch.float64), reference(kind, t), **HALF_TOLERANCE[t.dtype]
        )


@pytest.mark.parametrize("dtype", CUMSUM_DTYPES, ids=str)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(1,), (7,), (1000,), (1, 5), (4, 9)], ids=str)
def test_1d_2d(kind: str, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    assert_matches_upstream(kind, sample(shape, dtype))


@pytest.mark.parametrize("dtype", CUMSUM_DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["exclusive", "inclusive"])
@pytest.mark.parametrize("shape", [(), (2, 3, 4), (2, 1, 3, 2)], ids=str)
def test_any_rank_exclusive_inclusive(
    kind: str, dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    assert_matches_upstream(kind, sample(shape, dtype))


def test_documented_examples() -> None:
    x = torch.arange(6).view(2, 3)
    assert asynchronous_inclusive_cumsum_npu(x).tolist() == [[0, 1, 3], [6, 10, 15]]
    assert asynchronous_exclusive_cumsum_npu(x).tolist() == [[0, 0, 1], [3, 6, 10]]
    assert asynchronous_complete_cumsum_npu(x).tolist() == [[0, 0, 1, 3], [0, 3, 7, 12]]
    assert asynchronous_exclusive_cumsum_npu(torch.tensor(5)).tolist() == 0
    assert asynchronous_inclusive_cumsum_npu(torch.tensor(5)).tolist() == 5


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0), (0, 0)], ids=str)
def test_empty(kind: str, shape: tuple[int, ...]) -> None:
    assert_matches_upstream(kind, torch.zeros(shape, dtype=torch.int64))


def test_empty_complete_shapes() -> None:
    assert asynchronous_complete_cumsum_npu(torch.zeros(0, dtype=torch.int32)).tolist() == [0]
    assert asynchronous_complete_cumsum_npu(torch.zeros(0, 3)).shape == (0, 4)
    assert asynchronous_complete_cumsum_npu(torch.zeros(2, 0)).tolist() == [[0.0], [0.0]]


# Views whose memory is not a plain contiguous buffer from offset 0.
NON_CONTIGUOUS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "transposed": lambda x: x.view(6, 8).t(),
    "row_stride": lambda x: x.view(6, 8)[:, ::3],
    "step_1d": lambda x: x[::5],
    "offset_1d": lambda x: x[3:40],
    "permuted_3d": lambda x: x.view(2, 4, 6).permute(2, 0, 1),
    "expanded": lambda x: x[:4].view(4, 1).expand(4, 5),
}


# complete_cumsum takes 1-D or 2-D input only: the 3-D view goes to the other two.
NON_CONTIGUOUS_CASES = [
    (kind, view)
    for kind in KINDS
    for view in NON_CONTIGUOUS
    if not (kind == "complete" and view == "permuted_3d")
]


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32], ids=str)
@pytest.mark.parametrize(("kind", "view"), NON_CONTIGUOUS_CASES)
def test_non_contiguous(kind: str, dtype: torch.dtype, view: str) -> None:
    t = NON_CONTIGUOUS[view](sample((48,), dtype))
    assert not t.is_contiguous() or t.storage_offset() > 0
    assert_matches_upstream(kind, t)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(5,), (2, 3)], ids=str)
def test_int32_overflow_wraps_like_upstream(kind: str, shape: tuple[int, ...]) -> None:
    t = torch.full(shape, 2**31 - 1, dtype=torch.int32)
    assert_matches_upstream(kind, t)
    assert (OURS[kind](t) < 0).any(), "the sum must wrap, not saturate or promote"


# int64 is scanned as two int32 words with the carries between them rebuilt (cumsum.py:
# _complete_int64, _scan_int64): values that carry on every step, borrow, sit near 2**63, or use
# all 64 bits; each must equal upstream's int64 scan bit for bit (overflow wraps mod 2**64).
INT64_VALUES: dict[str, Callable[[torch.Generator], torch.Tensor]] = {
    "carry_every_step": lambda g: torch.full((300,), 2**32 - 1, dtype=torch.int64),
    "minus_one": lambda g: torch.full((300,), -1, dtype=torch.int64),
    "low_words": lambda g: torch.randint(0, 2**32, (4000,), generator=g, dtype=torch.int64),
    "full_range": lambda g: torch.randint(-(2**63), 2**63 - 1, (4000,), generator=g),
    "near_max": lambda g: torch.tensor([2**63 - 1, 1, 2**63 - 1, -(2**63), 5, 2**31, 2**32]),
    "mixed_signs": lambda g: torch.randint(-(2**40), 2**40, (999,), generator=g),
}
INT64_LAYOUTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "1-D": lambda x: x,
    "2-D": lambda x: x[: x.numel() // 3 * 3].view(3, -1),
    "transposed": lambda x: x[: x.numel() // 3 * 3].view(-1, 3).t(),
    "step": lambda x: x[::3],
    "expanded": lambda x: x[:4].view(4, 1).expand(4, 5),
}


@pytest.mark.parametrize("layout", INT64_LAYOUTS)
@pytest.mark.parametrize("values", INT64_VALUES)
@pytest.mark.parametrize("kind", KINDS)
def test_int64_exact_across_the_word_boundary(kind: str, values: str, layout: str) -> None:
    t = INT64_LAYOUTS[layout](INT64_VALUES[values](torch.Generator().manual_seed(1)))
    assert_matches_upstream(kind, t)


@pytest.mark.parametrize("kind", KINDS)
def test_int64_on_npu_exact_and_off_the_ai_cpu(kind: str) -> None:
    """On the (simulated) npu through the dispatcher: bit-exact, and no int64 cumsum (AI CPU)."""
    from fbgemm_npu.testing.counters import count

    t = INT64_VALUES["full_range"](torch.Generator().manual_seed(2))
    with count() as c:
        got = upstream(kind, t.to("npu"))
    assert torch.equal(got.cpu(), upstream(kind, t))
    assert c.ai_cpu == 0, c.summary()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kind", KINDS)
def test_half_long_sum_more_accurate_than_upstream(kind: str, dtype: torch.dtype) -> None:
    """3000 x 0.1: upstream gives 256 (fp16) / 32 (bf16); ours stays near the true 300."""
    t = torch.full((3000,), 0.1, dtype=dtype)
    exact = reference(kind, t)
    ours = OURS[kind](t).to(torch.float64)
    theirs = upstream(kind, t).to(torch.float64)
    torch.testing.assert_close(ours, exact, **HALF_TOLERANCE[dtype])
    assert (ours - exact).abs().max() < (theirs - exact).abs().max()


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    dtype=st.sampled_from(CUMSUM_DTYPES),
    shape=st.lists(st.integers(0, 6), min_size=0, max_size=3).map(tuple),
    transpose=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_random_shapes(
    kind: str, dtype: torch.dtype, shape: tuple[int, ...], transpose: bool, seed: int
) -> None:
    if kind == "complete" and len(shape) not in (1, 2):
        shape = shape[:2] or (3,)
    t = sample(shape, dtype, seed)
    if transpose and t.dim() >= 2:
        t = t.transpose(0, 1)
    assert_matches_upstream(kind, t)


@pytest.mark.parametrize("shape", [(), (2, 2, 2), (1, 1, 1, 1)], ids=str)
def test_complete_rejects_other_ranks(shape: tuple[int, ...]) -> None:
    t = torch.zeros(shape, dtype=torch.int64)
    with pytest.raises(UPSTREAM_ERRORS):  # upstream: "Expected num_dims == 1 || num_dims == 2"
        upstream("complete", t)
    with pytest.raises(ValueError) as info:
        asynchronous_complete_cumsum_npu(t)
    assert str(info.value) == (
        "fbgemm::asynchronous_complete_cumsum: argument 't_in' must be 1-D or 2-D, "
        f"got a {len(shape)}-D tensor of shape {shape}"
    )


@pytest.mark.parametrize(
    "dtype", [torch.float64, torch.int8, torch.uint8, torch.int16, torch.bool], ids=str
)
@pytest.mark.parametrize("kind", KINDS)
def test_rejects_dtypes_upstream_rejects(kind: str, dtype: torch.dtype) -> None:
    t = torch.ones(4, dtype=dtype)
    with pytest.raises(UPSTREAM_ERRORS):
        upstream(kind, t)
    with pytest.raises(ValueError) as info:
        OURS[kind](t)
    message = str(info.value)
    assert message.startswith(f"fbgemm::asynchronous_{kind}_cumsum: argument 't_in' ")
    assert "int32, int64, float16, bfloat16 or float32" in message
    assert str(dtype).removeprefix("torch.") in message


@pytest.mark.parametrize("kind", KINDS)
def test_rejects_non_tensor(kind: str) -> None:
    with pytest.raises(ValueError, match=rf"asynchronous_{kind}_cumsum: argument 't_in' .*list"):
        OURS[kind]([1, 2, 3])  # type: ignore[arg-type]


@pytest.mark.parametrize("grad_mode", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("shape", [(5,), (2, 3)], ids=["1-D", "2-D"])
@pytest.mark.parametrize("kind", KINDS)
def test_float_input_that_requires_grad_on_npu_as_upstream(
    kind: str, shape: tuple[int, ...], grad_mode: bool
) -> None:
    """A float input that requires grad: upstream (no autograd formula) returns the cumsum, and
    its output requires grad exactly when grad mode is on (autograd's not-implemented node, whose
    backward gives the input no gradient); ours on npu returns the same, whatever the op."""
    x = torch.rand(shape, generator=torch.Generator().manual_seed(0), requires_grad=True)
    x_npu = x.detach().to("npu").requires_grad_()
    with torch.set_grad_enabled(grad_mode):
        expected = upstream(kind, x)
        got = upstream(kind, x_npu)  # the same torch.ops call, on the npu tensor
    torch.testing.assert_close(got.detach().cpu(), expected.detach())
    assert got.requires_grad == expected.requires_grad == grad_mode
    if grad_mode:
        with pytest.warns(UserWarning, match="autograd kernel was not registered"):
            torch.autograd.backward([expected.sum(), got.sum()])
        assert x.grad is None and x_npu.grad is None
