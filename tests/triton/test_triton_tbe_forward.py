"""The fused Triton TBE forward (fbgemm_npu/native/fbgemm/tbe/_triton_forward.py) in Triton's
interpreter, on the simulated npu's tensors and on CPU tensors.

Judged against an independent float64 reference written from the math (one bag at a time),
against the tensor program (:func:`tbe_forward` under ``kernel_mode("tensor")``: the output, and
the backward's state exactly).  Also: the data check (the tensor program's message), VBE, and
the fallback to the tensor program.  Upstream's modules on the kernel, and the budgets:
test_triton_tbe_forward_module.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.native._triton import kernel_mode
from fbgemm_npu.native.fbgemm.tbe._utils import get_plan
from fbgemm_npu.native.fbgemm.tbe.forward import VbeArgs, tbe_forward
from fbgemm_npu.testing.budgets import drain_checks
from fbgemm_npu.testing.counters import count

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")

OP = "fbgemm::split_embedding_codegen_lookup_sgd_function_pt2"
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
SUM, MEAN, NONE = 0, 1, 2
TOL = {F32: 1e-5, F16: 2e-3, BF16: 1.6e-2}


@dataclass
class Layout:
    """Tables packed one after the other in a flat buffer, as upstream's modules pack them."""

    dims: list[int]
    rows: list[int]

    @property
    def d_offsets(self) -> list[int]:
        return [sum(self.dims[:t]) for t in range(len(self.dims) + 1)]

    @property
    def w_offsets(self) -> list[int]:
        sizes = [d * r for d, r in zip(self.dims, self.rows, strict=True)]
        return [sum(sizes[:t]) for t in range(len(sizes))]

    @property
    def numel(self) -> int:
        return sum(d * r for d, r in zip(self.dims, self.rows, strict=True))


_PLANS: dict[tuple, tuple] = {}


def plan_of(lay: Layout, device: str):
    """One plan per layout and device (its device tables are then built once)."""
    key = (tuple(lay.dims), tuple(lay.rows), device)
    if key not in _PLANS:
        d = torch.tensor(lay.d_offsets, device=device)
        w = torch.tensor(lay.w_offsets, device=device)
        _PLANS[key] = (d, w, get_plan(OP, d, w, weights_numel=lay.numel))
    return _PLANS[key][2]


def draw(lay: Layout, B: int, max_len: int, seed: int, tail: int = 0):
    """``(indices, offsets)`` int64 of ``T * B`` bags of 0 to ``max_len`` in-range indices, then
    ``tail`` indices past ``offsets[-1]``."""
    g = torch.Generator().manual_seed(seed)
    T = len(lay.dims)
    lens = torch.randint(0, max_len + 1, (T * B,), generator=g)
    idx = [torch.randint(0, lay.rows[k // B], (int(lens[k]),), generator=g) for k in range(T * B)]
    idx.append(torch.randint(0, 3, (tail,), generator=g))
    off = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)])
    return torch.cat(idx), off


def reference(lay: Layout, W: torch.Tensor, idx, off, pooling: int, psw) -> torch.Tensor:
    """float64, one bag at a time, from the math of the module docstring."""
    T, W = len(lay.dims), W.double()
    B = (off.numel() - 1) // T
    shape = (int(off[-1]), lay.dims[0]) if pooling == NONE else (B, lay.d_offsets[-1])
    out = torch.zeros(shape, dtype=torch.float64)
    for k in range(T * B):
        (t, b), lo, hi = divmod(k, B), int(off[k]), int(off[k + 1])
        D, start, col = lay.dims[t], lay.w_offsets[t], lay.d_offsets[t]
        scale = [1.0 if psw is None else float(psw[i]) for i in range(lo, hi)]
        rows = [W[start + int(idx[i]) * D :][:D] * scale[i - lo] for i in range(lo, hi)]
        if pooling == NONE:
            out[lo:hi] = torch.stack(rows) if rows else out[lo:hi]
            continue
        acc = sum(rows, torch.zeros(D, dtype=torch.float64))
        out[b, col : col + D] = acc / max(hi - lo, 1) if pooling == MEAN else acc
    return out


def run(mode: str, device: str, lay: Layout, W, idx, off, pooling, psw, odt, for_backward):
    with kernel_mode(mode):
        return tbe_forward(OP, plan_of(lay, device), W.to(device), idx.to(device), off.to(device),
                           pooling, None if psw is None else psw.to(device), odt,
                           for_backward=for_backward)  # fmt: skip


