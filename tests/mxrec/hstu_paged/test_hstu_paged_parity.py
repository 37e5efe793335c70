"""``mxrec::hstu_paged`` against the float64 reference written from Rec SDK's paged golden
(conformance/specs/mxrec/hstu_paged/reference.py), on npu and CPU: float32 / float16 /
bfloat16, mask types 0 (with and without targets, group sizes 1 and 2), 2 and 3, bias + alpha +
silu_scale, GQA, empty targets, full last pages, sequences without pages or new rows, page sizes
32 and 128, int32 / int64 metadata, several query tiles, sizes read back; and the reference's
built-in mask against the golden's TRIL formula."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.hstu_paged.inputs import paged_case
from conformance.specs.mxrec.hstu_paged.reference import (
    golden_tril_mask,
    hstu_paged_reference,
    paged_mask,
)
from fbgemm_npu.native._pending import check
from fbgemm_npu.native.mxrec.hstu import _attention

TOL = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}
# (cache rows, new history rows, targets or None) per sequence, and the call's extras
CASES: dict[str, tuple[list[int], list[int], list[int] | None, dict]] = {
    "targets": ([40, 5, 70], [3, 2, 1], [1, 0, 2], {}),
    "no_num_target": ([40, 5, 70], [3, 2, 1], None, {}),
    "empty_targets": ([40, 5, 70], [3, 2, 1], [0, 0, 0], {}),
    "group_2": ([33, 7], [2, 1], [3, 4], {"target_group_size": 2}),
    "full_last_pages": ([64, 32, 96], [2, 3, 1], [2, 1, 1], {}),
    "no_pages_no_rows": ([0, 45, 12], [2, 0, 3], [1, 0, 1], {}),
    "mask_none": ([40, 5, 70], [3, 2, 1], [1, 0, 2], {"mask_type": 2}),
    "mask_custom": ([40, 5, 70], [3, 2, 1], [1, 0, 2], {"mask_type": 3, "mask": True}),
    "bias_alpha": (
        [40, 5, 70], [3, 2, 1], [1, 0, 2], {"attn_bias": True, "alpha": 0.35, "silu_scale": 0.2},
    ),
    "gqa_4_1": ([40, 5], [3, 2], [1, 2], {"heads": (4, 1)}),
    "mha_3_3": ([40, 5], [3, 2], [1, 2], {"heads": (3, 3)}),
    "page_128": ([200, 5, 129], [3, 2, 1], [1, 0, 2], {"page_size": 128}),
}  # fmt: skip


def _build(name: str, dtype: torch.dtype, index_dtype: torch.dtype = torch.int64) -> dict:
    cache, new, targets, extra = CASES[name]
    extra = dict(extra)
    build = {n: extra.pop(n) for n in ("heads", "page_size") if n in extra}
    kw = paged_case(cache, new, targets, dtype=dtype, index_dtype=index_dtype, **build)
    g = torch.Generator().manual_seed(5)
    shape = (len(cache), kw["q"].size(1), kw["max_seq_len"], kw["max_seq_len_k"])  # type: ignore[union-attr]
    if extra.pop("mask", False):
        kw["mask"] = (torch.rand(shape, generator=g) > 0.3).to(dtype)
    if extra.pop("attn_bias", False):
        kw["attn_bias"] = torch.randn(shape, generator=g).to(dtype)
    kw.update(extra)
    return kw


def _on(kw: dict, device: str) -> dict:
    return {n: (t.to(device) if isinstance(t, torch.Tensor) else t) for n, t in kw.items()}


def _assert_matches(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> None:
    assert out.shape == ref.shape and out.dtype == dtype
    tol = TOL[dtype] * (ref.abs().max().item() + 1e-3)
    torch.testing.assert_close(out.double().cpu(), ref, rtol=0, atol=tol)


@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_matches_the_float64_reference(name: str, dtype: torch.dtype, device: str) -> None:
    kw = _build(name, dtype)
    ref = hstu_paged_reference(**kw)
    assert ref.abs().max() > 0
    out = torch.ops.mxrec.hstu_paged(**_on(kw, device))
    check()
    _assert_matches(out, ref, dtype)


@pytest.mark.parametrize("rows", [1, 2])
def test_several_query_tiles(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    kw = _build("targets", torch.float16)
    b, nq = 3, kw["q"].size(1)  # type: ignore[union-attr]
    monkeypatch.setattr(_attention, "TILE_ELEMENTS", b * nq * kw["max_seq_len_k"] * rows)
    out = torch.ops.mxrec.hstu_paged(**_on(kw, "npu"))
    check()
    _assert_matches(out, hstu_paged_reference(**kw), torch.float16)


@pytest.mark.parametrize("name", ["targets", "no_pages_no_rows"])
def test_int32_metadata_and_sizes_read_back(name: str) -> None:
    kw = _build(name, torch.float32, torch.int32)
    ref = hstu_paged_reference(**kw)
    _assert_matches(torch.ops.mxrec.hstu_paged(**_on(kw, "npu")), ref, torch.float32)
    kw.update(max_seq_len=0, max_seq_len_k=0)  # read back (1 sync): the same numbers
    _assert_matches(torch.ops.mxrec.hstu_paged(**_on(kw, "npu")), ref, torch.float32)
    check()


def test_the_optional_offsets_change_nothing() -> None:
    """``seq_offset_k`` / ``seq_offset_t`` only restate the pages and num_target."""
    kw = _build("targets", torch.float32)
    full = torch.ops.mxrec.hstu_paged(**_on(kw, "npu"))
    kw.pop("seq_offset_k"), kw.pop("seq_offset_t")
    torch.testing.assert_close(torch.ops.mxrec.hstu_paged(**_on(kw, "npu")), full)
    check()


def test_the_built_in_mask_is_the_goldens_tril() -> None:
    for l_q in range(1, 7):
        for cache in range(6):
            for n_t in range(l_q + 1):
                want = golden_tril_mask(l_q, cache, n_t)
                assert torch.equal(paged_mask(l_q, cache + n_t, n_t, 1), want), (l_q, cache, n_t)


def test_an_empty_call() -> None:
    kw = _build("targets", torch.float32)
    for n in ("q", "k", "v"):
        kw[n] = kw[n][:0]  # type: ignore[index]
    kw["seq_offset"] = torch.zeros(4, dtype=torch.int64)
    kw["num_target"] = torch.zeros(3, dtype=torch.int64)
    kw.pop("seq_offset_k"), kw.pop("seq_offset_t")
    out = torch.ops.mxrec.hstu_paged(**_on(kw, "npu"))
    check()
    assert out.shape == (0, 4, 8)
