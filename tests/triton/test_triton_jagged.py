"""The jagged family's fused Triton kernels (native/fbgemm/jagged/_triton_dense.py) in Triton's
interpreter: jagged_to_padded_dense / dense_to_jagged and their backward ops, on npu tensors
(through torch.ops.fbgemm) and CPU tensors (the registered kernel functions called directly).

Each result is compared with the tensor program (kernel mode ``tensor``) and with upstream's CPU
kernel on contiguous CPU copies (the oracle), exactly: every element is a copy of a value, the
padding value or zero.  Budgets are exact (assert_triton_budget); the fallbacks run no
``triton.*`` launch.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.native._triton import kernel_mode
from fbgemm_npu.native.fbgemm.jagged import to_dense as td
from fbgemm_npu.native.fbgemm.jagged import to_jagged as tj
from fbgemm_npu.testing.budgets import assert_triton_budget
from fbgemm_npu.testing.counters import count
from fbgemm_npu.testing.jagged_inputs import jagged, nested, nested_lengths

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")

F = torch.ops.fbgemm
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)
INDEX = (torch.int32, torch.int64)
DEVICES = ("npu", "cpu")


def _fused(fn: Callable[[], Any], device: str) -> tuple[Any, list[str]]:
    """``fn()`` in kernel mode triton, and the launches it made on ``device``."""
    with kernel_mode("triton"), count(device) as c:
        out = fn()
    return out, c.launch_ops


def _tensor(fn: Callable[[], Any]) -> Any:
    with kernel_mode("tensor"):
        return fn()


def _values(n: int, d: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(n, d, generator=gen) * 50).to(dtype)


def _to_dense(device: str) -> Callable[..., torch.Tensor]:
    if device == "cpu":
        return td.jagged_to_padded_dense_forward_npu
    return F.jagged_to_padded_dense


def _to_jagged(device: str) -> Callable[..., torch.Tensor]:
    if device == "cpu":
        return tj.dense_to_jagged_forward_npu
    return lambda *a: F.dense_to_jagged(*a)[0]


def _same(got: torch.Tensor, *want: torch.Tensor) -> None:
    for w in want:
        assert got.dtype == w.dtype and got.shape == w.shape
        torch.testing.assert_close(got.cpu(), w.cpu(), rtol=0, atol=0, equal_nan=True)


# ---- parity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index", INDEX)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("one_dim", [False, True], ids=["2d_values", "1d_values"])
def test_to_dense_parity(
    device: str, index: torch.dtype, dtype: torch.dtype, one_dim: bool
) -> None:
    _, offsets = jagged(5, 6, 1, seed=3, index=index)  # lengths 0..8: some cut at 6
    values = _values(int(offsets[-1]), 5, dtype)
    if one_dim:
        values = values[:, 0].contiguous()
    pad = -7.0 if dtype.is_floating_point else -3.9  # ints truncate it to -3
    v, o = values.to(device), offsets.to(device)
    got, ops = _fused(lambda: _to_dense(device)(v, [o], [6], pad), device)
    assert [n for n in ops if n.startswith("triton.")] == ["triton.jagged_to_dense"]
    want = F.jagged_to_padded_dense(values, [offsets], [6], pad)  # upstream CPU
    _same(got, want, _tensor(lambda: _to_dense(device)(v, [o], [6], pad)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index", INDEX)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sized", [True, False], ids=["total_L", "no_total_L"])
def test_to_jagged_parity(device: str, index: torch.dtype, dtype: torch.dtype, sized: bool) -> None:
    _, offsets = jagged(5, 6, 1, seed=4, index=index)
    total = int(offsets[-1])
    dense = _values(5 * 6, 3, dtype, seed=1).view(5, 6, 3)
    x, o = dense.to(device), offsets.to(device)
    args = (x, [o], total if sized else None)
    got, ops = _fused(lambda: _to_jagged(device)(*args), device)
    assert "triton.dense_to_jagged" in ops
    want = F.dense_to_jagged(dense, [offsets], total if sized else None)[0]
    _same(got, want, _tensor(lambda: _to_jagged(device)(*args)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_op_parity(device: str, dtype: torch.dtype) -> None:
    """jagged_to_padded_dense_backward: [B, L] (1-D values' gradient) and [B, L, D]."""
    _, offsets = jagged(4, 5, 1, seed=5)
    total = int(offsets[-1]) + 2  # rows no position reads: zeros
    for shape in ((4, 5), (4, 5, 3)):
        grad = _values(20, 3, dtype, seed=2).reshape(-1)[: torch.Size(shape).numel()].view(shape)
        g, o = grad.to(device), offsets.to(device)
        fn = tj.jagged_to_padded_dense_backward_npu if device == "cpu" else None
        call = partial(fn or F.jagged_to_padded_dense_backward, g, [o], total)
        got, ops = _fused(call, device)
        assert "triton.dense_to_jagged" in ops
        want = F.jagged_to_padded_dense_backward(grad, [offsets], total)
        _same(got, want, _tensor(call))


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16))
@pytest.mark.parametrize("one_dim", [False, True], ids=["2d_values", "1d_values"])
def test_autograd_both_ways(dtype: torch.dtype, one_dim: bool) -> None:
    """Forward and gradient of both composites on npu through the Triton kernels, vs upstream's
    CPU autograd (each backward is the other op's kernel)."""
    values, offsets = jagged(4, 5, 3, seed=6, dtype=dtype)
    if one_dim:
        values = values[:, 0].contiguous()
    shape = (4, 5) if one_dim else (4, 5, 3)
    w = _values(60, 1, dtype, seed=7).view(-1)[: torch.Size(shape).numel()].view(shape)
    leaf = values.to("npu").requires_grad_()
    with kernel_mode("triton"), count("npu") as c:
        out = F.jagged_to_padded_dense(leaf, [offsets.to("npu")], [5], 1.5)
        (out * w.to("npu")).sum().backward()
    assert {"triton.jagged_to_dense", "triton.dense_to_jagged"} <= set(c.launch_ops)
    ref = values.clone().requires_grad_()
    want = F.jagged_to_padded_dense(ref, [offsets], [5], 1.5)
    (want * w).sum().backward()
    _same(out.detach(), want.detach())
    _same(leaf.grad, ref.grad)
    if one_dim:
        return
    dense = _values(60, 1, dtype, seed=8).view(4, 5, 3)
    leaf = dense.to("npu").requires_grad_()
    wj = _values(int(offsets[-1]) * 3, 1, dtype, seed=9).view(-1, 3)
    with kernel_mode("triton"), count("npu") as c:
        out = F.dense_to_jagged(leaf, [offsets.to("npu")])[0]
        (out * wj.to("npu")).sum().backward()
    assert {"triton.jagged_to_dense", "triton.dense_to_jagged"} <= set(c.launch_ops)
    ref = dense.clone().requires_grad_()
    want = F.dense_to_jagged(ref, [offsets])[0]
    (want * wj).sum().backward()
    _same(out.detach(), want.detach())
    _same(leaf.grad, ref.grad)


