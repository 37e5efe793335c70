"""The fused Triton path of the sparse-data permutes (``permute/_triton_permute.py``) under the
interpreter: outputs equal to the tensor program, to upstream's CPU kernel and to the loop
reference of ``testing/permute_inputs.py``, for every op that runs ``permute_rows`` (npu tensors,
and CPU tensors through the registered kernel function), every value / weight / lengths dtype,
repeats and drops, strided inputs, multi-block scans and capped grids; gradients; the data
checks computed in the offsets kernel; the launch budget per label (exact) and the fallbacks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.native._triton import kernel_mode
from fbgemm_npu.native.fbgemm.permute import _gather
from fbgemm_npu.native.fbgemm.permute import permute as ours
from fbgemm_npu.testing.budgets import assert_budget, assert_triton_budget, budget_of
from fbgemm_npu.testing.counters import count
from fbgemm_npu.testing.permute_inputs import on_npu, permute_2d_reference, sparse_batch

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")
_tp = pytest.importorskip("fbgemm_npu.native.fbgemm.permute._triton_permute")

F = torch.ops.fbgemm
P2D = "fbgemm::permute_2D_sparse_data"
UNSIZED = "no_permuted_lengths_sum"


def _fused(c: Any) -> list[str]:
    return [n for n in c.launch_ops if n.startswith("triton.")]


def _same(got: Any, want: Any) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g is None) == (w is None), i
        if w is not None:
            assert g.dtype == w.dtype and g.shape == w.shape, (i, g.dtype, w.dtype, g.shape)
            assert torch.equal(g.cpu(), w.cpu()), (i, g.cpu(), w.cpu())


def _batch(t_in: int = 4, b: int = 3, seed: int = 0, **kw: Any) -> dict[str, Any]:
    d = sparse_batch(t_in, b, seed=seed, weights=True)
    d.update(kw)
    return d


def _pls(d: dict[str, Any]) -> int:
    return int(d["lengths"][d["permute"].long()].sum())


def _p2d(d: dict[str, Any], sized: bool = True, weights: bool = True) -> Callable[[], Any]:
    dev = on_npu(d)
    pls = _pls(d) if sized else None
    w = dev["weights"] if weights else None
    return lambda: F.permute_2D_sparse_data(dev["permute"], dev["lengths"], dev["values"], w, pls)


def _hold(fn: Callable[[], Any], op: str, label: str, sized: bool) -> list[Any]:
    """``fn`` held to the Triton budget ``label`` exactly; its output.  Unsized calls read the
    output size back (the op's one sync), which ``assert_triton_budget`` does not allow."""
    got: list[Any] = []
    call = lambda: got.append(fn())  # noqa: E731
    if sized:
        assert_triton_budget(call, op, label)
    else:
        from fbgemm_npu.native._checks import validation_enabled

        with kernel_mode("triton"):
            limit = budget_of(op).triton_limit(validation_enabled(), label)
            c = assert_budget(call, launches=limit, syncs=1)
        assert c.launches == limit and len(_fused(c)) == limit and not c.ai_cpu, c.summary()
    return got[0]


LABELS = [
    ("call", True, True, False),
    ("no_weights", True, False, False),
    (UNSIZED, False, True, False),
    (f"no_weights + {UNSIZED}", False, False, False),
    ("strided_lengths", True, True, True),
]


@pytest.mark.parametrize(
    ("label", "sized", "weights", "strided"), LABELS, ids=[c[0] for c in LABELS]
)
def test_2d_parity_and_budget(label: str, sized: bool, weights: bool, strided: bool) -> None:
    d = _batch(permute=torch.tensor([3, 0, 0, 2, 1], dtype=torch.int32))  # a repeat
    if strided:
        d["lengths"] = d["lengths"].t().contiguous().t()
    got = _hold(_p2d(d, sized, weights), P2D, label, sized)
    with kernel_mode("tensor"):
        _same(got, _p2d(d, sized, weights)())
    w = d["weights"] if weights else None
    pls = _pls(d) if sized else None
    cpu = (d["permute"], d["lengths"].contiguous(), d["values"], w, pls)
    _same(got, F.permute_2D_sparse_data(*cpu))  # upstream's CPU kernel
    _same(got, permute_2d_reference(*cpu))


@pytest.mark.parametrize("validate", [False, True], ids=["checks_off", "checks_on"])
def test_budget_checks_cost_nothing(monkeypatch: pytest.MonkeyPatch, validate: bool) -> None:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "1" if validate else "0")
    _hold(_p2d(_batch()), P2D, "call", True)
    _hold(_p2d(_batch(), sized=False), P2D, UNSIZED, False)


