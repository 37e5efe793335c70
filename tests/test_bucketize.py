"""The bucketize family on npu: budgets, bad inputs, upstream parity, torchrec's KJT bucketize.

Expected values come from upstream's CPU kernels (on contiguous copies where its CPU kernel reads
raw memory) or from Python integers, never from our kernels.  Budgets (OPS.md: 20 launches,
1 sync) are held with ``FBGEMM_NPU_VALIDATE=0`` (the kernels) and the data check's cost is pinned
separately; each count is measured at two sizes and must not change.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.harness import materialize
from conformance.specs.bucketize import block_budget, block_inputs, cyclic_budget, cyclic_inputs
from fbgemm_npu.native.fbgemm.bucketize import _utils as ub
from fbgemm_npu.native.fbgemm.bucketize import bucketize as ours
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.counters import assert_budget

F = torch.ops.fbgemm
NPU = "npu"
I32, I64 = torch.int32, torch.int64
BLOCK = "fbgemm::block_bucketize_sparse_features"
CYCLIC = "fbgemm::bucketize_sparse_features"


@pytest.fixture
def no_validation(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
    yield


def _kjt(n_feat: int, batch: int, p: int, idt: torch.dtype = I64, seed: int = 0,
         device: str = NPU) -> dict[str, Any]:  # fmt: skip
    """A KJT-like input: lengths 0..11, indices -50..2*block*p (inside and past the blocks)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 12, (n_feat * batch,), generator=gen, dtype=I32)
    block = 1000
    x = torch.randint(-50, 2 * block * p, (int(lengths.sum()),), generator=gen).to(idt)
    return {"lengths": lengths.to(device), "indices": x.to(device),
            "block_sizes": torch.full((n_feat,), block, dtype=idt, device=device),
            "my_size": p, "bucketize_pos": False, "sequence": False}  # fmt: skip


# ---- budgets ------------------------------------------------------------------------------------

SIZES = ((3, 4), (26, 256))  # (features, batch): the count must not depend on them
# Kernel launches without the data check, uniform blocks, my_size a power of two.  Budget 20:
# the bare op takes 19, with weights, VBE or 2-D weights 20.  Over: sequence (21: the inverse
# permutation needs an arange and a scatter), keep_orig_idx_per_feature (21: its gather and
# select), bucketize_pos (23: the row starts are a searchsorted, a subtraction and a gather);
# total_num_blocks (34: an unsigned division by a per-feature divisor) and block_bucketize_pos
# (40: a two-level boundary search, 56 with total_num_blocks).  A fused kernel is the remedy
# (upstream's CUDA kernels take 2-3 launches).
KERNEL: dict[str, tuple[int, dict[str, Any]]] = {
    "plain": (19, {}),
    "keep_orig_idx": (19, {"keep_orig_idx": True}),
    "weights": (20, {"weights": True}),
    "vbe": (20, {"vbe": True}),
    "sequence": (21, {"sequence": True}),
    "bucketize_pos": (23, {"bucketize_pos": True}),
    "sequence_weights_pos": (25, {"sequence": True, "weights": True, "bucketize_pos": True}),
    "keep_orig_idx_per_feature": (21, {"keep_pf": True}),
    "total_num_blocks": (34, {"total": True}),
    "block_bucketize_pos": (40, {"pos": True}),
    "block_bucketize_pos_total": (56, {"pos": True, "total": True}),
}
# The data check (lengths >= 0 summing to indices.numel(), batch sizes likewise, total_num_blocks
# multiples of my_size): one _assert_async after its reductions.
CHECKS = {"plain": 6, "vbe": 12, "total_num_blocks": 11, "block_bucketize_pos_total": 11}


def _block_call(n_feat: int, batch: int, opts: dict[str, Any], p: int = 8) -> Callable[[], Any]:
    d = _kjt(n_feat, batch, p)
    kw: dict[str, Any] = {k: d[k] for k in ("lengths", "indices", "block_sizes", "my_size")}
    kw["bucketize_pos"] = opts.get("bucketize_pos", False)
    kw["sequence"] = opts.get("sequence", False)
    kw["keep_orig_idx"] = opts.get("keep_orig_idx", False)
    if opts.get("weights"):
        kw["weights"] = torch.rand(d["indices"].numel(), device=NPU)
    if opts.get("keep_pf"):
        kw["keep_orig_idx_per_feature"] = torch.arange(n_feat, device=NPU) % 2 == 0
    if opts.get("vbe"):
        kw["batch_size_per_feature"] = torch.full((n_feat,), batch, dtype=I32, device=NPU)
        kw["max_B"] = batch
    if opts.get("total"):
        kw["total_num_blocks"] = torch.full((n_feat,), 2 * p, dtype=I64, device=NPU)
    if opts.get("pos"):
        row = torch.arange(p + 1, dtype=I64, device=NPU) * 250
        kw["block_bucketize_pos"] = [row] * n_feat
    return lambda: F.block_bucketize_sparse_features(**kw)


