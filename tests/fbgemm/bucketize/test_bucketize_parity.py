"""The bucketize family against upstream: CPU calls of our kernels, 2-D weights, the docs example,
unsigned reading of negative ids, forms upstream accepts silently, the mapping without sequence,
non-contiguous inputs, empty inputs, a second device.

Expected values come from upstream's CPU kernels (on contiguous copies where its CPU kernel reads
raw memory) or from Python integers, never from our kernels.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch

from fbgemm_npu.native.fbgemm.bucketize import bucketize as ours
from fbgemm_npu.testing.bucketize_inputs import assert_same_outputs, docs_example, on_device

F = torch.ops.fbgemm
NPU = "npu"
I32, I64 = torch.int32, torch.int64


def _random_block_case(rng: random.Random) -> dict[str, Any]:
    n_feat, p = rng.randint(1, 4), rng.choice([1, 2, 3, 4, 5, 8])
    ldt, idt = rng.choice([I32, I64]), rng.choice([I32, I64])
    bspf = [rng.randint(0, 4) for _ in range(n_feat)] if rng.random() < 0.3 else None
    rows = sum(bspf) if bspf else n_feat * rng.randint(0, 4)
    lengths = [rng.randint(0, 6) for _ in range(rows)]
    info = torch.iinfo(idt)
    x = [
        rng.choice([rng.randint(-60, 200), info.min, info.max, -1])
        if rng.random() < 0.2
        else rng.randint(0, 150)
        for _ in range(sum(lengths))
    ]
    blocks = [rng.choice([0, 1, 3, 7, 10]) for _ in range(n_feat)]
    kw: dict[str, Any] = {
        "lengths": torch.tensor(lengths, dtype=ldt),
        "indices": torch.tensor(x, dtype=idt),
        "bucketize_pos": rng.random() < 0.5,
        "sequence": rng.random() < 0.5,
        "block_sizes": torch.tensor(blocks, dtype=idt),
        "my_size": p,
        "keep_orig_idx": rng.random() < 0.2,
    }
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
        kw["block_bucketize_pos"] = [
            torch.tensor([0, *sorted(rng.sample(range(1, 90), p))], dtype=idt) for _ in blocks
        ]
        if rng.random() < 0.3:
            kw["total_num_blocks"] = torch.tensor(
                [p * rng.randint(1, 3) for _ in blocks], dtype=idt
            )
    return kw


def test_cpu_calls_match_upstream() -> None:
    """The kernels are device-generic tensor programs: on CPU tensors they equal upstream."""
    rng = random.Random(0)
    for _ in range(60):
        kw = _random_block_case(rng)
        assert_same_outputs(
            ours.block_bucketize_sparse_features_npu(**kw), F.block_bucketize_sparse_features(**kw)
        )
        kw["sequence"] = True
        assert_same_outputs(
            ours.block_bucketize_sparse_features_inference_npu(**kw, return_bucket_mapping=True),
            F.block_bucketize_sparse_features_inference(**kw, return_bucket_mapping=True),
        )
        if kw["lengths"].dtype == kw["indices"].dtype:
            args = (kw["lengths"], kw["indices"], kw["bucketize_pos"], kw["my_size"])
            w = kw.get("weights")
            w = None if w is None else w.float()
            assert_same_outputs(
                ours.bucketize_sparse_features_npu(*args, w), F.bucketize_sparse_features(*args, w)
            )


@pytest.mark.parametrize("wdtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_2d_weights_match_upstream(wdtype: torch.dtype) -> None:
    rng = random.Random(1)
    for _ in range(10):
        kw = _random_block_case(rng)
        kw.pop("weights", None)
        dim = rng.randint(1, 4)
        kw["weights"] = torch.randn(kw["indices"].numel(), dim).to(wdtype)
        expected = F.block_bucketize_sparse_features_2d_weights(**kw, weights_dim=dim)
        dev = {k: on_device(v, NPU) for k, v in kw.items()}
        assert_same_outputs(
            F.block_bucketize_sparse_features_2d_weights(**dev, weights_dim=dim), expected
        )


def test_docs_example_on_npu() -> None:
    out = F.block_bucketize_sparse_features(**docs_example())
    assert out[0].tolist() == [0, 2, 0, 1, 1, 0, 1, 0, 0, 0, 1, 2, 1, 3, 2, 1]
    assert out[1].tolist() == [3, 4, 11, 1, 11, 0, 13, 14, 0, 1, 2, 3, 2, 0, 0]
    assert out[3].tolist() == [0, 1, 0, 0, 0, 0, 1, 2, 1, 0, 1, 2, 1, 2, 0]
    assert out[4].tolist() == [0, 1, 5, 2, 6, 7, 3, 8, 9, 10, 11, 4, 12, 13, 14]
    assert out[2] is None and all(t.device.type == NPU for t in (out[0], out[1], out[3], out[4]))


@pytest.mark.parametrize("dtype", [I32, I64])
def test_negative_indices_are_read_unsigned(dtype: torch.dtype) -> None:
    bits = torch.iinfo(dtype).bits
    x = torch.tensor([-1, -7, torch.iinfo(dtype).min, 5, 9], dtype=dtype)
    kw = {
        "lengths": torch.tensor([5]),
        "indices": x,
        "bucketize_pos": False,
        "sequence": True,
        "block_sizes": torch.tensor([4], dtype=dtype),
        "my_size": 3,
    }
    lengths, new, _, _, perm = F.block_bucketize_sparse_features(**on_npu(kw))
    u = [v % 2**bits for v in x.tolist()]
    bucket = [v // 4 if v < 12 else v % 3 for v in u]
    value = [v % 4 if v < 12 else v // 3 for v in u]
    value = [v - 2**bits if v >= 2 ** (bits - 1) else v for v in value]
    for i in range(5):
        assert new.cpu()[perm.cpu()[i]] == value[i]
    assert lengths.tolist() == [bucket.count(0), bucket.count(1), bucket.count(2)]


def on_npu(kw: dict[str, Any]) -> dict[str, Any]:
    return {k: on_device(v, NPU) for k, v in kw.items()}


def test_upstream_silent_forms_match_upstream() -> None:
    """Forms upstream's CPU kernel accepts without a word: ours gives its result."""
    base = docs_example(device="cpu")
    cases = [
        {**base, "lengths": base["lengths"].view(4, 2)},  # 2-D lengths: read flat
        {**base, "weights": torch.rand(15, 1)},  # weights of any shape: same shape back
        {**base, "block_bucketize_pos": []},  # an empty list: uniform blocks
        {**base, "max_B": 123},  # max_B: unused on CPU (CUDA sizes a launch with it)
        {**base, "batch_size_per_feature": torch.tensor([2, 2, 2, 2], dtype=I32)},  # no max_B
    ]
    for kw in cases:
        assert_same_outputs(
            F.block_bucketize_sparse_features(**on_npu(kw)), F.block_bucketize_sparse_features(**kw)
        )
    flat = {**base, "weights": torch.rand(30), "weights_dim": 2}  # flat 2-D weights, row-major
    assert_same_outputs(
        F.block_bucketize_sparse_features_2d_weights(**on_npu(flat)),
        F.block_bucketize_sparse_features_2d_weights(**flat),
    )


