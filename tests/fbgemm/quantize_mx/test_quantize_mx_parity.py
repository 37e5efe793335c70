"""``fbgemm::quantize_mx`` / ``dequantize_mx`` on npu against upstream's CPU kernels (its Python
reference, ``fbgemm_gpu.triton.quantize_ref``), bit for bit: quantize bytes equal, dequantized
values equal as int32 bit patterns (``-0.0`` counts: upstream's code 8 decodes to +0.0).

Inputs: scaled normals over 2**-140 .. 2**120 (subnormal results, clamped exponents, saturation
at 6, rounding ties), zeros, float32 bit patterns, infinities; shapes of rank 1 to 3, last dims
padded or not, group sizes 8 / 16 / 32, every rounding mode but stochastic (random: its bytes
are checked to decode within one step).  Stated exception: a group whose shared exponent is
NaN (a NaN in it; an inf in rounding mode even): upstream writes the sign of the NaN its CPU
arithmetic produced (bytes 0x00 or 0x88, by code path), ours zeros; those groups are skipped.
"""

from __future__ import annotations

import pytest
import torch

F = torch.ops.fbgemm
NPU = "npu"
SHAPES = [(64,), (4, 64), (3, 5, 50), (7,), (2, 96), (1000,), (1, 1), (0, 32)]


def _values(shape: tuple[int, ...], seed: int, kind: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    n = torch.Size(shape).numel()
    if kind == "bits":  # every finite float32 class: subnormals, -0.0, ties
        x = torch.randint(-(2**31), 2**31 - 1, (n,), generator=g, dtype=torch.int32)
        x = x.view(torch.float32)
        x = torch.where(torch.isfinite(x), x, 1.0)
    else:
        x = torch.randn(n, generator=g) * torch.exp2(torch.randint(-140, 120, (n,), generator=g))
    if kind == "inf" and n:
        x[torch.randint(0, n, (2,), generator=g)] = float("inf")
        x[0] = -float("inf")
    if n > 4:
        x[1:4] = 0.0
    return x.view(shape)


def _nan_groups(x: torch.Tensor, g: int, mode: int | None) -> torch.Tensor:
    """Groups upstream's NaN shared exponent covers (the stated exception)."""
    if x.shape[-1] % g:
        x = torch.nn.functional.pad(x, (0, g - x.shape[-1] % g))
    a = x.reshape(-1, g)
    bad = torch.isnan(a).any(1)
    if mode in (None, 2):
        m = a.abs().amax(1)
        bad |= torch.isnan((m.view(torch.int32) + 2**21 - 1).view(torch.float32))
    return bad


@pytest.mark.parametrize("kind", ["normal", "bits", "inf"])
@pytest.mark.parametrize("mode", [None, 0, 1, 2, 4, 9])
@pytest.mark.parametrize("g", [8, 16, 32])
def test_quantize_and_dequantize_equal_upstream(kind: str, mode: int | None, g: int) -> None:
    for seed, shape in enumerate(SHAPES):
        x = _values(shape, seed, kind)
        want = F.quantize_mx(x, 8, 2, 3, 6.0, g, mode)
        got = F.quantize_mx(x.to(NPU), 8, 2, 3, 6.0, g, mode)
        assert got.device.type == NPU and got.dtype == torch.uint8 and got.shape == want.shape
        if x.numel():
            keep = ~_nan_groups(x, g, mode)
            rows = got.cpu().reshape(-1, g // 2 + 1)
            assert torch.equal(rows[keep], want.reshape(-1, g // 2 + 1)[keep]), (shape, seed)
        for q in (want, torch.randint(0, 256, want.shape, dtype=torch.uint8)):
            ref = F.dequantize_mx(q, g)
            out = F.dequantize_mx(q.to(NPU), g)
            assert out.shape == ref.shape and out.dtype == torch.float32
            assert torch.equal(out.cpu().view(torch.int32), ref.view(torch.int32)), (shape, g)


def test_int8_bytes_decode_as_upstream() -> None:
    q = torch.randint(-128, 128, (5, 17), dtype=torch.int8)
    q[:, -1] = torch.tensor([-1, 0, 127, -128, 1], dtype=torch.int8)  # exponent bytes 255, 0, ...
    want = F.dequantize_mx(q, 32)
    got = F.dequantize_mx(q.to(NPU), 32).cpu()
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


def test_stochastic_rounding_decodes_within_one_step() -> None:
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(3))
    q = F.quantize_mx(x.to(NPU), 8, 2, 3, 6.0, 32, 3)
    back = F.dequantize_mx(q, 32).cpu()
    even = F.dequantize_mx(F.quantize_mx(x, 8, 2, 3, 6.0, 32, 2), 32)
    step = x.reshape(-1, 32).abs().amax(1, keepdim=True)  # a shared exponent's scale, at most x2
    assert ((back - even).abs().reshape(-1, 32) <= step).all()
