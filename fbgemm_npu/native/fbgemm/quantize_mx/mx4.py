"""``fbgemm::quantize_mx`` / ``fbgemm::dequantize_mx`` (MX4, e2m1) on npu.

Semantics: upstream's CPU kernels are Python (``fbgemm_gpu.quantize.quantize_ops`` ->
``fbgemm_gpu.triton.quantize_ref.py_quantize_mx4`` / ``py_dequantize_mx4``); the op's
``scale_bits`` / ``elem_ebits`` / ``elem_mbits`` / ``elem_max_norm`` are ignored there (always
e2m1, exponent bias 1), and so here.  Quantize: a float32 input of any shape, its last dim padded
with zeros to a multiple of ``g = mx_group_size``, cut into groups of ``g``; per group the shared
exponent ``e = clamp(E(max |x|) - 2, -127, 125)`` with ``E`` by ``rounding_mode`` (0 nearest
``floor(log2 m + 0.5)``, 1 floor, 2 / None "even" ``floor(log2(m'))`` with ``bits(m') = bits(m) +
2**21 - 1``, 3 stochastic (random bits, as upstream), any other ceil; a zero max is ``2**-126``);
each ``y = x / 2**e`` rounded to e2m1 by upstream's integer steps on its float32 bits (round half
up on the 2-bit significand, subnormals, saturation at 6); two codes per byte, low nibble first,
and the byte ``e + 127`` after each group's ``g / 2`` bytes.  Output uint8 ``[..., -1]``.
Dequantize: per group of ``g / 2 + 1`` bytes, ``LUT[code] * 2**(b - 127)`` (the last byte
``b``; upstream's int8 arithmetic makes ``b = 255`` the exponent -128), float32 ``[..., -1]``.

Program: no shifts (AI CPU on a 910B, docs/hardware.md): bit fields by ``floor_divide`` /
``remainder`` on int32, powers of two built from their bits (``(k + 127) * 2**23``; the two
subnormal ones by a ``where``), codes packed by ``low + 16 * high``.  Non-finite values: an
inf in a group of finite shared exponent gets upstream's signed zero code (its int8 exponent
wraps, its shift count goes negative); a group whose shared exponent is NaN (a NaN in it; in
rounding mode even an inf or a max within half a step of FLT_MAX, whose bits + 2**21 - 1 are a
NaN) is all zero bytes here -- upstream writes the sign of whatever NaN its CPU arithmetic
produced (0x00 or 0x88 per byte, by code path): the one stated difference.  Other input dtypes
are refused by name (upstream's Python reads a half input's max in half: ``2**-126`` underflows
to 0).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import allocation_of, check_dtype, check_tensor
from fbgemm_npu.native._index import on_warm, tracing

__all__ = ["KERNELS", "dequantize_mx_npu", "quantize_mx_npu"]

QUANT = "fbgemm::quantize_mx"
DEQUANT = "fbgemm::dequantize_mx"
# upstream's E2M1_LUT writes code 8 as the Python int ``-0``: +0.0, not -0.0
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)

_LUT: dict[torch.device, torch.Tensor] = {}


@on_warm
def _lut(device: torch.device, fresh: bool = False) -> torch.Tensor:
    """The e2m1 values on ``device``, uploaded once per device (a constant, not data: never
    stale; ``warm_caches`` fills it before a measurement).  A traced call builds its own."""
    if fresh:
        return torch.tensor(E2M1, dtype=torch.float32, device=device)
    if device not in _LUT:
        _LUT[device] = torch.tensor(E2M1, dtype=torch.float32, device=device)
    return _LUT[device]


def _group(op: str, g: int) -> int:
    if not isinstance(g, int) or g <= 0 or g % 2:
        raise ValueError(f"{op}: mx_group_size must be a positive even int, got {g!r}")
    return g


def _pow2(k: torch.Tensor) -> torch.Tensor:
    """``2**k`` in float32 for int32 ``k`` in ``[-128, 127]``, exact, from its bits: normal
    ``(k + 127) * 2**23``, subnormal ``2**(k + 149)`` (``k = -127``: ``2**22``, ``-128``:
    ``2**21``).  Launches: add, mul, add, mul, ge, where: 6."""
    normal = (k + 127) * 2**23
    sub = (k + 129) * 2**21  # k = -127: 2**22, k = -128: 2**21
    return torch.where(k >= -126, normal, sub).view(torch.float32)


def _shared_exp(m: torch.Tensor, mode: int) -> torch.Tensor:
    """Upstream's ``_compute_exp`` (quantize_ref.py) on the group maxima ``m`` (float32)."""
    if mode == 0:
        return torch.floor(torch.log2(m) + 0.5)
    if mode == 1:
        return torch.floor(torch.log2(m))
    if mode == 2:
        return torch.floor(torch.log2((m.view(torch.int32) + (2**21 - 1)).view(torch.float32)))
    if mode == 3:
        noise = torch.randint_like(m, high=2**31 - 1, dtype=torch.int32).remainder_(2**22)
        return torch.floor(torch.log2((m.view(torch.int32) + noise).view(torch.float32)))
    return torch.ceil(torch.log2(m))