DTYPES = [
    (torch.int64, torch.int32, torch.float32, torch.int32),
    (torch.int32, torch.int64, torch.float16, torch.int64),
    (torch.int64, torch.float32, torch.bfloat16, torch.int32),
    (torch.int32, torch.float16, torch.float64, torch.int64),
    (torch.int64, torch.bfloat16, torch.int64, torch.int32),
    (torch.int32, torch.int32, torch.int32, torch.int64),
]


@pytest.mark.parametrize(("ldt", "vdt", "wdt", "pdt"), DTYPES, ids=[str(i) for i in range(6)])
def test_dtypes(ldt: torch.dtype, vdt: torch.dtype, wdt: torch.dtype, pdt: torch.dtype) -> None:
    """Every lengths / values / weights / permute dtype, bits copied exactly (NaN payloads,
    -0.0 included); 2-D weights on two of them."""
    d = _batch(5, 2, seed=1)
    d["lengths"], d["permute"] = d["lengths"].to(ldt), torch.tensor([4, 1, 1, 0], dtype=pdt)
    n = d["values"].numel()
    d["values"] = (torch.randn(n) * 100).to(vdt)
    if vdt.is_floating_point:
        d["values"][:3] = torch.tensor([float("nan"), -0.0, float("inf")], dtype=vdt)
    w = torch.randn(n, 3) if wdt in (torch.float16, torch.float64) else torch.randn(n)
    d["weights"] = (w * 100).to(wdt)
    with kernel_mode("triton"), count("npu") as c:
        got = _p2d(d)()
    assert len(_fused(c)) == 2, c.summary()
    want = permute_2d_reference(d["permute"], d["lengths"], d["values"], d["weights"])
    for g, w_ in zip(got, want, strict=True):  # bitwise: NaN == NaN
        assert g.dtype == w_.dtype and g.shape == w_.shape
        assert torch.equal(_bits(g.cpu()), _bits(w_))


def _bits(t: torch.Tensor) -> torch.Tensor:
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.view(ints[t.element_size()]) if t.dtype.is_floating_point else t


def _flat_calls(d: dict[str, Any]) -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """Each op over ``permute_rows`` with its arguments (CPU tensors)."""
    p, lengths, v, w = d["permute"], d["lengths"], d["values"], d["weights"]
    flat = lengths.reshape(-1)
    pls1 = int(flat[p.long()].sum())
    perm_rows = torch.tensor([2, 0, 1], dtype=torch.int32)
    rows = lengths.reshape(-1, 3)
    pls_in = int(rows[perm_rows.long()].sum())
    plsf = _pls(d)
    return {
        "permute_1D_sparse_data": (F.permute_1D_sparse_data, (p, flat, v, w, pls1)),
        "permute_2D_sparse_data_input1D": (
            F.permute_2D_sparse_data_input1D,
            (perm_rows, flat, v, 3, w, pls_in),
        ),
        "permute_sparse_data": (F.permute_sparse_data, (p, lengths, v, w, plsf)),
        "permute_sparse_features": (F.permute_sparse_features, (p, lengths, v, w)),
        "permute_sequence_embeddings": (F.permute_sequence_embeddings, (p, lengths, v)),
    }


OPS = list(_flat_calls(_batch()))


@pytest.mark.parametrize("name", OPS)
def test_other_ops(name: str) -> None:
    d = _batch(4, 3, seed=2)
    fn, args = _flat_calls(d)[name]
    dev = tuple(a.to("npu") if isinstance(a, torch.Tensor) else a for a in args)
    with kernel_mode("triton"), count("npu") as c:
        got = fn(*dev)
    assert len(_fused(c)) == 2, c.summary()
    with kernel_mode("tensor"):
        _same(got, fn(*dev))
    _same(got, fn(*args))  # upstream CPU