def test_bucket_mapping_without_sequence_is_real() -> None:
    """Upstream CPU returns an uninitialised mapping without sequence (CUDA: None); ours the
    buckets, which upstream computes with sequence=True."""
    base = docs_example(device="cpu")
    mine = F.block_bucketize_sparse_features_inference(
        **on_npu({**base, "sequence": False}), return_bucket_mapping=True
    )
    theirs = F.block_bucketize_sparse_features_inference(**base, return_bucket_mapping=True)
    assert mine[4] is None
    assert torch.equal(mine[5].cpu(), theirs[5])
    assert_same_outputs(mine[:4], theirs[:4])


def test_non_contiguous_inputs_read_by_strides() -> None:
    base = docs_example(device="cpu", weights=torch.rand(15))
    strided = {
        **base,
        "indices": torch.stack([base["indices"], -base["indices"]], 1)[:, 0],
        "weights": torch.stack([base["weights"], base["weights"]], 1)[:, 1],
        "block_sizes": torch.stack([base["block_sizes"]] * 3, 1)[:, 2],
        "lengths": base["lengths"].view(2, 4).t().contiguous().t(),
    }
    expected = F.block_bucketize_sparse_features(
        **{k: v.contiguous() if isinstance(v, torch.Tensor) else v for k, v in strided.items()}
    )
    assert_same_outputs(F.block_bucketize_sparse_features(**on_npu(strided)), expected)