def _on_npu(t: torch.Tensor) -> torch.Tensor:
    """``t`` on npu with its strides (stride 0 kept as an expansion)."""
    if t.stride(0) == 0:
        return t[:1].to("npu").expand(t.shape)
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="npu").copy_(t)


def _edge_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, int]]:
    v = _values(9, 4, torch.float32, seed=10)
    t = torch.tensor
    return [
        ("all_empty_rows", v, t([0, 0, 0, 0]), 3),
        ("one_row_cut", v, t([0, 9]), 4),
        ("L_1", v, t([0, 2, 2, 9]), 1),
        ("decreasing", v, t([0, 5, 2, 9]), 4),
        ("tail_unread", v, t([0, 2, 3]), 3),
        ("past_N_cut", v, t([0, 2, 7, 12]), 2),  # the last row's reads stop at 9
        ("long_L", v, t([0, 4, 9]), 40),  # several position blocks
        ("transposed", v.t().contiguous().t(), t([0, 3, 9]), 5),
        ("column_slice", _values(9, 8, torch.float32)[:, ::2], t([0, 3, 9]), 5),
        ("middle_dims", v.view(9, 1, 4), t([0, 3, 9]), 5),
        ("strided_offsets", v, t([0, 0, 3, 3, 9, 9])[::2], 5),
        ("expanded_values", v[:1].expand(9, 4), t([0, 3, 9]), 5),
    ]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", _edge_cases(), ids=lambda c: c[0])
