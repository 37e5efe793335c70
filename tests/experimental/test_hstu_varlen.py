"""``fbgemm_npu.experimental.hstu`` against the float64 reference written from upstream's test
math (conformance/specs/fbgemm/hstu_varlen/reference.py): the output and the gradients of q, k,
v and rab (``has_drab``), on npu and on CPU, over every mask upstream's test draws -- none,
causal, local windows, contexts, targets with group sizes, delta q, rab with ``H_rab`` 1 / 2 /
H, the arbitrary mask ``func``, seqused, scaling_seqlen, the paged KV cache -- and the packed
entry point.  Tolerances ``|ours - ref| <= atol + rtol |ref|``: float32 1e-4, float16 1e-2,
bfloat16 6e-2 (the matmuls in the input dtype, the scores rounded to it before ``@ v``).
"""

from __future__ import annotations

import pytest
import torch

from conformance.specs.fbgemm.hstu_varlen.reference import hstu_varlen_reference
from fbgemm_npu.experimental.hstu import (
    cuda_hstu_attn_varlen,
    hstu_attn_qkvpacked_func,
    hstu_attn_varlen_func,
)

F64, I32 = torch.float64, torch.int32
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}


def _cu(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=I32)


def _close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    tol = TOL[dtype]
    torch.testing.assert_close(got.cpu().double(), want, rtol=tol, atol=tol, msg=what)


# name: (q lengths, k lengths, extra arguments); 4 heads of q, 2 of k, D_qk 3, D_v 5 (paged: 4 / 4)
CASES: dict[str, tuple[list[int], list[int], dict]] = {
    "none": ([3, 0, 5], [3, 0, 5], {}),
    "causal_rab": ([3, 2, 5], [3, 2, 5], {"window_size": (-1, 0), "rab": 4, "has_drab": True}),
    "causal_rab1": ([3, 2, 5], [3, 2, 5], {"window_size": (-1, 0), "rab": 1, "has_drab": True}),
    "context_targets": (
        [4, 3, 6],
        [4, 3, 6],
        {"window_size": (-1, 0), "num_contexts": [1, 0, 2], "num_targets": [1, 2, 2]},
    ),  # fmt: skip
    "targets_group": (
        [4, 6, 6],
        [4, 6, 6],
        {
            "window_size": (-1, 0),
            "num_contexts": [0, 1, 2],
            "num_targets": [2, 4, 3],
            "target_group_size": 2,
            "rab": 2,
            "has_drab": True,
        },
    ),  # fmt: skip
    "delta_causal": ([2, 3, 1], [4, 3, 6], {"window_size": (-1, 0), "rab": 2, "has_drab": True}),
    "delta_local": ([2, 3, 1], [4, 3, 6], {"window_size": (1, 2), "alpha": 0.5}),
    "local_diagonal": ([4, 3, 6], [4, 3, 6], {"window_size": (0, 0), "scaling_seqlen": 3}),
    "local_wide": ([4, 3, 6], [4, 3, 6], {"window_size": (2, 50)}),
    "func": ([2, 3, 1], [4, 3, 6], {"func": (1, 3), "rab": 2, "has_drab": True}),
    "func_heads": ([4, 3, 6], [4, 3, 6], {"func": (2, 5)}),
    "seqused": (
        [4, 3, 5],
        [4, 5, 6],
        {
            "seqused_q": [2, 3, 4],
            "seqused_k": [3, 5, 6],
            "window_size": (-1, 0),
            "scaling_seqlen": 4,
        },
    ),  # fmt: skip
    "rab_not_causal": ([3, 2, 5], [3, 2, 5], {"rab": 2, "has_drab": False, "alpha": 2.0}),
}


