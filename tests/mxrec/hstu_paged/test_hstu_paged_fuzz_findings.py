"""Regression tests of what the hostile-input fuzz (tests/fuzz/test_fuzz_hstu_paged.py) found in
``mxrec::hstu_paged``, each deterministic:

1. ``max_seq_len_k`` (or ``max_seq_len``) past int32 reached the int32 clamp of the cache
   lengths and raised ``RuntimeError: value cannot be converted to type int without overflow``,
   naming neither the op nor the argument (fixed: the sizes' bound is checked first).
2. ``seq_offset_k`` / ``seq_offset_t`` were checked by their steps only: a copy shifted by a
   constant (or an int32 one wrapped past 2**31) passed silently (fixed: they must start at 0,
   a queued check).
3. NaN in the custom mask (mask_type 3) outside a sequence's ``[L_q, L_k]`` reaches the output:
   the shared tile program multiplies the scores by the mask after zeroing the invisible ones
   (``0 * NaN``).  NaN elsewhere the op must not read (the bias there, the cache past
   ``last_page_len`` and in unused pages, the k / v rows that are no target) stays out.
"""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.hstu_paged.inputs import paged_case
from conformance.specs.mxrec.hstu_paged.reference import hstu_paged_reference
from fbgemm_npu.native._checks import validation_enabled
from fbgemm_npu.native._pending import check
from fbgemm_npu.testing.counters import count

OP = "hstu_paged"
CACHE, NEW, TARGETS, PAGE = [9, 0, 14], [3, 2, 1], [1, 0, 2], 4
NAN = float("nan")


def _kw(**over: object) -> dict:
    kw = paged_case(CACHE, NEW, TARGETS, page_size=PAGE, heads=(4, 2), dim=3, spare_pages=2)
    kw.update(over)
    return kw


def _call(kw: dict) -> torch.Tensor:
    placed = {n: (t.npu() if isinstance(t, torch.Tensor) else t) for n, t in kw.items()}
    return torch.ops.mxrec.hstu_paged(**placed)


@pytest.mark.parametrize(
    ("name", "value"),
    [("max_seq_len_k", 2**31), ("max_seq_len_k", 2**40), ("max_seq_len", 2**31)],
)
def test_sizes_past_int32_are_named(name: str, value: int) -> None:
    check()
    with pytest.raises(ValueError, match=rf"{OP}: argument '{name}' must be <= 20480"):
        _call(_kw(**{name: value}))
    check()  # nothing of the refused call is left queued to fail a later read


def _restated(how: str) -> dict:
    kw = _kw()
    if how == "seq_offset_k shifted":
        kw["seq_offset_k"] = kw["seq_offset_k"] + 7  # type: ignore[operator]
    elif how == "seq_offset_t shifted":
        kw["seq_offset_t"] = kw["seq_offset_t"] - 3  # type: ignore[operator]
    else:  # every int32 step agrees, the values wrapped past 2**31
        kw["seq_offset_k"] = (kw["seq_offset_k"] + (2**31 - 2)).to(torch.int32)  # type: ignore[operator]
    return kw


@pytest.mark.skipif(not validation_enabled(), reason="FBGEMM_NPU_VALIDATE=0: no data checks")
@pytest.mark.parametrize("sized", [True, False], ids=["sized", "read_back"])
@pytest.mark.parametrize(
    "how", ["seq_offset_k shifted", "seq_offset_t shifted", "seq_offset_k wrapped"]
)
def test_restated_offsets_must_start_at_zero(how: str, sized: bool) -> None:
    check()
    kw, arg = _restated(how), how.split()[0]
    assert torch.equal(kw[arg].diff(), _kw()[arg].diff())  # every step agrees
    if not sized:
        kw.update(max_seq_len=0, max_seq_len_k=0)
    with count() as c:
        out = _call(kw)
    assert c.syncs == (0 if sized else 1) and out.shape == (9, 4, 3)
    with pytest.raises(RuntimeError, match=rf"{OP}.*argument '{arg}' must start at 0"):
        check()


def _used_cells(kw: dict) -> tuple[torch.Tensor, torch.Tensor, list[int], list[int]]:
    """The cache cells ``[P, page_size]`` and k / v rows ``[T]`` the op reads; L_q, L_k."""
    po, ids, last = kw["page_offsets"], kw["page_ids"], kw["last_page_len"]
    used = torch.zeros(kw["kv_cache"].size(0), PAGE, dtype=torch.bool)
    keep = torch.zeros(kw["k"].size(0), dtype=torch.bool)
    lq, lk, at = [], [], 0
    for b, (c, n, t) in enumerate(zip(CACHE, NEW, TARGETS, strict=True)):
        pages = ids[int(po[b]) : int(po[b + 1])].tolist()
        for i, p in enumerate(pages):
            used[p, : int(last[b]) if i == len(pages) - 1 else PAGE] = True
        keep[at + n : at + n + t] = True  # the targets: the last t rows of the q range
        at += n + t
        lq.append(n + t)
        lk.append(c + t)
    return used, keep, lq, lk


def _past(t: torch.Tensor, lq: list[int], lk: list[int], value: float) -> torch.Tensor:
    t = t.clone()
    for b, (n, k) in enumerate(zip(lq, lk, strict=True)):
        t[b, :, n:] = value
        t[b, :, :, k:] = value
    return t


def _masked_case(mask_type: int) -> dict:
    kw = _kw(mask_type=mask_type)
    shape = (3, 4, kw["max_seq_len"], kw["max_seq_len_k"])
    g = torch.Generator().manual_seed(3)
    kw["attn_bias"] = torch.randn(shape, generator=g)
    kw["mask"] = (torch.rand(shape, generator=g) > 0.3).float()
    return kw


@pytest.mark.parametrize("mask_type", [0, 2, 3])
def test_nan_where_the_op_must_not_read_stays_out(mask_type: int) -> None:
    """NaN in the bias past ``[L_q, L_k]``, in the cache past ``last_page_len`` and in the spare
    pages, in the k / v rows that are no target: the reference's output (which reads none)."""
    kw = _masked_case(mask_type)
    used, keep, lq, lk = _used_cells(kw)
    want = hstu_paged_reference(**kw)
    kw["attn_bias"] = _past(kw["attn_bias"], lq, lk, NAN)
    kw["kv_cache"] = kw["kv_cache"].masked_fill(~used.view(-1, 1, PAGE, 1, 1), NAN)
    for name in ("k", "v"):
        kw[name] = kw[name].masked_fill(~keep.view(-1, 1, 1), NAN)
    assert kw["kv_cache"].isnan().any() and kw["k"].isnan().any()
    out = _call(kw)
    check()
    torch.testing.assert_close(out.cpu().double(), want, rtol=1e-4, atol=1e-4)


def test_nan_in_the_custom_mask_past_the_lengths_stays_out() -> None:
    """mask_type 3 with NaN in the mask outside each ``[L_q, L_k]``: the output of the same mask
    with zeros there."""
    kw = _masked_case(3)
    _, _, lq, lk = _used_cells(kw)
    want = hstu_paged_reference(**kw)
    kw["mask"] = _past(kw["mask"], lq, lk, NAN)
    out = _call(kw)
    check()
    assert not out.isnan().any()
    torch.testing.assert_close(out.cpu().double(), want, rtol=1e-4, atol=1e-4)
