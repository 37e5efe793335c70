"""The eeg family: upstream's TBE index-distribution estimator and generator (``tbe.bench``'s
EEG tools), served on npu tensors by a host copy and upstream's own host code."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.fbgemm.eeg import eeg
from fbgemm_npu.native.fbgemm.eeg.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(eeg.KERNELS)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
