"""quantize_float on npu against upstream's CPU kernels, bit for bit (bfloat16, HFP8), and against
the reference written from upstream's CUDA kernels for FP8 rowwise (upstream's CPU kernels raise
``fp8 is not supported by CPU`` in 1.8.0): the outputs compared as their bit patterns, so NaN
payloads and ``-0.0`` count."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.fbgemm.quantize_float.reference import (
    fp8_rowwise_dequantize,
    fp8_rowwise_quantize,
    padded_fp8_rowwise_dequantize,
    padded_fp8_rowwise_quantize,
)

F = torch.ops.fbgemm
NPU = "npu"
HIGH = torch.arange(-(2**15), 2**15, dtype=torch.int32)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The bit patterns of ``t`` (any dtype) as an integer tensor of its shape."""
    size = t.element_size()
    as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[size]
    return t.contiguous().view(as_int)


def _patterns(lows: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    """float32 values of every high half with the given low halves (and one random one)."""
    rand = torch.randint(0, 2**16, HIGH.shape, generator=torch.Generator().manual_seed(seed))
    parts = [HIGH * 2**16 + low for low in lows] + [HIGH * 2**16 + rand.to(torch.int32)]
    return torch.cat(parts).view(torch.float32)


def test_bfloat16_every_high_half_and_the_rounding_ties() -> None:
    # 0x8000: the tie (upstream rounds it up), 0x7FFF / 0x8001 beside it; NaNs, infs, -0.0 among
    x = _patterns((0, 0x7FFF, 0x8000, 0x8001, 0xFFFF)).view(-1, 512)
    got = F.FloatToBfloat16Quantized(x.to(NPU)).cpu()
    assert got.dtype == torch.bfloat16
    assert torch.equal(_bits(got), _bits(F.FloatToBfloat16Quantized(x)))


@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4), (0, 3), (3, 0)])
def test_bfloat16_shapes(shape: tuple[int, ...]) -> None:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)) * 1e3
    got = F.FloatToBfloat16Quantized(x.to(NPU)).cpu()
    want = F.FloatToBfloat16Quantized(x)
    assert got.shape == want.shape and torch.equal(_bits(got), _bits(want))
    back = F.Bfloat16QuantizedToFloat(got.to(NPU)).cpu()
    assert back.shape == want.shape and torch.equal(
        _bits(back), _bits(F.Bfloat16QuantizedToFloat(want))
    )


def test_bfloat16_non_contiguous_inputs() -> None:
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(2))
    for view in (lambda t: t.t(), lambda t: t[:, ::3], lambda t: t[:1].expand(4, 8)):
        got = F.FloatToBfloat16Quantized(view(x.to(NPU))).cpu()
        assert torch.equal(_bits(got), _bits(F.FloatToBfloat16Quantized(view(x).contiguous())))
        b = F.FloatToBfloat16Quantized(x)
        back = F.Bfloat16QuantizedToFloat(view(b.to(NPU))).cpu()
        assert back.is_contiguous()
        assert torch.equal(_bits(back), _bits(F.Bfloat16QuantizedToFloat(view(b).contiguous())))


def test_bfloat16_decode_every_pattern() -> None:
    b = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    b = b.view(128, 512)
    got = F.Bfloat16QuantizedToFloat(b.to(NPU)).cpu()
    assert torch.equal(_bits(got), _bits(F.Bfloat16QuantizedToFloat(b)))


FORMATS = [
    (4, 15, 1.875),
    (5, 31, 0.875),
    (4, 15, 0.9375),
    (3, 7, 448.0),
    (7, 0, 3.0),
    (1, 0, 1.0),
    (6, 60, 1e10),
    (2, 121, 2.0**100),
    (4, 15, 0.0),
    (5, 1, 2.0**-126),
]


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_hfp8_encode_every_high_half(fmt: tuple[int, int, float]) -> None:
    # 0x8000-style ties at the format's mantissa widths, signalling / quiet NaNs, subnormals
    x = _patterns((0, 0x8000, 0x7FFF), seed=fmt[0]).view(-1, 1024)
    got = F.FloatToHFP8Quantized(x.to(NPU), *fmt).cpu()
    assert torch.equal(got, F.FloatToHFP8Quantized(x, *fmt))


@pytest.mark.parametrize("ebits", range(1, 8))
def test_hfp8_decode_every_code(ebits: int) -> None:
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(4, 64)
    for bias in (0, 7, 15, 31, 119 + ebits):
        got = F.HFP8QuantizedToFloat(codes.to(NPU), ebits, bias).cpu()
        assert torch.equal(_bits(got), _bits(F.HFP8QuantizedToFloat(codes, ebits, bias)))


def test_hfp8_empty_and_sliced() -> None:
    e = torch.zeros(0, 4)
    assert F.FloatToHFP8Quantized(e.to(NPU), 4, 15, 1.875).shape == (0, 4)
    assert F.HFP8QuantizedToFloat(e.to(torch.uint8).to(NPU), 4, 15).shape == (0, 4)
    x = torch.randn(5, 9, generator=torch.Generator().manual_seed(3))
    got = F.FloatToHFP8Quantized(x.to(NPU)[:, 1::2], 4, 15, 1.875).cpu()
    assert torch.equal(got, F.FloatToHFP8Quantized(x[:, 1::2].contiguous(), 4, 15, 1.875))


