"""torchrec's row-wise sharding input dist on npu (``bucketize_kjt_before_all2all``,
``bucketize_kjt_inference``) against the same calls on the CPU; the unsigned arithmetic of the
kernels against Python integers; the Meta kernel of ``bucketize_sparse_features``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch

from fbgemm_npu.native.fbgemm.bucketize import _utils as ub
from fbgemm_npu.testing.bucketize_inputs import kjt

F = torch.ops.fbgemm
NPU = "npu"
I32, I64 = torch.int32, torch.int64


def _kjt_pair(weighted: bool) -> tuple[Any, Any]:
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    d = kjt(5, 16, 4, device="cpu", seed=3)
    w = torch.rand(d["indices"].numel()) if weighted else None
    keys = [f"f{i}" for i in range(5)]
    cpu = KeyedJaggedTensor(keys=keys, values=d["indices"], lengths=d["lengths"], weights=w)
    dev = KeyedJaggedTensor(
        keys=keys,
        values=d["indices"].to(NPU),
        lengths=d["lengths"].to(NPU),
        weights=None if w is None else w.to(NPU),
    )
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
    divisors = [1, 2, 3, 7, 8, 1000003, 2 ** (bits - 2) + 5, 2 ** (bits - 2), info.max]
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
        ((24,), I64, "meta"),
        ((40,), I64, "meta"),
        ((40,), torch.float32, "meta"),
        ((40,), I64, "meta"),
    ]
    assert F.bucketize_sparse_features(lengths, x, False, 4)[2:] == (None, None)
    with pytest.raises(ValueError, match=r"bucketize_sparse_features: argument 'my_size' = "):
        F.bucketize_sparse_features(lengths, x, False, 2**62)  # 6 * 2**62 counts
