"""Drawn inputs of the bucketize specs (see ``block.py`` for what they cover), and what the
budget paths need to know of them: :func:`real` (a :class:`TensorView` as the tensor it
stands for) and :func:`copied` (an input the kernels must copy to read)."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import TensorView

INDEX = (torch.int32, torch.int64)
W1D = (torch.float32, torch.float64)
W2D = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def real(t: Any) -> Any:
    """The tensor (or list) ``t`` stands for, views applied."""
    if isinstance(t, TensorView):
        return t.view(t.base)
    if isinstance(t, list):
        return [real(v) for v in t]
    return t


def copied(*ts: Any, shape: tuple[int, ...] = (-1,)) -> bool:
    """Whether the kernels must copy one of ``ts`` to read it as ``shape`` (non-contiguous and
    not viewable): a copy is a launch no budget path counts."""
    for t in ts:
        t = real(t)
        if t is not None and t.numel() > 0:
            try:
                t.view(shape)
            except RuntimeError:
                return True
    return False


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def ints(n: int, lo: int, hi: int, dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    return torch.randint(lo, hi, (n,), generator=g, dtype=torch.int64).to(dtype)


def _indices(n: int, dtype: torch.dtype, fill: str, hi: int, g: torch.Generator) -> torch.Tensor:
    """small: 0..hi (inside and past block_size * my_size); signed: -hi..hi; extreme: the
    dtype's min / max, -1, 0 and anything between."""
    if fill == "small":
        return ints(n, 0, hi, dtype, g)
    if fill == "signed":
        return ints(n, -hi, hi, dtype, g)
    info = torch.iinfo(dtype)
    special = torch.tensor([info.min, info.max, -1, 0, 1, info.min + 1], dtype=dtype)
    pick = ints(n, 0, 2 * len(special), torch.int64, g)
    wide = torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dtype)
    return torch.where(pick < len(special), special[pick.clamp(max=len(special) - 1)], wide)


def _noncontig(t: torch.Tensor, how: str) -> torch.Tensor | TensorView:
    """``sliced``: every other element of a twice-as-long base; ``transposed`` (2-D only)."""
    if how == "sliced" and t.dim() == 1:
        base = torch.stack([t, t.flip(0)], 1).reshape(-1)  # base[::2] == t, the rest is valid too
        return TensorView(base, lambda b: b[::2], "sliced [::2]")
    if how == "transposed" and t.dim() == 2:
        return TensorView(t.t().contiguous(), lambda b: b.t(), "transposed")
    return t


def _boundaries(
    draw: st.DrawFn, blocks: torch.Tensor, p: int, idt: torch.dtype, g: torch.Generator
) -> list[torch.Tensor]:
    """Sorted boundaries from 0 per feature; at most p + 1 where the block size is 0."""
    pos = []
    for t in range(blocks.numel()):
        k = draw(st.integers(1, p + 1 if int(blocks[t]) == 0 else p + 3))
        rest = ints(k - 1, 1, 120, idt, g).sort().values
        pos.append(torch.cat([torch.zeros(1, dtype=idt), rest]))
    return pos


@st.composite
def block_inputs(draw: st.DrawFn, op: str) -> dict[str, Any]:
    """Valid inputs of one block op (or, one in ten, an input upstream rejects)."""
    g = gen(draw(st.integers(0, 2**31 - 1)))
    n_feat, p = draw(st.integers(1, 4)), draw(st.sampled_from([1, 2, 3, 4, 5, 8]))
    ldt, idt = draw(st.sampled_from(INDEX)), draw(st.sampled_from(INDEX))
    vbe = draw(st.integers(0, 3)) == 3
    batch = draw(st.integers(0, 5))
    bspf = ints(n_feat, 0, 6, ldt, g) if vbe else None
    rows = int(bspf.sum()) if bspf is not None else n_feat * batch
    lengths = ints(rows, 0, draw(st.sampled_from([3, 7, 41])), ldt, g)
    n_idx = int(lengths.sum())
    form = draw(st.sampled_from(["plain", "total_num_blocks", "pos", "pos", "empty_pos"]))
    blocks = ints(n_feat, 0, 13, idt, g)
    total = pos = None
    if form in ("total_num_blocks", "pos") and draw(st.booleans()):
        total = ints(n_feat, 1, 4, idt, g) * p
    if form == "pos":
        pos = _boundaries(draw, blocks, p, idt, g)
    hi = 300 if total is not None else 150
    fill = draw(st.sampled_from(["small", "small", "signed", "extreme"]))
    args: dict[str, Any] = {
        "lengths": lengths,
        "indices": _indices(n_idx, idt, fill, hi, g),
        "bucketize_pos": draw(st.booleans()),
        "sequence": draw(st.booleans()),
        "block_sizes": blocks,
        "my_size": p,
    }
    if op.endswith("_2d_weights"):
        dim = draw(st.integers(1, 4))
        args["weights"] = torch.randn(n_idx, dim, generator=g).to(draw(st.sampled_from(W2D)))
        args["weights_dim"] = dim
    elif draw(st.booleans()):
        args["weights"] = torch.randn(n_idx, generator=g).to(draw(st.sampled_from(W1D)))
    if bspf is not None:
        args["batch_size_per_feature"], args["max_B"] = bspf, max(int(bspf.max()), 1)
    args["block_bucketize_pos"] = [] if form == "empty_pos" else pos
    if op.endswith("_inference"):
        args["return_bucket_mapping"] = draw(st.booleans())
    args["keep_orig_idx"] = draw(st.integers(0, 4)) == 4
    args["total_num_blocks"] = total
    if draw(st.integers(0, 3)) == 3:
        args["keep_orig_idx_per_feature"] = torch.rand(n_feat, generator=g) < 0.5
    if draw(st.integers(0, 3)) == 3:
        _make_noncontiguous(draw, args, n_feat if not vbe and batch else 0)
    if draw(st.integers(0, 9)) == 9:  # shrinks towards valid inputs
        _spoil(draw, args, idt)
    return args


