"""Spec for ``fbgemm::jagged_unique_indices`` (upstream: CUDA only, no CPU kernel).

The oracle is :func:`~fbgemm_npu.testing.index_select_inputs.unique_reference`, plain Python
read from upstream's CUDA kernel (``jagged_unique_indices.cu``): linearize every index with its
feature's ``hash_size_cumsum``, sort the distinct linear ids, map each index to its rank
(``reverse_index``), delinearize the distinct ids by their owner feature, and spread each group's
count of distinct ids over the group's samples (the first ``count % samples`` samples get one
more).  The spec's op runs the reference on CPU tensors and
ours on npu tensors, so outputs, shapes and dtypes are all compared with the reference, exactly.

Inputs: 1 to 4 features (hash sizes 0 to 20), batch 1 to 4, 0 to 5 indices per sample (empty
samples and an empty batch of indices included), every feature its own group or features grouped
(``hash_size_offsets`` a partition of ``[0, T]``), int32 or int64 throughout (the op takes one
index dtype), sometimes strided ``offsets`` and ``indices``.  Budget: the op's ``BUDGETS`` entry
(strided ``offsets`` are copied once: their path); no sync without indices.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, OpSpec, TensorView
from conformance.specs.fbgemm.index_select.common import EXACT, INDEX_DTYPES
from fbgemm_npu.testing.index_select_inputs import unique_reference

F = torch.ops.fbgemm
__all__ = ["SPECS", "unique_inputs", "unique_reference"]


def _op(**kw: Any) -> Any:
    """Ours on npu tensors; the reference on CPU tensors (upstream has no CPU kernel)."""
    if kw["indices"].device.type == "cpu":
        return unique_reference(**kw)
    return F.jagged_unique_indices(**kw)


def _partition(draw: st.DrawFn, n_feat: int) -> list[int]:
    """``T + 1`` non-decreasing group boundaries from 0 to T (upstream's kernel reads ``T + 1``):
    one feature per group, or features grouped (empty groups included)."""
    if draw(st.booleans()):
        return list(range(n_feat + 1))
    inner = sorted(draw(st.lists(st.integers(0, n_feat), min_size=n_feat - 1, max_size=n_feat - 1)))
    return [0, *inner, n_feat]


def _strided(draw: st.DrawFn, t: torch.Tensor) -> Any:
    if t.numel() and draw(st.integers(0, 3)) == 0:
        return TensorView(torch.stack([t, t], 1).reshape(-1), lambda x: x[::2], "every other")
    return t


@st.composite
def unique_inputs(draw: st.DrawFn) -> dict:
    n_feat = draw(st.integers(1, 4))
    batch = draw(st.integers(1, 4))
    sizes = [draw(st.sampled_from((0, 1, 5, 20))) for _ in range(n_feat)]
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    lengths, ind = [], []
    for t in range(n_feat):
        for _ in range(batch):
            n = int(torch.randint(0, 6, (1,), generator=gen)) if sizes[t] else 0
            lengths.append(n)
            ind.extend(torch.randint(0, max(sizes[t], 1), (n,), generator=gen).tolist())
    if draw(st.integers(0, 5)) == 0:  # no indices at all
        lengths, ind = [0] * (n_feat * batch), []
    dtype = draw(st.sampled_from(INDEX_DTYPES))
    hsc = torch.tensor([0, *torch.tensor(sizes).cumsum(0).tolist()], dtype=dtype)
    offsets = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=dtype)
    return {
        "hash_size_cumsum": hsc,
        "hash_size_offsets": torch.tensor(_partition(draw, n_feat), dtype=dtype),
        "offsets": _strided(draw, offsets),
        "indices": _strided(draw, torch.tensor(ind, dtype=dtype)),
    }


def _budget(**kw: Any) -> BudgetUse:
    # searchsorted reads contiguous boundaries: strided offsets are copied once
    return BudgetUse(path="strided_offsets" if isinstance(kw["offsets"], TensorView) else None)


def _examples() -> tuple[dict, ...]:
    return (
        {
            "hash_size_cumsum": torch.tensor([0, 10, 15, 30]),
            "hash_size_offsets": torch.tensor([0, 1, 2, 3]),
            "offsets": torch.tensor([0, 2, 3, 3, 6, 7, 9]),
            "indices": torch.tensor([3, 3, 9, 1, 1, 4, 2, 14, 0]),
        },
        {
            "hash_size_cumsum": torch.tensor([0, 4, 4, 9], dtype=torch.int32),
            "hash_size_offsets": torch.tensor([0, 2, 2, 3], dtype=torch.int32),
            "offsets": torch.tensor([0, 1, 3, 3, 3, 4, 4], dtype=torch.int32),
            # feature 0's 5 runs past its hash range into feature 2's (read as its id there);
            # ids past hsc[T] are the last feature's (its group counts them)
            "indices": torch.tensor([3, 0, 5, 4], dtype=torch.int32),
        },
    )


SPECS = [
    OpSpec(
        "jagged_unique_indices",
        _op,
        unique_inputs(),
        EXACT,
        _budget,
        examples=_examples(),
        notes="CUDA-only upstream: judged by unique_reference (loops)",
    ),
]
