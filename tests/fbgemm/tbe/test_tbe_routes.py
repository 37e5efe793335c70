"""The eager TBE forward launches nothing a 910B runs on its AI CPU (issue 10, docs/hardware.md).

Upstream's ``SplitTableBatchedEmbeddingBagsCodegen`` on npu (rowwise AdaGrad): the pt2 lookup
inside the module -- counted apart from upstream's Python with ``intercept_lookups`` -- shows
``ai_cpu == 0`` for SUM / MEAN / NONE pooling, weighted or not, int32 or int64 indices, bounds
checks NONE or WARNING.  The bag of each index used to come from a ``searchsorted`` and MEAN's
closed offsets from an int64 ``constant_pad_nd`` (both AI CPU); ``segment_ids`` replaces the
former and is checked against ``torch.searchsorted`` on the CPU here.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode, PoolingMode

from fbgemm_npu.native.fbgemm.tbe._utils import segment_ids
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.tbe_counts import intercept_lookups
from fbgemm_npu.testing.tbe_inputs import NPU, build_tbe, make_batches

SPECS = [(40, 8), (25, 16), (30, 8)]


def _lookup_counts(
    pooling: PoolingMode,
    weighted: bool,
    dtype: torch.dtype,
    mode: BoundsCheckMode,
    vbe: list[list[int]] | None = None,
) -> list[counters.Counter]:
    """Counters of the lookup op alone, on the third forward (the plan is cached by then)."""
    specs = [(r, 8) for r, _ in SPECS] if pooling == PoolingMode.NONE else SPECS
    m = build_tbe(
        specs, "torchrec", optimizer=O.EXACT_ROWWISE_ADAGRAD, pooling_mode=pooling,
        bounds_check_mode=mode,
    )  # fmt: skip
    b = make_batches(specs, 4, 1, seed=3, weighted=weighted, vbe=vbe)[0]
    kw = {"batch_size_per_feature_per_rank": vbe} if vbe else {}
    idx, off = b.indices.to(dtype).to(NPU), b.offsets.to(dtype).to(NPU)
    psw = None if b.per_sample_weights is None else b.per_sample_weights.to(NPU)
    for _ in range(2):
        m(idx, off, per_sample_weights=psw, **kw)
    seen: list[counters.Counter] = []

    def hold(qualname: str, call: Any) -> torch.Tensor:
        with counters.count() as c:
            out = call()
        seen.append(c)
        return out

    with intercept_lookups(hold):
        m(idx, off, per_sample_weights=psw, **kw)
    assert len(seen) == 1, "the module made no (or more than one) lookup call"
    return seen


@pytest.mark.parametrize("mode", [BoundsCheckMode.NONE, BoundsCheckMode.WARNING], ids=str)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("pooling", [PoolingMode.SUM, PoolingMode.MEAN, PoolingMode.NONE], ids=str)
def test_lookup_forward_has_no_ai_cpu_launch(
    pooling: PoolingMode, weighted: bool, dtype: torch.dtype, mode: BoundsCheckMode
) -> None:
    if pooling == PoolingMode.NONE and weighted:
        pytest.skip("upstream's sequence TBE takes no per-sample weights")
    (c,) = _lookup_counts(pooling, weighted, dtype, mode)
    assert c.launches > 0, "the counter saw no launch: the lookup did not run on npu"
    routed = [e.name for e in c.events if e.ai_cpu]
    assert c.ai_cpu == 0, f"AI-CPU launches in the lookup forward: {routed}"


@pytest.mark.parametrize("pooling", [PoolingMode.SUM, PoolingMode.MEAN], ids=str)
def test_vbe_lookup_forward_has_no_ai_cpu_launch(pooling: PoolingMode) -> None:
    """Variable batch size per feature and rank: the feature of each bag, the block of each
    bag and the scatter's member test need no searchsorted either."""
    (c,) = _lookup_counts(
        pooling, False, torch.int64, BoundsCheckMode.NONE, vbe=[[2, 3], [1, 4], [3, 1]]
    )
    assert c.launches > 0, "the counter saw no launch: the lookup did not run on npu"
    assert c.ai_cpu == 0, [e.name for e in c.events if e.ai_cpu]