@pytest.mark.parametrize("path", list(KERNEL))
def test_block_kernel_budget(no_validation: None, path: str) -> None:
    launches, opts = KERNEL[path]
    counts = set()
    for n_feat, batch in SIZES:
        c = assert_budget(_block_call(n_feat, batch, opts), launches=launches, syncs=0)
        counts.add((c.launches, c.syncs))
    assert counts == {(launches, 0)}


@pytest.mark.parametrize("path", list(CHECKS))
def test_block_checks_cost(path: str) -> None:
    launches, opts = KERNEL[path]
    for n_feat, batch in SIZES:
        c = assert_budget(_block_call(n_feat, batch, opts), launches=launches + CHECKS[path],
                          syncs=0)  # fmt: skip
        assert c.launches == launches + CHECKS[path]


def test_not_power_of_two_my_size(no_validation: None) -> None:
    for n_feat, batch in SIZES:
        c = assert_budget(_block_call(n_feat, batch, {}, p=6), launches=21, syncs=0)
        # 21, one over: u // 6 of a negative id needs x < 0, its shift by 2**64 % 6 and the carry
        # 2**64 // 6, where a power of two is a shift and a mask
        assert c.launches == 21


def test_variants_budget(no_validation: None) -> None:
    for n_feat, batch in SIZES:
        d = _kjt(n_feat, batch, 4)
        n = d["indices"].numel()
        args = (d["lengths"], d["indices"], False, True, d["block_sizes"], 4)
        c = assert_budget(lambda: F.block_bucketize_sparse_features_inference(  # noqa: B023
            *args, return_bucket_mapping=True), launches=21, syncs=0)  # noqa: B023  # fmt: skip
        assert c.launches == 21  # sequence as above; the mapping is the bucket tensor itself
        w2 = torch.rand(n, 3, device=NPU)
        c = assert_budget(lambda: F.block_bucketize_sparse_features_2d_weights(  # noqa: B023
            *args[:3], False, *args[4:], w2, 3), launches=20, syncs=0)  # noqa: B023  # fmt: skip
        assert c.launches == 20
        lengths = d["lengths"].to(I64)
        c = assert_budget(lambda: F.bucketize_sparse_features(lengths, d["indices"], False, 4),  # noqa: B023
                          launches=11, syncs=0)  # fmt: skip
        assert c.launches == 11
        w = torch.rand(n, device=NPU)
        c = assert_budget(lambda: F.bucketize_sparse_features(lengths, d["indices"], True, 4, w),  # noqa: B023
                          launches=16, syncs=0)  # fmt: skip
        assert c.launches == 16


