"""Kernel selection (fbgemm_npu/native/_triton.py): modes, the fallback without Triton, counting.

A small Triton kernel defined here stands for a family's kernel: what is tested is the selection
and the launch wrapper, each rule of the module docstring once.
"""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native import _triton
from fbgemm_npu.testing.counters import count

triton = pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")
tl = pytest.importorskip("triton.language")


@triton.jit
def _axpy(x, y, out, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, alpha * tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


def test_mode_default_env_and_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_triton.ENV, raising=False)
    assert _triton.mode() == "auto"
    monkeypatch.setenv(_triton.ENV, "Tensor")
    assert _triton.mode() == "tensor"
    with _triton.kernel_mode("triton"):
        assert _triton.mode() == "triton"
        with _triton.kernel_mode("auto"):
            assert _triton.mode() == "auto"
        assert _triton.mode() == "triton"
    assert _triton.mode() == "tensor"


def test_bad_mode_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_triton.ENV, "cuda")
    with pytest.raises(ValueError, match="FBGEMM_NPU_KERNEL must be one of tensor, triton, auto"):
        _triton.mode()
    with pytest.raises(ValueError, match="kernel_mode must be one of"):
        with _triton.kernel_mode("fast"):
            pass


def test_auto_never_picks_the_interpreter_nor_the_simulated_device() -> None:
    assert _triton.interpreting()  # tests/conftest.py sets TRITON_INTERPRET=1 here
    npu = torch.device("npu", 0)
    with _triton.kernel_mode("auto"):
        assert not _triton.use_triton("fbgemm::op", npu)
        assert not _triton.use_triton("fbgemm::op", torch.device("cpu"))
    with _triton.kernel_mode("tensor"):
        assert not _triton.use_triton("fbgemm::op", npu)
    with _triton.kernel_mode("triton"):
        assert _triton.use_triton("fbgemm::op", npu)
        assert not _triton.use_triton("fbgemm::op", npu, supported=False)  # falls back


def test_without_triton_auto_falls_back_and_triton_mode_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_triton, "_triton_backends", lambda: None)  # as if not installed
    npu = torch.device("npu", 0)
    with _triton.kernel_mode("auto"):
        assert not _triton.use_triton("fbgemm::op", npu)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert _triton.backend_for(npu) is None
    with _triton.kernel_mode("triton"):
        with pytest.raises(RuntimeError, match="fbgemm::op: FBGEMM_NPU_KERNEL=triton but no"):
            _triton.use_triton("fbgemm::op", npu)


def test_native_backend_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(_triton, "_triton_backends", lambda: frozenset({"ascend"}))
    # The simulated npu has no Ascend driver: auto keeps the tensor program.
    assert _triton.backend_for(torch.device("npu", 0)) is None
    monkeypatch.setattr("fbgemm_npu._device.device_kind", lambda: "real")
    assert _triton.backend_for(torch.device("npu", 0)) == "native"
    with _triton.kernel_mode("auto"):
        assert _triton.use_triton("fbgemm::op", torch.device("npu", 0))
        assert not _triton.use_triton("fbgemm::op", torch.device("npu", 0), supported=False)
    assert _triton.backend_for(torch.device("cpu")) is None  # no cpu backend installed


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_launch_is_one_counted_launch_and_correct(device: str) -> None:
    x = torch.arange(10.0, device=device)
    y = torch.ones(10, device=device)
    out = torch.empty(10, device=device)
    with count(device) as c:
        _triton.launch("axpy", _axpy, (3,), x, y, out, 10, 2.0, BLOCK=4)
    torch.testing.assert_close(out.cpu(), 2.0 * torch.arange(10.0) + 1.0)
    assert c.launch_ops == ["triton.axpy"], c.summary()
    assert c.syncs == 0 and c.stalls == 0
    assert c.events[0].nbytes == 3 * 10 * 4


def test_empty_grid_launches_nothing() -> None:
    x = torch.empty(0, device="npu")
    with count("npu") as c:
        _triton.launch("axpy", _axpy, (0,), x, x, x, 0, 1.0, BLOCK=4)
    assert c.launches == 0


def test_triton_budget_limit() -> None:
    from fbgemm_npu.native.family import Budget

    b = Budget(launches=9, checks=3, triton={"call": 1, "mean": 2})
    assert (b.triton_limit(False), b.triton_limit(True), b.triton_limit(False, "mean")) == (1, 4, 2)
    with pytest.raises(KeyError, match="no Triton path 'weighted'"):
        b.triton_limit(False, "weighted")


def test_backward_on_autograd_device_thread_sees_the_mode() -> None:
    seen: list[str] = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
            return x * 2

        @staticmethod
        def backward(ctx: object, g: torch.Tensor) -> torch.Tensor:
            seen.append(_triton.mode())
            return g * 2

    x = torch.ones(3, device="npu", requires_grad=True)
    with _triton.kernel_mode("triton"):
        Probe.apply(x).sum().backward()
    with _triton.kernel_mode("tensor"):
        Probe.apply(x).sum().backward()
    assert seen == ["triton", "tensor"]