def test_preallocated_out() -> None:
    d = _batch(4, 3, seed=4)
    pls = _pls(d)
    dev = on_npu(d)
    outs = [torch.full((4 * 3,), -5, dtype=d["lengths"].dtype, device="npu")]
    outs += [torch.full((pls + 3,), -7, device="npu"), torch.full((pls + 2,), -9.0, device="npu")]
    args = (dev["permute"], dev["lengths"], dev["values"], dev["weights"], pls)
    with kernel_mode("triton"), count("npu") as c:
        got = F.permute_2D_sparse_preallocated_out(*args, *outs)
    assert len(_fused(c)) == 2 and got[1] is outs[1]
    fresh = [o.clone().fill_(-5 if i == 0 else -7 if i == 1 else -9) for i, o in enumerate(outs)]
    with kernel_mode("tensor"):
        _same(got, F.permute_2D_sparse_preallocated_out(*args, *fresh))


def test_cpu_tensors() -> None:
    """The registered kernel function on CPU tensors (torch.ops on CPU is upstream's)."""
    d = _batch(5, 4, seed=5, permute=torch.tensor([1, 4, 4, 0], dtype=torch.int32))
    args = (d["permute"], d["lengths"], d["values"], d["weights"])
    with kernel_mode("triton"):
        for pls in (_pls(d), None):
            _same(ours.permute_2D_sparse_data_npu(*args, pls), F.permute_2D_sparse_data(*args, pls))


EDGES: dict[str, dict[str, Any]] = {
    "drop all but one": {"permute": torch.tensor([2], dtype=torch.int32)},
    "zero lengths": {"lengths": torch.zeros(4, 3, dtype=torch.int64)},
    "values tail": {"values": torch.arange(500), "weights": torch.rand(500)},
    "strided values": {"values": torch.arange(1000)[::2], "weights": torch.rand(1000)[::2]},
    "one column": {"lengths": torch.tensor([[3], [0], [5], [2]])},
}


@pytest.mark.parametrize("case", list(EDGES), ids=list(EDGES))
def test_edge_cases(case: str) -> None:
    d = _batch(4, 3, seed=6)
    d.update(EDGES[case])
    if case != "values tail" and case != "strided values":
        n = int(d["lengths"].sum())
        d["values"], d["weights"] = torch.arange(n), torch.rand(n)
    for sized in (True, False):
        with kernel_mode("triton"), count("npu") as c:
            got = _p2d(d, sized)()
        assert len(_fused(c)) == (1 if _pls(d) == 0 else 2), c.summary()  # no copy of nothing
        args = (d["permute"], d["lengths"], d["values"].contiguous(), d["weights"].contiguous())
        _same(got, F.permute_2D_sparse_data(*args, _pls(d) if sized else None))