def test_to_dense_edge_cases(
    device: str, case: tuple[str, torch.Tensor, torch.Tensor, int]
) -> None:
    _, values, offsets, length = case
    v, o = values.to(device), offsets.to(device)
    if device == "npu":
        v = _on_npu(values)
    got, ops = _fused(lambda: _to_dense(device)(v, [o], [length], 2.5), device)
    assert ops[0] == "triton.jagged_to_dense"
    want = F.jagged_to_padded_dense(values.contiguous(), [offsets.contiguous()], [length], 2.5)
    _same(got, want)


def test_to_jagged_edge_cases() -> None:
    """Rows outside every offsets pair (before offsets[0], after offsets[-1]), truncated tails,
    a transposed and a broadcast (stride-0) dense, strided offsets: zeros where nothing writes."""
    t = torch.tensor
    dense = _values(4 * 3, 2, torch.float32, seed=11).view(4, 3, 2)
    cases = [
        (dense, t([2, 4, 4, 9, 10]), 13),
        (dense.transpose(0, 1).contiguous().transpose(0, 1), t([0, 1, 6, 6, 8]), 8),
        (dense[:1].expand(4, 3, 2), t([0, 2, 4, 6, 8]), 8),
        (dense, t([0, 0, 1, 1, 6, 6, 7, 7, 9, 9])[::2], 9),
    ]
    for x, offsets, total in cases:
        xn = _on_npu(x)
        got, _ = _fused(partial(F.dense_to_jagged, xn, [offsets.to("npu")], total), "npu")
        _same(got[0], F.dense_to_jagged(x.contiguous(), [offsets.contiguous()], total)[0])


def test_many_rows_loop_past_the_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """More batch rows than the grid's first dim (65535 on Ascend): each program loops."""
    from fbgemm_npu.native.fbgemm.jagged import _triton_dense

    monkeypatch.setattr(_triton_dense, "MAX_GRID", 2)
    values, offsets = jagged(7, 4, 3, seed=12)
    v, o = values.to("npu"), offsets.to("npu")
    got, _ = _fused(lambda: F.jagged_to_padded_dense(v, [o], [4], -1.0), "npu")
    _same(got, F.jagged_to_padded_dense(values, [offsets], [4], -1.0))
    dense = got
    back, _ = _fused(lambda: F.dense_to_jagged(dense, [o], values.size(0))[0], "npu")
    _same(back, F.dense_to_jagged(dense.cpu(), [offsets], values.size(0))[0])


def test_other_ops_on_the_same_kernels() -> None:
    """jagged_1d / 2d_to_dense and pack_segments gather through the same kernel."""
    values, offsets = jagged(4, 5, 3, seed=13)
    v, o = values.to("npu"), offsets.to("npu")
    got, ops = _fused(lambda: F.jagged_2d_to_dense(v, o, 5), "npu")
    assert ops[0] == "triton.jagged_to_dense"
    _same(got, F.jagged_2d_to_dense(values, offsets, 5))
    v1 = v[:, 0].contiguous()
    got, _ = _fused(lambda: F.jagged_1d_to_dense(v1, o, 5, -2), "npu")
    _same(got, F.jagged_1d_to_dense(values[:, 0].contiguous(), offsets, 5, -2))
    lengths = offsets.diff()
    got, ops = _fused(lambda: F.pack_segments(v, lengths.to("npu"), 6), "npu")
    assert "triton.jagged_to_dense" in ops
    _same(got, F.pack_segments(values, lengths, 6))


# ---- data checks ----------------------------------------------------------------------------


@pytest.mark.parametrize("index", INDEX)
def test_data_checks_name_the_op_and_offsets(index: torch.dtype) -> None:
    """Offsets past the values / output or negative: the deferred check raises by name; the
    kernels stay inside their tensors meanwhile."""
    v = torch.ones(5, 2, device="npu")
    for bad in ([0, 2, 7], [0, -1, 4]):
        o = torch.tensor(bad, dtype=index, device="npu")
        with kernel_mode("triton"):
            F.jagged_to_padded_dense(v, [o], [6])
        with pytest.raises(RuntimeError, match=r"jagged_to_padded_dense_forward: argument 'offs"):
            fbgemm_npu.check()
        dense = torch.ones(2, 6, 2, device="npu")
        with kernel_mode("triton"):
            F.dense_to_jagged(dense, [o], 5)
        with pytest.raises(RuntimeError, match=r"dense_to_jagged_forward: argument 'x_offsets'"):
            fbgemm_npu.check()
    if index == torch.int64:  # an offset upstream's int32 reading would wrap
        o = torch.tensor([0, 2, 2**31 + 1], device="npu")
        with kernel_mode("triton"):
            F.jagged_to_padded_dense(v, [o], [0 + 2])
        with pytest.raises(RuntimeError, match="2\\*\\*31"):
            fbgemm_npu.check()


