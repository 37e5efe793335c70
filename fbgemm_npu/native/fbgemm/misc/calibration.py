"""``fbgemm::histogram_binning_calibration`` on npu.

Upstream's CPU kernel (fbgemm-gpu-cpu 1.8.0, ``sparse_ops_cpu.cpp``), per logit ``x``: ``p =
T(x + log(positive_weight))`` (a float64 add rounded to the logit dtype ``T``), ``u = sigmoid(p)``,
``bin = ceil(u / step) - 1`` with ``step = (upper_bound - lower_bound) / num_bins`` (upstream
does not subtract ``lower_bound``: neither do we), and the calibrated prediction ``ctr * w + u *
(1 - w)`` where ``bin_num_examples[bin] > bin_ctr_in_use_after`` (``ctr = positives /
examples`` of the bin, ``w = bin_ctr_weight_value``), else ``u``.  Outputs: the prediction in
the logit's dtype and shape, ``bin_ids`` int64 ``(numel,)``.  Dtypes: logit float32 / float16 /
bfloat16, the bin tensors float64 (upstream refuses others).

On npu ``p`` is a float64 add rounded to ``T`` and ``exp`` runs in float32, as upstream's;
``1 / (1 + e)`` and ``u / step`` in float64, so the bin ids match upstream's (a float32 add or
float32 ``u / step`` moved ids at bin edges: measured); the blend in float32 (the bin counts
cast once, exact below 2**24 examples), within float32 rounding of upstream's.  A bin id
outside ``[0, num_bins)`` (``upper_bound < 1``, ``lower_bound > 0`` or ``u == 0``) makes
upstream read out of bounds: ours clamps the gather and queues a data check naming the op and
``lower_bound`` / ``upper_bound``.  Launches: budgets.py.
"""

from __future__ import annotations

import math

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    check_dtype,
    check_same_device,
    check_tensor,
    validation_enabled,
)

__all__ = [
    "KERNELS",
    "calibrate",
    "check_bins",
    "check_step",
    "histogram_binning_calibration_npu",
    "uncalibrated",
]

HBC = "fbgemm::histogram_binning_calibration"
LOGIT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
F64 = (torch.float64,)


def check_bins(
    op: str, logit: object, examples: object, positives: object, positive_weight: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``logit`` (float32 / float16 / bfloat16), the float64 bin tensors (as many examples as
    positives, on ``logit``'s device) and ``positive_weight > 0``, checked."""
    x = check_dtype(op, "logit", check_tensor(op, "logit", logit), LOGIT_DTYPES)
    ex = check_dtype(op, "bin_num_examples", check_tensor(op, "bin_num_examples", examples), F64)
    pos = check_tensor(op, "bin_num_positives", positives)
    pos = check_dtype(op, "bin_num_positives", pos, F64)
    check_same_device(op, logit=x, bin_num_examples=ex, bin_num_positives=pos)
    if pos.numel() != ex.numel():
        raise ValueError(
            f"{op}: arguments 'bin_num_examples' ({ex.numel()}) and 'bin_num_positives' "
            f"({pos.numel()}) must have the same number of elements"
        )
    if not positive_weight > 0:
        raise ValueError(
            f"{op}: argument 'positive_weight' must be positive, got {positive_weight}"
        )
    return x, ex, pos


def check_step(op: str, lower_bound: float, upper_bound: float, bins: int) -> float:
    """``(upper_bound - lower_bound) / bins``, required positive and finite."""
    step = (upper_bound - lower_bound) / bins if bins > 0 else 0.0
    if not (step > 0 and math.isfinite(step)):
        raise ValueError(
            f"{op}: arguments 'upper_bound' - 'lower_bound' over the bins must be positive "
            f"and finite, got {upper_bound} - {lower_bound} over {bins} bins"
        )
    return step


def uncalibrated(x: torch.Tensor, positive_weight: float) -> torch.Tensor:
    """Upstream's ``u`` in float64, flat: ``T pre_sigmoid = x + log(w)`` (a float64 add rounded
    once to ``T``: a float32 add moved ids at bin edges, measured), then ``1.0 / (1.0 +
    std::exp(-p))`` with ``exp`` in float (``p`` is a float / half) and the rest in float64.
    Launches: 2 casts, add_, cast to T (+1 half), neg_, exp, cast, add_, reciprocal_."""
    flat = x.detach().reshape(-1)
    p = flat.double().add_(math.log(positive_weight)).to(flat.dtype).float()
    e = torch.exp(p.neg_()).double()
    return e.add_(1).reciprocal_()


def calibrate(
    op: str,
    x: torch.Tensor,
    u64: torch.Tensor,
    ids: torch.Tensor,
    bins: tuple[torch.Tensor, torch.Tensor],
    bin_ctr_in_use_after: int,
    bin_ctr_weight_value: float,
    what: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The prediction from the bin ``ids`` (int64): the ids' range check queued (``what`` names
    the arguments), the bins' ``(examples, positives)`` gathered by the clamped ids, ``ctr w + u
    (1 - w)`` where the bin has more than ``bin_ctr_in_use_after`` examples, else ``u``."""
    n = bins[0].numel()
    if n == 0 and ids.numel() > 0:
        raise ValueError(f"{op}: argument 'bin_num_examples' is empty")
    u = u64.float()
    if validation_enabled() and ids.numel() > 0:
        checks = DataChecks(op)
        low, high = torch.aminmax(ids)
        what = f"{what} must lie in [0, {n})"
        checks.add(low, 0, None, what)
        checks.add(high, None, n - 1, what)
        checks.assert_on_device()
    table = torch.stack([bins[0].reshape(-1), bins[1].reshape(-1)], 1).float()  # (n, 2)
    got = table.index_select(0, ids.clamp(0, max(n - 1, 0)))
    ctr = got[:, 1] / got[:, 0]
    blend = torch.lerp(u, ctr, bin_ctr_weight_value)  # u + w (ctr - u) = ctr w + u (1 - w)
    out = torch.where(got[:, 0] > bin_ctr_in_use_after, blend, u)
    return out.to(x.dtype).view(x.shape), ids


def histogram_binning_calibration_npu(
    logit: torch.Tensor,
    bin_num_examples: torch.Tensor,
    bin_num_positives: torch.Tensor,
    positive_weight: float,
    lower_bound: float,
    upper_bound: float,
    bin_ctr_in_use_after: int,
    bin_ctr_weight_value: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(calibrated_prediction, bin_ids)`` (module docstring): elementwise math, one gather of
    the bins' ``(examples, positives)`` pairs by bin id, a ``where``."""
    op = HBC
    x, ex, pos = check_bins(op, logit, bin_num_examples, bin_num_positives, positive_weight)
    step = check_step(op, lower_bound, upper_bound, ex.numel())
    u64 = uncalibrated(x, positive_weight)
    ids = torch.ceil(u64.div(step)).sub_(1).long()
    what = "bin ids (from 'lower_bound' / 'upper_bound')"
    return calibrate(op, x, u64, ids, (ex, pos), bin_ctr_in_use_after, bin_ctr_weight_value, what)


KERNELS = {HBC: {"PrivateUse1": histogram_binning_calibration_npu}}
