"""The quantize_nbit ops on npu against upstream's CPU kernels (fbgemm-gpu-cpu 1.8.0): packed
bytes, scales and biases bit for bit; dequantized values exactly.

Drawn: bit rates 1..8 (upstream's reference kernel; 2 / 4 / 8 its AVX2 ones), float32 and
float16 rows of every magnitude (ranges below half's subnormals: scale 0 -> 1; past half's
range: scale / bias inf), constant rows, infinite values (rows of -inf at 2 / 4 / 8 bits only:
upstream's reference kernel for the other rates stores a NaN scale, its AVX2 ones inf), empty
and column-free inputs, a transposed input (upstream reads only contiguous memory: the oracle
gets a contiguous copy).
Not drawn: NaN and rows whose minimum is both +0 and -0 (upstream's min picks NaN / the zero's
sign by its vector lanes' order; ours by torch's ``aminmax``: the dequantized values agree).
The front layout (``scale_bias_last=False`` and ``...FrontToFloatOrHalf``, upstream's CUDA
math) is judged by upstream's dequantization of the same row with scale and bias moved last.
"""

from __future__ import annotations

import pytest
import torch

F = torch.ops.fbgemm
NPU = "npu"


def _rows(seed: int, rows: int, cols: int, kind: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g) * 10.0 ** (seed % 15 - 9)
    if kind == 1:
        x = x + 1e4
    elif kind == 2 and x.numel():
        x[0, 0], x[-1, -1] = float("inf"), float("-inf")
    elif kind == 3:
        x = torch.full((rows, cols), 0.3)
    elif kind == 4:
        x = x * 1e5  # scale / bias past half's range
    return x


def _no_signed_zero(x: torch.Tensor) -> torch.Tensor:
    x[x == 0] = 0  # no -0 (module docstring)
    return x


def _same(ours: torch.Tensor, ref: torch.Tensor) -> None:
    assert ours.device.type == NPU and ours.dtype == ref.dtype and ours.shape == ref.shape
    got = ours.cpu()
    if ref.dtype == torch.uint8:
        assert torch.equal(got, ref)
    else:  # NaN (inf * 0 of an infinite scale) where upstream has it
        assert torch.equal(got.isnan(), ref.isnan())
        assert torch.equal(got.nan_to_num(), ref.nan_to_num())


QUANTIZERS = [
    ("FloatToFusedNBitRowwiseQuantizedSBHalf", (torch.float32,)),
    ("HalfToFusedNBitRowwiseQuantizedSBHalf", (torch.float16,)),
    ("FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf", (torch.float32, torch.float16)),
]


@pytest.mark.parametrize("bit_rate", range(1, 9))
@pytest.mark.parametrize("name,dtypes", QUANTIZERS, ids=[q[0] for q in QUANTIZERS])
def test_quantize_equals_upstream(name: str, dtypes: tuple, bit_rate: int) -> None:
    fn = getattr(F, name)
    per = 8 // bit_rate
    for seed, (rows, groups) in enumerate([(5, 3), (17, 9), (1, 1), (0, 2), (64, 20)]):
        for kind in range(5):
            for dtype in dtypes:
                x = _no_signed_zero(_rows(seed * 5 + kind, rows, 2 * per * groups, kind).to(dtype))
                if bit_rate not in (2, 4, 8) and bool((x == float("-inf")).all(1).any()):
                    continue  # a row of -inf: upstream's reference kernel stores scale NaN
                _same(fn(x.to(NPU), bit_rate), fn(x, bit_rate))


@pytest.mark.parametrize("bit_rate", (2, 4, 8))
def test_column_free_rows_store_upstreams_start_values(bit_rate: int) -> None:
    x = torch.zeros(3, 0)
    ours = F.FloatToFusedNBitRowwiseQuantizedSBHalf(x.to(NPU), bit_rate)
    _same(ours, F.FloatToFusedNBitRowwiseQuantizedSBHalf(x, bit_rate))
    assert ours.cpu().view(torch.float16).tolist() == [[float("-inf"), float("inf")]] * 3


def test_a_transposed_input_is_read_by_its_strides() -> None:
    x = _rows(3, 16, 10, 0).t()  # [10, 16], not contiguous
    ours = F.FloatToFusedNBitRowwiseQuantizedSBHalf(x.to(NPU), 4)
    _same(ours, F.FloatToFusedNBitRowwiseQuantizedSBHalf(x.contiguous(), 4))


