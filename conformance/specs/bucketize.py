"""Specs for the bucketize family: ``block_bucketize_sparse_features`` (+ ``_inference``,
``_2d_weights``) and ``bucketize_sparse_features``.

Oracle: upstream's CPU kernels.  Drawn inputs: 1..4 features x batch 0..5 (0: empty batch) or
variable batch sizes per feature (VBE, 0 included), lengths 0..6 with some long rows (up to 40),
int32 / int64 lengths and indices, indices small (some inside ``block_size * my_size``, some
past it), signed (negative raw ids: upstream reads them unsigned) or extreme (the dtype's min /
max, -1, 0); block sizes 0..12 (0 included); my_size 1..8 (powers of two and not); weights
omitted or given (1-D: float32 / float64; 2-D: float32, float16, bfloat16, float64 with 1..4
columns); ``bucketize_pos``, ``sequence``, ``keep_orig_idx``, ``return_bucket_mapping`` both
ways; ``keep_orig_idx_per_feature``, ``total_num_blocks``, ``block_bucketize_pos`` (sorted
boundaries from 0, empty list too) given and omitted; non-contiguous lengths (a transposed 2-D
view), indices, block sizes, weights, keep flags and total_num_blocks.  One example in ten is
invalid in a way upstream also rejects (a dtype it does not dispatch, dtypes that disagree,
lengths that do not sum to ``indices.numel()``, total_num_blocks not multiples of my_size): ours
must raise too.

Where upstream's CPU kernel is no oracle, ``reference`` (upstream itself, on fixed-up inputs)
judges: non-contiguous inputs (upstream CPU reads raw memory, ignoring strides: the reference
runs it on contiguous copies) and ``return_bucket_mapping`` without ``sequence`` (upstream CPU
returns an uninitialised tensor: the reference takes the mapping from a ``sequence=True`` run).
Inputs upstream mishandles without raising (negative lengths, VBE sizes that disagree with
``lengths``, ``my_size < 1``, no features, boundaries above the smallest index) make it read or
write out of bounds or divide by zero, so they cannot run here: ``tests/test_bucketize.py``
checks ours raises on them.  Tolerances: none, every output is exact (weights are copied).

Budgets (OPS.md: 20 launches, 1 sync) are stated per call by :func:`block_budget` /
:func:`cyclic_budget`, term by term (``tests/test_bucketize.py`` checks they are exact): the bare
uniform-block kernel takes 19 launches when ``my_size`` is a power of two (21 otherwise: the
unsigned view of negative ids); weights and VBE add 1, sequence 2 (arange, scatter),
keep_orig_idx_per_feature 2, bucketize_pos 4; ``total_num_blocks`` (an unsigned division by a
per-feature divisor) takes 34 and ``block_bucketize_pos`` (a two-level boundary search) 40..57:
over budget, reported; a fused kernel is the remedy.  The data check adds 6 (12 with VBE, 11
with total_num_blocks), nothing with ``FBGEMM_NPU_VALIDATE=0``.  Syncs: 0 everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import Budget, Compare, OpSpec, TensorView, Tol
from fbgemm_npu.native._checks import validation_enabled
from fbgemm_npu.native.fbgemm.bucketize._utils import host_divmod_constants, pow2_shift

F = torch.ops.fbgemm
EXACT = Compare({d: Tol(rtol=0.0, atol=0.0) for d in (torch.float16, torch.bfloat16,
                                                    torch.float32, torch.float64)})  # fmt: skip
INDEX = (torch.int32, torch.int64)
W1D = (torch.float32, torch.float64)
W2D = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
BLOCK_OPS = ("block_bucketize_sparse_features", "block_bucketize_sparse_features_inference",
             "block_bucketize_sparse_features_2d_weights")  # fmt: skip


def _real(t: Any) -> Any:
    if isinstance(t, TensorView):
        return t.view(t.base)
    if isinstance(t, list):
        return [_real(v) for v in t]
    return t


def _copies(*ts: Any, shape: tuple[int, ...] = (-1,)) -> int:
    """Inputs the kernels must copy to read as ``shape`` (non-contiguous and not viewable)."""
    n = 0
    for t in ts:
        t = _real(t)
        if t is not None and t.numel() > 0:
            try:
                t.view(shape)
            except RuntimeError:
                n += 1
    return n


def _udiv(bits: int, d: int | None, remainder: bool = True, neg_given: bool = True) -> int:
    """Launches of ``_bucketize_utils.udivmod``: by a host-known ``d`` (a power of two is a shift
    and a mask; otherwise the shift and carry of negative ids are skipped when 0) or, ``d=None``,
    by a per-element divisor; ``neg_given``: the caller passes ``x < 0``."""
    if d is None:
        return 3 + remainder + (not neg_given)
    if pow2_shift(d) is not None:
        return 2 + remainder
    k, m = host_divmod_constants(d, bits)
    carry = int(k != 0) + int(m != 0)
    return 1 + remainder + carry + int(carry > 0 and not neg_given)


def block_budget(lengths: Any, indices: Any, bucketize_pos: bool, sequence: bool,
                 block_sizes: Any, my_size: int, weights: Any = None,
                 batch_size_per_feature: Any = None, block_bucketize_pos: Any = None,
                 return_bucket_mapping: bool = False, keep_orig_idx: bool = False,
                 total_num_blocks: Any = None, keep_orig_idx_per_feature: Any = None,
                 weights_dim: int | None = None, **_: Any) -> Budget:  # fmt: skip
    """Launches of one block-op call, term by term, as the kernels' docstrings count them."""
    x, p = _real(indices), my_size
    bits = torch.iinfo(x.dtype).bits
    pos, vbe = bool(block_bucketize_pos), batch_size_per_feature is not None
    tnb = total_num_blocks is not None
    g = None if tnb else p  # the divisor of the blk == 0 rule: total_num_blocks or my_size
    n = 1 + (2 if vbe else 1) + int(tnb or pow2_shift(p) is None)  # rows, features, x < 0
    if pos:
        n += 7 + (x.dtype == torch.int32) + 2  # boundaries, start cast, stack + gather
        n += 9 * tnb  # clamp(G), K and M of G
        n += _udiv(bits, g) + 1 + _udiv(bits, g, False, neg_given=False) + 2  # scaled index
        n += 7 + 2 + (_udiv(bits, p) if tnb else 0) + 1  # search, inside, u % P, bucket
        n += 0 if keep_orig_idx and keep_orig_idx_per_feature is None else 4  # new index
        n += int(return_bucket_mapping and x.dtype == torch.int32)  # int64 bucket -> int32
    elif tnb:
        n += 1 + 2 + 9 + 2 + 10  # Lb, S and d, clamp + K/M of G, stack + gather, math
    elif pow2_shift(p) is not None:
        n += 10  # gather, u // P and u % P (3), compare, divisor, divmod by the block, 2 wheres
    else:
        n += 7 + _udiv(bits, p)  # gather, S, compare, or, divisor, divmod, 2 wheres
    n += 2 * (keep_orig_idx_per_feature is not None)
    n += 5 + (p <= 256)  # key, ones, zeros, index_add, sort (+ its uint8 key)
    n += 1 + (weights is not None) + (sequence or bucketize_pos) + sequence + 3 * bucketize_pos
    n += _copies(lengths, indices, block_sizes, total_num_blocks, keep_orig_idx_per_feature)
    n += _copies(weights, shape=(-1,) if weights_dim is None else (x.numel(), weights_dim))
    if validation_enabled():
        n += 6 + 6 * vbe + 5 * tnb
    return Budget(launches=n, syncs=0)