def _rows(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.rand((*shape[:-1], 1), generator=g) * 50
    flat = x.view(-1)
    if flat.numel() >= 8:  # a NaN, an inf row, a zero row, -0.0, a tiny value
        flat[0], flat[3], flat[5] = float("nan"), -0.0, 1e-30
        if x.dim() >= 2 and x.size(0) >= 3:
            x[1] = 0.0
            x[2, 0] = float("inf")
    return x.to(dtype)


FP8_SHAPES = [(7, 10), (25, 3), (2, 3, 6), (9,), (1, 4), (4, 0), (0, 5)]


@pytest.mark.parametrize("shape", FP8_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_fp8_rowwise_equals_the_reference(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    x = _rows(shape, dtype, sum(shape))
    for forward in (True, False):
        got = F.FloatToFP8RowwiseQuantized(x.to(NPU), forward).cpu()
        want = fp8_rowwise_quantize(x, forward)
        meta = F.FloatToFP8RowwiseQuantized(x.to("meta"), forward)
        assert got.shape == want.shape == meta.shape and got.dtype == torch.uint8
        assert torch.equal(got, want)
        if want.size(-1) < 8:
            continue
        for output_dtype in (0, 1, 5):
            back = F.FP8RowwiseQuantizedToFloat(got.to(NPU), forward, output_dtype).cpu()
            ref = fp8_rowwise_dequantize(want, forward, output_dtype)
            assert back.shape == ref.shape and back.dtype == ref.dtype
            assert torch.equal(_bits(back), _bits(ref))


def test_fp8_rowwise_round_trip_error() -> None:
    """Dequantized values within HFP8's relative step of the input (E4M3: 2**-4)."""
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(4))
    back = F.FP8RowwiseQuantizedToFloat(F.FloatToFP8RowwiseQuantized(x.to(NPU), True), True)
    err = (back.cpu()[:, :32] - x).abs()
    assert bool((err <= x.abs() * 2**-4 + x.abs().amax(1, keepdim=True) * 2**-12).all())


PADDED_SHAPES = [(7, 10), (1, 10), (10,), (3, 16), (2, 3, 13), (1, 1, 4), (4, 0), (0, 5)]


@pytest.mark.parametrize("shape", PADDED_SHAPES, ids=str)
@pytest.mark.parametrize("row_dim", [4, 8, 12])
def test_padded_fp8_rowwise_equals_the_reference(shape: tuple[int, ...], row_dim: int) -> None:
    """Upstream has no CPU kernel (Meta only): the reference from its CUDA kernel, the shape
    from its Meta kernel.  NaNs mid-bucket and at a bucket's end, inf, zero rows."""
    x = _rows(shape, torch.float32, sum(shape) + row_dim)
    if x.dim() == 2 and x.size(1) >= row_dim and x.size(0) >= 3:
        x[2, row_dim - 1] = float("nan")  # the sequential min / max end on a NaN
    for dtype in (torch.float32, torch.bfloat16):
        for forward in (True, False):
            xin = x.to(dtype)
            got = F.FloatToPaddedFP8RowwiseQuantized(xin.to(NPU), forward, row_dim).cpu()
            want = padded_fp8_rowwise_quantize(xin, forward, row_dim)
            meta = F.FloatToPaddedFP8RowwiseQuantized(xin.to("meta"), forward, row_dim)
            assert got.shape == want.shape == meta.shape
            assert torch.equal(got, want)


@pytest.mark.parametrize("shape", PADDED_SHAPES, ids=str)
@pytest.mark.parametrize("row_dim", [4, 12])
def test_padded_fp8_rowwise_dequantize_equals_the_reference(
    shape: tuple[int, ...], row_dim: int
) -> None:
    x = _rows(shape, torch.float32, sum(shape) + row_dim + 1)
    q = padded_fp8_rowwise_quantize(x, True, row_dim)
    for last in (-1, shape[-1]):
        for output_dtype in (0, 1, 5):
            got = F.PaddedFP8RowwiseQuantizedToFloat(q.to(NPU), True, row_dim, last, output_dtype)
            want = padded_fp8_rowwise_dequantize(q, True, row_dim, last, output_dtype)
            assert got.shape == want.shape and got.dtype == want.dtype
            assert torch.equal(_bits(got.cpu()), _bits(want))


def test_padded_fp8_rowwise_one_row_counts_every_positive_tag() -> None:
    """One row: upstream's 1-D kernel sums every positive tag (a hand-made tag in the middle),
    where more rows walk the first row's skip counts."""
    q = padded_fp8_rowwise_quantize(torch.randn(1, 12), False, 4)
    q.view(3, 12)[0, 8:12] = torch.tensor([1], dtype=torch.int32).view(torch.uint8)
    got = F.PaddedFP8RowwiseQuantizedToFloat(q.to(NPU), False, 4).cpu()
    want = padded_fp8_rowwise_dequantize(q, False, 4)
    assert got.shape == (1, 11) and torch.equal(_bits(got), _bits(want))