def assert_same_state(a, b) -> None:
    """The backward's inputs, exactly the tensor program's."""
    assert torch.equal(a.bag.cpu(), b.bag.cpu()) and a.bag.dtype == b.bag.dtype
    assert torch.equal(a.t.cpu(), b.t.cpu()) and a.t.dtype == b.t.dtype
    assert len(a.mats) == len(b.mats) and a.B == b.B
    for x, y in zip(a.mats, b.mats, strict=True):
        assert x.shape == y.shape and x.dtype == y.dtype and torch.equal(x.cpu(), y.cpu())


def close(actual: torch.Tensor, expected: torch.Tensor, tol: float) -> None:
    torch.testing.assert_close(actual.cpu().double(), expected.cpu().double(), rtol=tol, atol=tol)


MIXED_D = Layout([8, 16, 8, 4], [11, 7, 9, 5])
ONE_D = Layout([8, 8, 8], [11, 7, 9])
CASES = [(p, w, wd) for p in (SUM, MEAN, NONE) for w in (False, True) for wd in (F32, F16, BF16)]


# npu tensors run every case; CPU tensors (a CI-sized subset) the fp32-output third of them.
DEVICE_CASES = [("npu", *c) for c in CASES] + [
    ("cpu", *c) for n, c in enumerate(CASES) if n % 3 == 0
]


@pytest.mark.parametrize(("device", "pooling", "weighted", "wdt"), DEVICE_CASES)
def test_parity(device: str, pooling: int, weighted: bool, wdt: torch.dtype) -> None:
    """Every pooling, weighting and weights dtype; the output dtypes, index dtypes and the
    autograd state cycle through the cases."""
    n = CASES.index((pooling, weighted, wdt))
    odt, idt = (F32, F16, BF16)[n % 3], (torch.int64, torch.int32)[n % 2]
    lay = ONE_D if pooling == NONE else MIXED_D
    idx, off = draw(lay, 3, 5, seed=n)
    W = torch.randn(lay.numel, generator=torch.Generator().manual_seed(n)).to(wdt)
    psw = torch.rand(idx.numel()).to(F16 if n % 4 == 1 else F32) if weighted else None
    fb = n % 2 == 0
    args = (lay, W, idx.to(idt), off.to(idt), pooling, psw, odt, fb)
    out, state = run("triton", device, *args)
    ref = reference(lay, W, idx, off, pooling, None if pooling == NONE else psw)
    assert out.dtype == odt and out.device.type == device
    close(out, ref, TOL[odt])
    tensor_out, tensor_state = run("tensor", device, *args)
    close(out, tensor_out, 2 * max(TOL[odt], TOL[wdt]))
    if fb:
        assert_same_state(state, tensor_state)
    fbgemm_npu.check()


def test_edges() -> None:
    """Bags longer than a block, D wider than a tile, empty bags, indices past offsets[-1],
    strided inputs, and a batch of empty bags only."""
    lay = Layout([160, 8, 24], [6, 9, 4])
    idx, off = draw(lay, 2, 3, seed=7, tail=5)
    long = torch.randint(0, 6, (70,))  # bag 0 long: 70 more indices of table 0
    idx, off = torch.cat([long, idx]), torch.cat([off[:1], off[1:] + 70])
    off[3] = off[2]  # an empty bag
    W = torch.randn(lay.numel)
    psw = torch.rand(idx.numel())
    for pooling in (SUM, MEAN):
        for weights in (None, psw):
            out, state = run("triton", "npu", lay, W, idx, off, pooling, weights, F32, True)
            close(out, reference(lay, W, idx, off, pooling, weights), 1e-5)
            ref_out, ref_state = run("tensor", "npu", lay, W, idx, off, pooling, weights, F32, True)
            assert_same_state(state, ref_state)
    # strided views: every other element of a doubled buffer
    wide = torch.stack([idx, idx]).T.reshape(-1)[::2]
    wide_off = torch.stack([off, off]).T.reshape(-1)[::2]
    wide_psw = torch.stack([psw, psw]).T.reshape(-1)[::2]
    assert not wide.is_contiguous() and torch.equal(wide, idx)
    out, _ = run("triton", "npu", lay, W, wide, wide_off, SUM, wide_psw, F32, False)
    close(out, reference(lay, W, idx, off, SUM, psw), 1e-5)
    # only empty bags (L = 0): zeros, also for MEAN
    zero = torch.zeros(3 * 4 + 1, dtype=torch.int64)
    empty = torch.zeros(0, dtype=torch.int64)
    for pooling in (SUM, MEAN):
        out, state = run("triton", "npu", lay, W, empty, zero, pooling, None, F16, True)
        assert out.shape == (4, 192) and not out.any()
    # NONE: the rows past offsets[-1] as the tensor program writes them
    one = Layout([8, 8], [5, 6])
    idx, off = draw(one, 3, 4, seed=3, tail=4)
    W = torch.randn(one.numel)
    out, state = run("triton", "npu", one, W, idx, off, NONE, None, F32, True)
    ref_out, ref_state = run("tensor", "npu", one, W, idx, off, NONE, None, F32, True)
    close(out, ref_out, 0.0)
    assert_same_state(state, ref_state)
    fbgemm_npu.check()