@settings(max_examples=20, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(data=st.data(), op=st.sampled_from(["block_bucketize_sparse_features",
                                           "block_bucketize_sparse_features_inference",
                                           "block_bucketize_sparse_features_2d_weights",
                                           "bucketize_sparse_features"]))  # fmt: skip
def test_spec_budgets_are_exact(data: st.DataObject, op: str) -> None:
    """The conformance specs state each call's launches term by term: they must be exact."""
    cyclic = op == "bucketize_sparse_features"
    inputs = data.draw(cyclic_inputs() if cyclic else block_inputs(op))
    cpu = materialize(inputs, "cpu")
    try:
        getattr(F, op)(**{k: _contig(v) for k, v in cpu.items()})
    except (RuntimeError, TypeError):
        return  # an input upstream rejects: no budget
    dev = materialize(inputs, NPU)
    with counters.count() as c:
        getattr(F, op)(**dev)
    budget = (cyclic_budget if cyclic else block_budget)(**inputs)
    assert (c.launches, c.syncs) == (budget.launches, budget.syncs), c.launch_ops


def _contig(v: Any) -> Any:
    if isinstance(v, list):
        return [t.contiguous() for t in v]
    return v.contiguous() if isinstance(v, torch.Tensor) else v


# ---- bad inputs ---------------------------------------------------------------------------------


def _base(device: str = NPU, **over: Any) -> dict[str, Any]:
    """The upstream docs' example: 4 features x 2, my_size 2."""
    kw: dict[str, Any] = {
        "lengths": torch.tensor([0, 2, 1, 3, 2, 3, 3, 1], dtype=I32),
        "indices": torch.tensor([3, 4, 15, 11, 28, 29, 1, 10, 11, 12, 13, 11, 22, 20, 20],
                                dtype=I32),  # fmt: skip
        "bucketize_pos": True, "sequence": True,
        "block_sizes": torch.tensor([5, 15, 10, 20], dtype=I32), "my_size": 2,
    }  # fmt: skip
    kw.update(over)
    return {k: _on(v, device) for k, v in kw.items()}


def _on(v: Any, device: str) -> Any:
    if isinstance(v, list):
        return [t.to(device) for t in v]
    return v.to(device) if isinstance(v, torch.Tensor) else v


BAD_BLOCK: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    # data errors upstream's CPU kernel does not detect (it reads / writes out of bounds)
    (
        "negative length",
        {"lengths": torch.tensor([0, 2, -1, 3, 2, 3, 3, 3], dtype=I32)},
        RuntimeError,
        r"'lengths' must be non-negative and sum to indices.numel\(\) = 15",
    ),
    (
        "lengths sum too small",
        {"indices": torch.arange(16, dtype=I32)},
        RuntimeError,
        r"block_bucketize_sparse_features: argument 'lengths' must be non-negative and sum to",
    ),
    (
        "lengths sum too large",
        {"indices": torch.arange(14, dtype=I32)},
        RuntimeError,
        r"'lengths' must be non-negative and sum to indices.numel\(\) = 14",
    ),
    (
        "VBE sizes disagree",
        {"batch_size_per_feature": torch.tensor([1, 3, 2, 1], dtype=I32)},
        RuntimeError,
        r"'batch_size_per_feature' must be non-negative and sum to lengths.numel",
    ),
    (
        "VBE negative size",
        {"batch_size_per_feature": torch.tensor([3, 3, 3, -1], dtype=I32)},
        RuntimeError,
        r"'batch_size_per_feature' must be non-negative",
    ),
    (
        "total_num_blocks not multiples",
        {"total_num_blocks": torch.tensor([3, 4, 6, 2], dtype=I32)},
        RuntimeError,
        r"'total_num_blocks' must hold positive multiples of my_size = 2",
    ),
    (
        "total_num_blocks zero",
        {"total_num_blocks": torch.tensor([0, 4, 6, 2], dtype=I32)},
        RuntimeError,
        r"'total_num_blocks' must hold positive multiples",
    ),
    (
        "total_num_blocks zero, zero block, boundaries",
        {
            "total_num_blocks": torch.tensor([0, 4, 6, 2], dtype=I32),
            "block_sizes": torch.tensor([0, 15, 10, 20], dtype=I32),
            "block_bucketize_pos": [torch.tensor([0, 9, 40], dtype=I32)] * 4,
        },
        RuntimeError,
        r"'total_num_blocks' must be positive where block_sizes is 0",
    ),
    # metadata errors
    (
        "lengths not a multiple of features",
        {"lengths": torch.tensor([1] * 7, dtype=I32), "indices": torch.arange(7, dtype=I32)},
        ValueError,
        r"'lengths' has 7 elements, not a multiple of block_sizes.numel\(\) = 4",
    ),
    (
        "no features",
        {"block_sizes": torch.zeros(0, dtype=I32)},
        ValueError,
        r"'lengths' has 8 elements, not a multiple of block_sizes.numel\(\) = 0",
    ),
    ("my_size 0", {"my_size": 0}, ValueError, r"'my_size' must be at least 1, got 0"),
    (
        "block_sizes dtype",
        {"block_sizes": torch.tensor([5, 15, 10, 20])},
        ValueError,
        r"arguments 'indices' \(int32\) and 'block_sizes' \(int64\) must have the same dtype",
    ),
    (
        "lengths float",
        {"lengths": torch.zeros(8)},
        ValueError,
        r"'lengths' must have dtype int32 or int64, got float32",
    ),
    (
        "indices int16",
        {"indices": torch.zeros(15, dtype=torch.int16)},
        ValueError,
        r"'indices' must have dtype int32 or int64, got int16",
    ),
    (
        "batch sizes dtype",
        {"batch_size_per_feature": torch.tensor([2, 2, 2, 2])},
        ValueError,
        r"'lengths' \(int32\) and 'batch_size_per_feature' \(int64\) must have the same dtype",
    ),
    (
        "batch sizes count",
        {"batch_size_per_feature": torch.tensor([4, 4], dtype=I32)},
        ValueError,
        r"'batch_size_per_feature' must have block_sizes.numel\(\) = 4 elements, got 2",
    ),
    (
        "weights dtype",
        {"weights": torch.ones(15, dtype=torch.float16)},
        ValueError,
        r"'weights' must have dtype float32 or float64, got float16",
    ),
    (
        "weights size",
        {"weights": torch.ones(14)},
        ValueError,
        r"'weights' must have indices.numel\(\) \* weights_dim = 15 \* 1 elements, got 14",
    ),
    (
        "keep flags dtype",
        {"keep_orig_idx_per_feature": torch.ones(4, dtype=I64)},
        ValueError,
        r"'keep_orig_idx_per_feature' must have dtype bool, got int64",
    ),
    (
        "keep flags count",
        {"keep_orig_idx_per_feature": torch.ones(1, dtype=torch.bool)},
        ValueError,
        r"'keep_orig_idx_per_feature' must have block_sizes.numel\(\) = 4 elements",
    ),
    (
        "total_num_blocks count",
        {"total_num_blocks": torch.tensor([2], dtype=I32)},
        ValueError,
        r"'total_num_blocks' must have block_sizes.numel\(\) = 4 elements, got 1",
    ),
    (
        "total_num_blocks dtype",
        {"total_num_blocks": torch.tensor([2, 2, 2, 2])},
        ValueError,
        r"'indices' \(int32\) and 'total_num_blocks' \(int64\) must have the same dtype",
    ),
    (
        "boundaries count",
        {"block_bucketize_pos": [torch.tensor([0, 9], dtype=I32)]},
        ValueError,
        r"'block_bucketize_pos' must hold block_sizes.numel\(\) = 4 tensors, got 1",
    ),
    (
        "boundaries empty",
        {"block_bucketize_pos": [torch.zeros(0, dtype=I32)] * 4},
        ValueError,
        r"'block_bucketize_pos\[0\]' must not be empty",
    ),
    (
        "boundaries dtype",
        {"block_bucketize_pos": [torch.tensor([0, 9])] * 4},
        ValueError,
        r"'indices' \(int32\) and 'block_bucketize_pos\[0\]' \(int64\) must have the same dtype",
    ),
]


