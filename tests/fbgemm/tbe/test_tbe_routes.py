"""The TBE kernels launch nothing a 910B runs on its AI CPU (issue 10, docs/hardware.md).

Upstream's modules on npu, the pt2 lookup counted apart from upstream's Python with
``intercept_lookups``: ``ai_cpu == 0`` in the forward (SUM / MEAN / NONE pooling, weighted or
not, VBE, bounds checks NONE or WARNING) and in the backward with every fused optimizer (the
counter / CowClip modes and global weight decay included), for int32 and int64 indices alike;
``bounds_check_indices`` in every mode, with VBE, and ``generate_vbe_metadata``.  The pieces
that replace AI-CPU ops are checked against the op they replace, on the CPU: ``segment_ids``
against ``searchsorted``, the backward's float-key sort against an integer stable sort (both
routes, the host's choice between them), the offsets repair's running max against ``cummax``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode, PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    GlobalWeightDecayDefinition,
    WeightDecayMode,
)

from fbgemm_npu.native.fbgemm.tbe import backward, metadata
from fbgemm_npu.native.fbgemm.tbe._utils import segment_ids
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.tbe_counts import intercept_lookups
from fbgemm_npu.testing.tbe_inputs import (
    COUNTER_CASES,
    NPU,
    build_tbe,
    counter_regularization,
    make_batches,
    training_tbe,
)
from fbgemm_npu.testing.trace import is_ours, owner_of_caller

SPECS = [(40, 8), (25, 16), (30, 8)]
VBE = [[2, 3], [1, 4], [3, 1]]


def _on_ai_cpu(c: counters.Counter) -> list[str]:
    return [e.name for e in c.events if e.ai_cpu]


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
    assert c.ai_cpu == 0, f"AI-CPU launches in the lookup forward: {_on_ai_cpu(c)}"


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("pooling", [PoolingMode.SUM, PoolingMode.MEAN], ids=str)
def test_vbe_lookup_forward_has_no_ai_cpu_launch(pooling: PoolingMode, dtype: torch.dtype) -> None:
    """Variable batch size per feature and rank: the block and feature of each bag and the
    scatter's member test need no searchsorted either."""
    (c,) = _lookup_counts(pooling, False, dtype, BoundsCheckMode.NONE, vbe=VBE)
    assert c.launches > 0, "the counter saw no launch: the lookup did not run on npu"
    assert c.ai_cpu == 0, _on_ai_cpu(c)


def _stalls(c: counters.Counter) -> list[str]:
    """Host waits a 910B adds in fbgemm_npu's code (upstream's Python frontend uploads VBE
    metadata itself), but the data checks' ``_assert_async`` (a later change removes those)."""
    return [
        e.name
        for e in c.events
        if e.stall is not None and is_ours(e) and "_assert_async" not in e.name
    ]


@pytest.mark.parametrize("vbe", [None, VBE], ids=["plain", "vbe"])
def test_first_step_with_a_new_layout_uploads_without_a_stall(
    vbe: list[list[int]] | None,
) -> None:
    """The first training step builds the plan (its tables uploaded pinned and non_blocking,
    no list index on a device tensor) and the VBE block tables: no blocking upload, no
    AI-CPU launch in fbgemm_npu's part of the step (the bounds check included)."""
    m = build_tbe(SPECS, "torchrec", optimizer=O.EXACT_ROWWISE_ADAGRAD,
                  bounds_check_mode=BoundsCheckMode.WARNING)  # fmt: skip
    b = make_batches(SPECS, 4, 1, seed=6, vbe=vbe)[0]
    kw = {"batch_size_per_feature_per_rank": vbe} if vbe else {}
    idx, off = b.indices.to(NPU), b.offsets.to(NPU)
    with counters.count() as c:
        c.owner = owner_of_caller
        out = m(idx, off, **kw)
        out.backward(torch.ones_like(out))
    assert _stalls(c) == [], c.summary()
    assert [e.name for e in c.events if e.ai_cpu and is_ours(e)] == []


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
    assert c.ai_cpu == 0, _on_ai_cpu(c)


def _backward_counts(
    opt: O,
    dtype: torch.dtype,
    pooling: PoolingMode = PoolingMode.SUM,
    vbe: list[list[int]] | None = None,
    **kwargs: Any,
) -> counters.Counter:
    """Counters of the second step's backward (the fused optimizer step included)."""
    specs = [(r, 8) for r, _ in SPECS] if pooling == PoolingMode.NONE else SPECS
    tbe = training_tbe(opt, specs, "npu", "cuda_user", pooling_mode=pooling, **kwargs)
    seen = []
    for b in make_batches(specs, 3, 2, seed=11, vbe=vbe):
        out = tbe(
            b.indices.to(dtype).to(NPU),
            b.offsets.to(dtype).to(NPU),
            batch_size_per_feature_per_rank=b.batch_size_per_feature_per_rank,
        )
        grad = torch.ones_like(out)
        with counters.count() as c:
            out.backward(grad)
        seen.append(c)
    return seen[-1]