def quantize_mx_npu(
    input: torch.Tensor,
    scale_bits: int = 8,
    elem_ebits: int = 2,
    elem_mbits: int = 3,
    elem_max_norm: float = 6.0,
    mx_group_size: int = 32,
    rounding_mode: int | None = None,
) -> torch.Tensor:
    """MX4 codes of a float32 ``input`` (module docstring): uint8 ``[..., n / 2 + n / g]`` for a
    last dim padded to ``n``.  Launches: see budgets.py (one check of finiteness read on the
    host with the data: the contract refuses what upstream cannot encode)."""
    g = _group(QUANT, mx_group_size)
    x = _quant_input(input).detach()
    if x.numel() == 0:
        return torch.empty(x.shape, dtype=torch.uint8, device=x.device)
    # a stride-0 input of 2**38 rows passes every check: its output cannot be allocated
    with allocation_of(QUANT, "the output of 'input'"):
        return _quantize(x, g, rounding_mode)


def _quant_input(input: object) -> torch.Tensor:
    """A float32 tensor of 1 or more dims (upstream's Python indexes ``input.shape[-1]``: a 0-D
    tensor raises its IndexError, which names nothing)."""
    x = check_dtype(QUANT, "input", check_tensor(QUANT, "input", input), (torch.float32,))
    if x.dim() == 0:
        raise ValueError(f"{QUANT}: argument 'input' must have 1 or more dims, got a 0-D tensor")
    return x


def _quantize(x: torch.Tensor, g: int, rounding_mode: int | None) -> torch.Tensor:
    """The program of :func:`quantize_mx_npu` on a checked, non-empty input."""
    if x.shape[-1] % g:
        x = torch.nn.functional.pad(x, (0, g - x.shape[-1] % g))
    shape = x.shape
    a = x.reshape(-1, g)
    m = a.abs().amax(dim=1, keepdim=True)
    m = torch.where(m == 0, 2.0**-126, m)
    mode = 2 if rounding_mode is None else int(rounding_mode)
    ef = _shared_exp(m, mode).sub_(2).clamp_(-127, 125)
    lost = torch.isnan(ef)  # a NaN (or, rounding up, an inf / near-max) group: upstream's zeros
    e = torch.where(lost, 0.0, ef).to(torch.int32)
    y = (a / _pow2(e)).view(torch.int32)
    sign = (y < 0).to(torch.int32)
    b = torch.floor_divide(torch.bitwise_and(y, 0x7F800000), 2**23)  # biased exponent
    tm = torch.bitwise_and(y, 0x007FFFFF)
    nbe = b - 126  # - 127 + the e2m1 bias 1
    sub = b == 0
    exp_diff = torch.where(nbe <= 0, 1 - nbe, 0).clamp_(max=24)
    mant = torch.where(sub, tm, tm + 2**23)
    shift = torch.where(sub, 20, 21) + exp_diff  # sig bits + exp_diff - MBITS - 1
    mant = torch.floor_divide(mant, torch.pow(2, shift.clamp_(max=24)))
    mant = torch.floor_divide(mant + 1, 2)
    overflow = mant > 3
    mant = torch.where(overflow & ~sub, torch.floor_divide(mant, 2), mant)
    nbe = torch.where((nbe <= 0) & (mant == 2), 1, nbe)
    mant = torch.remainder(mant, 2)
    nbe = torch.where(overflow, nbe + 1, nbe)
    mant = torch.where(nbe > 3, 1, mant)
    code = nbe.clamp_(0, 3).mul_(2).add_(mant).add_(sign * 8)
    # an inf in a finite group: upstream's int8 exponent wraps and its shift count goes
    # negative (torch shifts all bits out): the signed zero code
    code = torch.where(b == 255, sign * 8, code)
    packed = code[:, 0::2] + code[:, 1::2] * 16
    out = torch.cat([packed, e + 127], dim=1).masked_fill_(lost, 0).to(torch.uint8)
    return out.view(*shape[:-1], -1)