def test_multi_block_scans_and_capped_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scans over several blocks (the carry), a grid of fewer programs than segments (each
    program walks its segments), segments longer than a copy block."""
    monkeypatch.setattr(_tp, "SCAN_BLOCK", 16)
    monkeypatch.setattr(_tp, "COPY_BLOCK", 16)
    monkeypatch.setattr(_tp, "MAX_PROGRAMS", 5)
    gen = torch.Generator().manual_seed(7)
    lengths = torch.randint(0, 40, (9, 5), generator=gen)
    n = int(lengths.sum())
    d = {"lengths": lengths, "values": torch.arange(n), "weights": torch.rand(n, 2)}
    d["permute"] = torch.tensor([8, 1, 1, 0, 5, 3, 7], dtype=torch.int32)
    for sized in (True, False):
        with kernel_mode("triton"):
            got = _p2d(d, sized)()
        want = permute_2d_reference(d["permute"], lengths, d["values"], d["weights"])
        _same(got, want)


GRADS = [
    (torch.float32, False, torch.tensor([1, 1, 3], dtype=torch.int32)),  # repeat, drops
    (torch.float16, True, torch.tensor([3, 0, 2, 1], dtype=torch.int32)),  # 2-D weights
    (torch.bfloat16, False, torch.tensor([2, 2, 2, 0, 0], dtype=torch.int64)),
]


@pytest.mark.parametrize(("dtype", "wide", "perm"), GRADS, ids=["f32", "f16_2d", "bf16"])
def test_gradients(dtype: torch.dtype, wide: bool, perm: torch.Tensor) -> None:
    """Forward and backward on the Triton path (offsets + one sum kernel per gradient): the
    gradients of values and weights as the tensor path's and the float64 reference's (repeats
    summed, dropped features and the values' tail zero)."""
    d = _batch(4, 3, seed=8, permute=perm)
    n = d["values"].numel()
    d["values"] = torch.randn(n + 3).to(dtype)  # a tail no segment reads
    d["weights"] = torch.randn(n + 3, *((2,) if wide else ())).to(dtype)
    grads, fused = [], []
    for mode in ("triton", "tensor"):
        v = d["values"].to("npu").requires_grad_()
        w = d["weights"].to("npu").requires_grad_()
        with kernel_mode(mode):
            out = F.permute_2D_sparse_data(d["permute"].to("npu"), d["lengths"].to("npu"), v, w)
            scale = torch.arange(out[1].numel(), device="npu").to(dtype)
            loss = (out[1] * scale).sum() + (out[2] * 3).sum()
            with count("npu") as c:
                loss.backward()
        fused.append(_fused(c))
        grads.append((v.grad.cpu().double(), w.grad.cpu().double()))
    assert fused == [["triton.permute_offsets", "triton.permute_grad", "triton.permute_grad"], []]
    v = d["values"].double().requires_grad_()
    w = d["weights"].double().requires_grad_()
    out = permute_2d_reference(d["permute"], d["lengths"], v, w)
    (out[1] * torch.arange(out[1].numel()).to(dtype).double()).sum().add(
        (out[2] * 3).sum()
    ).backward()
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype != torch.float32 else {}
    for g in grads:
        torch.testing.assert_close(g[0], v.grad, **tol)
        torch.testing.assert_close(g[1], w.grad, **tol)
    assert torch.equal(grads[0][0][n:], torch.zeros(3, dtype=torch.float64))


BAD = [
    (
        {"permute": torch.tensor([0, 4], dtype=torch.int32)},
        r"'permute' must hold indices in \[0, 4\)",
    ),
    ({"permute": torch.tensor([-1, 2], dtype=torch.int32)}, r"'permute' must hold indices"),
    ({"lengths": torch.tensor([[1, -2, 0], [3, 1, 0], [0, 0, 1], [2, 2, 2]])}, "non-negative"),
    ({"lengths": torch.full((4, 3), 2**31 - 1)}, r"sum\(lengths\) must not exceed"),
    ({"lengths": torch.full((4, 3), 3)}, r"sum\(lengths\) must not exceed values.numel\(\)"),
]


@pytest.mark.parametrize(("over", "match"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_data_checks_in_the_kernel(over: dict[str, Any], match: str) -> None:
    """Bad data: sized, the queued flag fails by name (RuntimeError); unsized, the size's read
    raises the failed condition (ValueError).  Either way memory stays in bounds."""
    d = _batch(4, 3, seed=9)
    d["values"], d["weights"] = torch.arange(20), torch.rand(20)
    d.update(over)
    dev = on_npu(d)
    args = (dev["permute"], dev["lengths"], dev["values"], dev["weights"])
    with kernel_mode("triton"):
        with pytest.raises(RuntimeError, match=f"{P2D}: .*{match}"):
            F.permute_2D_sparse_data(*args, 5)
            fbgemm_npu.check()
        with pytest.raises(ValueError, match=f"{P2D}: .*{match}"):
            F.permute_2D_sparse_data(*args)


def test_wrong_permuted_lengths_sum() -> None:
    d = _batch(4, 3, seed=10)
    with kernel_mode("triton"):
        with pytest.raises(RuntimeError, match=f"{P2D}: .*'permuted_lengths_sum' \\(3\\) must eq"):
            dev = on_npu(d)
            F.permute_2D_sparse_data(dev["permute"], dev["lengths"], dev["values"], None, 3)
            fbgemm_npu.check()


def test_auto_and_wide_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    fn = _p2d(_batch())
    with kernel_mode("auto"), count("npu") as c:
        fn()
    assert not _fused(c)
    monkeypatch.setattr(_gather, "INT32_LIMIT", 16)  # as if the sizes passed 2**31
    with kernel_mode("triton"), count("npu") as c:
        fn()
    assert not _fused(c) and c.launches > 2
