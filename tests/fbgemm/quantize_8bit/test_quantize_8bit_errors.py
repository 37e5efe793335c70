"""Hostile input to the fused 8-bit row-wise ops: a ``RuntimeError`` (upstream's class) naming
the op and the argument, where upstream raises, or reads memory as another dtype (float16 rows
given to ``FloatTo...``), or writes past a buffer (a float16 ``output`` of
``Fused8BitRowwiseQuantizedToFloatOut``: heap corruption)."""

from __future__ import annotations

import pytest
import torch

F = torch.ops.fbgemm
NPU = "npu"


def _raises(call, op: str, arg: str) -> None:
    with pytest.raises(RuntimeError) as info:
        call()
    assert op in str(info.value) and arg in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("op", "bad"),
    [
        ("FloatToFused8BitRowwiseQuantized", torch.float16),
        ("FloatToFused8BitRowwiseQuantized", torch.float64),
        ("HalfToFused8BitRowwiseQuantized", torch.float32),
        ("HalfToFused8BitRowwiseQuantized", torch.bfloat16),
        ("FloatOrHalfToFused8BitRowwiseQuantized", torch.bfloat16),
        ("FloatOrHalfToFused8BitRowwiseQuantized", torch.int32),
    ],
)
def test_quantize_refuses_other_dtypes(op: str, bad: torch.dtype) -> None:
    x = torch.ones(3, 4, dtype=bad, device=NPU)
    _raises(lambda: getattr(F, op)(x), op, "'t'")


@pytest.mark.parametrize("shape", [(), (5,)], ids=str)
def test_rows_need_two_dims(shape: tuple[int, ...]) -> None:
    x = torch.ones(shape, device=NPU)
    q = torch.ones(shape, dtype=torch.uint8, device=NPU)
    _raises(lambda: F.FloatToFused8BitRowwiseQuantized(x), "FloatToFused8Bit", "'t'")
    _raises(
        lambda: F.Fused8BitRowwiseQuantizedToHalf(q), "Fused8BitRowwiseQuantizedToHalf", "'input'"
    )
    with pytest.raises(RuntimeError):  # upstream too
        F.Fused8BitRowwiseQuantizedToHalf(q.cpu())


def test_dequantize_refuses_non_uint8_and_short_rows() -> None:
    op = "Fused8BitRowwiseQuantizedToFloat"
    _raises(
        lambda: F.Fused8BitRowwiseQuantizedToFloat(torch.ones(2, 12, device=NPU)), op, "'input'"
    )
    short = torch.zeros(2, 7, dtype=torch.uint8, device=NPU)
    _raises(lambda: F.Fused8BitRowwiseQuantizedToFloat(short), op, "'input'")
    with pytest.raises(RuntimeError):  # upstream: integer multiplication overflow
        F.Fused8BitRowwiseQuantizedToFloat(short.cpu())
    half_sb = torch.zeros(2, 3, dtype=torch.uint8, device=NPU)
    _raises(
        lambda: F.Fused8BitRowwiseQuantizedToFloatOrHalf(half_sb, 0, False, False),
        "Fused8BitRowwiseQuantizedToFloatOrHalf",
        "'input'",
    )


def test_float_or_half_flags_and_output_dtype() -> None:
    op = "Fused8BitRowwiseQuantizedToFloatOrHalf"
    q = torch.zeros(2, 12, dtype=torch.uint8, device=NPU)
    for bad in (2, 3, 6, -1):
        _raises(
            lambda bad=bad: F.Fused8BitRowwiseQuantizedToFloatOrHalf(q, bad), op, "output_dtype"
        )
        with pytest.raises(RuntimeError):
            F.Fused8BitRowwiseQuantizedToFloatOrHalf(q.cpu(), bad)
    _raises(
        lambda: F.Fused8BitRowwiseQuantizedToFloatOrHalf(q, 0, True, False), op, "quant_padding"
    )
    with pytest.raises(RuntimeError, match="quant_padding_float_type"):
        F.Fused8BitRowwiseQuantizedToFloatOrHalf(q.cpu(), 0, True, False)


