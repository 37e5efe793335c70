"""Hostile arguments of the quantize_nbit ops: a ``RuntimeError`` (upstream's class;
``NotImplementedError`` where upstream's dtype dispatch raises it) naming the op and the
argument, where upstream reads foreign memory (a half input to the float kernel), sizes a
negative output, or ends the process (``bit_rate`` 0 or past 8: SIGFPE)."""

from __future__ import annotations

import pytest
import torch

F = torch.ops.fbgemm
NPU = "npu"
Q = "FloatToFusedNBitRowwiseQuantizedSBHalf"
H = "HalfToFusedNBitRowwiseQuantizedSBHalf"
FOH = "FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf"
MM = "FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfWithRowwiseMinMax"
TOF = "FusedNBitRowwiseQuantizedSBHalfToFloat"
TOFH = "FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf"
FRONT = "FusedNBitRowwiseQuantizedSBHalfFrontToFloatOrHalf"


def _raises(error: type[Exception], op: str, arg: str, fn, *args) -> None:
    with pytest.raises(error) as info:
        fn(*args)
    assert op in str(info.value) and f"'{arg}'" in str(info.value), str(info.value)


x = torch.randn(3, 8)
h = x.half()


@pytest.mark.parametrize(
    "name,value,error",
    [
        (Q, h, RuntimeError),
        (Q, x.double(), RuntimeError),
        (Q, x.bfloat16(), RuntimeError),
        (H, x, RuntimeError),
        (FOH, x.bfloat16(), NotImplementedError),
        (FOH, x.double(), NotImplementedError),
        (Q, torch.randn(8), RuntimeError),
        (Q, torch.randn(2, 3, 8), RuntimeError),
        (Q, torch.randn(3, 6), RuntimeError),  # 6 columns at 4 bits: not a multiple of 4
    ],
)
def test_quantize_input(name: str, value: torch.Tensor, error: type[Exception]) -> None:
    _raises(error, name, "input", getattr(F, name), value.to(NPU), 4)


@pytest.mark.parametrize("bit_rate", (0, 9, 16, -2))
@pytest.mark.parametrize("name", (Q, FOH, TOF, TOFH))
def test_bit_rate_outside_1_to_8(name: str, bit_rate: int) -> None:
    arg = x.to(NPU) if name in (Q, FOH) else torch.zeros(3, 8, dtype=torch.uint8, device=NPU)
    _raises(RuntimeError, name, "bit_rate", getattr(F, name), arg, bit_rate)


def test_rowwise_min_max_arguments() -> None:
    fn = getattr(F, MM)
    xn, mm = x.to(NPU), torch.stack([x.amin(1), x.amax(1)], 1).to(NPU)
    for bad in (mm[:2], mm.t(), torch.zeros(3, 3, device=NPU), mm.half(), mm.double()):
        _raises(RuntimeError, MM, "rowwise_min_max", fn, xn, 4, bad)
    _raises(RuntimeError, MM, "rowwise_min_max", fn, xn, 4, mm.cpu())
    _raises(RuntimeError, MM, "bit_rate", fn, xn, 3, mm)  # upstream ignores the bounds there
    _raises(NotImplementedError, MM, "input", fn, xn.double(), 4, mm.double())
    with pytest.raises((ValueError, RuntimeError), match="rowwise_min_max"):
        fn(xn, 4, None)


@pytest.mark.parametrize("name", (TOF, "FusedNBitRowwiseQuantizedSBHalfToHalf", TOFH))
def test_dequantize_input(name: str) -> None:
    fn = getattr(F, name)
    for bad in (
        torch.zeros(3, 8, device=NPU),  # float: upstream "expected scalar type Byte"
        torch.zeros(3, 8, dtype=torch.int8, device=NPU),
        torch.zeros(2, 3, 8, dtype=torch.uint8, device=NPU),
        torch.zeros(3, 3, dtype=torch.uint8, device=NPU),  # no room for scale and bias
        torch.zeros(3, 0, dtype=torch.uint8, device=NPU),
    ):
        _raises(RuntimeError, name, "input", fn, bad, 4)


def test_output_dtype() -> None:
    q = torch.zeros(3, 8, dtype=torch.uint8, device=NPU)
    for bad in (2, 3, 4, 5, -1):  # upstream's CPU kernel: FP32 and FP16 only
        _raises(
            RuntimeError,
            TOFH,
            "output_dtype",
            F.FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf,
            q,
            4,
            bad,
        )
    for bad in (2, 3, 4, 6):
        _raises(RuntimeError, FRONT, "output_dtype", getattr(F, FRONT), q, 4, bad)


def test_none_input_names_the_argument() -> None:
    """A direct call of the kernel (the dispatcher refuses a call with no tensor itself)."""
    from fbgemm_npu.native.fbgemm.quantize_nbit import KERNELS

    for name in (Q, TOF):
        with pytest.raises(ValueError, match=f"{name}.*'input'"):
            KERNELS["fbgemm::" + name]["PrivateUse1"](None, 4)