def test_module_forward_without_bounds_check_has_no_ai_cpu_launch() -> None:
    """With bounds checks off the whole module forward (upstream's Python around the op
    included) stays on the AI Core."""
    m = build_tbe(SPECS, "torchrec", optimizer=O.EXACT_ROWWISE_ADAGRAD,
                  bounds_check_mode=BoundsCheckMode.NONE)  # fmt: skip
    b = make_batches(SPECS, 4, 1, seed=5)[0]
    idx, off = b.indices.to(NPU), b.offsets.to(NPU)
    for _ in range(2):
        m(idx, off)
    with counters.count() as c:
        m(idx, off)
    assert c.ai_cpu == 0, [e.name for e in c.events if e.ai_cpu]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_segment_ids_equal_searchsorted(dtype: torch.dtype) -> None:
    """Empty segments, a first bound above 0, items past the last bound, bounds past ``n`` and
    below 0, no segments, no items: equal to ``torch.searchsorted`` on the CPU."""
    cases = [
        ([0, 2, 2, 5, 5, 5, 7], 9),
        ([0, 0, 0], 4),
        ([1, 3, 3, 4], 4),
        ([0, 3, 12, 40], 10),
        ([-3, -1, 2, 6], 6),
        ([0], 5),
        ([0, 0, 0], 0),
        ([0, 4, 8, 8, 12], 12),
    ]
    g = torch.Generator().manual_seed(0)
    lens = torch.randint(0, 4, (300,), generator=g)
    cases.append(([0, *lens.cumsum(0).tolist()], int(lens.sum()) + 5))
    for bounds, n in cases:
        b = torch.tensor(bounds, dtype=dtype)
        want = torch.searchsorted(b[1:], torch.arange(n, dtype=dtype), right=True)
        with counters.count() as c:
            got = segment_ids(b.to(NPU), n)
        assert got.dtype == torch.int32
        torch.testing.assert_close(got.cpu().to(torch.int64), want, rtol=0, atol=0)
        assert c.ai_cpu == 0, [e.name for e in c.events if e.ai_cpu]


@pytest.mark.parametrize("vbe", [False, True], ids=["plain", "vbe"])
def test_bounds_check_indices_finds_bags_without_searchsorted(vbe: bool) -> None:
    """The bag of every index comes from segment_ids; what stays on a 910B's AI CPU is listed
    (cummax of the repaired offsets, the int64 masked_fill_ of the repair, VBE's bag -> feature
    search): issue-10 work still open, held here so it can only shrink."""
    T, B, L = 3, 2, 2
    rows = torch.full((T,), 10, device=NPU)
    idx = torch.randint(0, 10, (T * B * L,), generator=torch.Generator().manual_seed(0)).to(NPU)
    off = torch.arange(0, T * B * L + 1, L).to(NPU)
    warning = torch.zeros(1, dtype=torch.int64, device=NPU)
    b_off = torch.arange(0, T * B + 1, B, dtype=torch.int32).to(NPU) if vbe else None
    with counters.count() as c:
        torch.ops.fbgemm.bounds_check_indices(
            rows, idx, off, BoundsCheckMode.WARNING.value, warning, None,
            B_offsets=b_off, max_B=B if vbe else -1,
        )  # fmt: skip
    on_ai_cpu = sorted(e.name for e in c.events if e.ai_cpu)
    searches = [n for n in on_ai_cpu if "searchsorted" in n]
    assert len(searches) == (1 if vbe else 0), on_ai_cpu
    assert len(on_ai_cpu) <= (3 if vbe else 2), on_ai_cpu
