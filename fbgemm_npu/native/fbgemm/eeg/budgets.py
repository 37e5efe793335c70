"""Launch / sync budgets of the eeg family (docs/ops.md)."""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# one host copy of the tensor argument (a sync), upstream's host code, the tensor result
# uploaded back (one non-blocking copy)
_HOST_TOOL = Budget(launches=1, syncs=1, ai_cpu=0)

BUDGETS: dict[str, Budget] = {
    "fbgemm::tbe_estimate_indices_distribution": _HOST_TOOL,
    "fbgemm::tbe_generate_indices_from_distribution": _HOST_TOOL,
}
