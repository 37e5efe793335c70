"""Inputs of the bucketize family's tests and specs, and the names of its budget paths.

A path of a bucketize budget (``fbgemm_npu/native/fbgemm/bucketize/budgets.py``) is named by the
options its call uses, in :data:`OPTIONS` order, joined by :data:`SEPARATOR` (``"weights +
sequence"``); :data:`EVERY` closes the name of a ceiling, every option of a form at once
(``"total_num_blocks + every option"``): the most a call of that form can launch.
:func:`path_name` turns options into that name, :func:`block_call` / :func:`cyclic_call` turn a
name back into a call, so the budget tests can run every path the table names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

__all__ = [
    "BLOCK",
    "BLOCK_2D",
    "BLOCK_INFERENCE",
    "CYCLIC",
    "EVERY",
    "FORMS",
    "NOT_POW2",
    "OPTIONS",
    "SEPARATOR",
    "assert_same_outputs",
    "block_call",
    "block_kwargs",
    "cyclic_call",
    "docs_example",
    "kjt",
    "on_device",
    "path_name",
    "path_options",
]

F = torch.ops.fbgemm
I32, I64 = torch.int32, torch.int64
BLOCK = "fbgemm::block_bucketize_sparse_features"
BLOCK_INFERENCE = "fbgemm::block_bucketize_sparse_features_inference"
BLOCK_2D = "fbgemm::block_bucketize_sparse_features_2d_weights"
CYCLIC = "fbgemm::bucketize_sparse_features"

NOT_POW2 = "my_size not a power of two"
OPTIONS = (
    "weights",
    "batch_size_per_feature",
    "sequence",
    "bucketize_pos",
    "keep_orig_idx_per_feature",
    NOT_POW2,
    "total_num_blocks",
    "block_bucketize_pos",
)
# The forms: how the blocks are given.  A ceiling path names its form, then EVERY.
FORMS = ("total_num_blocks", "block_bucketize_pos")
EVERY = "every option"
SEPARATOR = " + "
BLOCK_SIZE = 1000


def path_name(options: Iterable[str], every: bool = False) -> str | None:
    """The path of a call using ``options`` (``None``: the main path, no option)."""
    chosen = set(options)
    unknown = chosen - set(OPTIONS)
    if unknown:
        raise ValueError(f"bucketize budgets: unknown options {sorted(unknown)}")
    parts = [o for o in OPTIONS if o in chosen] + ([EVERY] if every else [])
    return SEPARATOR.join(parts) or None


def path_options(path: str | None) -> tuple[set[str], bool]:
    """The options a path names, and whether it is a ceiling (:data:`EVERY`)."""
    parts = set() if path is None else set(path.split(SEPARATOR))
    every = EVERY in parts
    parts.discard(EVERY)
    if path is not None and path_name(parts, every) != path:
        raise ValueError(f"bucketize budgets: path {path!r} is not in canonical order")
    return parts, every


def on_device(v: Any, device: str) -> Any:
    """``v`` on ``device`` (tensors, lists of tensors); anything else as it is."""
    if isinstance(v, list):
        return [t.to(device) for t in v]
    return v.to(device) if isinstance(v, torch.Tensor) else v


def kjt(
    n_feat: int, batch: int, p: int, idt: torch.dtype = I64, seed: int = 0, device: str = "npu"
) -> dict[str, Any]:
    """A KJT-like input: lengths 0..11, indices -50..2*block*p (inside and past the blocks)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 12, (n_feat * batch,), generator=gen, dtype=I32)
    x = torch.randint(-50, 2 * BLOCK_SIZE * p, (int(lengths.sum()),), generator=gen).to(idt)
    d = {
        "lengths": lengths,
        "indices": x,
        "block_sizes": torch.full((n_feat,), BLOCK_SIZE, dtype=idt),
        "my_size": p,
        "bucketize_pos": False,
        "sequence": False,
    }
    return {k: on_device(v, device) for k, v in d.items()}


def _strided_lengths(lengths: torch.Tensor, n_feat: int) -> torch.Tensor:
    """``lengths`` as a non-contiguous ``(T, B)`` view (the kernel copies it to read it flat)."""
    rows = lengths.view(n_feat, -1)
    return rows.t().contiguous().t()


def block_call(
    op: str,
    path: str | None,
    n_feat: int,
    batch: int,
    device: str = "npu",
    keep_orig_idx: bool = False,
    return_bucket_mapping: bool = False,
    lengths_dtype: torch.dtype | None = None,
) -> Callable[[], Any]:
    """A call of block op ``op`` on the argument path ``path``: :func:`block_kwargs`' call."""
    args = (device, keep_orig_idx, return_bucket_mapping, lengths_dtype)
    kw = block_kwargs(op, path, n_feat, batch, *args)
    fn = getattr(F, op.split("::")[1])
    return lambda: fn(**kw)


