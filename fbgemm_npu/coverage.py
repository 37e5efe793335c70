"""Upstream's CPU build, op by op: what fbgemm_npu serves on npu, and why the rest is not served.

fbgemm-gpu-cpu defines the ``fbgemm::`` ops a user calls and many that only its own modules call.
Every upstream op that a CPU tensor can run (a kernel at ``CPU``, ``AutogradCPU``, ``Autograd`` or
a composite key) falls in exactly one group here:

* **served** -- fbgemm_npu registers a ``PrivateUse1`` / ``AutogradPrivateUse1`` kernel for it
  (the registrar's table, :data:`fbgemm_npu._registry.REGISTRY`), or it takes no tensor at all
  (:data:`DEVICE_FREE`: upstream's kernel answers on every device);
* **internal** -- an op upstream's own Python calls on the way to a served op (a TBE lookup's
  CPU / pt2-wrapper pieces, the forward halves of autograd functions): :func:`internal` names the
  served op that takes its place on npu;
* **out of scope** -- :func:`out_of_scope` gives the reason (UVM and its caches: npu has no
  unified memory; ...).

``tests/core/test_coverage.py`` holds the split: each upstream op in one group, every op that
"internal" names is served, no stale entry, and an op a newer fbgemm_gpu adds that is neither
served nor classified fails the test.  ``python -m fbgemm_npu info`` prints the three groups.
Ops we serve that upstream's CPU build has no kernel for (CUDA-only upstream) are listed too
(:func:`beyond_cpu_build`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

__all__ = [
    "DEVICE_FREE",
    "Coverage",
    "beyond_cpu_build",
    "coverage",
    "coverage_lines",
    "internal",
    "out_of_scope",
    "upstream_cpu_ops",
]

# A kernel at one of these keys runs a CPU tensor (the Autograd alias included: upstream's
# autograd functions, e.g. jagged_slice, registered for every backend at once).
CPU_KEYS = (
    "CPU",
    "AutogradCPU",
    "Autograd",
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
)
NPU_KEYS = ("PrivateUse1", "AutogradPrivateUse1")

DEVICE_FREE = {
    "fbgemm::check_feature_gate_key": "takes a feature name (str) and returns a bool: no tensor, "
    "so upstream's kernel answers on every device",
    "fbgemm::create_zch_buffer": "a factory (int size, Device? device): no tensor argument, so "
    "the dispatcher runs upstream's composite kernel (two at::full) for device='npu' too "
    "(tests/fbgemm/zch/test_zch_parity.py)",
}

# The TBE optimizers whose training lookup is the served `..._function_pt2` op.
_PT2_OPTIMIZERS = (
    "adagrad",
    "adam",
    "lamb",
    "lars_sgd",
    "none",
    "partial_rowwise_adam",
    "partial_rowwise_lamb",
    "rowwise_adagrad",
    "rowwise_adagrad_with_counter",
    "rowwise_rmsprop_ar",
    "sgd",
)


def _lookup(opt: str) -> str:
    if opt == "dense":
        return "fbgemm::dense_embedding_codegen_lookup_function"
    return f"fbgemm::split_embedding_codegen_lookup_{opt}_function_pt2"


_TBE_PIECE = re.compile(
    r"fbgemm::split_embedding_(?:nobag_)?backward_codegen_(?P<opt>\w+?)"
    r"_(?:cpu|(?:un)?weighted(?:_vbe)?_pt2_wrapper)"
)
_TBE_SHARED = re.compile(
    r"fbgemm::split_embedding_(?:nobag_)?codegen_(?:forward|grad_indice_weights)"
    r"_(?:cpu|(?:(?:un)?weighted_)?(?:vbe_)?pt2_wrapper)"
)
_V1_LOOKUP = re.compile(r"fbgemm::split_embedding_codegen_lookup_(?P<opt>\w+)_function_cpu")

_INTERNAL = {
    "fbgemm::batch_index_select_dim0_forward_cpu_impl": "fbgemm::batch_index_select_dim0",
    "fbgemm::batch_index_select_dim0_backward_cpu_impl": "fbgemm::batch_index_select_dim0",
    "fbgemm::batch_index_select_dim0_tensor_forward_cpu_impl": (
        "fbgemm::batch_index_select_dim0_tensor"
    ),
    "fbgemm::group_index_select_dim0_gpu_impl": "fbgemm::group_index_select_dim0",
    "fbgemm::group_index_select_dim0_gpu_backward": "fbgemm::group_index_select_dim0",
    "fbgemm::jagged_index_select_2d_forward": "fbgemm::jagged_index_select",
    "fbgemm::jagged_index_add_2d_forward": "fbgemm::jagged_index_select",
}

_NO_UVM = (
    "UVM / cache machinery (EmbeddingLocation.MANAGED, MANAGED_CACHING): an npu has no unified "
    "memory; our TBE refuses those locations by name and keeps tables in device memory"
)
_UVM = (
    "new_unified_tensor",
    "is_uvm_tensor",
    "uvm_to_cpu",
    "uvm_to_cpu_clone",
    "lru_cache_populate_byte",
    "lfu_cache_populate_byte",
    "direct_mapped_lru_cache_populate_byte",
    "direct_mapped_lxu_cache_lookup",
    "lxu_cache_lookup",
    "linearize_cache_indices",
    "linearize_cache_indices_from_row_idx",
    "int_nbit_split_embedding_uvm_caching_codegen_lookup_function",
)
_ISSUE_14 = "inference and quantisation, not served yet: the inference and quantisation issue"
# Not served yet, planned by the inference and quantisation issue: an op leaves this list when it
# is served.
_QUANTIZED: frozenset[str] = frozenset()
_OUT_OF_SCOPE = {f"fbgemm::{name}": _NO_UVM for name in _UVM}
_OUT_OF_SCOPE["fbgemm::ssd_embedding_codegen_lookup_rowwise_adagrad_function_pt2"] = (
    "SSD-offloaded TBE (fbgemm_gpu.tbe.ssd: tables in RocksDB on the host, CUDA kernels; its "
    "module is not in the CPU build): no storage tier of that kind on npu"
)


def internal(op: str) -> str | None:
    """The served op that takes ``op``'s place on npu (``op`` is an upstream-internal piece)."""
    if op in _INTERNAL:
        return _INTERNAL[op]
    match = _TBE_PIECE.fullmatch(op)
    if match:  # a backward of one optimizer: its lookup's autograd runs ours
        return _lookup(match["opt"])
    if _TBE_SHARED.fullmatch(op):  # the forward / per-sample-weight gradient of every lookup
        return _lookup("sgd")
    match = _V1_LOOKUP.fullmatch(op)
    if match and match["opt"] in _PT2_OPTIMIZERS:
        return _lookup(match["opt"])
    return None