def _inputs(case: str, dtype: torch.dtype, seed: int = 0) -> tuple[dict, dict]:
    """(the call on CPU, its float64 twin for the reference: same values)."""
    lq, lk, extra = CASES[case]
    g = torch.Generator().manual_seed(seed)
    b, sq, sk = len(lq), max(lq), max(lk)
    kw: dict = {
        "q": (0.5 * torch.randn(sum(lq), 4, 3, generator=g)).to(dtype),
        "k": (0.5 * torch.randn(sum(lk), 2, 3, generator=g)).to(dtype),
        "v": torch.randn(sum(lk), 2, 5, generator=g).to(dtype),
        "cu_seqlens_q": _cu(lq), "cu_seqlens_k": _cu(lk), "seqused_q": None, "seqused_k": None,
        "max_seqlen_q": sq, "max_seqlen_k": sk, "scaling_seqlen": -1,
        "num_contexts": None, "num_targets": None,
    }  # fmt: skip
    for name, val in extra.items():
        if name == "rab":
            kw["rab"] = torch.randn(b, val, sk, sk, generator=g).to(dtype)
        elif name == "func":
            hf, nf = val
            kw["func"] = torch.randint(-1, sk + 2, (hf, nf, sum(lq) + 3), generator=g, dtype=I32)
        elif isinstance(val, list):
            kw[name] = torch.tensor(val, dtype=I32)
        else:
            kw[name] = val
    ref = {n: (t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t)
           for n, t in kw.items()}  # fmt: skip
    return kw, ref


def _run(kw: dict, device: str, grads: tuple[str, ...]) -> tuple[torch.Tensor, list]:
    ours = {n: (t.to(device) if isinstance(t, torch.Tensor) else t) for n, t in kw.items()}
    for n in grads:
        ours[n] = ours[n].detach().requires_grad_()
    out = hstu_attn_varlen_func(**ours)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(9)).to(device, out.dtype)
    got = torch.autograd.grad((out * w).float().sum(), [ours[n] for n in grads])
    return out, list(got)


def _want(ref: dict, grads: tuple[str, ...]) -> tuple[torch.Tensor, list]:
    ref = dict(ref)
    for n in grads:
        ref[n] = ref[n].detach().requires_grad_()
    out = hstu_varlen_reference(**ref)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(9)).to(F64)
    return out, list(torch.autograd.grad((out * w).sum(), [ref[n] for n in grads]))


@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_the_reference(case: str, device: str) -> None:
    kw, ref = _inputs(case, torch.float32)
    grads = ("q", "k", "v") + (("rab",) if kw.get("has_drab") else ())
    out, got = _run(kw, device, grads)
    want, want_grads = _want(ref, grads)
    assert out.device.type == device
    _close(out, want, torch.float32, f"{case}: out")
    for n, a, b in zip(grads, got, want_grads, strict=True):
        _close(a, b, torch.float32, f"{case}: d{n}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", ["targets_group", "delta_causal", "func"])
def test_half_dtypes(case: str, dtype: torch.dtype) -> None:
    kw, ref = _inputs(case, dtype, seed=1)
    grads = ("q", "k", "v", "rab")
    out, got = _run(kw, "npu", grads)
    want, want_grads = _want(ref, grads)
    assert out.dtype == dtype
    _close(out, want, dtype, f"{case}: out")
    for n, a, b in zip(grads, got, want_grads, strict=True):
        assert a.dtype == dtype
        _close(a, b, dtype, f"{case}: d{n}")


def test_rows_outside_the_used_sequences_are_zero() -> None:
    """seqused leaves rows of a segment unused, cu_seqlens_q may end before q's last row: 0
    there, in the output and in the gradients (upstream leaves the output rows unwritten)."""
    kw, _ = _inputs("seqused", torch.float32)
    kw["q"] = torch.cat([kw["q"], torch.randn(2, 4, 3)])  # 2 rows past cu_seqlens_q[-1]
    out, (dq, dk, _) = _run(kw, "npu", ("q", "k", "v"))
    unused_q = [2, 3, 11, 12, 13]  # segments [0, 4), [4, 7), [7, 12): 2, 3, 4 used; the tail
    unused_k = [3]  # segments [0, 4), [4, 9), [9, 15): 3, 5, 6 used
    assert out[unused_q].abs().max() == 0 and dq[unused_q].abs().max() == 0
    assert dk[unused_k].abs().max() == 0 and out.abs().sum() > 0


