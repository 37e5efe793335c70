"""``fbgemm::FloatToHFP8Quantized`` / ``HFP8QuantizedToFloat`` on npu: float32 <-> HFP8 bytes
of a format given by ``ebits`` and ``exponent_bias`` (saturating at ``max_pos``).

Semantics, from upstream's CPU kernels (``_float_to_hfp8_cpu`` / ``_hfp8_to_float_cpu``,
``float_to_hfp8`` / ``hfp8_to_float``) and measured on fbgemm-gpu-cpu 1.8.0: a 2-D float32 input
gives uint8 codes of its shape, a 2-D uint8 input float32 values; other ranks and dtypes raise;
empty inputs give empty outputs.  The codes are upstream's bytes exactly, NaN / inf / ``-0.0`` /
subnormals included (the program and the argument range: ``_hfp8.py``).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import check_dtype, check_ndim, check_tensor
from fbgemm_npu.native.fbgemm.quantize_float import _hfp8

__all__ = ["KERNELS", "float_to_hfp8_npu", "hfp8_to_float_npu"]

TO_HFP8 = "fbgemm::FloatToHFP8Quantized"
FROM_HFP8 = "fbgemm::HFP8QuantizedToFloat"


def _input(op: str, value: object, dtype: torch.dtype) -> torch.Tensor:
    t = check_dtype(op, "input", check_tensor(op, "input", value), (dtype,)).detach()
    return check_ndim(op, "input", t, (2,))


def float_to_hfp8_npu(
    input: torch.Tensor, ebits: int, exponent_bias: int, max_pos: float
) -> torch.Tensor:
    """uint8 HFP8 codes of a 2-D float32 ``input``: ``code = sign << 7 | RNE(min(|x|, max_pos))``
    in the format (``ebits``, ``7 - ebits`` mantissa bits, ``exponent_bias``), upstream's bytes
    (``_hfp8.encode``).  Launches: ``_hfp8.ENCODE_LAUNCHES`` (21; ``ebits = 7``: 19) and the
    uint8 cast: 22 (ebits 7: 20)."""
    op = TO_HFP8
    x = _input(op, input, torch.float32)
    _hfp8.check_format(op, ebits, exponent_bias)
    bound = _hfp8.check_max_pos(op, max_pos)
    if x.numel() == 0:
        return torch.empty(x.shape, dtype=torch.uint8, device=x.device)
    return _hfp8.encode(x, ebits, exponent_bias, bound).to(torch.uint8)


def hfp8_to_float_npu(input: torch.Tensor, ebits: int, exponent_bias: int) -> torch.Tensor:
    """float32 values of a 2-D uint8 ``input`` of HFP8 codes, upstream's ``hfp8_to_float`` bit
    for bit (``_hfp8.decode``).  Launches: ``_hfp8.DECODE_LAUNCHES`` (11)."""
    op = FROM_HFP8
    x = _input(op, input, torch.uint8)
    _hfp8.check_format(op, ebits, exponent_bias)
    if x.numel() == 0:
        return torch.empty(x.shape, dtype=torch.float32, device=x.device)
    return _hfp8.decode(x, ebits, exponent_bias)


KERNELS = {
    TO_HFP8: {"PrivateUse1": float_to_hfp8_npu},
    FROM_HFP8: {"PrivateUse1": hfp8_to_float_npu},
}