def test_sequence_changes_only_the_permute() -> None:
    a = F.block_bucketize_sparse_features(**docs_example(sequence=False))
    b = F.block_bucketize_sparse_features(**docs_example(sequence=True))
    assert_same_outputs(a[:4], tuple(None if t is None else t.cpu() for t in b[:4]))
    new, perm = b[1].cpu(), b[4].cpu()
    assert torch.equal(torch.sort(perm).values, torch.arange(15, dtype=I32))
    assert new[perm].tolist() == [3, 4, 0, 11, 13, 14, 1, 0, 1, 2, 3, 11, 2, 0, 0]


def test_empty_inputs() -> None:
    """No features and no rows: upstream divides by zero; ours returns empty outputs."""
    kw = docs_example(
        lengths=torch.zeros(0, dtype=I32),
        indices=torch.zeros(0, dtype=I32),
        block_sizes=torch.zeros(0, dtype=I32),
    )
    out = F.block_bucketize_sparse_features(**kw)
    assert [t.shape for t in (out[0], out[1], out[3], out[4])] == [(0,)] * 4
    out = F.block_bucketize_sparse_features(
        **docs_example(lengths=torch.zeros(8, dtype=I32), indices=torch.zeros(0, dtype=I32))
    )
    assert out[0].tolist() == [0] * 16 and out[1].shape == (0,)


def test_empty_boundary_list_is_omitted() -> None:
    """``block_bucketize_pos=[]`` is read as omitted (uniform blocks), as upstream does; the
    fuzz suite's "boundary count" case shrinking one feature's list to none expects this."""
    for total in (None, torch.tensor([4], dtype=I32)):
        kw = {
            "lengths": torch.tensor([2, 1], dtype=I32),
            "indices": torch.tensor([3, 40, -7], dtype=I32),
            "bucketize_pos": True,
            "sequence": True,
            "block_sizes": torch.tensor([10], dtype=I32),
            "my_size": 2,
            "block_bucketize_pos": [],
            "total_num_blocks": total,
        }
        want = F.block_bucketize_sparse_features(**kw)
        for pos in ([], None):
            dev = {k: on_device(v, NPU) for k, v in {**kw, "block_bucketize_pos": pos}.items()}
            assert_same_outputs(F.block_bucketize_sparse_features(**dev), want)


def test_second_device() -> None:
    """Every tensor the kernels make lands on the inputs' device, npu:1 included."""
    kw = {
        k: v.to("npu:1") if isinstance(v, torch.Tensor) else v
        for k, v in docs_example(weights=torch.rand(15)).items()
    }
    kw["block_bucketize_pos"] = [torch.tensor([0, 9, 40], dtype=I32, device="npu:1")] * 4
    out = F.block_bucketize_sparse_features(**kw)
    assert all(t.device == torch.device("npu:1") for t in out if t is not None)
    cpu = {k: on_device(v, "cpu") for k, v in kw.items()}
    assert_same_outputs(out, F.block_bucketize_sparse_features(**cpu))


@pytest.mark.parametrize("dtype", [I32, I64])
def test_sizes_at_the_index_dtype_bounds(dtype: torch.dtype) -> None:
    """Found by tests/fuzz/test_fuzz_bucketize.py: ``total_num_blocks = 2**(bits - 2)`` (its
    unsigned-division constants overflowed: negative ids got new indices off by ``2**bits /
    G``), block sizes at ``max // G``, indices at the dtype's ends: as upstream."""
    bits, info = torch.iinfo(dtype).bits, torch.iinfo(dtype)
    top = info.max
    x = torch.tensor([info.min, info.min + 7, -5, -1, 0, 3, top - 2, top], dtype=dtype)
    calls = [
        {"block_sizes": [1, 1], "my_size": 2, "total_num_blocks": [2 ** (bits - 2)] * 2},
        {"block_sizes": [1, 0], "my_size": 4, "total_num_blocks": [2 ** (bits - 2), 2**20]},
        {"block_sizes": [top // 6] * 2, "my_size": 6},
        {"block_sizes": [top // 12, 1], "my_size": 3, "total_num_blocks": [12, top // 3 * 3]},
    ]
    for call in calls:
        kw: dict[str, Any] = {
            "lengths": torch.tensor([3, 5], dtype=I32),
            "indices": x,
            "bucketize_pos": True,
            "sequence": True,
            **{
                k: torch.tensor(v, dtype=dtype) if isinstance(v, list) else v
                for k, v in call.items()
            },
        }
        expected = F.block_bucketize_sparse_features(**kw)
        got = F.block_bucketize_sparse_features(**{k: on_device(v, NPU) for k, v in kw.items()})
        assert_same_outputs(got, expected)