OPTIMIZERS = [O.EXACT_SGD, O.EXACT_ADAGRAD, O.EXACT_ROWWISE_ADAGRAD, O.ADAM,
              O.PARTIAL_ROWWISE_ADAM, O.LAMB, O.PARTIAL_ROWWISE_LAMB, O.LARS_SGD]  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("opt", OPTIMIZERS, ids=lambda o: o.name)
def test_backward_and_optimizer_step_have_no_ai_cpu_launch(opt: O, dtype: torch.dtype) -> None:
    """The de-duplication sorts float keys, numbers runs by an int32 cumsum and finds their
    starts by counting (no integer sort, int64 cumsum or searchsorted); the optimizers' math is
    elementwise."""
    c = _backward_counts(opt, dtype)
    assert c.launches > 0
    assert c.ai_cpu == 0, _on_ai_cpu(c)


@pytest.mark.parametrize(
    ("pooling", "vbe"),
    [(PoolingMode.MEAN, None), (PoolingMode.NONE, None), (PoolingMode.SUM, VBE)],
    ids=["mean", "sequence", "vbe"],
)
def test_every_backward_path_has_no_ai_cpu_launch(
    pooling: PoolingMode, vbe: list[list[int]] | None
) -> None:
    c = _backward_counts(O.EXACT_ROWWISE_ADAGRAD, torch.int32, pooling, vbe)
    assert c.ai_cpu == 0, _on_ai_cpu(c)


@pytest.mark.parametrize("case", [*COUNTER_CASES, "global_weight_decay"])
def test_regularized_rowwise_adagrad_has_no_ai_cpu_launch(case: str) -> None:
    """The counter / CowClip modes of ``rowwise_adagrad_with_counter`` and global weight
    decay (whose forward gathers ``prev_iter`` too)."""
    if case == "global_weight_decay":
        kwargs: dict[str, Any] = {
            "weight_decay": 0.01,
            "weight_decay_mode": WeightDecayMode.DECOUPLE_GLOBAL,
            "global_weight_decay": GlobalWeightDecayDefinition(start_iter=0, lower_bound=0.0),
        }
    else:
        kwargs = counter_regularization(case)
    c = _backward_counts(O.EXACT_ROWWISE_ADAGRAD, torch.int64, **kwargs)
    assert c.ai_cpu == 0, _on_ai_cpu(c)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("vbe", [False, True], ids=["plain", "vbe"])
@pytest.mark.parametrize("mode", [BoundsCheckMode.WARNING, BoundsCheckMode.IGNORE,
                                  BoundsCheckMode.FATAL], ids=str)  # fmt: skip
def test_bounds_check_indices_has_no_ai_cpu_launch(
    mode: BoundsCheckMode, vbe: bool, dtype: torch.dtype
) -> None:
    """No cummax (the running max of the repair is three windowed amax passes), no int64
    masked_fill_ (a where), no searchsorted (segment_ids), FATAL with no running max at all."""
    T, B, L = 3, 2, 2
    rows = torch.full((T,), 10, device=NPU)
    idx = torch.randint(0, 10, (T * B * L,), generator=torch.Generator().manual_seed(0))
    idx = idx.to(dtype).to(NPU)
    off = torch.arange(0, T * B * L + 1, L, dtype=dtype).to(NPU)
    warning = torch.zeros(1, dtype=torch.int64, device=NPU)
    b_off = torch.arange(0, T * B + 1, B, dtype=torch.int32).to(NPU) if vbe else None
    with counters.count() as c:
        torch.ops.fbgemm.bounds_check_indices(
            rows, idx, off, mode.value, warning, None,
            B_offsets=b_off, max_B=B if vbe else -1,
        )  # fmt: skip
    assert c.launches > 0
    assert c.ai_cpu == 0, _on_ai_cpu(c)


