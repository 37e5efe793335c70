"""Upstream's Python callers of the 8-bit ops through the mirror on npu tensors, against the
same calls on CPU: ``fbgemm_npu.quantize_comm`` (``QuantizedCommCodec`` INT8 rows: encode with
``FloatToFused8BitRowwiseQuantized``, decode with ``Fused8BitRowwiseQuantizedToFloat``; FP16 /
BF16 codecs, pure torch) and ``fbgemm_npu.quantize_utils`` (``fp32_to_fp16_with_clamp``,
``fp32_to_bf16_with_clamp``, ``fp16_to_fp32``, ``bf16_to_fp32``).  The FP8 / HFP8 / MX4 paths
call the float-format ops (another family) and are left to its tests.

The checks run in a child process (``python <this file>``): importing upstream's
``quantize_utils`` imports ``fbgemm_gpu.quantize``, which registers two more ``fbgemm::`` ops
(``quantize_mx``, ``dequantize_mx``) that would change what ``tests/core/test_coverage.py``
sees in this process."""

from __future__ import annotations

import os
import subprocess
import sys

import torch

NPU = "npu"


def _grads(n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(n)
    return torch.randn(n, generator=g) * torch.rand(n, generator=g) * 30


def int8_codec_round_trip_equals_cpu(row_dim: int) -> None:
    import fbgemm_npu.quantize_comm as qc
    from fbgemm_npu.split_embedding_configs import SparseType

    x = _grads(32 * 12).view(12, 32) if row_dim == -1 else _grads(32 * 12)
    codec = qc.QuantizedCommCodec(SparseType.INT8)
    assert type(codec) is qc.QuantizedCommCodec  # upstream's class, through the mirror
    results = []
    for device in ("cpu", NPU):
        ctx = codec.create_context()
        if row_dim != 32:
            ctx.row_dim = row_dim
        encoded = codec.encode(x.to(device), ctx)
        assert encoded.device.type == device and encoded.dtype == torch.uint8
        if row_dim > 0:
            assert encoded.numel() == codec.calc_quantized_size(x.numel(), ctx)
        decoded = codec.decode(encoded, ctx)
        assert decoded.device.type == device
        results.append((encoded.cpu(), decoded.cpu()))
    (enc_cpu, dec_cpu), (enc_npu, dec_npu) = results
    assert torch.equal(enc_npu, enc_cpu)  # the uint8 rows bit for bit
    assert torch.equal(dec_npu, dec_cpu)


def float_codecs_equal_cpu(precision: object) -> None:
    import fbgemm_npu.quantize_comm as qc

    x = _grads(500) * 1e4  # some beyond float16's range: clamped
    codec = qc.QuantizedCommCodec(precision, loss_scale=4.0)
    outs = []
    for device in ("cpu", NPU):
        ctx = codec.create_context()
        encoded = codec.encode(x.to(device), ctx)
        assert encoded.device.type == device and encoded.dtype == codec.quantized_dtype
        outs.append((encoded.cpu(), codec.decode(encoded, ctx).cpu()))
    assert torch.equal(outs[1][0], outs[0][0]) and torch.equal(outs[1][1], outs[0][1])


def quantize_utils_helpers_equal_cpu() -> None:
    import fbgemm_npu.quantize_utils as qu

    x = _grads(300) * 1e4
    for fn in (qu.fp32_to_fp16_with_clamp, qu.fp32_to_bf16_with_clamp):
        got, want = fn(x.to(NPU)), fn(x)
        assert got.device.type == NPU and torch.equal(got.cpu(), want)
    h, b = x.half(), x.bfloat16()
    assert torch.equal(qu.fp16_to_fp32(h.to(NPU)).cpu(), qu.fp16_to_fp32(h))
    assert torch.equal(qu.bf16_to_fp32(b.to(NPU)).cpu(), qu.bf16_to_fp32(b))


def main() -> None:
    import fbgemm_npu  # noqa: F401  - registers the npu kernels
    from fbgemm_npu.split_embedding_configs import SparseType

    for row_dim in (32, 8, -1):
        int8_codec_round_trip_equals_cpu(row_dim)
    for precision in (SparseType.FP16, SparseType.BF16):
        float_codecs_equal_cpu(precision)
    quantize_utils_helpers_equal_cpu()
    print("mirror checks: 6 passed")


def test_mirror_callers_on_npu_equal_cpu() -> None:
    env = {**os.environ, "FBGEMM_NPU_SIMULATE": "1"}
    run = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert "mirror checks: 6 passed" in run.stdout


if __name__ == "__main__":
    main()