@pytest.mark.parametrize(("over", "exc", "match"), [c[1:] for c in BAD_BLOCK],
                         ids=[c[0] for c in BAD_BLOCK])  # fmt: skip
def test_block_bad_inputs(over: dict[str, Any], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        F.block_bucketize_sparse_features(**_base(**over))


def test_bad_inputs_name_the_variant() -> None:
    kw = _base(lengths=torch.tensor([0, 2, -1, 3, 2, 3, 3, 3], dtype=I32))
    with pytest.raises(
        RuntimeError, match=r"^fbgemm::block_bucketize_sparse_features_inference: arg"
    ):
        F.block_bucketize_sparse_features_inference(**kw)
    kw = _base(weights=torch.ones(15, 2))
    with pytest.raises(
        ValueError,
        match=r"_2d_weights: argument 'weights' must have indices"
        r".numel\(\) \* weights_dim = 15 \* 3 elements, got 30",
    ):
        F.block_bucketize_sparse_features_2d_weights(**{**kw, "weights_dim": 3})


def test_mixed_devices_are_refused() -> None:
    kw = _base()
    kw["block_sizes"] = kw["block_sizes"].cpu()
    with pytest.raises(
        RuntimeError,
        match=r"arguments 'lengths' \(npu:0\) and 'block_sizes' "
        r"\(cpu\) must be on the same device",
    ):
        F.block_bucketize_sparse_features(**kw)
    kw = _base(weights=torch.ones(15))
    kw["weights"] = kw["weights"].to("npu:1")
    with pytest.raises(RuntimeError, match=r"'weights' \(npu:1\) and 'lengths' \(npu:0\)"):
        F.block_bucketize_sparse_features(**kw)


BAD_CYCLIC: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    (
        "dtypes differ",
        {"lengths": torch.ones(3, dtype=I32)},
        ValueError,
        r"arguments 'lengths' \(int32\) and 'indices' \(int64\) must have the same dtype",
    ),
    (
        "weights dtype",
        {"weights": torch.ones(3, dtype=torch.float64)},
        ValueError,
        r"'weights' must have dtype float32, got float64",
    ),
    (
        "weights size",
        {"weights": torch.ones(4)},
        ValueError,
        r"'weights' must have indices.numel\(\) = 3 elements, got 4",
    ),
    (
        "lengths sum",
        {"lengths": torch.tensor([1, 1, 2])},
        RuntimeError,
        r"^fbgemm::bucketize_sparse_features: argument 'lengths' must be non-negative and sum to",
    ),
    ("negative length", {"lengths": torch.tensor([2, -1, 2])}, RuntimeError, r"'lengths'"),
    ("my_size", {"my_size": -2}, ValueError, r"'my_size' must be at least 1, got -2"),
]