def test_generate_vbe_metadata_has_no_ai_cpu_launch() -> None:
    b_off = torch.tensor([0, 3, 4, 10], dtype=torch.int32)
    brpf = torch.tensor([[0, 1, 3], [0, 1, 1], [0, 2, 6]], dtype=torch.int32)
    ofr = torch.tensor([0, 4, 12, 36, 44, 44, 92])
    d_off = torch.tensor([0, 4, 8, 20], dtype=torch.int32)
    args = [t.to(NPU) for t in (b_off, brpf, ofr, d_off)]
    with counters.count() as c:
        torch.ops.fbgemm.generate_vbe_metadata(*args, 12, False, 4, 26, 10)
    assert c.launches > 0
    assert c.ai_cpu == 0, _on_ai_cpu(c)


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
        assert c.ai_cpu == 0, _on_ai_cpu(c)


@pytest.mark.parametrize(
    ("key_bound", "high"),
    [(1 << 20, 1 << 20), (1 << 24, 1 << 24), ((1 << 24) + 1, 1 << 30), (1 << 40, 1 << 40)],
    ids=["small", "2**24", "past 2**24", "2**40"],
)
def test_sort_keys_equal_an_integer_stable_sort(key_bound: int, high: int) -> None:
    """The backward's float-key sort (one float32 pass up to 2**24, two 24-bit digits past it,
    decided on the host from the bound) orders keys exactly as an integer stable sort, ties
    in index order, with no AI-CPU launch; keys far past 2**24 need the two passes."""
    g = torch.Generator().manual_seed(1)
    keys = torch.cat([
        torch.randint(0, 50, (200,), generator=g),  # many ties
        torch.randint(0, high, (200,), generator=g),
        torch.tensor([0, high - 1, high - 1, high - 2]),
    ])  # fmt: skip
    keys = keys[torch.randperm(keys.numel(), generator=g)]
    want_keys, want_perm = torch.sort(keys, stable=True)
    with counters.count() as c:
        got_keys, got_perm = backward.sort_keys(keys.to(NPU), key_bound)
    assert torch.equal(got_perm.cpu(), want_perm)
    assert torch.equal(got_keys.cpu().to(torch.int64), want_keys)
    assert c.ai_cpu == 0, _on_ai_cpu(c)
    one_pass = key_bound <= backward.F32_EXACT
    assert [e.name for e in c.events].count("aten.sort.stable") == (1 if one_pass else 2)


def test_sort_keys_route_is_chosen_on_the_host() -> None:
    """Keys below 2**24: one float sort (2 launches); up to 2**48: two digit passes; past it
    (no table has so many rows) the int64 sort, on the AI CPU, stated; an unknown bound (a
    trace) takes the digits."""
    keys = torch.tensor([5, 3, 5, 1]).to(NPU)
    for bound, launches, ai_cpu in (
        (backward.F32_EXACT, 2, 0), (None, 9, 0), (1 << 48, 9, 0), ((1 << 48) + 1, 1, 1)
    ):  # fmt: skip
        with counters.count() as c:
            backward.sort_keys(keys, bound)
        assert (c.launches, c.ai_cpu) == (launches, ai_cpu), (bound, c.summary())


@pytest.mark.parametrize("n", [1, 2, 3, 9, 64, 65, 1000, 4097])
def test_repaired_offsets_equal_cummax(n: int) -> None:
    """The WARNING / IGNORE repair's running max (windowed amax passes over a zero-prefixed
    buffer) against ``cummax`` of the clamped offsets with the last one set to N, on offsets
    broken anywhere: below 0, past N, decreasing."""
    g = torch.Generator().manual_seed(n)
    N = 50
    for _ in range(4):
        o = torch.randint(-5, N + 10, (n,), generator=g)
        if n > 3:  # mostly non-decreasing, as real offsets are, with a few breaks
            o = torch.sort(o).values
            o[torch.randint(0, n, (3,), generator=g)] = torch.randint(-5, N + 10, (3,), generator=g)
        want = o.clone()
        want[-1] = N
        want = torch.cummax(want.clamp(0, N), 0).values
        with counters.count() as c:
            got = metadata._repaired_offsets(o.to(NPU), N)
        assert torch.equal(got.cpu(), want), (o, got, want)
        assert c.ai_cpu == 0, _on_ai_cpu(c)


def test_running_max_passes_are_chosen_on_the_host() -> None:
    """Three passes (radix the smallest q with q**3 >= n) up to 64**3 offsets, so the launch
    count does not grow with the batch; one more pass per factor 64 past it."""
    assert metadata._scan_shape(1) == (3, 2)
    assert metadata._scan_shape(9) == (3, 3)
    assert metadata._scan_shape(1665) == (3, 12)
    assert metadata._scan_shape(64**3) == (3, 64)
    assert metadata._scan_shape(64**3 + 1) == (4, 23)
    passes, q = metadata._scan_shape(10**7)
    assert q**passes >= 10**7 and q <= 64
