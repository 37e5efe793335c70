"""Bad input to the permute family: an error naming the op and the argument, including the data
errors upstream's kernels miss (they read out of bounds or leave garbage), so the conformance
suite cannot run them; ``FBGEMM_NPU_VALIDATE=0`` switching the data checks off and nothing else.

A data error may be queued (``FBGEMM_NPU_VALIDATE=deferred``): each test reads it with
``fbgemm_npu.check()`` inside its ``pytest.raises``, where a caller reads the result, and no test
leaves a queued check behind for the next (``no_leftover_checks``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.native._pending import pending
from fbgemm_npu.testing.budgets import drain_checks
from fbgemm_npu.testing.permute_inputs import SMALL, on_npu

F = torch.ops.fbgemm
NPU = "npu"
I32 = torch.int32
P2D = "fbgemm::permute_2D_sparse_data"


@pytest.fixture(autouse=True)
def no_leftover_checks() -> Any:
    """Fail a test that leaves a queued data check unread: under deferred checks it would be
    raised by the next test's first failing kernel in place of that test's own error."""
    drain_checks()
    yield
    left = pending()
    drain_checks()
    assert left == 0, f"{left} queued data check(s) left unread: call fbgemm_npu.check()"


def _p2d(**change: Any) -> Callable[[], Any]:
    d = on_npu({**SMALL, **change})
    pls = d.pop("permuted_lengths_sum", None)
    return lambda: F.permute_2D_sparse_data(
        d["permute"], d["lengths"], d["values"], d["weights"], pls
    )


DATA_ERRORS = {
    "permute_too_big": ({"permute": torch.tensor([3, 0, 1], dtype=I32)}, "'permute'.*\\[0, 3\\)"),
    "permute_negative": ({"permute": torch.tensor([-1, 0], dtype=I32)}, "'permute'.*\\[0, 3\\)"),
    "negative_length": ({"lengths": torch.tensor([[1, 2], [0, 3], [3, -1]])}, "'lengths'"),
    "values_too_short": (
        {"values": torch.arange(8), "weights": torch.arange(8.0)},
        "values.numel\\(\\) \\(8\\)",
    ),
    "weights_too_short": ({"weights": torch.arange(5.0)}, "weights.size\\(0\\) \\(5\\)"),
}


@pytest.mark.parametrize("given", [False, True], ids=["pls_none", "pls_given"])
@pytest.mark.parametrize("case", list(DATA_ERRORS))
def test_data_errors_name_op_and_argument(case: str, given: bool) -> None:
    change, match = DATA_ERRORS[case]
    if given:
        change = {**change, "permuted_lengths_sum": 9}
    with pytest.raises((ValueError, RuntimeError), match=f"{P2D}: .*{match}"):
        _p2d(**change)()
        fbgemm_npu.check()


@pytest.mark.parametrize("pls", [8, 10])
def test_permuted_lengths_sum_must_match(pls: int) -> None:
    """Upstream truncates (writing out of bounds) or leaves garbage; ours refuses."""
    with pytest.raises(RuntimeError, match=f"{P2D}: .*'permuted_lengths_sum' \\({pls}\\)"):
        _p2d(permuted_lengths_sum=pls)()
        fbgemm_npu.check()
    with pytest.raises(ValueError, match=f"{P2D}: argument 'permuted_lengths_sum' must be non-neg"):
        _p2d(permuted_lengths_sum=-1)()


META_ERRORS = {
    "lengths_1d": ({"lengths": torch.tensor([1, 2, 0])}, "'lengths' must be 2-D"),
    "lengths_3d": ({"lengths": torch.ones(3, 2, 1, dtype=torch.int64)}, "'lengths' must be 2-D"),
    "weights_3d": ({"weights": torch.ones(9, 1, 1)}, "'weights' must be 1-D or 2-D"),
    "permute_float": ({"permute": torch.tensor([2.0, 0.0, 1.0])}, "'permute' must have dtype"),
    "lengths_float": ({"lengths": torch.ones(3, 2)}, "'lengths' must have dtype"),
    "values_float64": ({"values": torch.arange(9.0, dtype=torch.float64)}, "'values' must have"),
    "weights_bool": ({"weights": torch.ones(9, dtype=torch.bool)}, "'weights' must have dtype"),
}


@pytest.mark.parametrize("case", list(META_ERRORS))
def test_metadata_errors(case: str) -> None:
    change, match = META_ERRORS[case]
    with pytest.raises(ValueError, match=f"{P2D}: argument {match}"):
        _p2d(**change)()


def test_devices_must_agree() -> None:
    d = on_npu(SMALL)
    with pytest.raises(RuntimeError, match=f"{P2D}: arguments 'permute' .* and 'lengths' .*same"):
        F.permute_2D_sparse_data(SMALL["permute"], d["lengths"], d["values"])
    with pytest.raises(RuntimeError, match=f"{P2D}: arguments 'permute' .* and 'weights' .*same"):
        F.permute_2D_sparse_data(d["permute"], d["lengths"], d["values"], d["weights"].to("npu:1"))


def test_other_ops_errors() -> None:
    d = on_npu(SMALL)
    with pytest.raises(ValueError, match="permute_sparse_features: arguments 'lengths' .*dtype"):
        F.permute_sparse_features(d["permute"], d["lengths"].int(), d["values"])
    with pytest.raises(ValueError, match="permute_sparse_features: argument 'lengths' must be 2-D"):
        F.permute_sparse_features(d["permute"], d["lengths"].view(-1), d["values"])
    with pytest.raises(ValueError, match="input1D: argument 'stride' must be positive and divide"):
        F.permute_2D_sparse_data_input1D(d["permute"], d["lengths"].view(-1), d["values"], 4)
    with pytest.raises(ValueError, match="permute_1D_sparse_data: argument 'permute' .*\\[0, 6\\)"):
        F.permute_1D_sparse_data(d["permute"] * 3, d["lengths"].view(-1), d["values"])
    with pytest.raises(ValueError, match="permute_1D_sparse_data: sum\\(lengths\\) must not exc"):
        F.permute_1D_sparse_data(d["permute"], d["lengths"].view(-1), d["values"][:4])


@pytest.mark.parametrize(
    "perm", [[0, 0, 1], [0, 1, 3], [-1, 0, 1], [2, 2, 2]], ids=["repeat", "big", "neg", "same"]
)
def test_invert_permute_requires_a_permutation(perm: list[int]) -> None:
    with pytest.raises(RuntimeError, match="invert_permute: .*'permute' must be a permutation of"):
        F.invert_permute(torch.tensor(perm, device=NPU))
        fbgemm_npu.check()
    with pytest.raises(ValueError, match="invert_permute: argument 'permute' must have dtype"):
        F.invert_permute(torch.tensor([1.0, 0.0], device=NPU))


EXPAND = "fbgemm::expand_into_jagged_permute"


def _expand(
    perm: list[int], ins: list[int], outs: list[int], size: int, dtype: torch.dtype = torch.int64
) -> Any:
    def t(x: list[int]) -> torch.Tensor:
        return torch.tensor(x, dtype=dtype, device=NPU)

    return F.expand_into_jagged_permute(t(perm), t(ins), t(outs), size)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([1, 2], [0, 2, 5], [0, 3, 5], 5), "'permute' must hold indices in \\[0, 2\\)"),
        (([1, 0], [0, 2, 5], [0, 3, 2], 2), "'output_offset' must be non-decreasing"),
        (([1, 0], [0, 2, 5], [1, 3, 5], 5), "'output_offset' must start at 0"),
        (([1, 0], [0, 2, 5], [0, 3, 5], 4), "'output_offset' must end at output_size \\(4\\)"),
        # int32 offsets across 2**31: every difference wraps to a non-negative step, and the
        # element index was built for lengths summing to no real size
        (
            ([1, 0, 2], [0, 3, 5, 4], [0, 2**31 - 1, -(2**31) + 5, 4], 4, torch.int32),
            "'output_offset' must be non-decreasing",
        ),
    ],
    ids=["permute_range", "decreasing", "start", "end", "wrapped_int32"],
)
def test_expand_data_errors(args: tuple[Any, ...], match: str) -> None:
    with pytest.raises(RuntimeError, match=f"{EXPAND}: .*{match}"):
        _expand(*args)
        fbgemm_npu.check()


def test_expand_metadata_errors() -> None:
    with pytest.raises(ValueError, match=f"{EXPAND}: argument 'permute' must not be empty"):
        _expand([], [0], [0], 0)
    with pytest.raises(ValueError, match=f"{EXPAND}: argument 'input_offset' must have perm"):
        _expand([1, 0], [0, 2], [0, 3, 5], 5)
    with pytest.raises(ValueError, match=f"{EXPAND}: argument 'output_offset' must have permute's"):
        F.expand_into_jagged_permute(
            *(torch.tensor(x, device=NPU) for x in ([1, 0], [0, 2, 5])),
            torch.tensor([0, 3, 5], dtype=I32, device=NPU),
            5,
        )


def test_validation_off_skips_only_data_checks(no_validation: None) -> None:
    """FBGEMM_NPU_VALIDATE=0 trusts the data; metadata is still checked."""
    with pytest.raises(ValueError, match=f"{P2D}: argument 'lengths' must be 2-D"):
        _p2d(lengths=torch.tensor([1, 2, 0]))()
    ok = _p2d(permuted_lengths_sum=9)()
    assert ok[1].cpu().tolist() == [6, 7, 8, 0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    "name", ["permuted_lengths_out", "permuted_indices_out", "permuted_weights_out"]
)
def test_preallocated_buffer_overlapping_itself_is_refused(name: str) -> None:
    """A stride-0 (expanded) buffer would have every element written to one place (found by
    tests/fuzz/test_fuzz_permute.py: torch's own error named neither op nor argument)."""
    shapes = {"permuted_lengths_out": (3, 2), "permuted_indices_out": (9,)}
    dtype = torch.float32 if name == "permuted_weights_out" else torch.int64
    buf = torch.zeros([1] * len(shapes.get(name, (9,))), dtype=dtype, device=NPU)
    d = on_npu(SMALL)
    with pytest.raises(
        ValueError,
        match=f"permute_2D_sparse_preallocated_out: argument '{name}' must not overlap itself",
    ):
        F.permute_2D_sparse_preallocated_out(
            d["permute"],
            d["lengths"],
            d["values"],
            d["weights"],
            9,
            **{name: buf.expand(shapes.get(name, (9,)))},
        )


@pytest.mark.parametrize("size", [2**40, 2**62])
def test_expand_output_that_cannot_be_allocated(size: int) -> None:
    """Offsets that agree with an output_size no memory holds: an error naming the op and
    output_size, not the allocator's (found by tests/fuzz/test_fuzz_permute.py)."""
    args = [torch.tensor(v, device=NPU) for v in ([0], [0, 5], [0, size])]
    with pytest.raises(
        RuntimeError,
        match=f"expand_into_jagged_permute: the output of 'output_size' = {size} "
        "elements cannot be allocated",
    ):
        F.expand_into_jagged_permute(*args, size)


@pytest.mark.parametrize("mode", ["1", "deferred"])
@pytest.mark.parametrize("size", [2**31, 2**40, 2**62])
def test_expand_int32_output_size_past_its_range(
    size: int, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """int32 offsets cannot end at an output_size of 2**31 or more: refused on the host, before
    any launch (under deferred checks the int32 clamp of the offsets to output_size raised an
    overflow inside the kernel: found by tests/fuzz/test_fuzz_permute_index.py)."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", mode)
    with pytest.raises(
        ValueError,
        match=f"{EXPAND}: argument 'output_offset' must end at "
        f"output_size \\({size}\\), past the range of its dtype int32",
    ):
        _expand([1, 0], [0, 1, 3], [0, 2, 3], size, torch.int32)
    fbgemm_npu.check()  # nothing was queued


@pytest.mark.parametrize("size", [2**40, 2**62])
def test_expand_unallocatable_output_with_bad_offsets_while_deferred(
    size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offsets that do not end at output_size and an output no memory holds, the checks
    deferred: the output is allocated before the checks are queued, so the allocator's refusal
    is the error (naming output_size), not a launch failing on bad data (the fuzz suite counted
    these memory-unsafe)."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "deferred")
    with pytest.raises(RuntimeError, match=f"{EXPAND}: the output of 'output_size'") as info:
        _expand([1, 0], [0, 1, 3], [0, 2, 3], size)
    assert getattr(info.value, "fbgemm_npu_kernel_error", None) is None
    fbgemm_npu.check()  # nothing was queued


@pytest.mark.parametrize("mode", ["1", "deferred"])
@pytest.mark.parametrize("pls", [28, 2**31 + 5, 2**40, 2**62])
def test_permuted_lengths_sum_past_what_values_hold(
    pls: int, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each permuted row sums to at most values.numel() (9), so 3 rows to at most 27: a larger
    permuted_lengths_sum is refused on the host, before anything of that size is allocated
    (under deferred checks the kernel went on to allocate it: 2**31 + 5 was 16 GiB of index)."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", mode)
    with pytest.raises(
        ValueError,
        match=f"{P2D}: argument 'permuted_lengths_sum' \\({pls}\\) "
        "must equal .* at most permute.numel\\(\\) \\(3\\)",
    ):
        _p2d(permuted_lengths_sum=pls)()
    fbgemm_npu.check()  # nothing was queued


# --- the int32 index arithmetic (native/fbgemm/permute/_gather.py) on data that breaks it -------


def _wrapping(given: bool) -> Callable[[], Any]:
    """4096 segments of 2**20 over 2**20 values: each length fits, but the int32 scans reach
    2**32 and wrap back to 0, so the sums' own checks would pass (and, with
    permuted_lengths_sum = 0, the output would be silently empty)."""
    lengths = torch.full((1, 4096), 2**20, device=NPU)
    values = torch.zeros(2**20, dtype=I32, device=NPU)
    perm = torch.zeros(1, dtype=I32, device=NPU)
    return lambda: F.permute_2D_sparse_data(perm, lengths, values, None, 0 if given else None)


@pytest.mark.parametrize("given", [False, True], ids=["pls_none", "pls_given"])
def test_int32_scan_that_wraps_is_refused(given: bool) -> None:
    with pytest.raises(
        (ValueError, RuntimeError),
        match=f"{P2D}: .*sum\\(lengths\\) must not exceed values.numel\\(\\) \\(1048576\\)",
    ):
        _wrapping(given)()
        fbgemm_npu.check()


@pytest.mark.parametrize("given", [False, True], ids=["pls_none", "pls_given"])
def test_int64_length_past_int32_is_refused(given: bool) -> None:
    """A length of 2**32 + 1 would be cut to 1 by the int32 cast of the scans: refused by the
    check that no length exceeds the values (pls given: the int64 route, by the sums)."""
    lengths = torch.tensor([[2**32 + 1, 1]])
    pls = 2**32 + 2 if given else None
    with pytest.raises((ValueError, RuntimeError), match=f"{P2D}: .*values.numel\\(\\) \\(9\\)"):
        _p2d(lengths=lengths, permute=torch.tensor([0], dtype=I32), permuted_lengths_sum=pls)()
        fbgemm_npu.check()


def test_values_asked_for_where_there_are_none() -> None:
    """Empty values and weights, a positive permuted_lengths_sum: refused on the host (no data
    can make it valid), before any gather."""
    empty = {"values": torch.zeros(0, dtype=torch.int64), "weights": torch.zeros(0)}
    with pytest.raises(
        ValueError, match=f"{P2D}: sum\\(lengths\\).*'permuted_lengths_sum' \\(9\\)"
    ):
        _p2d(**empty, permuted_lengths_sum=9)()


DEFERRED_CASES: dict[str, dict[str, Any]] = {
    **{name: change for name, (change, _) in DATA_ERRORS.items()},
    "sum_mismatch": {"permuted_lengths_sum": 12},
    "huge_length": {"lengths": torch.tensor([[1, 2], [0, 2**40], [2, 1]])},
}


@pytest.mark.parametrize("case", list(DEFERRED_CASES))
def test_bad_data_stays_in_bounds_while_the_check_is_deferred(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the checks queued (FBGEMM_NPU_VALIDATE=deferred) the call runs on bad data before
    any check is read: every scatter and gather stays inside its buffer (the simulator raises
    on an index out of bounds), and the error comes at fbgemm_npu.check()."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "deferred")
    change = {"permuted_lengths_sum": 9, **DEFERRED_CASES[case]}
    _p2d(**change)()  # no error yet: memory-safe
    with pytest.raises(RuntimeError, match=f"{P2D}: "):
        fbgemm_npu.check()
    _wrapping(given=True)()
    with pytest.raises(RuntimeError, match=f"{P2D}: .*sum\\(lengths\\) must not exceed"):
        fbgemm_npu.check()


@pytest.mark.parametrize(
    "args",
    [
        ([3, 0, 1], [0, 3, 5, 9], [0, 4, 6, 9], 9),  # permute past T
        ([1, 0, 2], [0, 3, 5, 9], [0, 9, 5, 7], 7),  # decreasing offsets
        ([1, 0, 2], [0, 3, 5, 9], [0, 2, 5, 40], 9),  # an end past output_size
    ],
    ids=["permute_range", "decreasing", "end"],
)
@pytest.mark.parametrize("dtype", [torch.int64, I32], ids=str)
def test_expand_bad_data_stays_in_bounds_while_deferred(
    args: tuple[Any, ...], dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "deferred")
    *tensors, size = args
    out = F.expand_into_jagged_permute(
        *(torch.tensor(t, dtype=dtype, device=NPU) for t in tensors), size
    )
    assert out.shape == (size,)
    with pytest.raises(RuntimeError, match=f"{EXPAND}: "):
        fbgemm_npu.check()
