"""The fused Triton TBE forward (fbgemm_npu/native/fbgemm/tbe/_triton_forward.py) in Triton's
interpreter, on the simulated npu's tensors and on CPU tensors.

Judged against an independent float64 reference written from the math (one bag at a time),
against the tensor program (:func:`tbe_forward` under ``kernel_mode("tensor")``: the output, and
the backward's state exactly) and, through upstream's ``SplitTableBatchedEmbeddingBagsCodegen``
on npu, against upstream's CPU module.  Also: the data check (the tensor program's message),
the budgets (exact, per label), and the fallback to the tensor program.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode

import fbgemm_npu
from fbgemm_npu.native._triton import kernel_mode
from fbgemm_npu.native.fbgemm.tbe._utils import get_plan
from fbgemm_npu.native.fbgemm.tbe.forward import VbeArgs, tbe_forward
from fbgemm_npu.split_table import register_tbe_layout
from fbgemm_npu.testing.budgets import assert_triton_budget, drain_checks
from fbgemm_npu.testing.counters import count
from fbgemm_npu.testing.tbe_counts import intercept_lookups
from fbgemm_npu.testing.tbe_inputs import MIXED, make_batches, same_weights, training_tbe

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


@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize(("pooling", "weighted", "wdt"), CASES)
def test_parity(device: str, pooling: int, weighted: bool, wdt: torch.dtype) -> None:
    """Every pooling, weighting and weights dtype; the output dtypes, index dtypes and the
    autograd state cycle through the cases."""
    n = CASES.index((pooling, weighted, wdt))
    odt, idt = (F32, F16, BF16)[n % 3], (torch.int64, torch.int32)[n % 2]
    if device == "cpu" and n % 3:  # a CI-sized CPU subset: the fp32 outputs
        pytest.skip("CPU tensors: the fp32-output third of the cases (the npu runs them all)")
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
    fbgemm_npu.check()


def _module_lookups(opt: O, pooling: PoolingMode, weighted: bool, vbe: bool = False):
    specs = MIXED if pooling != PoolingMode.NONE else [(40, 8), (30, 8)]
    tbe = training_tbe(opt, specs, "npu", "cuda_user", pooling_mode=pooling)
    register_tbe_layout(tbe)
    per_rank = [[2, 3], [1, 4], [3, 0]] if vbe else None
    batch = make_batches(specs, 3, 1, seed=4, weighted=weighted, vbe=per_rank)[0]
    psw = None if batch.per_sample_weights is None else batch.per_sample_weights.to("npu")
    kwargs = {"per_sample_weights": psw, "batch_size_per_feature_per_rank": per_rank}
    return tbe, batch, (batch.indices.to("npu"), batch.offsets.to("npu")), kwargs


@pytest.mark.parametrize(
    ("opt", "pooling", "weighted", "label"),
    [
        (O.EXACT_SGD, PoolingMode.SUM, False, "call"),
        (O.EXACT_ROWWISE_ADAGRAD, PoolingMode.MEAN, False, "call"),
        (O.ADAM, PoolingMode.SUM, True, "call"),
        (O.EXACT_ADAGRAD, PoolingMode.NONE, False, "sequence"),
        (O.EXACT_ROWWISE_ADAGRAD, PoolingMode.SUM, True, "vbe"),
    ],
)
@pytest.mark.parametrize("train", [True, False])
def test_budget(opt: O, pooling: PoolingMode, weighted: bool, label: str, train: bool) -> None:
    """The lookup inside upstream's module, training (autograd) or not, exactly its budget."""
    tbe, _, args, kwargs = _module_lookups(opt, pooling, weighted, vbe=label == "vbe")
    seen = []

    def hold(qualname: str, call) -> torch.Tensor:
        with kernel_mode("triton"):
            call()  # the layout's device tables, once
        c = assert_triton_budget(call, qualname, label)
        seen.append(qualname)
        return c.result

    with intercept_lookups(hold), torch.set_grad_enabled(train):
        tbe(*args, **kwargs)
    assert len(seen) == 1
    fbgemm_npu.check()


@pytest.mark.parametrize(
    ("pooling", "vbe"),
    [(PoolingMode.SUM, False), (PoolingMode.MEAN, False), (PoolingMode.NONE, False),
     (PoolingMode.SUM, True), (PoolingMode.MEAN, True)],
)  # fmt: skip
def test_module_forward_vs_tensor_and_upstream_cpu(pooling: PoolingMode, vbe: bool) -> None:
    """Upstream's SplitTableBatchedEmbeddingBagsCodegen on npu (fbgemm_npu's split_table), its
    forward under kernel_mode("triton") == kernel_mode("tensor") ~= upstream's CPU module."""
    weighted = pooling == PoolingMode.SUM
    tbe, batch, args, kwargs = _module_lookups(O.EXACT_ROWWISE_ADAGRAD, pooling, weighted, vbe)
    specs = [(e, d) for e, d, *_ in tbe.embedding_specs]
    cpu = training_tbe(O.EXACT_ROWWISE_ADAGRAD, specs, "cpu", pooling_mode=pooling)
    same_weights(tbe, cpu)
    with kernel_mode("triton"), count("npu") as c:
        out = tbe(*args, **kwargs)
    assert "triton.tbe_forward" in c.launch_ops
    with kernel_mode("tensor"):
        tensor_out = tbe(*args, **kwargs)
    cpu_kwargs = {**kwargs, "per_sample_weights": batch.per_sample_weights}
    upstream = cpu(batch.indices, batch.offsets, **cpu_kwargs)
    close(out, tensor_out, 1e-6)
    close(out, upstream, 1e-5)
    fbgemm_npu.check()


def test_training_step_on_the_fused_forward_state() -> None:
    """A VBE training step (SGD, weighted) whose forward is the Triton kernel: the backward
    (the tensor program's: VBE) reads the kernel's state and updates the tables as after the
    tensor program's forward, and as upstream's CPU module does."""
    runs = [_module_lookups(O.EXACT_SGD, PoolingMode.SUM, True, True) for _ in range(2)]
    tbe0, batch, _, kwargs = runs[0]
    cpu = training_tbe(O.EXACT_SGD, [(e, d) for e, d, *_ in tbe0.embedding_specs], "cpu")
    same_weights(tbe0, runs[1][0])
    same_weights(tbe0, cpu)
    per_rank = kwargs["batch_size_per_feature_per_rank"]
    width = sum(d * sum(bs) for (_, d), bs in zip(MIXED, per_rank, strict=True))
    grad = torch.linspace(-1, 1, width)
    outs = []
    for mode, (tbe, _, args, kw) in zip(("triton", "tensor"), runs, strict=True):
        with kernel_mode(mode):
            out = tbe(*args, **kw)
            out.backward(grad.to("npu").view_as(out))
        outs.append(out.detach())
    cpu_kwargs = {**kwargs, "per_sample_weights": batch.per_sample_weights}
    cpu_out = cpu(batch.indices, batch.offsets, **cpu_kwargs)
    cpu_out.backward(grad.view_as(cpu_out))
    close(outs[0], outs[1], 1e-6)
    close(outs[0], cpu_out, 1e-5)
    weights = [t.split_embedding_weights() for t in (runs[0][0], runs[1][0], cpu)]
    for a, b, c in zip(*weights, strict=True):
        close(a, b, 1e-6)
        close(a, c, 1e-5)
    fbgemm_npu.check()
