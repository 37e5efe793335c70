"""Triton-path budgets of the HSTU ops outside the hstu family that run the tile program
(``hstu/_attention.py``, hence its fused Triton kernels): ``mxrec::hstu_forward_v2`` /
``hstu_backward_v2``, ``fbgemm::hstu_varlen_fwd_80`` / ``bwd_80``, ``mxrec::hstu_paged``, each
label held exactly by ``assert_triton_budget`` with the data checks off (the hstu family's own:
tests/triton/test_triton_hstu.py).  Each call is the op's costliest metadata (int64 offsets and
counts: their casts) on the inputs of its family's budget test, at one size: the Triton path's
count does not depend on B, N, the dtype or the tile count (no tiles)."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.hstu_paged.inputs import paged_case
from fbgemm_npu.native._triton import kernel_mode
from fbgemm_npu.testing.budgets import assert_triton_budget

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")

S, D, B, H = 16, 16, 2, 4
I32, I64 = torch.int32, torch.int64


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).npu()


def _hold(fn, op: str, label: str) -> None:  # type: ignore[no-untyped-def]
    with kernel_mode("triton"):
        fn()  # warm: the index caches grow on a first call
    assert_triton_budget(fn, op, label)


V2_LABELS = ["call", "sliding", "none", "context_targets", "arbitrary"]


@pytest.mark.parametrize("label", V2_LABELS)
@pytest.mark.parametrize("op", ["mxrec::hstu_forward_v2", "mxrec::hstu_backward_v2"])
def test_v2(op: str, label: str, no_validation: None) -> None:
    q, k, v, grad = (_rand(B * S, h, D, seed=h) for h in (H, H // 2, H // 2, H))
    off = (torch.arange(B + 1) * S).npu()
    kw: dict = {"rab": _rand(B, H, S, S), "alpha": 0.5}
    if label == "context_targets":
        ones = torch.ones(B, dtype=I64).npu()
        kw.update(num_context=ones, num_target=ones, target_group_size=1, window_size_right=0)
    elif label == "arbitrary":
        af = torch.randint(0, S + 1, (B, 1, S, 4), generator=torch.Generator().manual_seed(1))
        kw["arbitrary_func"] = af.to(I32).sort(-1).values.npu()
    else:
        window = {"call": (-1, 0), "sliding": (3, 0), "none": (-1, -1)}[label]
        kw["window_size_left"], kw["window_size_right"] = window
    if op.endswith("forward_v2"):
        fn = lambda: torch.ops.mxrec.hstu_forward_v2(q, k, v, max_seq_len=S, seq_offset=off, **kw)  # noqa: E731
    else:
        fn = lambda: torch.ops.mxrec.hstu_backward_v2(grad, q, k, v, S, S, off, off, **kw)  # noqa: E731
    _hold(fn, op, label)


VARLEN = ["call", "context_targets_rab", "local_rab", "func_rab", "seqused", "paged"]
CASES = [
    (op, label) for op in ("fwd", "bwd") for label in VARLEN if (op, label) != ("bwd", "paged")
]


@pytest.mark.parametrize(("op", "label"), CASES)
def test_varlen(op: str, label: str, no_validation: None) -> None:
    lq = torch.full((B,), S // 2 if label == "paged" else S, dtype=I64)
    lk = torch.full((B,), S, dtype=I64)
    cu = lambda n: torch.cat([torch.zeros(1, dtype=I64), n.cumsum(0)]).npu()  # noqa: E731
    rows_q = int(lq.sum())
    rows_kv = rows_q if label == "paged" else int(lk.sum())
    q, dout = _rand(rows_q, H, D, seed=0), _rand(rows_q, H, D, seed=1)
    k, v = _rand(rows_kv, H // 2, D, seed=2), _rand(rows_kv, H // 2, D, seed=3)
    meta = [cu(lq), cu(lk), None, None, S, S]
    kw: dict = {"alpha": 0.5}
    ones = torch.ones(B, dtype=I64).npu()
    if label in ("call", "seqused", "paged", "context_targets_rab"):
        kw.update(window_size_left=-1, window_size_right=0)
    if label in ("context_targets_rab", "paged"):
        meta[2:4] = [lq.npu(), lk.npu()]
    if label == "context_targets_rab":
        kw.update(num_contexts=ones, num_targets=ones * 2, target_group_size=2)
    elif label == "local_rab":
        kw.update(window_size_left=3, window_size_right=1)
    elif label == "func_rab":
        g = torch.Generator().manual_seed(4)
        kw["func"] = torch.randint(0, S, (1, 3, rows_q), generator=g, dtype=I32).npu()
    elif label == "seqused":
        meta[2:4] = [(lq // 2).npu(), (lk - 1).npu()]
    elif label == "paged":  # S / 2 queries (2 targets), S keys: S - 2 cached in pages of 8
        pages = -(-(S - 2) // 8)
        kw.update(
            num_targets=ones * 2,
            kv_cache=_rand(B * pages, 2, 8, H // 2, D, seed=5),
            page_offsets=(torch.arange(B + 1) * pages).npu(),
            page_ids=torch.randperm(B * pages, generator=torch.Generator().manual_seed(6)).npu(),
            last_page_lens=torch.full((B,), S - 2 - 8 * (pages - 1)).npu(),
        )
    if label.endswith("_rab"):
        kw["rab"] = _rand(B, H // 2, S, S, seed=7)
    if op == "fwd":
        fn = lambda: torch.ops.fbgemm.hstu_varlen_fwd_80(q, k, v, *meta, **kw)  # noqa: E731
    else:
        kw["has_drab"] = "rab" in kw
        fn = lambda: torch.ops.fbgemm.hstu_varlen_bwd_80(dout, q, k, v, *meta, **kw)  # noqa: E731
    _hold(fn, f"fbgemm::hstu_varlen_{op}_80", label)


@pytest.mark.parametrize("label", ["call", "unmasked", "targets", "targets_unmasked"])
def test_paged(label: str, no_validation: None) -> None:
    targets = [2] * B if label.startswith("targets") else None
    kw = paged_case([40] * B, [4 if targets else 6] * B, targets, heads=(H, H // 2))
    if label.endswith("unmasked"):
        kw["mask_type"] = 2
    kw = {n: (t.npu() if isinstance(t, torch.Tensor) else t) for n, t in kw.items()}
    _hold(lambda: torch.ops.mxrec.hstu_paged(**kw), "mxrec::hstu_paged", label)
