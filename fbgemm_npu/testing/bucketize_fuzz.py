"""Drawn inputs of the bucketize family's fuzz tests (``tests/fuzz/test_fuzz_bucketize.py``).

:func:`block_kwargs` draws a valid call of a block op (every argument combination torchrec and
upstream's tests use) with the oracle that judges it; :func:`cyclic_kwargs` one of
``bucketize_sparse_features``; :func:`spoil_data` and :func:`spoil_argument` make a valid call
invalid in one drawn way and say which argument the error must name.  Tensors are contiguous
CPU tensors; :func:`layouts` gives them drawn strides (the harness reproduces them on npu).

The valid domain is the contract of ``fbgemm_npu/native/fbgemm/bucketize``: lengths (and VBE
batch sizes) non-negative summing to the indices (the rows), ``block_sizes`` non-negative with
``block_sizes * G`` in the index dtype (``G``: ``total_num_blocks`` or ``my_size``; upstream's
product is a signed overflow past it), ``total_num_blocks`` positive multiples of ``my_size``,
boundaries sorted (unsigned), at most ``my_size + 1`` of them where a block size is 0.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz_strategies import in_layout

__all__ = [
    "BLOCK",
    "INDEX",
    "W1D",
    "W2D",
    "BLOCK_2D",
    "CYCLIC",
    "INFERENCE",
    "block_kwargs",
    "cyclic_kwargs",
    "indices_like",
    "layouts",
    "rand",
]

BLOCK = "fbgemm::block_bucketize_sparse_features"
INFERENCE = "fbgemm::block_bucketize_sparse_features_inference"
BLOCK_2D = "fbgemm::block_bucketize_sparse_features_2d_weights"
CYCLIC = "fbgemm::bucketize_sparse_features"
I32, I64 = torch.int32, torch.int64
INDEX = (I32, I64)
W1D = (torch.float32, torch.float64)
W2D = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
REF = "fbgemm_npu.testing.bucketize_references:"
REFERENCES = {
    BLOCK: REF + "block_bucketize_training",
    INFERENCE: REF + "block_bucketize_inference",
    BLOCK_2D: REF + "block_bucketize_2d_weights",
}
# small sizes most often; powers of two and not; past 256 (the sort key is no longer uint8)
MY_SIZES = st.one_of(st.integers(1, 9), st.sampled_from([16, 31, 64, 255, 256, 257, 1000]))


def rand(g: torch.Generator, n: int, lo: int, hi: int, dtype: torch.dtype = I64) -> torch.Tensor:
    """``n`` values in ``[lo, hi)`` (int64 arithmetic), as ``dtype``."""
    return torch.randint(lo, hi, (n,), generator=g, dtype=torch.int64).to(dtype)


def indices_like(data: Any, g: torch.Generator, n: int, dtype: torch.dtype, hi: int) -> Any:
    """``n`` indices: small (``[0, hi)``: inside and past the blocks), signed (negative raw ids,
    read unsigned), extreme (the dtype's min / max, -1, 0 and the whole range) or near the
    dtype's ends (``2**31 - 1`` and ``-2**31`` for int32)."""
    info = torch.iinfo(dtype)
    hi = max(2, min(hi, info.max))
    fill = data.draw(st.sampled_from(("small", "small", "signed", "extreme", "ends")), label="x")
    if fill == "small":
        return rand(g, n, 0, hi, dtype)
    if fill == "signed":
        return rand(g, n, -hi, hi, dtype)
    off = rand(g, n, 0, 1000)
    top = rand(g, n, 0, 2) == 1
    if fill == "ends":
        return torch.where(top, info.max - off, info.min + off).to(dtype)
    special = torch.tensor([info.min, info.max, -1, 0, 1, info.min + 1, info.max - 1])
    wide = rand(g, n, info.min, info.max)
    return torch.where(top, special[off % len(special)], wide).to(dtype)


def _blocks(data: Any, g: torch.Generator, groups: list[int], dtype: torch.dtype) -> Any:
    """Block sizes for ``G`` per feature: small, 0, equal, or at the bound ``max // G``."""
    kind = data.draw(st.sampled_from(("small", "small", "zero", "equal", "bound")), label="b")
    n = len(groups)
    if kind == "zero":
        return torch.zeros(n, dtype=dtype)
    if kind == "equal":
        return torch.full((n,), data.draw(st.integers(1, 20)), dtype=dtype)
    if kind == "bound":
        top = torch.iinfo(dtype).max
        return torch.tensor(
            [max(top // gg - int(o), 0) for gg, o in zip(groups, rand(g, n, 0, 3), strict=True)]
        )
    return rand(g, n, 0, 21, dtype)


def _totals(data: Any, g: torch.Generator, n: int, p: int, dtype: torch.dtype) -> torch.Tensor:
    """``total_num_blocks``: small multiples of ``p``, multiples near the dtype's end, or
    powers of two up to ``2**(bits - 2)`` where ``p`` divides them."""
    kind = data.draw(st.sampled_from(("small", "small", "small", "end", "pow2")), label="G")
    top = torch.iinfo(dtype).max
    if kind == "end":
        return ((top // p - rand(g, n, 0, 3)) * p).to(dtype)
    if kind == "pow2" and p & (p - 1) == 0:
        bits = torch.iinfo(dtype).bits
        low = p.bit_length() - 1
        top_pow = data.draw(st.sampled_from((bits - 2, bits - 3, None)))  # the largest first
        exps = rand(g, n, low, bits - 1) if top_pow is None else torch.full((n,), top_pow)
        return (2**exps).to(dtype)
    return (rand(g, n, 1, 5) * p).to(dtype)


def _boundaries(
    data: Any, g: torch.Generator, blocks: list[int], p: int, dtype: torch.dtype
) -> tuple[list[torch.Tensor], bool]:
    """Sorted boundaries per feature (at most ``p + 1`` where the block size is 0, but in one
    case in eight); returns them and whether upstream's CPU kernel is no oracle for them: some
    start above 0 (an index can lie below the first one) or a 0 block size has more than
    ``p + 1`` (upstream CPU counts and places by different rules)."""
    start = data.draw(st.sampled_from(("zero", "zero", "zero", "above", "unsigned")), label="pos")
    many = data.draw(st.integers(0, 7), label="many") == 0
    info, out, fixed = torch.iinfo(dtype), [], start == "zero"
    for b in blocks:
        most = min(p + 3, 14) if b != 0 or many else min(p + 1, 12)
        k = data.draw(st.integers(1, most))
        fixed = fixed and (b != 0 or k <= p + 1)
        if start == "unsigned":  # the whole range, sorted as unsigned (negative last)
            v = rand(g, k, info.min, info.max, dtype)
            out.append(
                v[torch.argsort(v.to(I64) ^ info.min if dtype == I64 else v.to(I64) % 2**32)]
            )
            continue
        first = torch.zeros(1, dtype=I64) if start == "zero" else rand(g, 1, 1, 60)
        rest = rand(g, k - 1, 1, data.draw(st.sampled_from((40, 200, 10**6)))).sort().values
        out.append(torch.cat([first, first + rest]).to(dtype))
    return out, not fixed


def block_kwargs(data: Any, op: str, g: torch.Generator) -> tuple[dict[str, Any], str | None]:
    """A valid call of block op ``op`` and its oracle (``None``: upstream's CPU kernel)."""
    draw = data.draw
    n_feat, p = draw(st.integers(1, 5), label="T"), draw(MY_SIZES, label="my_size")
    ldt, idt = draw(st.sampled_from(INDEX)), draw(st.sampled_from(INDEX))
    info = torch.iinfo(idt)
    bspf = rand(g, n_feat, 0, 7, ldt) if draw(st.integers(0, 3)) == 0 else None
    batch = draw(st.integers(0, 6), label="B")
    rows = int(bspf.sum()) if bspf is not None else n_feat * batch
    lengths = rand(g, rows, 0, draw(st.sampled_from((1, 3, 8, 41))), ldt)
    n_idx = int(lengths.sum())
    form = draw(st.sampled_from(("uniform", "uniform", "total", "pos", "pos", "pos+total", "[]")))
    total = None
    if "total" in form:
        total = _totals(data, g, n_feat, p, idt)
    groups = [int(v) for v in total] if total is not None else [p] * n_feat
    pos, oracle = None, None
    if form.startswith("pos"):
        blocks = rand(g, n_feat, -3 if draw(st.integers(0, 5)) == 0 else 0, 13, idt)
        pos, below = _boundaries(data, g, [int(b) for b in blocks], p, idt)
        oracle = REFERENCES[op] if below else None
        hi = 2 * max(int(t.to(I64).max()) for t in pos) + 2
    else:
        bound = torch.tensor([info.max // gg for gg in groups])
        blocks = torch.minimum(_blocks(data, g, groups, idt).to(I64), bound).to(idt)
        hi = 2 * max(int(b) * gg for b, gg in zip(blocks.tolist(), groups, strict=True)) + 2
    x = indices_like(data, g, n_idx, idt, hi)
    kw: dict[str, Any] = {
        "lengths": lengths,
        "indices": x,
        "bucketize_pos": draw(st.booleans()),
        "sequence": draw(st.booleans()),
        "block_sizes": blocks,
        "my_size": p,
    }
    if bspf is not None:
        kw["batch_size_per_feature"] = bspf
        kw["max_B"] = draw(st.sampled_from((-1, max(int(bspf.max()), 1), 2**31 - 1)))
    if op == BLOCK_2D:
        dim = draw(st.integers(0 if draw(st.integers(0, 9)) == 0 else 1, 4), label="weights_dim")
        w = torch.randn(n_idx, dim, generator=g).to(draw(st.sampled_from(W2D)))
        kw["weights"] = w.reshape(-1) if draw(st.booleans()) else w
        kw["weights_dim"] = dim
    elif draw(st.booleans()):
        kw["weights"] = torch.randn(n_idx, generator=g).to(draw(st.sampled_from(W1D)))
    if pos is not None or form == "[]":
        kw["block_bucketize_pos"] = pos if pos is not None else []
    if draw(st.integers(0, 4)) == 0:
        kw["keep_orig_idx"] = True
    if total is not None:
        kw["total_num_blocks"] = total
    if draw(st.integers(0, 3)) == 0:
        kw["keep_orig_idx_per_feature"] = rand(g, n_feat, 0, 2) == 1
    if op == INFERENCE:
        kw["return_bucket_mapping"] = draw(st.booleans())
        if kw["return_bucket_mapping"] and not kw["sequence"] and oracle is None:
            oracle = REF + "inference_mapping"
    _shapes(data, kw, n_feat if bspf is None else 0)
    return kw, oracle


def _shapes(data: Any, kw: dict[str, Any], n_feat: int) -> None:
    """Lengths as a ``(T, B)`` matrix, indices (and 1-D weights) as a matrix (``(0, k)``
    when empty) or 0-D (one index), sometimes: upstream reads ``numel()`` elements of each."""
    if n_feat and data.draw(st.integers(0, 3)) == 0:
        kw["lengths"] = kw["lengths"].view(n_feat, -1)
    n = kw["indices"].numel()
    shape: tuple[int, ...] | None = None
    if n % 2 == 0 and data.draw(st.integers(0, 4)) == 0:
        shape = (2, n // 2) if n else (0, data.draw(st.integers(1, 5)))
    elif n == 1 and data.draw(st.booleans()):
        shape = ()
    if shape is not None:
        kw["indices"] = kw["indices"].view(shape)
        w = kw.get("weights")
        if w is not None and "weights_dim" not in kw:
            kw["weights"] = w.view(shape)


def cyclic_kwargs(data: Any, g: torch.Generator) -> dict[str, Any]:
    """A valid ``bucketize_sparse_features`` call (lengths and indices of one dtype, float32
    weights or none)."""
    dtype, p = data.draw(st.sampled_from(INDEX)), data.draw(MY_SIZES, label="my_size")
    rows = data.draw(st.integers(0, 40), label="rows")
    lengths = rand(g, rows, 0, data.draw(st.sampled_from((1, 3, 8, 41))), dtype)
    n = int(lengths.sum())
    kw: dict[str, Any] = {
        "lengths": lengths,
        "indices": indices_like(data, g, n, dtype, 3 * p + 100),
        "bucketize_pos": data.draw(st.booleans()),
        "my_size": p,
    }
    if data.draw(st.booleans()):
        kw["weights"] = torch.randn(n, generator=g)
    _shapes(data, kw, 0)
    return kw


def layouts(data: Any, kw: dict[str, Any]) -> dict[str, Any]:
    """``kw`` with each tensor (and boundary tensor) in a drawn memory layout, one case in two."""
    if not data.draw(st.booleans(), label="layouts"):
        return kw
    out = dict(kw)
    for name, v in kw.items():
        if isinstance(v, torch.Tensor):
            out[name] = in_layout(data, v)
        elif isinstance(v, list):
            out[name] = [in_layout(data, t) for t in v]
    return out
