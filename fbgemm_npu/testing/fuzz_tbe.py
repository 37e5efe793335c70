"""Programs of the tbe family's fuzz tests (``tests/fuzz/test_fuzz_tbe.py``): whole TBE flows.

The fuzz harness (:mod:`fbgemm_npu.testing.fuzz`) calls a program on the placed arguments (our
side: the tensors on npu, or where ``On`` puts them) and, as the oracle, on contiguous CPU copies.
A program builds upstream's ``SplitTableBatchedEmbeddingBagsCodegen`` on the device of its
``weights`` argument -- the same class, so the CPU run is upstream's own CPU kernels, in the same
``BoundsCheckMode`` -- loads the tables from ``weights``, runs the forward and, when a ``grad`` is
given, the backward with the fused optimizer step, and returns what the run produced or changed:
the output, every table and optimizer state after the step, the per-sample weights' gradient and
the bounds-check warning counter.  The harness also compares the input tensors after the call
(``bounds_check_indices`` repairs ``indices`` / ``offsets`` in place in WARNING and IGNORE).

Because every table and state is compared with upstream's after the step, an index outside its
table that read or updated another table's rows shows up as a wrong result.
"""

from __future__ import annotations

from typing import Any

import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode, PoolingMode

__all__ = ["bounds_check_none", "lookup_op", "tbe_step"]


def lookup_op(optimizer: str) -> str:
    """The pt2 lookup op an ``EmbOptimType`` name's module calls."""
    name = {"EXACT_SGD": "sgd", "EXACT_ROWWISE_ADAGRAD": "rowwise_adagrad"}[optimizer]
    return f"fbgemm::split_embedding_codegen_lookup_{name}_function_pt2"


def _build(
    weights: torch.Tensor, specs: list[tuple[int, int]], optimizer: str, mode: str, pooling: str
) -> torch.nn.Module:
    from fbgemm_npu.testing.tbe_inputs import training_tbe

    device = str(weights.device)
    tbe = training_tbe(
        EmbOptimType[optimizer],
        specs,
        device,
        "torchrec",
        bounds_check_mode=BoundsCheckMode[mode],
        pooling_mode=PoolingMode[pooling],
    )
    with torch.no_grad():
        start = 0
        for w in tbe.split_embedding_weights():
            w.copy_(weights[start : start + w.numel()].view_as(w))
            start += w.numel()
    return tbe


def tbe_step(
    weights: torch.Tensor,
    indices: Any,
    offsets: Any,
    per_sample_weights: Any = None,
    *,
    grad_seed: int | None = None,
    specs: list[tuple[int, int]],
    optimizer: str = "EXACT_SGD",
    mode: str = "WARNING",
    pooling: str = "SUM",
) -> tuple[Any, ...]:
    """One step of upstream's TBE on ``weights.device`` (see the module docstring).

    ``weights``: every table's rows, flat, in table order; ``grad_seed``: seeds the output
    gradient of the backward (None: forward only).  Returns ``(output, tables, states,
    per-sample weights' gradient or None, bounds_check_warning)``.
    """
    tbe = _build(weights, specs, optimizer, mode, pooling)
    psw = per_sample_weights
    if isinstance(psw, torch.Tensor) and psw.is_floating_point():
        psw = psw.detach().requires_grad_()
    out = tbe(indices, offsets, per_sample_weights=psw)
    psw_grad = None
    if grad_seed is not None:
        grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_seed))
        out.backward(grad.to(device=out.device, dtype=out.dtype))
        if isinstance(psw, torch.Tensor) and psw.requires_grad:
            psw_grad = psw.grad
    tables = [w.detach().clone() for w in tbe.split_embedding_weights()]
    states = [s.detach().clone() for st in tbe.split_optimizer_states() for s in st]
    warning = getattr(tbe, "bounds_check_warning", None)
    return out.detach(), tables, states, psw_grad, warning


def bounds_check_none(*args: Any, **kwargs: Any) -> None:
    """The reference of ``bounds_check_indices`` in ``BoundsCheckMode.NONE``: it changes
    nothing.  (Upstream's CPU kernel, which upstream's modules never call in that mode, reads
    past the buffers of broken offsets there -- a segfault -- so it cannot be the oracle.)"""
    return None