def out_of_scope(op: str) -> str | None:
    """Why ``op`` is not served on npu (None: it is not out of scope)."""
    if op in _OUT_OF_SCOPE:
        return _OUT_OF_SCOPE[op]
    if op in _QUANTIZED:
        return _ISSUE_14
    match = _V1_LOOKUP.fullmatch(op)
    if match and match["opt"] not in _PT2_OPTIMIZERS:
        return (
            f"the v1 CPU-only lookup of optimizer {match['opt']!r}: no module of fbgemm_gpu 1.8 "
            "calls it and upstream has no kernel for it but this CPU one (its training module "
            "offers the optimizer through no pt2 lookup)"
        )
    return None


def _has(op: str, keys: tuple[str, ...]) -> bool:
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(op, k) for k in keys)


def _fbgemm_ops() -> list[str]:
    import fbgemm_gpu  # noqa: F401  - upstream's schemas and kernels
    import fbgemm_gpu.quantize  # noqa: F401  - registers quantize_mx / dequantize_mx (MX4)
    import fbgemm_gpu.sll  # noqa: F401  - the SLL ops are registered by this module

    return sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("fbgemm::"))


def upstream_cpu_ops() -> list[str]:
    """Every ``fbgemm::`` op a CPU tensor can run in the installed fbgemm_gpu, sorted."""
    return [op for op in _fbgemm_ops() if _has(op, CPU_KEYS)]


def _served_here() -> set[str]:
    import fbgemm_npu  # noqa: F401  - registers every family
    from fbgemm_npu._registry import REGISTRY

    return {op for op, keys in REGISTRY.kernels.items() if set(keys) & set(NPU_KEYS)}


def beyond_cpu_build() -> list[str]:
    """``fbgemm::`` ops we serve that upstream's CPU build has no kernel for (CUDA-only there)."""
    cpu = set(upstream_cpu_ops())
    return sorted(op for op in _served_here() if op.startswith("fbgemm::") and op not in cpu)


@dataclass(frozen=True)
class Coverage:
    served: list[str]
    internal: dict[str, str]  # op -> the served op that takes its place
    out_of_scope: dict[str, str]  # op -> reason
    unclassified: list[str]  # neither: the coverage test fails on any


def coverage() -> Coverage:
    """Split :func:`upstream_cpu_ops` into the three groups (and what fits none)."""
    here = _served_here()
    served, inner, out, unknown = [], {}, {}, []
    for op in upstream_cpu_ops():
        if op in here or op in DEVICE_FREE:
            served.append(op)
        elif (target := internal(op)) is not None:
            inner[op] = target
        elif (reason := out_of_scope(op)) is not None:
            out[op] = reason
        else:
            unknown.append(op)
    return Coverage(served, inner, out, unknown)


def coverage_lines() -> list[str]:
    """The ``info`` report's three groups (and a fourth, listing what fits none)."""
    cov = coverage()
    total = len(cov.served) + len(cov.internal) + len(cov.out_of_scope) + len(cov.unclassified)
    out = [
        f"{total} upstream fbgemm:: ops run on CPU tensors: {len(cov.served)} served on npu, "
        f"{len(cov.internal)} internal, {len(cov.out_of_scope)} out of scope, "
        f"{len(cov.unclassified)} unclassified"
    ]
    out.append(f"served ({len(cov.served)}):")
    out += [f"  {op}" + (" (no tensor argument)" if op in DEVICE_FREE else "") for op in cov.served]
    out.append(f"internal ({len(cov.internal)}), with the served op that takes its place:")
    out += [f"  {op} -> {target}" for op, target in cov.internal.items()]
    out.append(f"out of scope ({len(cov.out_of_scope)}), with the reason:")
    reasons: dict[str, list[str]] = {}
    for op, reason in cov.out_of_scope.items():
        reasons.setdefault(reason, []).append(op)
    for reason, ops in reasons.items():
        out.append(f"  {reason}:")
        out += [f"    {op}" for op in ops]
    if cov.unclassified:
        out.append(f"unclassified ({len(cov.unclassified)}): neither served nor classified")
        out += [f"  {op}" for op in cov.unclassified]
    beyond = beyond_cpu_build()
    out.append(f"also served, with no kernel in upstream's CPU build ({len(beyond)}):")
    out += [f"  {op}" for op in beyond]
    return out
