"""The fused Triton HSTU attention (mxrec/hstu/_triton_attention.py: 1 launch forward, 2 backward)
under Triton's interpreter, hooked at the tile program so every op built on it runs it.

* parity: each op under ``kernel_mode("triton")`` against the float64 references written from
  the math (conformance/specs/mxrec/hstu/reference.py, its hstu_v2 and fbgemm/hstu_varlen
  siblings) and against the tensor program (``kernel_mode("tensor")``): outputs, gradients of
  q, k, v and the bias, on npu and CPU tensors: causal, none, the custom mask, context and
  targets (group sizes 0, 1, 2), windows (max_attn_len), arbitrary intervals shared and per
  head, rab with alpha and scale, GQA, rab heads shared by q heads (the summed dbias), rab
  padded past the keys, q shorter than k, an empty sequence, non-contiguous inputs, 16-row
  blocks (several blocks per sequence: the key-block skipping of causal rows and windows);
* budgets: ``assert_triton_budget`` per op and label, exact;
* fallback: ``auto`` runs the tensor program (no ``triton.*`` launch); what the kernels do not
  take (float64, a head dim over 256) runs it under ``triton`` too.

Tolerance: ``|ours - ref| <= TOL * max|ref|`` (gradients ``5 * TOL``), as the ops' own tests.
"""

from __future__ import annotations

import pytest
import torch

from conformance.specs.fbgemm.hstu_varlen.reference import hstu_varlen_reference
from conformance.specs.mxrec.hstu.reference import (
    hstu_delta_reference,
    hstu_dense_reference,
    hstu_jagged_reference,
)
from conformance.specs.mxrec.hstu_v2.reference import hstu_forward_v2_reference
from fbgemm_npu.native._triton import kernel_mode
from fbgemm_npu.testing.budgets import assert_triton_budget
from fbgemm_npu.testing.counters import count

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")

from fbgemm_npu.native.mxrec.hstu import _attention  # noqa: E402
from fbgemm_npu.native.mxrec.hstu import _triton_attention as T  # noqa: E402

F64 = torch.float64
TOL = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}
OFF = [0, 30, 30, 51]  # lengths 30, 0, 21: 2 blocks of 16 rows, an empty sequence
S, NQ, NK, D = 32, 2, 1, 16


@pytest.fixture(autouse=True)
def _blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(T, "BLOCK", 16)  # several key / query blocks per sequence


