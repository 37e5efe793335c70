"""Registration of the table-batched-embedding ops on npu.

``split_embedding_codegen_lookup_<opt>_function_pt2`` for every optimizer the installed fbgemm_gpu
defines a pt2 lookup for (SSD variants excluded): upstream registers them at CUDA, Meta and the
Autograd alias only, and its C++ autograd refuses npu tensors; we register

* ``AutogradPrivateUse1``: :class:`.lookup.SplitLookupFunction` -- the lookup, with a backward
  that applies the fused optimizer to the weights and states in place -- when a gradient is
  needed, else the forward alone;
* ``PrivateUse1``: the forward alone (reached when autograd is not involved).

A call's arguments are read by their schema names and unpacked by :mod:`.call`.  A traced call
(fake tensors: torch.compile, AOTAutograd, opcheck) runs the layout-free program of
:mod:`.traced` / :mod:`.traced_backward` instead, which needs no host read of the layout.

Upstream's Meta kernels stay in charge of shapes.  The metadata ops (``bounds_check_indices``,
``get_infos_metadata``, ``generate_vbe_metadata``) live in :mod:`.metadata`;
``dense_embedding_codegen_lookup_function`` is registered here.

What the lookups launch: see :mod:`.forward` (forward) and :mod:`.backward` plus
:mod:`.optimizers` (backward).  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fbgemm_npu.native._autograd import needs_grad
from fbgemm_npu.native.fbgemm.tbe.call import LookupCall, named_args, op_name, parse_call
from fbgemm_npu.native.fbgemm.tbe.dense import (
    DENSE_EMBEDDING_CODEGEN_LOOKUP_FUNCTION,
    dense_lookup_autograd,
    dense_lookup_forward,
)
from fbgemm_npu.native.fbgemm.tbe.lookup import lookup_forward_only, run_lookup
from fbgemm_npu.native.fbgemm.tbe.traced_backward import traced_lookup, traced_lookup_forward_only

__all__ = ["KERNELS", "pt2_optimizers"]


def pt2_optimizers() -> list[str]:
    """Optimizers with a ``split_embedding_codegen_lookup_<opt>_function_pt2`` op (no SSD)."""
    prefix, suffix = "fbgemm::split_embedding_codegen_lookup_", "_function_pt2"
    names = []
    for n in torch._C._dispatch_get_all_op_names():
        if n.startswith(prefix) and n.endswith(suffix) and "ssd" not in n:
            names.append(n[len(prefix) : -len(suffix)])
    return sorted(names)


def _forward_only(call: LookupCall) -> torch.Tensor:
    if call.traced:
        return traced_lookup_forward_only(call)
    return lookup_forward_only(call)


def _autograd_kernel(optimizer: str) -> Callable[..., torch.Tensor]:
    op = op_name(optimizer)

    def kernel(*args: Any, **kwargs: Any) -> torch.Tensor:
        named = named_args(op, args, kwargs)
        call = parse_call(optimizer, named)
        placeholder = named["placeholder_autograd_tensor"]
        if not needs_grad(placeholder, call.indice_weights, call.dev_weights_param):
            return _forward_only(call)  # eval / inference: nothing to save for a backward
        if call.traced:
            return traced_lookup(call, placeholder)
        return run_lookup(call, placeholder)

    kernel.__name__ = f"split_embedding_codegen_lookup_{optimizer}_function_pt2_autograd_npu"
    return kernel


def _forward_kernel(optimizer: str) -> Callable[..., torch.Tensor]:
    op = op_name(optimizer)

    def kernel(*args: Any, **kwargs: Any) -> torch.Tensor:
        return _forward_only(parse_call(optimizer, named_args(op, args, kwargs)))

    kernel.__name__ = f"split_embedding_codegen_lookup_{optimizer}_function_pt2_npu"
    return kernel


KERNELS: dict[str, dict[str, Callable[..., Any]]] = {
    op_name(opt): {
        "AutogradPrivateUse1": _autograd_kernel(opt),
        "PrivateUse1": _forward_kernel(opt),
    }
    for opt in pt2_optimizers()
}
KERNELS[DENSE_EMBEDDING_CODEGEN_LOOKUP_FUNCTION] = {
    "AutogradPrivateUse1": dense_lookup_autograd,
    "PrivateUse1": dense_lookup_forward,
}