@pytest.mark.parametrize(("over", "exc", "match"), [c[1:] for c in BAD_CYCLIC],
                         ids=[c[0] for c in BAD_CYCLIC])  # fmt: skip
def test_cyclic_bad_inputs(over: dict[str, Any], exc: type[Exception], match: str) -> None:
    kw = {"lengths": torch.ones(3, dtype=I64), "indices": torch.tensor([5, -7, 9]),
          "bucketize_pos": True, "my_size": 3, **over}  # fmt: skip
    with pytest.raises(exc, match=match):
        F.bucketize_sparse_features(**{k: _on(v, NPU) for k, v in kw.items()})


def test_direct_call_rejects_non_tensors() -> None:
    with pytest.raises(
        ValueError,
        match=r"block_bucketize_sparse_features: argument 'lengths' "
        r"must be a Tensor, got list",
    ):
        ours.block_bucketize_sparse_features_npu([1], torch.zeros(1), False, False,  # type: ignore[arg-type]
                                                 torch.ones(1), 2)  # fmt: skip


def test_validation_off_still_checks_metadata(no_validation: None) -> None:
    with pytest.raises(ValueError, match=r"'my_size' must be at least 1"):
        F.block_bucketize_sparse_features(**_base(my_size=0))
    # a data error is trusted: no check runs, and the call may fail however the backend does
    kw = _base(lengths=torch.tensor([0, 2, 1, 3, 2, 3, 3, 1], dtype=I32),
               indices=torch.arange(15, dtype=I32))  # fmt: skip
    assert F.block_bucketize_sparse_features(**kw)[0].shape == (16,)


# ---- semantics against upstream ----------------------------------------------------------------


def _assert_same(actual: tuple[Any, ...], expected: tuple[Any, ...]) -> None:
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert (a is None) == (e is None), f"output {i}: {a} vs {e}"
        if e is not None:
            assert a.dtype == e.dtype and a.shape == e.shape, f"output {i}"
            assert torch.equal(a.cpu(), e), f"output {i}: {a.cpu().tolist()} != {e.tolist()}"


def _random_block_case(rng: random.Random) -> dict[str, Any]:
    n_feat, p = rng.randint(1, 4), rng.choice([1, 2, 3, 4, 5, 8])
    ldt, idt = rng.choice([I32, I64]), rng.choice([I32, I64])
    bspf = [rng.randint(0, 4) for _ in range(n_feat)] if rng.random() < 0.3 else None
    rows = sum(bspf) if bspf else n_feat * rng.randint(0, 4)
    lengths = [rng.randint(0, 6) for _ in range(rows)]
    info = torch.iinfo(idt)
    x = [rng.choice([rng.randint(-60, 200), info.min, info.max, -1]) if rng.random() < 0.2
         else rng.randint(0, 150) for _ in range(sum(lengths))]  # fmt: skip
    blocks = [rng.choice([0, 1, 3, 7, 10]) for _ in range(n_feat)]
    kw: dict[str, Any] = {
        "lengths": torch.tensor(lengths, dtype=ldt), "indices": torch.tensor(x, dtype=idt),
        "bucketize_pos": rng.random() < 0.5, "sequence": rng.random() < 0.5,
        "block_sizes": torch.tensor(blocks, dtype=idt), "my_size": p,
        "keep_orig_idx": rng.random() < 0.2,
    }  # fmt: skip
    if rng.random() < 0.5:
        kw["weights"] = torch.rand(len(x), dtype=rng.choice([torch.float32, torch.float64]))
    if bspf:
        kw["batch_size_per_feature"], kw["max_B"] = torch.tensor(bspf, dtype=ldt), max(bspf)
    if rng.random() < 0.2:
        kw["keep_orig_idx_per_feature"] = torch.tensor([rng.random() < 0.5 for _ in blocks])
    form = rng.random()
    if form < 0.25:
        kw["total_num_blocks"] = torch.tensor([p * rng.randint(1, 3) for _ in blocks], dtype=idt)
    elif form < 0.5:
        kw["block_bucketize_pos"] = [torch.tensor([0, *sorted(rng.sample(range(1, 90), p))],
                                                  dtype=idt) for _ in blocks]  # fmt: skip
        if rng.random() < 0.3:
            kw["total_num_blocks"] = torch.tensor([p * rng.randint(1, 3) for _ in blocks],
                                                  dtype=idt)  # fmt: skip
    return kw


