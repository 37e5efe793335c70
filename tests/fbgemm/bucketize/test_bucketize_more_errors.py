"""Bad input to ``populate_bucketized_permute``, ``get_source_mask`` and the unique-indices ops:
a ValueError / RuntimeError naming the op and the argument (data checks queued and raised at
``fbgemm_npu.check()``), never a crash or a read outside the inputs; with the checks off, a
result of the right size."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from fbgemm_npu.native._pending import check

F = torch.ops.fbgemm
NPU = "npu"
ERRORS = (ValueError, RuntimeError)


def _t(*v: Any, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.tensor(v, dtype=dtype).to(NPU)


LEN, BL, BM = _t(2, 1), _t(1, 0, 1, 1), _t(0, 1, 1)

BAD: dict[str, tuple[str, tuple[Any, ...], str]] = {
    "populate float lengths": (
        "populate_bucketized_permute",
        (_t(2.0, 1.0, dtype=torch.float32), BL, BM),
        "lengths",
    ),
    "populate mixed dtypes": (
        "populate_bucketized_permute",
        (LEN, BL.int(), BM),
        "bucketized_lengths",
    ),
    "populate size": ("populate_bucketized_permute", (LEN, _t(1, 0, 1), BM), "bucketized_lengths"),
    "populate no rows": ("populate_bucketized_permute", (_t(), _t(), BM), "bucket_mapping"),
    "populate empty buckets": (
        "populate_bucketized_permute",
        (LEN, _t(), BM),
        "bucketized_lengths",
    ),
    "populate bucket past my_size": (
        "populate_bucketized_permute",
        (LEN, BL, _t(0, 2, 1)),
        "bucket_mapping",
    ),
    "populate negative bucket": (
        "populate_bucketized_permute",
        (LEN, BL, _t(0, -1, 1)),
        "bucket_mapping",
    ),
    "populate lengths sum": ("populate_bucketized_permute", (_t(2, 2), BL, BM), "lengths"),
    "populate negative lengths": ("populate_bucketized_permute", (_t(4, -1), BL, BM), "lengths"),
    "mask batch": ("get_source_mask", (_t(1, 2), _t(1), 4), "num_targets"),
    "mask dtypes": ("get_source_mask", (_t(1, 2), _t(1, 1).int(), 5), "num_targets"),
    "mask float": ("get_source_mask", (_t(1.0, dtype=torch.float32), _t(1), 2), "num_sources"),
    "mask 2-D": ("get_source_mask", (_t(1, 2).view(1, 2), _t(1, 2).view(1, 2), 6), "num_sources"),
    "mask size too small": ("get_source_mask", (_t(2, 3), _t(1, 1), 5), "output_size"),
    "mask size too large": ("get_source_mask", (_t(2, 3), _t(1, 1), 9), "output_size"),
    "mask negative size": ("get_source_mask", (_t(2, 3), _t(1, 1), -1), "output_size"),
    "mask negative count": ("get_source_mask", (_t(3, -1), _t(1, 1), 4), "num_sources"),
    "mask empty with size": ("get_source_mask", (_t(), _t(), 3), "output_size"),
    "unique float": (
        "get_unique_indices",
        (_t(1.0, dtype=torch.float32), 5, True),
        "linear_indices",
    ),
    "unique 2-D": ("get_unique_indices", (_t(1, 2).view(1, 2), 5, True), "linear_indices"),
    "unique past max": ("get_unique_indices", (_t(1, 9, 2), 5, True), "linear_indices"),
    "unique negative": (
        "get_unique_indices_with_inverse",
        (_t(1, -3), 5, True, True),
        "linear_indices",
    ),
    "unique negative max": ("get_unique_indices", (_t(1, 2), -1, False), "max_indices"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_names_op_and_argument(name: str) -> None:
    op, args, arg = BAD[name]
    with pytest.raises(ERRORS, match=op) as info:
        getattr(F, op)(*args)
        check()
    assert arg in str(info.value)


def test_checks_off_bad_data_stays_in_bounds(no_validation: None) -> None:
    """Buckets and lengths past their tables: some result of the right size, no crash."""
    out = F.populate_bucketized_permute(_t(5, -2), BL, _t(7, -4, 1))
    assert out.shape == (3,)
    assert F.get_source_mask(_t(9, -3), _t(2, 2), 4).shape == (4,)
    assert F.get_unique_indices(_t(-5, 2**40, 3), 10, True)[0].shape == (3,)


def test_none_is_refused() -> None:
    with pytest.raises((ValueError, RuntimeError, TypeError), match="linear_indices|Tensor"):
        F.get_unique_indices(None, 5, True)