def _rand(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _run(fn, leaves: list[torch.Tensor], w: torch.Tensor, mode: str):  # type: ignore[no-untyped-def]
    """``fn(*leaves)`` and the gradients of ``sum(out * w)`` with respect to the leaves."""
    xs = [x.detach().clone().requires_grad_() for x in leaves]
    with kernel_mode(mode):
        out = fn(*xs)
        (out.double() * w.to(out.device)).sum().backward()
    return out.detach().double().cpu(), [x.grad.double().cpu() for x in xs]


def _close(got, want, dtype: torch.dtype, factor: float = 1.0) -> None:  # type: ignore[no-untyped-def]
    tol = factor * TOL[dtype] * (want.abs().max().item() + 1e-3)
    torch.testing.assert_close(got, want, rtol=0, atol=tol)


def _check(fn, ref_fn, leaves: list[torch.Tensor], w: torch.Tensor, dtype: torch.dtype) -> None:  # type: ignore[no-untyped-def]
    """Triton vs the float64 reference and vs the tensor program, outputs and gradients."""
    ref, ref_grads = _run(ref_fn, [x.double().cpu() for x in leaves], w.cpu(), "tensor")
    out, grads = _run(fn, leaves, w, "triton")
    out_t, grads_t = _run(fn, leaves, w, "tensor")
    _close(out, ref, dtype)
    _close(out, out_t, dtype)
    for a, b, c in zip(grads, ref_grads, grads_t, strict=True):
        _close(a, b, dtype, 5.0)
        _close(a, c, dtype, 5.0)


JAGGED = {
    "causal": {},
    "none": {"mask_type": 2},
    "custom": {"mask_type": 3, "mask": True},
    "ctx_targets_g2": {"num_context": [3, 0, 2], "num_target": [5, 0, 6], "target_group_size": 2},
    "ctx_targets_g1": {"num_context": [1, 0, 4], "num_target": [3, 0, 2], "target_group_size": 1},
    "targets_g0": {"num_target": [4, 0, 3], "target_group_size": 0},
    "bias_alpha_scale": {"attn_bias": True, "alpha": 0.5, "silu_scale": 0.25},
}
CASES = [(n, torch.float32, "npu") for n in JAGGED] + [
    ("bias_alpha_scale", torch.float16, "npu"),
    ("ctx_targets_g2", torch.bfloat16, "npu"),
    ("ctx_targets_g2", torch.float32, "cpu"),
    ("custom", torch.float16, "cpu"),
]


@pytest.mark.parametrize(("name", "dtype", "device"), CASES, ids=str)
def test_jagged_matches_the_reference_and_the_tensor_program(name, dtype, device) -> None:  # type: ignore[no-untyped-def]
    cfg, b, t = JAGGED[name], len(OFF) - 1, OFF[-1]
    kw: dict = {"max_seq_len": S}
    for n, val in cfg.items():
        kw[n] = torch.tensor(val) if isinstance(val, list) else val
    mask = (torch.rand(b, NQ, S, S, generator=torch.Generator().manual_seed(3)) > 0.3).double()
    bias = _rand(b, NQ, S, S, seed=4)
    leaves = [_rand(t, NQ, D, seed=0), _rand(t, NK, D, seed=1), _rand(t, NK, 24, seed=2)]
    if "attn_bias" in cfg:
        leaves.append(bias)
    leaves = [x.to(device, dtype) for x in leaves]

    def call(ref: bool):  # type: ignore[no-untyped-def]
        def fn(q, k, v, *rest):  # type: ignore[no-untyped-def]
            dev, dt = q.device, q.dtype
            args = {n: (x.to(dev) if isinstance(x, torch.Tensor) else x) for n, x in kw.items()}
            if "mask" in cfg:
                args["mask"] = mask.to(dev, dt)
            args["attn_bias"] = rest[0] if rest else None
            off = torch.tensor(OFF, device=dev)
            if ref:
                return hstu_jagged_reference(q, k, v, off, **args)
            return torch.ops.mxrec.hstu_jagged(q, k, v, seq_offset=off, **args)

        return fn

    _check(call(False), call(True), leaves, _rand(t, NQ, 24, seed=5), dtype)


@pytest.mark.parametrize(("mask_type", "dtype"), [(0, torch.float32), (3, torch.bfloat16)])
def test_dense_with_rab(mask_type: int, dtype: torch.dtype) -> None:
    b, s = 2, 40
    leaves = [_rand(b, s, 2, D, seed=0), _rand(b, s, 2, D, seed=1), _rand(b, s, 2, 32, seed=2)]
    leaves = [x.to("npu", dtype) for x in [*leaves, _rand(b, 2, s, s, seed=3)]]
    mask = (torch.rand(b, 2, s, s, generator=torch.Generator().manual_seed(3)) > 0.4).double()

    def fn(q, k, v, bias, ref=False):  # type: ignore[no-untyped-def]
        m = mask.to(q.device, q.dtype)
        f = hstu_dense_reference if ref else torch.ops.mxrec.hstu_dense
        return f(q, k, v, m, bias, mask_type, 0, 0.3)

    _check(fn, lambda *a: fn(*a, ref=True), leaves, _rand(b, s, 2, 32, seed=5), dtype)


def test_delta_q_shorter_than_k_with_context_targets_and_bias() -> None:
    oq, ok = [0, 9, 9, 29], [0, 30, 35, 60]  # q lengths 9, 0, 20 of k lengths 30, 5, 25
    sq, sk = 20, 30
    leaves = [_rand(29, NQ, D, seed=0), _rand(60, NK, D, seed=1), _rand(60, NK, D, seed=2)]
    leaves = [x.npu().float() for x in [*leaves, _rand(3, NQ, sq, sk, seed=3)]]
    kw = {
        "max_seq_len": sq, "max_seq_len_k": sk, "num_context": torch.tensor([2, 0, 3]),
        "num_target": torch.tensor([4, 0, 5]), "target_group_size": 2, "alpha": 0.7,
    }  # fmt: skip

    def fn(q, k, v, bias, ref=False):  # type: ignore[no-untyped-def]
        dev = q.device
        a = {n: (x.to(dev) if isinstance(x, torch.Tensor) else x) for n, x in kw.items()}
        offs = {
            "seq_offset": torch.tensor(oq, device=dev),
            "seq_offset_k": torch.tensor(ok, device=dev),
        }
        if ref:
            return hstu_delta_reference(q, k, v, attn_bias=bias, **offs, **a)
        return torch.ops.mxrec.hstu_jagged.delta(q, k, v, attn_bias=bias, **offs, **a)

    _check(fn, lambda *a: fn(*a, ref=True), leaves, _rand(29, NQ, D, seed=5), torch.float32)


V2 = {
    "max_attn_len": {"window_size_left": 5, "window_size_right": 0},
    "symmetric_window": {"window_size_left": 7, "window_size_right": 3},
    "arbitrary_heads": {"arbitrary_func": "heads"},
    "rab": {"rab": True, "alpha": 0.5, "silu_scale": 0.2},
}  # fmt: skip


@pytest.mark.parametrize("name", list(V2))
def test_v2_windows_intervals_and_rab(name: str) -> None:
    oq, ok, sq, sk = [0, 20, 20, 44], [0, 28, 30, 60], 24, 30
    cfg = V2[name]
    g = torch.Generator().manual_seed(7)
    heads = torch.randint(0, sk + 2, (3, NQ, sq, 6), generator=g, dtype=torch.int32)
    leaves = [_rand(44, NQ, D, seed=0), _rand(60, NK, D, seed=1), _rand(60, NK, D, seed=2)]
    if "rab" in cfg:
        leaves.append(_rand(3, NQ, sq, sk, seed=3))
    leaves = [x.npu().float() for x in leaves]

    def fn(q, k, v, *rab, ref=False):  # type: ignore[no-untyped-def]
        dev = q.device
        kw: dict = {"max_seq_len": sq, "max_seq_len_k": sk}
        kw["seq_offset"] = torch.tensor(oq, device=dev, dtype=torch.int32)
        kw["seq_offset_k"] = torch.tensor(ok, device=dev)
        for n, val in cfg.items():
            kw[n] = heads.to(dev) if val == "heads" else rab[0] if val is True else val
        f = hstu_forward_v2_reference if ref else torch.ops.mxrec.hstu_forward_v2
        return f(q, k, v, **kw)

    _check(fn, lambda *a: fn(*a, ref=True), leaves, _rand(44, NQ, D, seed=5), torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_varlen_shared_rab_heads_and_padded_drab(dtype: torch.dtype) -> None:
    """H = 4 q heads over 1 rab head (dbias summed over 4 heads in one program), 2 kv heads, a
    window; the backward op's rab_padded (last dim rounded up to 8: dbias wider than the keys)."""
    cu, s, h = torch.tensor([0, 21, 21, 45], dtype=torch.int32), 24, 4
    q, k, v = (_rand(45, n, D, seed=i).npu().to(dtype) for i, n in enumerate((h, 2, 2)))
    rab = _rand(3, 1, s, s, seed=3).npu().to(dtype)
    kw = {"window_size_left": 6, "window_size_right": 0, "alpha": 0.5}
    common = (cu.npu(), cu.npu(), None, None, s, s)
    ref = hstu_varlen_reference(q.cpu().double(), k.cpu().double(), v.cpu().double(), cu, cu,
                                max_seqlen_q=s, max_seqlen_k=s, rab=rab.cpu().double(),
                                window_size=(6, 0), alpha=0.5)  # fmt: skip
    dout = _rand(45, h, D, seed=5).npu().to(dtype)
    results = {}
    for mode in ("triton", "tensor"):
        with kernel_mode(mode):
            out, rab_padded = torch.ops.fbgemm.hstu_varlen_fwd_80(q, k, v, *common, rab=rab, **kw)
            grads = torch.ops.fbgemm.hstu_varlen_bwd_80(
                dout, q, k, v, *common, rab=rab_padded, has_drab=True, **kw
            )
        results[mode] = [out, *grads]
    _close(results["triton"][0].double().cpu(), ref.double(), dtype)
    for a, b in zip(results["triton"], results["tensor"], strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        _close(a.double().cpu(), b.double().cpu(), dtype, 5.0)


def _problem(dtype: torch.dtype, bias_heads: int, device: str = "npu") -> _attention.Problem:
    """A padded problem with non-contiguous q / k (strided views), GQA 4 / 2, a bias of
    ``bias_heads`` heads padded past S_q / S_k (dbias keeps its shape), window + context +
    targets spans (the tile program's rules: no op takes a window with targets today)."""
    from fbgemm_npu.native.mxrec.hstu._spans import build_spans

    b, s = 2, 20
    base = _rand(b, s, 4, 2 * D, seed=0).to(device, dtype)
    k = _rand(b, 2, s, D, seed=1).to(device, dtype).transpose(1, 2)  # [B, S, N_k, D] strided
    v = _rand(b, s, 2, D, seed=2).to(device, dtype)
    bias = _rand(b, bias_heads, s + 4, s + 8, seed=3).to(device, dtype)
    lengths = torch.tensor([20, 13], device=device)
    counts = {n: torch.tensor(c, device=device) for n, c in (("num_context", [2, 1]),
                                                              ("num_target", [5, 4]))}  # fmt: skip
    # a window (max_attn_len 5) with context and targets in groups of 2: two intervals a row
    spans = build_spans(s, s, torch.device(device), lengths, window=(5, 0), group=2, **counts)
    return _attention.Problem(base[..., ::2], k, v, spans, None, bias, 0.25, 0.8)


@pytest.mark.parametrize(("dtype", "bias_heads"), [(torch.float32, 1), (torch.bfloat16, 2),
                                                   (torch.float32, 4)])  # fmt: skip
def test_tile_program_non_contiguous_gqa_and_padded_bias(dtype, bias_heads) -> None:  # type: ignore[no-untyped-def]
    p = _problem(dtype, bias_heads)
    assert not p.q.is_contiguous() and not p.k.is_contiguous()
    grad = _rand(2, 20, 4, D, seed=6).to("npu", dtype)
    with kernel_mode("tensor"):
        want = [_attention.attention_forward(p), *_attention.attention_backward(p, grad)]
    with kernel_mode("triton"), count("npu") as c:
        got = [_attention.attention_forward(p), *_attention.attention_backward(p, grad)]
    fused = ["triton.hstu_attention_fwd", "triton.hstu_attention_bwd_dkdv"]
    assert c.launch_ops == [*fused, "triton.hstu_attention_bwd_dq"]
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        _close(a.double().cpu(), b.double().cpu(), dtype, 5.0)


JAGGED_ARGS = {"max_seq_len": S, "alpha": 0.5}


def _jagged(path: str | None, op: str):  # type: ignore[no-untyped-def]
    b, t = len(OFF) - 1, OFF[-1]
    q, k, v = (_rand(t, n, D, seed=i).float().npu() for i, n in enumerate((NQ, NK, NK)))
    kw = {**JAGGED_ARGS, "seq_offset": torch.tensor(OFF).npu()}
    kw["attn_bias"] = _rand(b, NQ, S, S, seed=3).float().npu()
    if path == "context_targets":
        ones = torch.ones(b, dtype=torch.int64).npu()
        kw.update(num_context=ones, num_target=ones, target_group_size=1)
    if op.startswith("mxrec::hstu_jagged."):
        return lambda: torch.ops.mxrec.hstu_jagged(q, k, v, **kw)
    grad = _rand(t, NQ, D, seed=5).float().npu()
    return lambda: torch.ops.mxrec.hstu_jagged_backward(grad, q, k, v, **kw)


# the data checks off (Budget.triton's definition; the checks are the tensor path's, held there)
@pytest.mark.parametrize("path", [None, "context_targets"])
@pytest.mark.parametrize("op", ["mxrec::hstu_jagged.equal", "mxrec::hstu_jagged_backward.equal"])
def test_jagged_triton_budget(op, path, no_validation) -> None:  # type: ignore[no-untyped-def]
    fn = _jagged(path, op)
    with kernel_mode("triton"):
        fn()  # warm: the index caches
    assert_triton_budget(fn, op, path or "call")


@pytest.mark.parametrize("mask_type", [0, 2])
@pytest.mark.parametrize("op", ["mxrec::hstu_dense", "mxrec::hstu_dense_backward"])
def test_dense_triton_budget(op: str, mask_type: int) -> None:
    q = _rand(2, S, 2, D, seed=0).float().npu()
    bias = _rand(2, 2, S, S, seed=1).float().npu()
    if op == "mxrec::hstu_dense":
        fn = lambda: torch.ops.mxrec.hstu_dense(q, q, q, None, bias, mask_type)  # noqa: E731
    else:
        fn = lambda: torch.ops.mxrec.hstu_dense_backward(q, q, q, q, None, bias, mask_type)  # noqa: E731
    with kernel_mode("triton"):
        fn()
    assert_triton_budget(fn, op, "call" if mask_type == 0 else "unmasked")


@pytest.mark.parametrize("path", [None, "context_targets"])
@pytest.mark.parametrize("op", ["mxrec::hstu_jagged.delta", "mxrec::hstu_jagged_backward.delta"])
def test_delta_triton_budget(op: str, path: str | None, no_validation: None) -> None:
    q, k, v = (_rand(n, h, D, seed=n).float().npu() for n, h in ((9, NQ), (20, NK), (20, NK)))
    kw: dict = {"max_seq_len": 5, "max_seq_len_k": 10}
    kw["seq_offset"], kw["seq_offset_k"] = (
        torch.tensor([0, 5, 9]).npu(),
        torch.tensor([0, 10, 20]).npu(),
    )
    if path:
        ones = torch.ones(2, dtype=torch.int64).npu()
        kw.update(num_context=ones, num_target=ones, target_group_size=1)
    if "backward" in op:
        fn = lambda: torch.ops.mxrec.hstu_jagged_backward.delta(q, q, k, v, **kw)  # noqa: E731
    else:
        fn = lambda: torch.ops.mxrec.hstu_jagged.delta(q, k, v, **kw)  # noqa: E731
    with kernel_mode("triton"):
        fn()
    assert_triton_budget(fn, op, path or "call")


def test_auto_runs_the_tensor_program() -> None:
    fn = _jagged(None, "mxrec::hstu_jagged_backward.equal")
    with kernel_mode("auto"), count("npu") as c:
        fn()
    assert c.launches > 0 and not [n for n in c.launch_ops if n.startswith("triton.")]


@pytest.mark.parametrize("case", ["float64_cpu", "head_dim_300"])
def test_unsupported_calls_fall_back_under_triton(case: str) -> None:
    if case == "float64_cpu":  # v2 takes float64 on CPU (gradcheck); the kernels do not
        q = _rand(6, 2, 8, seed=0)
        kw = {"max_seq_len": 6, "seq_offset": torch.tensor([0, 6], dtype=torch.int32)}
        fn = lambda: torch.ops.mxrec.hstu_forward_v2(q, q, q, **kw)  # noqa: E731
        ref = hstu_forward_v2_reference(q, q, q, **kw)
        device = "cpu"
    else:
        q = _rand(1, 4, 1, 300, seed=0).float().npu()
        fn = lambda: torch.ops.mxrec.hstu_dense(q, q, q)  # noqa: E731
        ref = hstu_dense_reference(q.cpu().double(), q.cpu().double(), q.cpu().double())
        device = "npu"
    with kernel_mode("triton"), count(device) as c:
        out = fn()
    assert not [n for n in c.launch_ops if n.startswith("triton.")], c.launch_ops
    _close(out.double().cpu(), ref.double(), torch.float32)


def test_programs_loop_over_the_work_past_the_grid_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grids are ``min(work, 65535)`` programs (Ascend's coreDim), each looping over its share:
    capped at 3 here, every launch of a GQA problem with a summed dbias gives the tensor
    program's results; a size past 65535 programs is taken (sizes only: stride-0 stand-ins)."""
    monkeypatch.setattr(T, "MAX_PROGRAMS", 3)
    test_tile_program_non_contiguous_gqa_and_padded_bias(torch.float32, 1)
    big = torch.zeros(1, 16, 1, 16).expand(40000, 16, 2, 16)
    assert _attention.triton_supported(_attention.Problem(big, big, big, None))
    assert T._work(1, 80000) == ((3,), 1, 80000)
