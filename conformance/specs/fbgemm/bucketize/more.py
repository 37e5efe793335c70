"""Specs for the bucketize family's smaller ops against upstream's CPU kernels.

* ``populate_bucketized_permute``: 0 to 40 rows of 0-4 indices, ``my_size`` 1 to 9, int32 /
  int64 lengths (``bucketized_lengths`` alike) and bucket mapping, the bucketized lengths those
  the buckets give or (one in three) random.  Budget: the op's entry, ``int32 bucket_mapping``
  for an int32 mapping.
* ``get_source_mask``: 0 to 60 batch elements of 0-4 sources and targets, int32 / int64, the
  ``output_size`` their sum.
* ``get_unique_indices`` / ``_with_inverse``: 0 to 400 indices in ``[0, max_indices]`` with
  many duplicates (``max_indices`` itself among them), ``max_indices`` from 0 to ``2**40``
  (past ``2**24``: the two-digit sort), int32 / int64, every optional output.  Budget paths
  by the flags and ``max_indices``.

One example in ten of the first two draws float32 counts, which upstream refuses: ours must
raise too.  The unique ops draw no float indices: upstream's CPU kernel sorts them, ours refuses
them by name (the CUDA kernel's index types only).  Not drawn: data upstream reads or writes
outside its buffers for (buckets past ``my_size``, an ``output_size`` other than the sum,
lengths not summing to the mapping), which ours refuses by name
(tests/fbgemm/bucketize/test_bucketize_more_errors.py).  Oracle: upstream, exact (every output is
an integer or a bool).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec
from fbgemm_npu.testing.op_samples_bucketize_more import (
    populate_inputs,
    source_mask_inputs,
    unique_inputs,
)

F = torch.ops.fbgemm
DTYPES = st.sampled_from((torch.int32, torch.int64))


@st.composite
def _populate(draw: st.DrawFn) -> dict[str, object]:
    dtype, mapping = draw(DTYPES), draw(DTYPES)
    lengths, bl, bm = populate_inputs(
        draw(st.integers(0, 2**16)),
        draw(st.integers(0, 40)),
        draw(st.integers(1, 9)),
        dtype,
        mapping,
        consistent=draw(st.integers(0, 2)) > 0,
    )
    if lengths.numel() > 0 and draw(st.integers(0, 9)) == 9:  # upstream refuses float lengths
        lengths = lengths.float()
    return {"lengths": lengths, "bucketized_lengths": bl, "bucket_mapping": bm}


def _populate_budget(bucket_mapping: torch.Tensor, **_: object) -> BudgetUse:
    return BudgetUse(path="int32 bucket_mapping" if bucket_mapping.dtype == torch.int32 else None)


@st.composite
def _mask(draw: st.DrawFn) -> dict[str, object]:
    ns, nt, size = source_mask_inputs(
        draw(st.integers(0, 2**16)), draw(st.integers(0, 60)), draw(DTYPES)
    )
    if ns.numel() > 0 and draw(st.integers(0, 9)) == 9:  # upstream refuses float counts
        ns, nt = ns.float(), nt.float()
    return {"num_sources": ns, "num_targets": nt, "output_size": size}


@st.composite
def _unique(draw: st.DrawFn, inverse: bool) -> dict[str, object]:
    dtype = draw(DTYPES)
    top = draw(st.sampled_from((0, 1, 7, 1000, 2**24 - 1, 2**24, 2**30, 2**40)))
    if dtype == torch.int32:
        top = min(top, 2**31 - 1)
    v = unique_inputs(draw(st.integers(0, 2**16)), draw(st.integers(0, 400)), top, dtype)
    out: dict[str, object] = {
        "linear_indices": v,
        "max_indices": top,
        "compute_count": draw(st.booleans()),
    }
    if inverse:
        out["compute_inverse_indices"] = draw(st.booleans())
    return out


def _unique_budget(
    max_indices: int, compute_count: bool, compute_inverse_indices: bool | None = None, **_: object
) -> BudgetUse:
    if max_indices + 1 > 2**24:
        return BudgetUse(path="max_indices >= 2**24")
    if compute_inverse_indices is None:
        return BudgetUse(path=None if compute_count else "no count")
    if not compute_count and not compute_inverse_indices:
        return BudgetUse(path="no count, no inverse")
    return BudgetUse()  # the main path is the ceiling: count and inverse


SPECS = [
    OpSpec(
        name="populate_bucketized_permute",
        op=lambda **kw: F.populate_bucketized_permute(**kw),
        inputs=_populate(),
        compare=Compare({}),
        budget=_populate_budget,
    ),
    OpSpec(
        name="get_source_mask",
        op=lambda **kw: F.get_source_mask(**kw),
        inputs=_mask(),
        compare=Compare({}),
    ),
    OpSpec(
        name="get_unique_indices",
        op=lambda **kw: F.get_unique_indices(**kw),
        inputs=_unique(False),
        compare=Compare({}),
        budget=_unique_budget,
    ),
    OpSpec(
        name="get_unique_indices_with_inverse",
        op=lambda **kw: F.get_unique_indices_with_inverse(**kw),
        inputs=_unique(True),
        compare=Compare({}),
        budget=_unique_budget,
    ),
]