def test_out_ops_check_output() -> None:
    x = torch.ones(2, 4, device=NPU)
    q = torch.zeros(2, 12, dtype=torch.uint8, device=NPU)
    qop, dop = "FloatToFused8BitRowwiseQuantizedOut", "Fused8BitRowwiseQuantizedToFloatOut"
    _raises(
        lambda: F.FloatToFused8BitRowwiseQuantizedOut(torch.empty(0, device=NPU), x),
        qop,
        "'output'",
    )
    _raises(
        lambda: F.FloatToFused8BitRowwiseQuantizedOut(torch.empty(0, dtype=torch.uint8), x),
        qop,
        "'output'",
    )
    half = torch.empty(0, dtype=torch.float16, device=NPU)
    _raises(lambda: F.Fused8BitRowwiseQuantizedToFloatOut(half, q), dop, "'output'")
    _raises(lambda: F.Fused8BitRowwiseQuantizedToFloatOut(torch.empty(0), q), dop, "'output'")
    _raises(
        lambda: F.FloatToFused8BitRowwiseQuantizedOut(
            torch.empty(0, dtype=torch.uint8, device=NPU), x.half()
        ),
        qop,
        "'input'",
    )


def test_none_is_refused_by_name() -> None:
    from fbgemm_npu.native.fbgemm.quantize_8bit import KERNELS

    kernel = KERNELS["fbgemm::Fused8BitRowwiseQuantizedToFloat"]["PrivateUse1"]
    with pytest.raises(ValueError, match="Fused8BitRowwiseQuantizedToFloat.*'input'"):
        kernel(None)


@pytest.mark.parametrize(
    ("op", "dtype", "width"),
    [
        ("FloatToFused8BitRowwiseQuantized", torch.float32, 4),
        ("HalfToFused8BitRowwiseQuantized", torch.float16, 4),
        ("FloatOrHalfToFused8BitRowwiseQuantized", torch.float32, 4),
        ("Fused8BitRowwiseQuantizedToFloat", torch.uint8, 12),
        ("Fused8BitRowwiseQuantizedToHalf", torch.uint8, 12),
        ("Fused8BitRowwiseQuantizedToBfloat16", torch.uint8, 12),
        ("Fused8BitRowwiseQuantizedToFloatOrHalf", torch.uint8, 12),
    ],
)
def test_output_that_cannot_be_allocated_is_named(op: str, dtype: torch.dtype, width: int) -> None:
    """A stride-0 input of 2**40 rows passes every check; its output cannot be allocated: the
    error names the op and the argument (the fuzz suite's 'huge' case: the allocator's words
    named neither)."""
    x = torch.zeros(1, width, dtype=dtype, device=NPU).expand(2**40, width)
    arg = "'t'" if dtype != torch.uint8 else "'input'"
    with pytest.raises(RuntimeError, match=f"{op}: the output .* of {arg} cannot be allocated"):
        getattr(F, op)(x)


def test_out_and_mixed_dim_outputs_that_cannot_be_allocated_are_named() -> None:
    x = torch.zeros(1, 4, device=NPU).expand(2**40, 4)
    out = torch.empty(0, dtype=torch.uint8, device=NPU)
    with pytest.raises(RuntimeError, match="FloatToFused8BitRowwiseQuantizedOut: the output"):
        F.FloatToFused8BitRowwiseQuantizedOut(out, x)
    q = torch.zeros(1, 12, dtype=torch.uint8, device=NPU).expand(2**40, 12)
    with pytest.raises(RuntimeError, match="Fused8BitRowwiseQuantizedToFloatOut: the output"):
        F.Fused8BitRowwiseQuantizedToFloatOut(torch.empty(0, device=NPU), q)
    offsets = torch.tensor([0, 12], dtype=torch.int32, device=NPU)
    with pytest.raises(RuntimeError, match="MixedDim: the output .* of 'input' cannot be"):
        F.Fused8BitRowwiseQuantizedToFloatMixedDim(q, offsets, 0)