def _make_noncontiguous(draw: st.DrawFn, args: dict[str, Any], n_feat: int) -> None:
    """Non-contiguous inputs: lengths a transposed ``(T, B)`` view (``n_feat`` 0: no 2-D view),
    indices, block sizes, total_num_blocks, keep flags and weights sliced or transposed."""
    lengths = args["lengths"]
    args["lengths"] = _noncontig(lengths.view(n_feat, -1) if n_feat else lengths, "transposed")
    for name in ("indices", "block_sizes", "total_num_blocks", "keep_orig_idx_per_feature"):
        if name == "block_sizes" and args.get("block_bucketize_pos"):
            continue  # upstream would read other blocks: see _spoil
        if args.get(name) is not None and draw(st.booleans()):
            args[name] = _noncontig(args[name], "sliced")
    w = args.get("weights")
    if w is not None:
        args["weights"] = _noncontig(w, "transposed" if w.dim() == 2 else "sliced")


def _spoil(draw: st.DrawFn, args: dict[str, Any], idt: torch.dtype) -> None:
    """Make the input invalid in a way upstream's CPU kernel detects (it raises)."""
    other = torch.int64 if idt == torch.int32 else torch.int32
    how = draw(st.sampled_from(["block_sizes", "lengths_sum", "weights", "keep", "total"]))
    if how == "block_sizes":
        args["block_sizes"] = real(args["block_sizes"]).to(other)
    elif how == "lengths_sum":
        args["indices"] = torch.cat([real(args["indices"]), torch.zeros(2, dtype=idt)])
        w = real(args.get("weights"))
        if w is not None:
            args["weights"] = torch.cat([w, w.new_zeros((2, *w.shape[1:]))])
    elif how == "weights" and args.get("weights_dim") is None:
        args["weights"] = torch.ones(real(args["indices"]).numel(), dtype=torch.float16)
    elif how == "keep":
        n_feat = real(args["block_sizes"]).numel()
        args["keep_orig_idx_per_feature"] = torch.ones(n_feat, dtype=torch.int64)
    elif not args.get("block_bucketize_pos") and args["my_size"] > 1:
        blocks = real(args["block_sizes"])
        args["total_num_blocks"] = torch.full_like(blocks, args["my_size"] + 1)
    else:
        args["block_sizes"] = real(args["block_sizes"]).to(other)


@st.composite
def cyclic_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Valid inputs of ``bucketize_sparse_features`` (or, one in ten, ones upstream rejects)."""
    g = gen(draw(st.integers(0, 2**31 - 1)))
    dtype, p = draw(st.sampled_from(INDEX)), draw(st.sampled_from([1, 2, 3, 4, 7, 8]))
    lengths = ints(draw(st.integers(0, 12)), 0, draw(st.sampled_from([3, 7, 41])), dtype, g)
    n_idx = int(lengths.sum())
    x = _indices(n_idx, dtype, draw(st.sampled_from(["small", "signed", "extreme"])), 100, g)
    args: dict[str, Any] = {
        "lengths": lengths,
        "indices": x,
        "bucketize_pos": draw(st.booleans()),
        "my_size": p,
    }
    if draw(st.booleans()):
        args["weights"] = torch.randn(n_idx, generator=g)
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