def dequantize_mx_npu(input: torch.Tensor, mx_group_size: int = 32) -> torch.Tensor:
    """float32 values of MX4 bytes (uint8 or int8, groups of ``g / 2 + 1`` bytes along the
    flattened input): ``[..., -1]`` of the input's leading dims.  Launches: budgets.py."""
    g = _group(DEQUANT, mx_group_size)
    q = check_tensor(DEQUANT, "input", input)
    q = check_dtype(DEQUANT, "input", q, (torch.uint8, torch.int8)).detach()
    if q.numel() == 0:
        return torch.empty(q.shape, dtype=torch.float32, device=q.device)
    if q.numel() % (g // 2 + 1):
        raise ValueError(
            f"{DEQUANT}: input has {q.numel()} bytes, not a multiple of mx_group_size / 2 + 1 = "
            f"{g // 2 + 1}"
        )
    # a stride-0 input of 2**40 bytes passes every check: its output cannot be allocated
    with allocation_of(DEQUANT, "the output of 'input'"):
        return _dequantize(q, g)


def _dequantize(q: torch.Tensor, g: int) -> torch.Tensor:
    """The program of :func:`dequantize_mx_npu` on checked, whole groups."""
    shape = q.shape
    rows = q.reshape(-1, g // 2 + 1).view(torch.uint8).to(torch.int32)
    k = rows[:, -1:] - 127
    k = torch.where(k == 128, -128, k)  # upstream's int8 b - 127 wraps at b = 255
    p = rows[:, :-1]
    codes = torch.stack([torch.remainder(p, 16), torch.floor_divide(p, 16)], dim=2)
    lut = _lut(q.device, fresh=tracing(q))
    vals = torch.index_select(lut, 0, codes.view(-1)).view(-1, g)
    out = vals * _pow2(k)
    return out.view(*shape[:-1], -1)


def quantize_mx_meta(
    input: torch.Tensor,
    scale_bits: int = 8,
    elem_ebits: int = 2,
    elem_mbits: int = 3,
    elem_max_norm: float = 6.0,
    mx_group_size: int = 32,
    rounding_mode: int | None = None,
) -> torch.Tensor:
    """Meta kernel (upstream has none): uint8 ``[..., n / 2 + n / g]``."""
    g = _group(QUANT, mx_group_size)
    x = _quant_input(input)
    if x.numel() == 0:
        return torch.empty(x.shape, dtype=torch.uint8, device=x.device)
    shape = x.shape
    n = -(-shape[-1] // g) * g
    return x.new_empty((*shape[:-1], n // 2 + n // g), dtype=torch.uint8)


def dequantize_mx_meta(input: torch.Tensor, mx_group_size: int = 32) -> torch.Tensor:
    """Meta kernel (upstream has none): float32 ``[..., -1]``."""
    g = _group(DEQUANT, mx_group_size)
    q = check_tensor(DEQUANT, "input", input)
    q = check_dtype(DEQUANT, "input", q, (torch.uint8, torch.int8))
    if q.numel() == 0:
        return torch.empty(q.shape, dtype=torch.float32, device=q.device)
    lead = q.shape[:-1]
    n = q.numel() // (g // 2 + 1) * g
    last = n // max(1, torch.Size(lead).numel())
    return q.new_empty((*lead, last), dtype=torch.float32)


KERNELS = {
    QUANT: {"PrivateUse1": quantize_mx_npu, "Meta": quantize_mx_meta},
    DEQUANT: {"PrivateUse1": dequantize_mx_npu, "Meta": dequantize_mx_meta},
}
