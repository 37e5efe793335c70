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

__all__ = ["KERNELS", "histogram_binning_calibration_npu"]

HBC = "fbgemm::histogram_binning_calibration"
LOGIT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


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
    """``(calibrated_prediction, bin_ids)`` (module docstring): elementwise float32 math, one
    gather of the bins' ``(examples, positives)`` pairs by bin id, a ``where``."""
    op = HBC
    x = check_dtype(op, "logit", check_tensor(op, "logit", logit), LOGIT_DTYPES)
    ex = check_dtype(op, "bin_num_examples", bin_num_examples, (torch.float64,))
    pos = check_dtype(op, "bin_num_positives", bin_num_positives, (torch.float64,))
    check_same_device(op, logit=x, bin_num_examples=ex, bin_num_positives=pos)
    n = ex.numel()
    if pos.numel() != n:
        raise ValueError(
            f"{op}: arguments 'bin_num_examples' ({n}) and 'bin_num_positives' "
            f"({pos.numel()}) must have the same number of elements"
        )
    if not positive_weight > 0:
        raise ValueError(
            f"{op}: argument 'positive_weight' must be positive, got {positive_weight}"
        )
    step = (upper_bound - lower_bound) / n if n else 0.0
    if not (n > 0 and step > 0 and math.isfinite(step)):
        raise ValueError(
            f"{op}: arguments 'upper_bound' - 'lower_bound' over the bins must be positive "
            f"and finite, got {upper_bound} - {lower_bound} over {n} bins"
        )
    flat = x.detach().reshape(-1)
    # upstream: T pre_sigmoid = x + log(w), a float64 add rounded once to T (a float32 add
    # then that rounding moved ids at bin edges: measured)
    p = flat.double().add_(math.log(positive_weight)).to(flat.dtype).float()
    # upstream: 1.0 / (1.0 + std::exp(-p)), exp in float (p is a float / half), the rest in
    # float64: the same float32 exp, then u and u / step in float64, so the ids match upstream's
    e = torch.exp(p.neg_()).double()
    u64 = e.add_(1).reciprocal_()
    ids = torch.ceil(u64.div(step)).sub_(1).long()
    u = u64.float()
    if validation_enabled() and ids.numel() > 0:
        checks = DataChecks(op)
        low, high = torch.aminmax(ids)
        what = f"bin ids (from 'lower_bound' / 'upper_bound') must lie in [0, {n})"
        checks.add(low, 0, None, what)
        checks.add(high, None, n - 1, what)
        checks.assert_on_device()
    bins = torch.stack([ex.reshape(-1), pos.reshape(-1)], 1).float()  # (n, 2)
    got = bins.index_select(0, ids.clamp(0, n - 1))
    ctr = got[:, 1] / got[:, 0]
    blend = torch.lerp(u, ctr, bin_ctr_weight_value)  # u + w (ctr - u) = ctr w + u (1 - w)
    out = torch.where(got[:, 0] > bin_ctr_in_use_after, blend, u)
    return out.to(x.dtype).view(x.shape), ids


KERNELS = {HBC: {"PrivateUse1": histogram_binning_calibration_npu}}