def block_kwargs(
    op: str,
    path: str | None,
    n_feat: int,
    batch: int,
    device: str = "npu",
    keep_orig_idx: bool = False,
    return_bucket_mapping: bool = False,
    lengths_dtype: torch.dtype | None = None,
) -> dict[str, Any]:
    """The arguments of a call of block op ``op`` on the argument path ``path`` (see the module
    docstring).

    A ceiling (``EVERY``) uses every option at once, plus what raises the count further where
    the form has it: ``my_size`` 1 with uniform ``total_num_blocks`` (a division by ``G``
    itself), int32 indices (the variable-block bucket mapping is cast), int64 lengths (the
    int32 counts are widened), the bucket mapping (inference), non-contiguous lengths and 2-D
    weights (copied to be read flat).  A named path has int32 lengths and int64 indices;
    ``lengths_dtype`` overrides the lengths' (and VBE batch sizes') dtype.
    """
    options, every = path_options(path)
    if every:
        options |= set(OPTIONS) - set(FORMS)
    p = 6 if NOT_POW2 in options else 8
    if every and options & set(FORMS) == {"total_num_blocks"}:
        p = 1  # u // 1 wraps: total_num_blocks divides by G itself (its per-feature K, M)
    d = kjt(n_feat, batch, p, I32 if every else I64, device=device)
    n_idx = d["indices"].numel()
    kw: dict[str, Any] = {k: d[k] for k in ("lengths", "indices", "block_sizes", "my_size")}
    if every or lengths_dtype is not None:
        kw["lengths"] = kw["lengths"].to(lengths_dtype or I64)
    kw["bucketize_pos"] = "bucketize_pos" in options
    kw["sequence"] = "sequence" in options
    kw["keep_orig_idx"] = keep_orig_idx
    if op == BLOCK_2D:
        w = torch.rand(3, n_idx, device=device)
        kw["weights"], kw["weights_dim"] = (w.t() if every else w.t().contiguous()), 3
    elif "weights" in options:
        kw["weights"] = torch.rand(n_idx, device=device)
    if "keep_orig_idx_per_feature" in options:
        kw["keep_orig_idx_per_feature"] = torch.arange(n_feat, device=device) % 2 == 0
    if "batch_size_per_feature" in options:
        kw["batch_size_per_feature"] = torch.full(
            (n_feat,), batch, dtype=kw["lengths"].dtype, device=device
        )
        kw["max_B"] = batch
    if "total_num_blocks" in options:
        kw["total_num_blocks"] = torch.full(
            (n_feat,), 2 * p, dtype=d["indices"].dtype, device=device
        )
    if "block_bucketize_pos" in options:
        row = torch.arange(p + 1, dtype=d["indices"].dtype, device=device) * 250
        kw["block_bucketize_pos"] = [row] * n_feat
    if every:
        kw["lengths"] = _strided_lengths(kw["lengths"], n_feat)
    if op == BLOCK_INFERENCE:
        kw["return_bucket_mapping"] = return_bucket_mapping or every
    return kw


def cyclic_call(
    path: str | None, n_feat: int, batch: int, device: str = "npu", dtype: torch.dtype = I64
) -> Callable[[], Any]:
    """A call of ``bucketize_sparse_features`` on ``path`` (options: weights, bucketize_pos,
    my_size not a power of two; the ceiling takes all three); lengths and indices ``dtype``."""
    options, every = path_options(path)
    if every:
        options |= {"weights", "bucketize_pos", NOT_POW2}
    p = 6 if NOT_POW2 in options else 4
    d = kjt(n_feat, batch, p, dtype, device=device)
    lengths, x = d["lengths"].to(dtype), d["indices"]
    w = torch.rand(x.numel(), device=device) if "weights" in options else None
    return lambda: F.bucketize_sparse_features(lengths, x, "bucketize_pos" in options, p, w)


def docs_example(device: str = "npu", **over: Any) -> dict[str, Any]:
    """Upstream's docs example of ``block_bucketize_sparse_features``: 4 features x 2,
    my_size 2, ``over`` replacing arguments; on ``device``."""
    kw: dict[str, Any] = {
        "lengths": torch.tensor([0, 2, 1, 3, 2, 3, 3, 1], dtype=I32),
        "indices": torch.tensor(
            [3, 4, 15, 11, 28, 29, 1, 10, 11, 12, 13, 11, 22, 20, 20], dtype=I32
        ),
        "bucketize_pos": True,
        "sequence": True,
        "block_sizes": torch.tensor([5, 15, 10, 20], dtype=I32),
        "my_size": 2,
    }
    kw.update(over)
    return {k: on_device(v, device) for k, v in kw.items()}


def assert_same_outputs(actual: tuple[Any, ...], expected: tuple[Any, ...]) -> None:
    """Equal output tuples: the same ``None`` entries, dtypes, shapes and values (on the CPU)."""
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert (a is None) == (e is None), f"output {i}: {a} vs {e}"
        if e is not None:
            assert a.dtype == e.dtype and a.shape == e.shape, f"output {i}"
            assert torch.equal(a.cpu(), e.cpu()), f"output {i}: {a.cpu().tolist()} != {e.tolist()}"
