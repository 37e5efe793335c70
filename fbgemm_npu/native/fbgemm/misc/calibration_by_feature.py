"""``fbgemm::histogram_binning_calibration_by_feature`` and
``fbgemm::generic_histogram_binning_calibration_by_feature`` on npu.

Upstream's CPU kernels (fbgemm-gpu-cpu 1.8.0, ``sparse_ops_cpu.cpp``) calibrate as
``histogram_binning_calibration`` (``calibration.py``), with one bin table per feature value:
each logit ``i`` has a segment of ``segment_lengths[i]`` values in ``segment_value``; its dense
value is ``d_i = segment_value[start_i] + 1`` when the segment has exactly one value, else 0
(``start`` the exclusive scan of the lengths), and its bin id is ``base_i + (d_i > num_segments
? 0 : max(0, d_i * num_bins))``.  ``base``: ``ceil(u / step) - 1`` with ``step = (upper_bound -
lower_bound) / num_bins``; generic: ``lower_bound(bin_boundaries, u)``, the number of
boundaries below ``u`` (boundaries sorted), with ``num_bins = len(bin_boundaries) + 1`` and
upstream's check ``len(bin_num_examples) == (num_segments + 1) * num_bins``.

Upstream densifies ``segment_lengths.numel()`` entries into a buffer of ``logit.numel()``
(unwritten entries are uninitialised memory; more lengths write past it): ours requires one
length per logit, by name.  Lengths must be non-negative and sum to at most
``len(segment_value)`` (upstream reads past it otherwise) and bin ids must lie inside the bin
tables: queued data checks, the gathers clamped meanwhile.  The scan is int32 (AI Core); the
boundary count a broadcast compare + sum (no ``searchsorted``, AI CPU on a 910B).  Launches:
budgets.py.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native.fbgemm.misc.calibration import (
    F64,
    calibrate,
    check_bins,
    check_step,
    uncalibrated,
)

__all__ = [
    "KERNELS",
    "generic_histogram_binning_calibration_by_feature_npu",
    "histogram_binning_calibration_by_feature_npu",
]

HBC_BY_FEATURE = "fbgemm::histogram_binning_calibration_by_feature"
GENERIC = "fbgemm::generic_histogram_binning_calibration_by_feature"
INDEX = (torch.int32, torch.int64)


def _segment_offsets(
    op: str,
    x: torch.Tensor,
    segment_value: object,
    segment_lengths: object,
    num_segments: int,
    num_bins: int,
) -> torch.Tensor:
    """``d_i > num_segments ? 0 : max(0, d_i * num_bins)`` per logit, int64 (module docstring).
    Launches: the int32 scan (cast, cumsum, sub), clamp, gather, eq, add, where, gt, mul,
    clamp_min, where (+ the lengths' check: aminmax, sum and the queued check)."""
    values = check_ndim(op, "segment_value", check_tensor(op, "segment_value", segment_value), (1,))
    check_dtype(op, "segment_value", values, INDEX)
    lengths = check_tensor(op, "segment_lengths", segment_lengths)
    check_ndim(op, "segment_lengths", check_dtype(op, "segment_lengths", lengths, INDEX), (1,))
    check_same_device(op, logit=x, segment_value=values, segment_lengths=lengths)
    if lengths.numel() != x.numel():
        raise ValueError(
            f"{op}: argument 'segment_lengths' must have one length per logit ({x.numel()}), "
            f"got {lengths.numel()}"
        )
    nv = values.numel()
    if validation_enabled() and lengths.numel() > 0:
        checks = DataChecks(op)
        what = f"argument 'segment_lengths' must be non-negative and sum to at most {nv}"
        checks.add(lengths.amin(), 0, None, what)
        checks.add(lengths.sum(dtype=torch.int64), None, nv, what)
        checks.assert_on_device()
    small = lengths.to(torch.int32)
    starts = torch.cumsum(small, 0, dtype=torch.int32).sub_(small)
    if nv == 0:
        first = torch.zeros_like(small, dtype=values.dtype)
    else:
        first = values.index_select(0, starts.clamp_(0, nv - 1))
    dense = torch.where(small == 1, first + 1, 0).long()
    return torch.where(dense > num_segments, 0, (dense * num_bins).clamp_min_(0))


def histogram_binning_calibration_by_feature_npu(
    logit: torch.Tensor,
    segment_value: torch.Tensor,
    segment_lengths: torch.Tensor,
    num_segments: int,
    bin_num_examples: torch.Tensor,
    bin_num_positives: torch.Tensor,
    num_bins: int,
    positive_weight: float,
    lower_bound: float,
    upper_bound: float,
    bin_ctr_in_use_after: int,
    bin_ctr_weight_value: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(calibrated_prediction, bin_ids)``: ids ``ceil(u / step) - 1`` plus the feature's
    table offset (module docstring); the prediction as ``histogram_binning_calibration``."""
    op = HBC_BY_FEATURE
    x, ex, pos = check_bins(op, logit, bin_num_examples, bin_num_positives, positive_weight)
    step = check_step(op, lower_bound, upper_bound, num_bins)
    offsets = _segment_offsets(op, x, segment_value, segment_lengths, num_segments, num_bins)
    u64 = uncalibrated(x, positive_weight)
    ids = torch.ceil(u64.div(step)).sub_(1).long().add_(offsets)
    what = "bin ids (from 'lower_bound' / 'upper_bound', 'num_bins' and 'segment_value')"
    return calibrate(op, x, u64, ids, (ex, pos), bin_ctr_in_use_after, bin_ctr_weight_value, what)


def generic_histogram_binning_calibration_by_feature_npu(
    logit: torch.Tensor,
    segment_value: torch.Tensor,
    segment_lengths: torch.Tensor,
    num_segments: int,
    bin_num_examples: torch.Tensor,
    bin_num_positives: torch.Tensor,
    bin_boundaries: torch.Tensor,
    positive_weight: float,
    bin_ctr_in_use_after: int,
    bin_ctr_weight_value: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(calibrated_prediction, bin_ids)``: ids the number of boundaries below ``u`` plus the
    feature's table offset (module docstring)."""
    op = GENERIC
    x, ex, pos = check_bins(op, logit, bin_num_examples, bin_num_positives, positive_weight)
    edges = check_dtype(
        op, "bin_boundaries", check_tensor(op, "bin_boundaries", bin_boundaries), F64
    )
    check_same_device(op, logit=x, bin_boundaries=edges)
    num_bins = edges.numel() + 1
    if ex.numel() != (num_segments + 1) * num_bins:
        raise ValueError(
            f"{op}: argument 'bin_num_examples' must have (num_segments + 1) * "
            f"(len(bin_boundaries) + 1) = {(num_segments + 1) * num_bins} elements, got "
            f"{ex.numel()}"
        )
    offsets = _segment_offsets(op, x, segment_value, segment_lengths, num_segments, num_bins)
    u64 = uncalibrated(x, positive_weight)
    below = torch.lt(edges.reshape(1, -1), u64.view(-1, 1)).sum(1)  # lower_bound, sorted edges
    ids = below.add_(offsets)
    what = "bin ids (from 'bin_boundaries' and 'segment_value')"
    return calibrate(op, x, u64, ids, (ex, pos), bin_ctr_in_use_after, bin_ctr_weight_value, what)


def _by_feature_fake(logit: torch.Tensor, *_: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Meta (upstream registers none for this op; the generic form has one): the prediction
    like ``logit``, the bin ids int64 ``(numel,)``."""
    return torch.empty_like(logit), logit.new_empty((logit.numel(),), dtype=torch.int64)


KERNELS = {
    HBC_BY_FEATURE: {
        "PrivateUse1": histogram_binning_calibration_by_feature_npu,
        "Meta": _by_feature_fake,
    },
    GENERIC: {"PrivateUse1": generic_histogram_binning_calibration_by_feature_npu},
}