@pytest.mark.parametrize("pooling", [SUM, MEAN, NONE])
def test_programs_loop_over_work_items(pooling: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer programs than bags and index blocks (the grid's cap): each program loops over its
    items and the output, state and data check are the same."""
    from fbgemm_npu.native.fbgemm.tbe import _triton_forward

    monkeypatch.setattr(_triton_forward, "GRID_LIMIT", 3)
    lay = ONE_D if pooling == NONE else MIXED_D
    idx, off = draw(lay, 4, 3, seed=5, tail=2)
    W = torch.randn(lay.numel)
    with count("npu") as c:
        out, state = run("triton", "npu", lay, W, idx, off, pooling, None, F32, True)
    assert c.launch_ops[-2:] == ["triton.tbe_forward", "aten.all.default"]
    ref_out, ref_state = run("tensor", "npu", lay, W, idx, off, pooling, None, F32, True)
    close(out, ref_out, 1e-6)
    assert_same_state(state, ref_state)
    idx[1] = -1
    run("triton", "npu", lay, W, idx, off, pooling, None, F32, True)
    with pytest.raises(RuntimeError, match="argument 'indices' holds an index outside"):
        fbgemm_npu.check()


@pytest.mark.parametrize("pooling", [SUM, NONE])
@pytest.mark.parametrize("bad", ["past_table", "minus_one", "decreasing", "start", "end"])
def test_data_check(pooling: int, bad: str) -> None:
    """Bad data raises the tensor program's error naming the op and the argument, at the next
    check (the kernel stays inside its buffers meanwhile); the same data is valid otherwise."""
    idx, off = draw(ONE_D, 3, 4, seed=11)
    assert idx.numel() > 0 and off[2] > off[1]
    if bad == "past_table":
        idx[-1] = ONE_D.rows[-1]  # the last table's row count: one past its end
    elif bad == "minus_one":
        idx[0] = -1
    elif bad == "decreasing":
        off[2] = off[1] - 1
    elif bad == "start":
        off[0] = 1
    else:
        off[-1] = idx.numel() + 3
    W = torch.randn(ONE_D.numel)
    run("triton", "npu", ONE_D, W, *draw(ONE_D, 3, 4, seed=11), pooling, None, F32, False)
    drain_checks()  # the warm-up above built the layout's device tables (once per layout)
    on_npu = (W.to("npu"), idx.to("npu"), off.to("npu"))  # moved before counting
    with count("npu") as c:
        out, _ = run("triton", "npu", ONE_D, *on_npu, pooling, None, F32, False)
    assert c.launch_ops == ["triton.tbe_forward", "aten.all.default"], c.summary()
    assert torch.isfinite(out.cpu()).all()
    with pytest.raises(
        RuntimeError, match=r"split_embedding_codegen_lookup_sgd.*argument '(indices|offsets)'"
    ):
        fbgemm_npu.check()
    with pytest.raises(RuntimeError, match="argument 'indices' holds an index outside"):
        run("triton", "cpu", ONE_D, W, idx, off, pooling, None, F32, False)  # read at once


def test_checks_off_launch_only_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
    idx, off = draw(MIXED_D, 2, 3, seed=1)
    idx[0] = 10**6  # clamped into its table: no read outside it
    W = torch.randn(MIXED_D.numel).to("npu")
    run("triton", "npu", MIXED_D, W, *draw(MIXED_D, 2, 3, 1), SUM, None, F32, True)  # warm-up
    idx, off = idx.to("npu"), off.to("npu")
    with count("npu") as c:
        out, _ = run("triton", "npu", MIXED_D, W, idx, off, SUM, None, F32, True)
    assert c.launch_ops == ["triton.tbe_forward"] and torch.isfinite(out.cpu()).all()


def test_fallback() -> None:
    """``auto`` never takes the interpreter; unsupported calls run the tensor program under
    ``triton`` too: pooling NONE with mixed D, no bags."""
    idx, off = draw(MIXED_D, 2, 3, seed=2)
    W = torch.randn(MIXED_D.numel)
    for mode, pooling, offsets in [
        ("auto", SUM, off),
        ("triton", NONE, off),
        ("triton", SUM, off[:1]),
    ]:
        with count("npu") as c:
            run(mode, "npu", MIXED_D, W, idx, offsets, pooling, None, F32, False)
        assert c.launches and not [n for n in c.launch_ops if n.startswith("triton.")], (
            mode,
            c.summary(),
        )
    drain_checks()


def vbe_args(dims: list[int], per_rank: list[list[int]], out: torch.Tensor | None = None):
    """Upstream's VBE metadata on npu for ``per_rank[t][r]`` bags (output rank-major)."""
    T, R = len(dims), len(per_rank[0])
    b_off = [sum(sum(per_rank[u]) for u in range(t)) for t in range(T + 1)]
    brpf = [[sum(per_rank[t][:r]) for r in range(R + 1)] for t in range(T)]
    sizes = [per_rank[t][r] * dims[t] for r in range(R) for t in range(T)]
    ooff = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    size = ooff[-1] if out is None else out.numel()
    i32 = torch.int32
    args = (torch.tensor(b_off, dtype=i32), torch.tensor(ooff), torch.tensor(brpf, dtype=i32))
    return VbeArgs(*(a.to("npu") for a in args), size, out)


def test_vbe_state_and_preallocated_output() -> None:
    """VBE (every pooling the kernel serves, weighted or not): the output, each bag's output
    start and the rest of the backward's state exactly the tensor program's; upstream's
    pre-allocated ``vbe_output`` is written in place around what it already holds."""
    lay, per_rank = MIXED_D, [[2, 1], [0, 3], [1, 1], [2, 2]]
    g = torch.Generator().manual_seed(9)
    feats = [t for t in range(4) for _ in range(sum(per_rank[t]))]
    lens = torch.randint(0, 4, (len(feats),), generator=g)
    bags = zip(feats, lens, strict=True)
    idx = torch.cat([torch.randint(0, lay.rows[f], (int(n),), generator=g) for f, n in bags])
    off = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).to("npu")
    W, idx, psw = torch.randn(lay.numel).to("npu"), idx.to("npu"), torch.rand(idx.numel()).to("npu")
    plan = plan_of(lay, "npu")
    for pooling, weights in [(SUM, None), (SUM, psw), (MEAN, None), (MEAN, psw)]:
        outs = []
        for mode in ("triton", "tensor"):
            with kernel_mode(mode):
                v = vbe_args(lay.dims, per_rank)
                outs.append(tbe_forward(OP, plan, W, idx, off, pooling, weights, F32, v))
        (out, state), (ref, ref_state) = outs
        close(out, ref, 1e-6)
        assert_same_state(state, ref_state)
        assert torch.equal(state.row_starts.cpu(), ref_state.row_starts.cpu())
    pre = torch.full((out.numel() + 3,), 7.0, device="npu")
    args = (OP, plan, W, idx, off, SUM, None, F32)
    with kernel_mode("triton"):
        res, _ = tbe_forward(*args, vbe_args(lay.dims, per_rank, pre), for_backward=False)
    assert res is pre and (pre[-3:].cpu() == 7.0).all()
    with kernel_mode("tensor"):
        ref, _ = tbe_forward(*args, vbe_args(lay.dims, per_rank), for_backward=False)
    close(pre[: ref.numel()], ref, 1e-6)
    # hostile metadata (decreasing rank offsets, outputs past the buffer): no access outside
    # the buffers, nothing written outside the output
    bad = vbe_args(lay.dims, per_rank, torch.full((8,), 7.0, device="npu"))
    bad.B_offsets_rank_per_feature[1:, 1] = -5
    bad.output_offsets_feature_rank.mul_(-3).add_(2)
    with kernel_mode("triton"):
        out, _ = tbe_forward(*args, bad, for_backward=True)
    assert out.shape == (8,) and torch.isfinite(out.cpu()).all()
    fbgemm_npu.check()