@pytest.mark.parametrize("bit_rate", (2, 4, 8))
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16))
def test_rowwise_min_max_equals_upstream(bit_rate: int, dtype: torch.dtype) -> None:
    fn = F.FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfWithRowwiseMinMax
    for seed, (rows, cols) in enumerate([(6, 16), (20, 40), (1, 64)]):
        g = torch.Generator().manual_seed(seed)
        x = (torch.randn(rows, cols, generator=g) * 3).to(dtype)
        lo, hi = x.float().aminmax(dim=1)
        for bounds in (
            torch.stack([lo, hi], 1),
            torch.stack(
                [lo - torch.rand(rows, generator=g), hi + 2 * torch.rand(rows, generator=g)], 1
            ),
            torch.stack([lo + 0.5, hi - 0.5], 1),  # values outside the bounds: clamped codes
            torch.stack([hi, lo], 1),  # reversed: a negative scale, as upstream
        ):
            b = bounds.to(dtype)
            _same(fn(x.to(NPU), bit_rate, b.to(NPU)), fn(x, bit_rate, b))


@pytest.mark.parametrize("bit_rate", (2, 4))
def test_rowwise_min_max_products_past_int32_are_code_zero(bit_rate: int) -> None:
    """Bounds far inside the row: (x - min) / scale reaches 2**31, upstream's AVX2 conversion
    saturates it to code 0 (64 columns: every column on that path)."""
    x = torch.zeros(1, 64)
    x[0, :6] = torch.tensor([0.0, 0.5, 1.0, 20.0, 1e9, 1e10])
    b = torch.tensor([[0.0, 1.0]])
    fn = F.FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfWithRowwiseMinMax
    _same(fn(x.to(NPU), bit_rate, b.to(NPU)), fn(x, bit_rate, b))


def _bytes(seed: int, rows: int, ncols: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (rows, ncols), generator=g, dtype=torch.uint8)


@pytest.mark.parametrize("bit_rate", range(1, 9))
def test_dequantize_equals_upstream(bit_rate: int) -> None:
    for seed, (rows, ncols) in enumerate([(7, 12), (30, 9), (1, 4), (0, 8), (50, 37)]):
        q = _bytes(seed, rows, ncols)
        qn = q.to(NPU)
        for name in (
            "FusedNBitRowwiseQuantizedSBHalfToFloat",
            "FusedNBitRowwiseQuantizedSBHalfToHalf",
        ):
            fn = getattr(F, name)
            _same(fn(qn, bit_rate), fn(q, bit_rate))
        for dtype in (0, 1):
            fn = F.FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf
            _same(fn(qn, bit_rate, dtype), fn(q, bit_rate, dtype))


def test_dequantize_a_strided_input() -> None:
    q = _bytes(4, 12, 40)[:, ::2][:, :12]  # [12, 12], column stride 2
    ours = F.FusedNBitRowwiseQuantizedSBHalfToFloat(q.to(NPU), 4)
    _same(ours, F.FusedNBitRowwiseQuantizedSBHalfToFloat(q.contiguous(), 4))


@pytest.mark.parametrize("bit_rate", (2, 4, 8, 3))
def test_front_layout_is_the_last_layout_with_scale_and_bias_moved(bit_rate: int) -> None:
    q = _bytes(bit_rate, 9, 14)
    front = torch.cat([q[:, -4:], q[:, :-4]], 1)
    last32 = F.FusedNBitRowwiseQuantizedSBHalfToFloat(q, bit_rate)
    fn = F.FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf
    _same(fn(front.to(NPU), bit_rate, 0, False), last32)
    _same(
        fn(front.to(NPU), bit_rate, 1, False), F.FusedNBitRowwiseQuantizedSBHalfToHalf(q, bit_rate)
    )
    fr = F.FusedNBitRowwiseQuantizedSBHalfFrontToFloatOrHalf
    _same(fr(front.to(NPU), bit_rate, 0), last32)
    _same(fr(front.to(NPU), bit_rate, 1), last32.half())
    _same(fr(front.to(NPU), bit_rate, 5), last32.bfloat16())  # rounded once from float32


@pytest.mark.parametrize("bit_rate", (2, 4, 8))
def test_round_trip_is_within_half_a_step(bit_rate: int) -> None:
    x = torch.randn(40, 32, generator=torch.Generator().manual_seed(bit_rate))
    q = F.FloatToFusedNBitRowwiseQuantizedSBHalf(x.to(NPU), bit_rate)
    back = F.FusedNBitRowwiseQuantizedSBHalfToFloat(q, bit_rate).cpu()
    scale = q.cpu()[:, -4:].contiguous().view(torch.float16)[:, :1].float()
    # float64 bound: half a step, plus the bias' rounding to half
    err = (back.double() - x.double()).abs()
    assert bool((err <= scale.double() * 0.5 + 1e-3 * x.abs().amax()).all())