def test_cpu_calls_match_upstream() -> None:
    """The kernels are device-generic tensor programs: on CPU tensors they equal upstream."""
    rng = random.Random(0)
    for _ in range(60):
        kw = _random_block_case(rng)
        _assert_same(ours.block_bucketize_sparse_features_npu(**kw),
                     F.block_bucketize_sparse_features(**kw))  # fmt: skip
        kw["sequence"] = True
        _assert_same(
            ours.block_bucketize_sparse_features_inference_npu(**kw, return_bucket_mapping=True),
            F.block_bucketize_sparse_features_inference(**kw, return_bucket_mapping=True),
        )
        if kw["lengths"].dtype == kw["indices"].dtype:
            args = (kw["lengths"], kw["indices"], kw["bucketize_pos"], kw["my_size"])
            w = kw.get("weights")
            w = None if w is None else w.float()
            _assert_same(ours.bucketize_sparse_features_npu(*args, w),
                         F.bucketize_sparse_features(*args, w))  # fmt: skip


@pytest.mark.parametrize("wdtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_2d_weights_match_upstream(wdtype: torch.dtype) -> None:
    rng = random.Random(1)
    for _ in range(10):
        kw = _random_block_case(rng)
        kw.pop("weights", None)
        dim = rng.randint(1, 4)
        kw["weights"] = torch.randn(kw["indices"].numel(), dim).to(wdtype)
        expected = F.block_bucketize_sparse_features_2d_weights(**kw, weights_dim=dim)
        dev = {k: _on(v, NPU) for k, v in kw.items()}
        _assert_same(F.block_bucketize_sparse_features_2d_weights(**dev, weights_dim=dim),
                     expected)  # fmt: skip


def test_docs_example_on_npu() -> None:
    out = F.block_bucketize_sparse_features(**_base())
    assert out[0].tolist() == [0, 2, 0, 1, 1, 0, 1, 0, 0, 0, 1, 2, 1, 3, 2, 1]
    assert out[1].tolist() == [3, 4, 11, 1, 11, 0, 13, 14, 0, 1, 2, 3, 2, 0, 0]
    assert out[3].tolist() == [0, 1, 0, 0, 0, 0, 1, 2, 1, 0, 1, 2, 1, 2, 0]
    assert out[4].tolist() == [0, 1, 5, 2, 6, 7, 3, 8, 9, 10, 11, 4, 12, 13, 14]
    assert out[2] is None and all(t.device.type == NPU for t in (out[0], out[1], out[3], out[4]))


@pytest.mark.parametrize("dtype", [I32, I64])
def test_negative_indices_are_read_unsigned(dtype: torch.dtype) -> None:
    bits = torch.iinfo(dtype).bits
    x = torch.tensor([-1, -7, torch.iinfo(dtype).min, 5, 9], dtype=dtype)
    kw = {"lengths": torch.tensor([5]), "indices": x, "bucketize_pos": False, "sequence": True,
          "block_sizes": torch.tensor([4], dtype=dtype), "my_size": 3}  # fmt: skip
    lengths, new, _, _, perm = F.block_bucketize_sparse_features(**_on_all(kw))
    u = [v % 2**bits for v in x.tolist()]
    bucket = [v // 4 if v < 12 else v % 3 for v in u]
    value = [v % 4 if v < 12 else v // 3 for v in u]
    value = [v - 2**bits if v >= 2 ** (bits - 1) else v for v in value]
    for i in range(5):
        assert new.cpu()[perm.cpu()[i]] == value[i]
    assert lengths.tolist() == [bucket.count(0), bucket.count(1), bucket.count(2)]


def _on_all(kw: dict[str, Any]) -> dict[str, Any]:
    return {k: _on(v, NPU) for k, v in kw.items()}


def test_upstream_silent_forms_match_upstream() -> None:
    """Forms upstream's CPU kernel accepts without a word: ours gives its result."""
    base = _base(device="cpu")
    cases = [
        {**base, "lengths": base["lengths"].view(4, 2)},  # 2-D lengths: read flat
        {**base, "weights": torch.rand(15, 1)},  # weights of any shape: same shape back
        {**base, "block_bucketize_pos": []},  # an empty list: uniform blocks
        {**base, "max_B": 123},  # max_B: unused on CPU (CUDA sizes a launch with it)
        {**base, "batch_size_per_feature": torch.tensor([2, 2, 2, 2], dtype=I32)},  # no max_B
    ]
    for kw in cases:
        _assert_same(F.block_bucketize_sparse_features(**_on_all(kw)),
                     F.block_bucketize_sparse_features(**kw))  # fmt: skip
    flat = {**base, "weights": torch.rand(30), "weights_dim": 2}  # flat 2-D weights, row-major
    _assert_same(F.block_bucketize_sparse_features_2d_weights(**_on_all(flat)),
                 F.block_bucketize_sparse_features_2d_weights(**flat))  # fmt: skip


def test_bucket_mapping_without_sequence_is_real() -> None:
    """Upstream CPU returns an uninitialised mapping without sequence (CUDA: None); ours the
    buckets, which upstream computes with sequence=True."""
    base = _base(device="cpu")
    mine = F.block_bucketize_sparse_features_inference(
        **_on_all({**base, "sequence": False}), return_bucket_mapping=True)  # fmt: skip
    theirs = F.block_bucketize_sparse_features_inference(**base, return_bucket_mapping=True)
    assert mine[4] is None
    assert torch.equal(mine[5].cpu(), theirs[5])
    _assert_same(mine[:4], theirs[:4])


def test_non_contiguous_inputs_read_by_strides() -> None:
    base = _base(device="cpu", weights=torch.rand(15))
    strided = {**base, "indices": torch.stack([base["indices"], -base["indices"]], 1)[:, 0],
               "weights": torch.stack([base["weights"], base["weights"]], 1)[:, 1],
               "block_sizes": torch.stack([base["block_sizes"]] * 3, 1)[:, 2],
               "lengths": base["lengths"].view(2, 4).t().contiguous().t()}  # fmt: skip
    expected = F.block_bucketize_sparse_features(**{k: v.contiguous() if isinstance(
        v, torch.Tensor) else v for k, v in strided.items()})  # fmt: skip
    _assert_same(F.block_bucketize_sparse_features(**_on_all(strided)), expected)


def test_sequence_changes_only_the_permute() -> None:
    a = F.block_bucketize_sparse_features(**_base(sequence=False))
    b = F.block_bucketize_sparse_features(**_base(sequence=True))
    _assert_same(a[:4], tuple(None if t is None else t.cpu() for t in b[:4]))
    new, perm = b[1].cpu(), b[4].cpu()
    assert torch.equal(torch.sort(perm).values, torch.arange(15, dtype=I32))
    assert new[perm].tolist() == [3, 4, 0, 11, 13, 14, 1, 0, 1, 2, 3, 11, 2, 0, 0]


def test_empty_inputs() -> None:
    """No features and no rows: upstream divides by zero; ours returns empty outputs."""
    kw = _base(lengths=torch.zeros(0, dtype=I32), indices=torch.zeros(0, dtype=I32),
               block_sizes=torch.zeros(0, dtype=I32))  # fmt: skip
    out = F.block_bucketize_sparse_features(**kw)
    assert [t.shape for t in (out[0], out[1], out[3], out[4])] == [(0,)] * 4
    out = F.block_bucketize_sparse_features(
        **_base(lengths=torch.zeros(8, dtype=I32), indices=torch.zeros(0, dtype=I32))
    )
    assert out[0].tolist() == [0] * 16 and out[1].shape == (0,)


# ---- torchrec -----------------------------------------------------------------------------------


def _kjt_pair(weighted: bool) -> tuple[Any, Any]:
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    d = _kjt(5, 16, 4, device="cpu", seed=3)
    w = torch.rand(d["indices"].numel()) if weighted else None
    keys = [f"f{i}" for i in range(5)]
    cpu = KeyedJaggedTensor(keys=keys, values=d["indices"], lengths=d["lengths"], weights=w)
    dev = KeyedJaggedTensor(keys=keys, values=d["indices"].to(NPU), lengths=d["lengths"].to(NPU),
                            weights=None if w is None else w.to(NPU))  # fmt: skip
    return cpu, dev


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("permute", [False, True])
def test_torchrec_bucketize_kjt_before_all2all(weighted: bool, permute: bool) -> None:
    from torchrec.distributed.embedding_sharding import bucketize_kjt_before_all2all

    cpu, dev = _kjt_pair(weighted)
    block_sizes = torch.full((5,), 1000, dtype=I64)
    kw = {"num_buckets": 4, "output_permute": permute, "bucketize_pos": weighted}
    exp, exp_perm = bucketize_kjt_before_all2all(cpu, block_sizes=block_sizes, **kw)
    got, got_perm = bucketize_kjt_before_all2all(dev, block_sizes=block_sizes.to(NPU), **kw)
    assert got.keys() == exp.keys() and got.values().device.type == NPU
    assert torch.equal(got.values().cpu(), exp.values())
    assert torch.equal(got.lengths().cpu(), exp.lengths())
    if weighted:
        assert torch.equal(got.weights().cpu(), exp.weights())
    assert (got_perm is None) == (exp_perm is None)
    if exp_perm is not None:
        assert torch.equal(got_perm.cpu(), exp_perm)


@pytest.mark.parametrize("is_sequence", [False, True])
def test_torchrec_bucketize_kjt_inference(is_sequence: bool) -> None:
    from torchrec.distributed.embedding_sharding import bucketize_kjt_inference

    cpu, dev = _kjt_pair(weighted=False)
    block_sizes = torch.full((5,), 1000, dtype=I64)
    exp = bucketize_kjt_inference(cpu, 4, block_sizes, is_sequence=is_sequence)
    got = bucketize_kjt_inference(dev, 4, block_sizes.to(NPU), is_sequence=is_sequence)
    assert torch.equal(got[0].values().cpu(), exp[0].values())
    assert torch.equal(got[0].lengths().cpu(), exp[0].lengths())
    for g, e in zip(got[1:], exp[1:], strict=True):
        assert (g is None) == (e is None)
        if e is not None:
            assert torch.equal(g.cpu(), e)


# ---- the unsigned arithmetic and the Meta kernel ----------------------------------------------


@pytest.mark.parametrize("dtype", [I32, I64])
def test_unsigned_divmod_matches_python(dtype: torch.dtype) -> None:
    bits, info = torch.iinfo(dtype).bits, torch.iinfo(dtype)
    rng = random.Random(2)
    vals = [info.min, info.max, -1, 0, 1] + [rng.randint(info.min, info.max) for _ in range(200)]
    x = torch.tensor(vals, dtype=dtype)
    neg = x < 0
    divisors = [1, 2, 3, 7, 8, 1000003, 2 ** (bits - 2) + 5]
    for d in divisors:
        q, r = ub.udivmod(x, neg, d)
        assert r is not None
        want = [(v % 2**bits // d, v % 2**bits % d) for v in vals]
        wrap = [(a - 2**bits if a >= 2 ** (bits - 1) else a, b) for a, b in want]
        assert list(zip(q.tolist(), r.tolist(), strict=True)) == wrap, d
    g = torch.tensor(divisors, dtype=dtype)
    k, m = ub.pow2_divmod(g)
    for d, kk, mm in zip(divisors, k.tolist(), m.tolist(), strict=True):
        assert (kk % 2**bits, mm) == ((2**bits) // d % 2**bits, (2**bits) % d)
    q, r = ub.udivmod(x, neg, g[3], k[3], m[3])  # a tensor divisor: 7
    assert (q.tolist(), r.tolist()) == tuple(t.tolist() for t in ub.udivmod(x, neg, 7))


def test_meta_kernel_of_bucketize_sparse_features() -> None:
    lengths = torch.empty(6, dtype=I64, device="meta")
    x = torch.empty(40, dtype=I64, device="meta")
    w = torch.empty(40, device="meta")
    out = F.bucketize_sparse_features(lengths, x, True, 4, w)
    assert [(t.shape, t.dtype, t.device.type) for t in out] == [
        ((24,), I64, "meta"), ((40,), I64, "meta"), ((40,), torch.float32, "meta"),
        ((40,), I64, "meta")]  # fmt: skip
    assert F.bucketize_sparse_features(lengths, x, False, 4)[2:] == (None, None)


def test_second_device() -> None:
    """Every tensor the kernels make lands on the inputs' device, npu:1 included."""
    kw = {k: v.to("npu:1") if isinstance(v, torch.Tensor) else v
          for k, v in _base(weights=torch.rand(15)).items()}  # fmt: skip
    kw["block_bucketize_pos"] = [torch.tensor([0, 9, 40], dtype=I32, device="npu:1")] * 4
    out = F.block_bucketize_sparse_features(**kw)
    assert all(t.device == torch.device("npu:1") for t in out if t is not None)
    cpu = {k: _on(v, "cpu") for k, v in kw.items()}
    _assert_same(out, F.block_bucketize_sparse_features(**cpu))
