"""The misc family: small upstream ``fbgemm::`` ops that belong to no other family
(``repeat_arange``, ``histogram_binning_calibration`` and its ``_by_feature`` forms)."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.misc import (
    bottom_k,
    calibration,
    calibration_by_feature,
    repeat_arange,
    rowwise_prune,
    unary_embeddings,
)
from fbgemm_npu.native.fbgemm.misc.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(
    merge_kernels(
        repeat_arange.KERNELS,
        calibration.KERNELS,
        calibration_by_feature.KERNELS,
        rowwise_prune.KERNELS,
        bottom_k.KERNELS,
        unary_embeddings.KERNELS,
    )
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