def _paged_inputs(seed: int) -> tuple[dict, dict]:
    """upstream's generate_paged_kv_input in small: new history + targets as q (and the targets'
    k / v), the cache holding the old and new history in shuffled pages of 3."""
    g = torch.Generator().manual_seed(seed)
    page, new, targets, old = 3, [3, 1, 2], [2, 0, 1], [5, 2, 0]
    lq = [h + t for h, t in zip(new, targets, strict=True)]
    cached = [o + h for o, h in zip(old, new, strict=True)]
    lk = [c + t for c, t in zip(cached, targets, strict=True)]
    pages = [-(-c // page) for c in cached]
    kw = {
        "q": torch.randn(sum(lq), 2, 4, generator=g), "k": torch.randn(sum(lq), 2, 4, generator=g),
        "v": torch.randn(sum(lq), 2, 4, generator=g), "cu_seqlens_q": _cu(lq),
        "cu_seqlens_k": _cu(lk), "seqused_q": None, "seqused_k": None, "max_seqlen_q": max(lq),
        "max_seqlen_k": max(lk), "scaling_seqlen": -1, "num_contexts": None,
        "num_targets": torch.tensor(targets), "window_size": (-1, 0), "alpha": 0.5,
        "kv_cache": torch.randn(sum(pages) + 1, 2, page, 2, 4, generator=g),
        "page_offsets": _cu(pages), "page_ids": torch.randperm(sum(pages) + 1, generator=g)[
            : sum(pages)].to(I32),
        "last_page_lens": torch.tensor([(c - 1) % page + 1 for c in cached], dtype=I32),
    }  # fmt: skip
    ref = {n: (t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t)
           for n, t in kw.items()}  # fmt: skip
    return kw, ref


@pytest.mark.parametrize("device", ["npu", "cpu"])
def test_paged_kv_cache(device: str) -> None:
    kw, ref = _paged_inputs(3)
    with torch.no_grad():
        out = hstu_attn_varlen_func(**{n: (t.to(device) if isinstance(t, torch.Tensor) else t)
                                       for n, t in kw.items()})  # fmt: skip
    _close(out, hstu_varlen_reference(**ref), torch.float32, "paged")


def test_paged_kv_cache_has_no_backward() -> None:
    kw, _ = _paged_inputs(4)
    ours = {n: (t.npu() if isinstance(t, torch.Tensor) else t) for n, t in kw.items()}
    ours["q"].requires_grad_()
    out = hstu_attn_varlen_func(**ours)
    with pytest.raises(RuntimeError, match="hstu_attn_varlen_func: argument 'kv_cache'"):
        out.sum().backward()


@pytest.mark.parametrize("has_drab", [False, True])
def test_qkvpacked_matches_the_reference(has_drab: bool) -> None:
    g = torch.Generator().manual_seed(5)
    lengths = [3, 0, 4]
    qkv = 0.5 * torch.randn(7, 3, 2, 4, generator=g)
    rab = torch.randn(3, 1, 4, 4, generator=g)
    sizes = (_cu(lengths), _cu(lengths), None, None, 4, 4)
    qd, rd = qkv.double().requires_grad_(), rab.double().requires_grad_(has_drab)
    want = hstu_varlen_reference(qd[:, 0], qd[:, 1], qd[:, 2], *sizes, -1, None, None, 1,
                                 (-1, 0), 1.0, rd, has_drab)  # fmt: skip
    qn, rn = qkv.npu().requires_grad_(), rab.npu().requires_grad_(has_drab)
    on = [s.npu() if isinstance(s, torch.Tensor) else s for s in sizes]
    out = hstu_attn_qkvpacked_func(qn, *on, -1, None, None, 1, (-1, 0), 1.0, rn, has_drab)
    _close(out, want, torch.float32, "packed out")
    w = torch.randn(want.shape, generator=g, dtype=F64)
    ins_ref, ins = ([qd, rd], [qn, rn]) if has_drab else ([qd], [qn])
    a = torch.autograd.grad((want * w).sum(), ins_ref)
    b = torch.autograd.grad((out.double() * w.npu()).sum(), ins)
    assert b[0].shape == qkv.shape
    for x, y in zip(b, a, strict=True):
        _close(x, y, torch.float32, "packed grads")


def test_cuda_hstu_attn_varlen_both_modes() -> None:
    kw, ref = _inputs("context_targets", torch.float32)
    nt = kw["num_targets"]
    args = [kw[n] for n in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")]
    rest = (None, None, kw["max_seqlen_q"], kw["max_seqlen_k"], -1, nt.npu(), (-1, 0), 1.0)
    want = hstu_varlen_reference(**{**ref, "num_contexts": None, "window_size": (-1, 0)})
    for train in (True, False):
        out = cuda_hstu_attn_varlen(*(t.npu() for t in args), *rest, is_train=train)
        _close(out, want, torch.float32, f"is_train={train}")
