"""The zch family: upstream's zero-collision hash ops (``faster_hash.cpp``), which torchrec's
managed-collision modules (``torchrec/modules/hash_mc_modules.py``) call: ``murmur_hash3`` and
the read-only (inference) ``zero_collision_hash``.

``fbgemm::create_zch_buffer`` needs no kernel of ours: it has no tensor argument, so the
dispatcher runs upstream's CompositeImplicitAutograd kernel for every ``device``, and that
kernel is two ``at::full`` calls, which the npu device serves (``tests/fbgemm/zch/``).
"""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.zch import murmur, zero_collision_hash
from fbgemm_npu.native.fbgemm.zch.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(merge_kernels(murmur.KERNELS, zero_collision_hash.KERNELS))
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