# ---- budgets and fallbacks ------------------------------------------------------------------


def _budget_calls() -> list[tuple[str, str, Callable[[], Any]]]:
    values, offsets = jagged(4, 5, 3)
    v, o, n = values.to("npu"), [offsets.to("npu")], values.size(0)
    dense = torch.randn(4, 5, 3, device="npu")
    strided = dense.transpose(0, 1).contiguous().transpose(0, 1)
    v64, v1 = v.long(), v[:, 0].contiguous()
    return [
        ("jagged_to_padded_dense", "call", lambda: F.jagged_to_padded_dense(v, o, [5], -1.0)),
        ("jagged_to_padded_dense", "int64_values", lambda: F.jagged_to_padded_dense(v64, o, [5])),
        (
            "jagged_to_padded_dense_forward",
            "call",
            lambda: F.jagged_to_padded_dense_forward(v, o, [5]),
        ),
        ("jagged_1d_to_dense", "call", lambda: F.jagged_1d_to_dense(v1, o[0], 5, 0)),
        ("jagged_2d_to_dense", "call", lambda: F.jagged_2d_to_dense(v, o[0], 5)),
        (
            "jagged_to_padded_dense_backward",
            "call",
            lambda: F.jagged_to_padded_dense_backward(dense, o, n),
        ),
        (
            "jagged_to_padded_dense_backward",
            "strided_grad_output",
            lambda: F.jagged_to_padded_dense_backward(strided, o, n),
        ),
        ("dense_to_jagged", "call", lambda: F.dense_to_jagged(dense, o, n)),
        ("dense_to_jagged", "strided_dense", lambda: F.dense_to_jagged(strided, o, n)),
        ("dense_to_jagged_forward", "call", lambda: F.dense_to_jagged_forward(dense, o, n)),
    ]


@pytest.mark.parametrize("checks", [True, False], ids=["checks_on", "checks_off"])
def test_triton_budgets(checks: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not checks:
        monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
    for op, label, call in _budget_calls():
        call()  # warm: the first call compiles / caches
        assert_triton_budget(call, f"fbgemm::{op}", label)


def test_without_total_l_one_read_back() -> None:
    values, offsets = jagged(4, 5, 3)
    dense, o = torch.randn(4, 5, 3, device="npu"), [offsets.to("npu")]
    with kernel_mode("triton"), count("npu") as c:
        F.dense_to_jagged_forward(dense, o)
    assert c.launch_ops[:3] == ["aten.max.default", "aten.zeros.default", "triton.dense_to_jagged"]
    assert c.syncs == 1


def test_auto_and_unsupported_calls_run_the_tensor_program() -> None:
    values, offsets = jagged(4, 5, 3)
    v, o = values.to("npu"), [offsets.to("npu")]
    with kernel_mode("auto"), count("npu") as c:  # auto never picks the interpreter
        F.jagged_to_padded_dense(v, o, [5])
        F.dense_to_jagged(torch.ones(4, 5, 3, device="npu"), o, values.size(0))
    assert c.launches > 0 and not [n for n in c.launch_ops if n.startswith("triton.")]
    nv, noffs = nested(3, dims=2)
    nv, noffs = nv.to("npu"), [t.to("npu") for t in noffs]
    lengths = nested_lengths(2)
    with kernel_mode("triton"), count("npu") as c:  # two jagged dims: supported=False
        dense = F.jagged_to_padded_dense(nv, noffs, lengths)
        F.dense_to_jagged(dense, noffs, nv.size(0))
    assert c.launches > 0 and not [n for n in c.launch_ops if n.startswith("triton.")]
    _same(dense, F.jagged_to_padded_dense(nv.cpu(), [t.cpu() for t in noffs], lengths))
    assert not td.triton_supported(v, o, [65535 * 32 + 1])
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as fake:  # a traced call: no memory to launch on
        assert not td.triton_supported(fake.from_tensor(v), [fake.from_tensor(o[0])], [5])
    assert td.triton_supported(v, o, [5])