def cyclic_budget(lengths: Any, indices: Any, bucketize_pos: bool, my_size: int,
                  weights: Any = None) -> Budget:  # fmt: skip
    bits = torch.iinfo(_real(indices).dtype).bits
    n = 1 + _udiv(bits, my_size, neg_given=False)  # row ids, unsigned divmod
    n += 5 + (my_size <= 256) + 1 + (weights is not None) + 4 * bucketize_pos
    n += _copies(lengths, indices, weights) + (6 if validation_enabled() else 0)
    return Budget(launches=n, syncs=0)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _ints(n: int, lo: int, hi: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(lo, hi, (n,), generator=gen, dtype=torch.int64).to(dtype)


def _indices(n: int, dtype: torch.dtype, fill: str, hi: int, gen: torch.Generator) -> torch.Tensor:
    """small: 0..hi (inside and past block_size * my_size); signed: -hi..hi; extreme: the
    dtype's min / max, -1, 0 and anything between."""
    if fill == "small":
        return _ints(n, 0, hi, dtype, gen)
    if fill == "signed":
        return _ints(n, -hi, hi, dtype, gen)
    info = torch.iinfo(dtype)
    special = torch.tensor([info.min, info.max, -1, 0, 1, info.min + 1], dtype=dtype)
    pick = _ints(n, 0, 2 * len(special), torch.int64, gen)
    wide = torch.randint(info.min, info.max, (n,), generator=gen, dtype=torch.int64).to(dtype)
    return torch.where(pick < len(special), special[pick.clamp(max=len(special) - 1)], wide)


def _noncontig(t: torch.Tensor, how: str) -> torch.Tensor | TensorView:
    """``sliced``: every other element of a twice-as-long base; ``transposed`` (2-D only)."""
    if how == "sliced" and t.dim() == 1:
        base = torch.stack([t, t.flip(0)], 1).reshape(-1)  # base[::2] == t, the rest is valid too
        return TensorView(base, lambda b: b[::2], "sliced [::2]")
    if how == "transposed" and t.dim() == 2:
        return TensorView(t.t().contiguous(), lambda b: b.t(), "transposed")
    return t


@st.composite
def block_inputs(draw: st.DrawFn, op: str) -> dict[str, Any]:
    """Valid inputs of one block op (or, one in ten, an input upstream rejects)."""
    gen = _gen(draw(st.integers(0, 2**31 - 1)))
    n_feat, p = draw(st.integers(1, 4)), draw(st.sampled_from([1, 2, 3, 4, 5, 8]))
    ldt, idt = draw(st.sampled_from(INDEX)), draw(st.sampled_from(INDEX))
    vbe = draw(st.integers(0, 3)) == 3
    batch = draw(st.integers(0, 5))
    bspf = _ints(n_feat, 0, 6, ldt, gen) if vbe else None
    rows = int(bspf.sum()) if bspf is not None else n_feat * batch
    lengths = _ints(rows, 0, draw(st.sampled_from([3, 7, 41])), ldt, gen)
    n_idx = int(lengths.sum())
    form = draw(st.sampled_from(["plain", "total_num_blocks", "pos", "pos", "empty_pos"]))
    blocks = _ints(n_feat, 0, 13, idt, gen)
    total = pos = None
    if form in ("total_num_blocks", "pos") and draw(st.booleans()):
        total = _ints(n_feat, 1, 4, idt, gen) * p
    if form == "pos":
        pos = []
        for t in range(n_feat):  # boundaries from 0; at most p + 1 where the block size is 0
            k = draw(st.integers(1, p + 1 if int(blocks[t]) == 0 else p + 3))
            pos.append(torch.cat([torch.zeros(1, dtype=idt),
                                  _ints(k - 1, 1, 120, idt, gen).sort().values]))  # fmt: skip
    hi = 300 if total is not None else 150
    x = _indices(n_idx, idt, draw(st.sampled_from(["small", "small", "signed", "extreme"])),
                 hi, gen)  # fmt: skip
    args: dict[str, Any] = {
        "lengths": lengths, "indices": x, "bucketize_pos": draw(st.booleans()),
        "sequence": draw(st.booleans()), "block_sizes": blocks, "my_size": p,
    }  # fmt: skip
    if op.endswith("_2d_weights"):
        dim = draw(st.integers(1, 4))
        args["weights"] = torch.randn(n_idx, dim, generator=gen).to(draw(st.sampled_from(W2D)))
        args["weights_dim"] = dim
    elif draw(st.booleans()):
        args["weights"] = torch.randn(n_idx, generator=gen).to(draw(st.sampled_from(W1D)))
    if bspf is not None:
        args["batch_size_per_feature"], args["max_B"] = bspf, max(int(bspf.max()), 1)
    args["block_bucketize_pos"] = [] if form == "empty_pos" else pos
    if op.endswith("_inference"):
        args["return_bucket_mapping"] = draw(st.booleans())
    args["keep_orig_idx"] = draw(st.integers(0, 4)) == 4
    args["total_num_blocks"] = total
    if draw(st.integers(0, 3)) == 3:
        args["keep_orig_idx_per_feature"] = torch.rand(n_feat, generator=gen) < 0.5
    if draw(st.integers(0, 3)) == 3:  # non-contiguous inputs
        args["lengths"] = _noncontig(lengths.view(n_feat, -1) if not vbe and batch else lengths,
                                     "transposed")  # fmt: skip
        for name in ("indices", "block_sizes", "total_num_blocks", "keep_orig_idx_per_feature"):
            if name == "block_sizes" and pos:  # upstream would read other blocks: see _spoil
                continue
            if args.get(name) is not None and draw(st.booleans()):
                args[name] = _noncontig(args[name], "sliced")
        w = args.get("weights")
        if w is not None:
            args["weights"] = _noncontig(w, "transposed" if w.dim() == 2 else "sliced")
    if draw(st.integers(0, 9)) == 9:  # shrinks towards valid inputs
        _spoil(draw, args, idt)
    return args


def _spoil(draw: st.DrawFn, args: dict[str, Any], idt: torch.dtype) -> None:
    """Make the input invalid in a way upstream's CPU kernel detects (it raises)."""
    other = torch.int64 if idt == torch.int32 else torch.int32
    how = draw(st.sampled_from(["block_sizes", "lengths_sum", "weights", "keep", "total"]))
    if how == "block_sizes":
        args["block_sizes"] = _real(args["block_sizes"]).to(other)
    elif how == "lengths_sum":
        args["indices"] = torch.cat([_real(args["indices"]), torch.zeros(2, dtype=idt)])
        w = _real(args.get("weights"))
        if w is not None:
            args["weights"] = torch.cat([w, w.new_zeros((2, *w.shape[1:]))])
    elif how == "weights" and args.get("weights_dim") is None:
        args["weights"] = torch.ones(_real(args["indices"]).numel(), dtype=torch.float16)
    elif how == "keep":
        args["keep_orig_idx_per_feature"] = torch.ones(_real(args["block_sizes"]).numel(),
                                                       dtype=torch.int64)  # fmt: skip
    elif not args.get("block_bucketize_pos") and args["my_size"] > 1:
        args["total_num_blocks"] = torch.full_like(_real(args["block_sizes"]),
                                                   args["my_size"] + 1)  # fmt: skip
    else:
        args["block_sizes"] = _real(args["block_sizes"]).to(other)


@st.composite
def cyclic_inputs(draw: st.DrawFn) -> dict[str, Any]:
    gen = _gen(draw(st.integers(0, 2**31 - 1)))
    dtype, p = draw(st.sampled_from(INDEX)), draw(st.sampled_from([1, 2, 3, 4, 7, 8]))
    lengths = _ints(draw(st.integers(0, 12)), 0, draw(st.sampled_from([3, 7, 41])), dtype, gen)
    n_idx = int(lengths.sum())
    x = _indices(n_idx, dtype, draw(st.sampled_from(["small", "signed", "extreme"])), 100, gen)
    args: dict[str, Any] = {"lengths": lengths, "indices": x,
                            "bucketize_pos": draw(st.booleans()), "my_size": p}  # fmt: skip
    if draw(st.booleans()):
        args["weights"] = torch.randn(n_idx, generator=gen)
    if draw(st.integers(0, 3)) == 3:
        args["indices"] = _noncontig(x, "sliced")
        if args.get("weights") is not None:
            args["weights"] = _noncontig(args["weights"], "sliced")
    if draw(st.integers(0, 9)) == 9:  # upstream rejects: dtypes that disagree, double weights
        if draw(st.booleans()):
            args["lengths"] = lengths.to(torch.int64 if dtype == torch.int32 else torch.int32)
        else:
            args["weights"] = torch.ones(n_idx, dtype=torch.float64)
    return args


def _contiguous(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.contiguous()
    if isinstance(v, list):
        return [_contiguous(t) for t in v]
    return v


def _needs_reference(**kw: Any) -> bool:
    """Upstream CPU reads raw memory of non-contiguous inputs and leaves ``bucket_mapping``
    uninitialised without ``sequence``: those cases are judged by :func:`_fixed_upstream`."""
    flat = [v for val in kw.values() for v in (val if isinstance(val, list) else [val])]
    strided = any(isinstance(v, torch.Tensor) and not v.is_contiguous() for v in flat)
    return strided or bool(kw.get("return_bucket_mapping") and not kw.get("sequence"))


def _fixed_upstream(op: Callable[..., Any]) -> Callable[..., Any]:
    """Upstream on contiguous copies; the bucket mapping from a ``sequence=True`` run."""

    def reference(**kw: Any) -> Any:
        kw = {k: _contiguous(v) for k, v in kw.items()}
        if kw.get("return_bucket_mapping") and not kw.get("sequence"):
            out = list(op(**{**kw, "sequence": True}))
            out[4] = None  # no unbucketize_permute without sequence
            return tuple(out)
        return op(**kw)

    return reference


def _kw(op: Callable[..., Any]) -> Callable[..., Any]:
    return lambda **kw: op(**kw)


def _t(values: list[int], dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


def _examples(op: str) -> tuple[dict[str, Any], ...]:
    """Edge cases every run checks."""
    i32, i64 = torch.int32, torch.int64
    lengths, x = _t([0, 2, 1, 3, 2, 3, 3, 1], i32), _t([3, 4, 15, 11, 28, 29, 1, 10, 11, 12,
                                                         13, 11, 22, 20, 20], i32)  # fmt: skip
    base = {"lengths": lengths, "indices": x, "bucketize_pos": True, "sequence": True,
            "block_sizes": _t([5, 15, 10, 20], i32), "my_size": 2}  # fmt: skip
    big = _gen(7)
    rows = _ints(26 * 64, 0, 41, i64, big)  # torchrec-shaped: 26 features x 64, mean 20
    torchrec = {"lengths": rows.to(i32), "indices": _ints(int(rows.sum()), 0, 10**6, i64, big),
                "bucketize_pos": False, "sequence": True, "my_size": 8,
                "block_sizes": torch.full((26,), 10**6 // 8 + 1, dtype=i64)}  # fmt: skip
    neg32 = {**base, "indices": -x, "my_size": 3}
    neg64 = {**base, "indices": torch.cat([-x[:5], x[5:]]).to(i64) * (2**40),
             "block_sizes": base["block_sizes"].to(i64), "my_size": 5}  # fmt: skip
    cases: list[dict[str, Any]] = [
        base,
        torchrec,
        neg32,
        neg64,
        {**base, "lengths": _t([0] * 8, i64), "indices": _t([], i32)},  # no indices at all
        {**base, "lengths": _t([], i32), "indices": _t([], i32)},  # empty batch
        {**base, "block_sizes": _t([0, 3, 0, 4], i32), "my_size": 3},  # zero-size blocks
        {**base, "keep_orig_idx": True},
        {**base, "keep_orig_idx_per_feature": torch.tensor([True, False, True, False])},
        {**base, "batch_size_per_feature": _t([1, 3, 0, 4], i32), "max_B": 4},  # VBE
        {**base, "total_num_blocks": _t([2, 4, 6, 2], i32)},
        {
            **base,
            "block_bucketize_pos": [
                _t([0, 2, 8], i32),
                _t([0, 5, 30], i32),
                _t([0, 10, 20], i32),
                _t([0, 15, 40], i32),
            ],
        },
        {
            **base,
            "block_sizes": _t([0, 15, 0, 20], i32),
            "total_num_blocks": _t([4, 2, 6, 2], i32),
            "block_bucketize_pos": [
                _t([0, 2, 8], i32),
                _t([0, 5, 30], i32),
                _t([0, 10], i32),
                _t([0], i32),
            ],
        },  # fmt: skip
        {**base, "block_bucketize_pos": []},  # an empty list means uniform blocks
        {**base, "indices": TensorView(torch.stack([x, x], 1), lambda b: b[:, 1], "column 1")},
        {**base, "lengths": _t([0, 2, -1, 3, 2, 3, 3, 1], i32)[:0], "indices": x[:0]},
        {**base, "block_sizes": base["block_sizes"].to(i64)},  # upstream rejects: dtypes differ
        {**base, "indices": x[:10]},  # upstream rejects: lengths sum to 15
        {**base, "total_num_blocks": _t([3, 4, 6, 2], i32)},  # upstream rejects: 3 % 2 != 0
    ]
    if op.endswith("_inference"):
        cases += [{**base, "return_bucket_mapping": True},
                  {**base, "sequence": False, "return_bucket_mapping": True}]  # fmt: skip
    if op.endswith("_2d_weights"):
        for c in cases:
            n = _real(c["indices"]).numel()
            c["weights"], c["weights_dim"] = torch.randn(n, 3, generator=_gen(n)), 3
        cases += [{**base, "weights": torch.randn(15, 2).to(d), "weights_dim": 2} for d in W2D]
        cases += [{**base, "weights": torch.randn(30), "weights_dim": 2}]  # flat, as upstream
    else:
        cases += [{**base, "weights": torch.randn(15).to(d)} for d in W1D]
        cases += [{**base, "weights": torch.ones(15, dtype=torch.float16)}]  # upstream rejects
    return tuple(cases)


def _cyclic_examples() -> tuple[dict[str, Any], ...]:
    x = _t([3, 4, 15, 11, 28, 29, 1, 10, 11, 12, 13, 11, 22, 20, 20])
    base = {"lengths": _t([0, 2, 1, 3, 2, 3, 3, 1]), "indices": x, "bucketize_pos": True,
            "my_size": 3}  # fmt: skip
    return (
        base,
        {**base, "weights": torch.randn(15)},
        {**base, "indices": -x * 2**40, "my_size": 7},
        {**base, "lengths": base["lengths"].int(), "indices": x.int() - 20, "my_size": 2},
        {**base, "lengths": _t([]), "indices": _t([])},
        {**base, "lengths": _t([0, 0]), "indices": _t([]), "weights": torch.randn(0)},
        {**base, "lengths": base["lengths"].int()},  # upstream rejects: dtypes differ
        {**base, "weights": torch.randn(15, dtype=torch.float64)},  # upstream rejects
        {**base, "indices": x[:12]},  # upstream rejects: lengths sum to 15
    )


def _block_spec(name: str) -> OpSpec:
    op = getattr(F, name)
    return OpSpec(
        name=name,
        op=_kw(op),
        inputs=block_inputs(name),
        compare=EXACT,
        budget=block_budget,
        reference=_fixed_upstream(op),
        use_reference=_needs_reference,
        examples=_examples(name),
        notes="non-contiguous inputs and the mapping without sequence: upstream on fixed inputs",
    )


SPECS = [
    *(_block_spec(name) for name in BLOCK_OPS),
    OpSpec(
        name="bucketize_sparse_features",
        op=_kw(F.bucketize_sparse_features),
        inputs=cyclic_inputs(),
        compare=EXACT,
        budget=cyclic_budget,
        reference=_fixed_upstream(F.bucketize_sparse_features),
        use_reference=_needs_reference,
        examples=_cyclic_examples(),
    ),
]
