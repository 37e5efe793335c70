"""Regroup KeyedTensors on npu: ``fbgemm::permute_multi_embedding`` (and its internal
``permute_multi_embedding_function``), ``fbgemm::regroup_keyed_tensor``,
``fbgemm::kt_regroup_arguments`` -- torchrec's ``KeyedTensor.regroup`` / ``KTRegroupAsDict`` path.

Each regrouping is a column gather from the inputs concatenated along dim 1 (``src`` from
``_utils``), its backward the matching ``index_add``.  Semantics are upstream's CPU
kernels' (fbgemm-gpu-cpu 1.8.0), measured:

* values float32, float16 or bfloat16, one dtype and device for all; ``permutes`` int32
  ``(P, 6)`` (upstream CPU and CUDA refuse other dtypes too);
* the batch is ``pooled_embs[0]``'s; later inputs with more rows are read from their first rows,
  as upstream does; inputs of rank > 2 are read as ``(B, -1)``, as upstream's CPU kernel does;
* ``in_shapes`` / ``out_shapes`` are not read (upstream CPU ignores them; CUDA uses them as row
  strides, so they must agree with the inputs there anyway);
* rows must copy inside their input and tile every output in row order, as
  ``kt_regroup_arguments`` makes them: upstream reads and writes out of bounds otherwise, and
  leaves the columns no row fills uninitialised;
* the gradient of input columns no output reads is 0 (upstream: uninitialised memory);
* ``kt_regroup_arguments`` returns its tensors on ``embs``' device, as upstream's CUDA kernel does.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence

import torch

from fbgemm_npu.native._checks import (
    allocation_of,
    check_dtype,
    check_same_device,
    check_same_dtype,
    check_tensor,
)
from fbgemm_npu.native.fbgemm.pooled import _utils as plans

__all__ = [
    "KERNELS",
    "kt_regroup_arguments_npu",
    "permute_multi_embedding_function_npu",
    "permute_multi_embedding_npu",
    "regroup_keyed_tensor_npu",
]

PERMUTE_MULTI_EMBEDDING = "fbgemm::permute_multi_embedding"
PERMUTE_MULTI_EMBEDDING_FUNCTION = "fbgemm::permute_multi_embedding_function"
KT_REGROUP_ARGUMENTS = "fbgemm::kt_regroup_arguments"
REGROUP_KEYED_TENSOR = "fbgemm::regroup_keyed_tensor"
MULTI_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _multi_inputs(
    op: str, pooled_embs: Sequence[torch.Tensor]
) -> tuple[list[torch.Tensor], int, list[int]]:
    """Checked inputs read as ``(B, width)``, the batch ``B`` and the widths (metadata only)."""
    if len(pooled_embs) == 0:
        raise ValueError(f"{op}: argument 'pooled_embs' must not be empty")
    named = {
        f"pooled_embs[{k}]": check_tensor(op, f"pooled_embs[{k}]", t)
        for k, t in enumerate(pooled_embs)
    }
    check_same_device(op, **named)
    check_dtype(op, "pooled_embs[0]", pooled_embs[0], MULTI_DTYPES)
    check_same_dtype(op, **named)
    batch = pooled_embs[0].size(0) if pooled_embs[0].dim() else 0
    flat = []
    for name, t in named.items():
        if t.dim() < 2 or t.size(0) < batch:
            raise ValueError(
                f"{op}: argument '{name}' must be at least 2-D with at least {batch} rows (the "
                f"batch of pooled_embs[0]), got shape {tuple(t.shape)}"
            )
        flat.append(t.narrow(0, 0, batch).reshape(batch, math.prod(t.shape[1:])))
    return flat, batch, [t.size(1) for t in flat]


def _check_permutes(
    op: str, permutes: torch.Tensor, first: torch.Tensor, in_shapes: object, out_shapes: object
) -> None:
    """``permutes`` int32 ``(P, 6)``; it, ``in_shapes`` and ``out_shapes`` on the inputs' device
    (upstream CUDA checks the same; its CPU kernel reads neither shape tensor)."""
    check_tensor(op, "permutes", permutes)
    check_same_device(
        op,
        **{"pooled_embs[0]": first},
        permutes=permutes,
        in_shapes=in_shapes,
        out_shapes=out_shapes,
    )
    # With no rows upstream's CPU kernel never reads ``permutes``, so it takes an int64 one too.
    dtypes = (torch.int32,) if first.size(0) else (torch.int32, torch.int64)
    check_dtype(op, "permutes", permutes, dtypes)
    if permutes.dim() != 2 or permutes.size(1) != plans.PERMUTE_COLUMNS:
        raise ValueError(
            f"{op}: argument 'permutes' must be 2-D with {plans.PERMUTE_COLUMNS} columns, got "
            f"shape {tuple(permutes.shape)}"
        )


def _out_lengths(op: str, out_lengths: Sequence[int], arg: str = "out_lengths") -> list[int]:
    widths = [int(w) for w in out_lengths]
    if any(w < 0 for w in widths):
        raise ValueError(f"{op}: argument '{arg}' must be non-negative, got {widths}")
    return widths


def _multi_src(
    op: str, permutes: torch.Tensor, in_widths: list[int], out_widths: list[int]
) -> torch.Tensor:
    """``src`` for ``permutes``, derived and checked on the device every call
    (:func:`._utils.device_src`; why no plan is kept: :mod:`._utils`)."""
    return plans.device_src(op, permutes, in_widths, out_widths)


def _multi_call(
    op: str,
    pooled_embs: Sequence[torch.Tensor],
    permutes: torch.Tensor,
    in_shapes: torch.Tensor,
    out_shapes: torch.Tensor,
    out_lengths: Sequence[int],
) -> tuple[list[torch.Tensor], int, list[int], list[int]]:
    """Checks of a ``permute_multi_embedding`` call: ``(inputs as (B, width), B, input widths,
    output widths)``."""
    inputs, batch, widths = _multi_inputs(op, pooled_embs)
    _check_permutes(op, permutes, inputs[0], in_shapes, out_shapes)
    return inputs, batch, widths, _out_lengths(op, out_lengths)


def _permute_multi(
    op: str,
    pooled_embs: Sequence[torch.Tensor],
    permutes: torch.Tensor,
    in_shapes: torch.Tensor,
    out_shapes: torch.Tensor,
    out_lengths: Sequence[int],
    reverse: bool,
) -> list[torch.Tensor]:
    """The PrivateUse1 program of both ``permute_multi_embedding`` ops, checked and named as
    ``op``: the gather, or (``reverse``) the scatter back."""
    call = _multi_call(op, pooled_embs, permutes, in_shapes, out_shapes, out_lengths)
    inputs, batch, widths, lengths = call
    if batch == 0:
        return _no_rows(inputs[0], lengths)
    if reverse:
        src = _multi_src(op, permutes, lengths, widths)
        with _outputs_of(op, batch, lengths):
            return plans.scatter_src(inputs, src, lengths, batch)
    src = _multi_src(op, permutes, widths, lengths)
    with _outputs_of(op, batch, lengths):
        return plans.apply_src(inputs, src, lengths)


def _outputs_of(op: str, batch: int, lengths: Sequence[int]) -> contextlib.AbstractContextManager:
    """An allocation failure of the outputs (or the gradients' sum) named after 'out_lengths'."""
    return allocation_of(op, f"the outputs of 'out_lengths' ({batch} x {sum(lengths)} elements)")


def permute_multi_embedding_function_npu(
    pooled_embs: Sequence[torch.Tensor],
    permutes: torch.Tensor,
    in_shapes: torch.Tensor,
    out_shapes: torch.Tensor,
    out_lengths: Sequence[int],
    reverse: bool = False,
) -> list[torch.Tensor]:
    """Forward (``reverse=False``): ``out[o][:, oo:oo+len] = pooled_embs[i][:, io:io+len]`` for
    every row ``[i, o, io, oo, len, next]`` of ``permutes``.  Reverse (the backward): the inputs
    are the outputs' gradients and ``out_lengths`` the original inputs' widths; every row adds
    back, so a key used twice gets the sum (upstream: copy at the first row, add at rows with
    ``next < 0``; the same for ``kt_regroup_arguments``' rows).

    Launches: the gather (``cat``, ``index_select``, ``split_with_sizes_copy``) or the scatter
    (``cat``, ``zeros``, ``index_add``, ``split_with_sizes_copy``), without the ``cat`` / split for
    one input or output; plus, every call, the plan derived and checked on the device, all on a
    910B's AI Core (:func:`._utils.device_src`: 9 launches, the widths' table uploaded on the first
    call with a layout; ``FBGEMM_NPU_VALIDATE=0`` drops the check).  Launches and syncs:
    ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    op = PERMUTE_MULTI_EMBEDDING_FUNCTION
    args = (pooled_embs, permutes, in_shapes, out_shapes, out_lengths)
    return _permute_multi(op, *args, reverse=reverse)


def permute_multi_embedding_npu(
    pooled_embs: Sequence[torch.Tensor],
    permutes: torch.Tensor,
    in_shapes: torch.Tensor,
    out_shapes: torch.Tensor,
    out_lengths: Sequence[int],
) -> list[torch.Tensor]:
    """``permute_multi_embedding_function(..., reverse=False)``; same launches and syncs."""
    args = (pooled_embs, permutes, in_shapes, out_shapes, out_lengths)
    return _permute_multi(PERMUTE_MULTI_EMBEDDING, *args, reverse=False)


def _no_rows(first: torch.Tensor, lengths: Sequence[int]) -> list[torch.Tensor]:
    """Outputs of a call with no rows: empty, never reading the plan (as upstream; no launch)."""
    return [first.new_empty((0, n)) for n in lengths]


class _GatherFunction(torch.autograd.Function):
    """Outputs gathered by ``src`` from the inputs; the gradient scattered back by ``src``."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        src: torch.Tensor,
        batch: int,
        out_widths: list[int],
        *pooled_embs: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        flat = [t.narrow(0, 0, batch).reshape(batch, math.prod(t.shape[1:])) for t in pooled_embs]
        ctx.save_for_backward(src)
        ctx.meta = (batch, [t.size(1) for t in flat], [t.shape for t in pooled_embs])  # type: ignore[attr-defined]
        return tuple(plans.apply_src(flat, src, out_widths))

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, *grads: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        (src,) = ctx.saved_tensors  # type: ignore[attr-defined]
        batch, widths, shapes = ctx.meta  # type: ignore[attr-defined]
        grad_in = plans.scatter_src(grads, src, widths, batch)
        return (
            None,
            None,
            None,
            *(_restore(g, s, batch) for g, s in zip(grad_in, shapes, strict=True)),
        )


def _restore(grad: torch.Tensor, shape: torch.Size, batch: int) -> torch.Tensor:
    """A ``(B, width)`` gradient in its input's shape; rows past the batch (never read) get 0."""
    if shape[0] == batch:
        return grad.view(shape)
    full = grad.new_zeros(shape)
    full.narrow(0, 0, batch).copy_(grad.view((batch, *shape[1:])))
    return full


def permute_multi_embedding_autograd(
    pooled_embs: Sequence[torch.Tensor],
    permutes: torch.Tensor,
    in_shapes: torch.Tensor,
    out_shapes: torch.Tensor,
    out_lengths: Sequence[int],
) -> list[torch.Tensor]:
    """AutogradPrivateUse1 of ``permute_multi_embedding``; backward = the reverse permutation."""
    op = PERMUTE_MULTI_EMBEDDING
    call = _multi_call(op, pooled_embs, permutes, in_shapes, out_shapes, out_lengths)
    _, batch, widths, lengths = call
    src = _multi_src(op, permutes, widths, lengths)
    with _outputs_of(op, batch, lengths):
        return list(_GatherFunction.apply(src, batch, lengths, *pooled_embs)) if lengths else []


def kt_regroup_arguments_npu(
    embs: torch.Tensor,
    keys: Sequence[Sequence[str]],
    lengths: Sequence[Sequence[int]],
    groups: Sequence[Sequence[str]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
    """``(permutes (P, 6) int32, in_shapes int32, out_shapes int32, out_lengths)`` on ``embs``'
    device, computed on the host from the string keys (:func:`._utils.kt_rows`).

    Launches: one pinned, non-blocking host-to-device copy per tensor (no stall); fresh tensors
    every call (the caller owns them).  Launches and syncs: ``BUDGETS`` in ``budgets.py``
    (docs/ops.md).
    """
    device = check_tensor(KT_REGROUP_ARGUMENTS, "embs", embs).device
    rows, in_lengths, out_lengths = plans.kt_rows(KT_REGROUP_ARGUMENTS, keys, lengths, groups)
    host = _int32(rows).view(-1, plans.PERMUTE_COLUMNS)
    permutes = plans.to_device(host, device)
    in_shapes = plans.to_device(_int32(in_lengths), device)
    out_shapes = _int32(out_lengths)
    return permutes, in_shapes, plans.to_device(out_shapes, device), out_shapes.tolist()


def _int32(values: object) -> torch.Tensor:
    """A host int32 tensor of ``values``, wrapped like upstream's int32 vectors."""
    return torch.tensor(values, dtype=torch.int64).to(torch.int32)


def _regroup_src(
    pooled_embs: Sequence[torch.Tensor],
    keys: Sequence[Sequence[str]],
    lengths: Sequence[Sequence[int]],
    groups: Sequence[Sequence[str]],
) -> tuple[list[torch.Tensor], int, torch.Tensor, list[int]]:
    """Inputs, batch, ``src`` on the device and the output widths.  ``src`` is made on the host
    (checked there) and uploaded on the first call with a layout (keys, lengths, groups, input
    widths: host values), then kept (:func:`._utils.cached`); a warm call launches nothing for it.
    """
    inputs, batch, widths = _multi_inputs(REGROUP_KEYED_TENSOR, pooled_embs)
    device = inputs[0].device
    layout = (
        "regroup_keyed_tensor",
        device,
        tuple(tuple(str(k) for k in ks) for ks in keys),
        tuple(tuple(int(n) for n in ns) for ns in lengths),
        tuple(tuple(str(g) for g in gs) for gs in groups),
        tuple(widths),
    )

    def build() -> tuple[torch.Tensor, list[int]]:
        rows, _, out_widths = plans.kt_rows(REGROUP_KEYED_TENSOR, keys, lengths, groups)
        src = plans.host_src(REGROUP_KEYED_TENSOR, rows, widths, out_widths, arg="lengths")
        return plans.to_device(src, device), out_widths

    src, out_widths = plans.cached(layout, build)
    return inputs, batch, src, list(out_widths)


def regroup_keyed_tensor_npu(
    pooled_embs: Sequence[torch.Tensor],
    keys: Sequence[Sequence[str]],
    lengths: Sequence[Sequence[int]],
    groups: Sequence[Sequence[str]],
) -> list[torch.Tensor]:
    """``kt_regroup_arguments`` + ``permute_multi_embedding`` with the plan made on the host.

    Launches: ``cat``, ``index_select``, ``split_with_sizes_copy``, and a non-blocking upload of
    ``src`` on the first call with a layout (then kept: ``_regroup_src``).
    Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    inputs, _, src, out_widths = _regroup_src(pooled_embs, keys, lengths, groups)
    return plans.apply_src(inputs, src, out_widths)


def regroup_keyed_tensor_autograd(
    pooled_embs: Sequence[torch.Tensor],
    keys: Sequence[Sequence[str]],
    lengths: Sequence[Sequence[int]],
    groups: Sequence[Sequence[str]],
) -> list[torch.Tensor]:
    """AutogradPrivateUse1 of ``regroup_keyed_tensor``: the forward's gather, the backward's
    scatter (:func:`._utils.scatter_src`)."""
    _, batch, src, out_widths = _regroup_src(pooled_embs, keys, lengths, groups)
    return list(_GatherFunction.apply(src, batch, out_widths, *pooled_embs)) if out_widths else []


KERNELS = {
    PERMUTE_MULTI_EMBEDDING: {
        "PrivateUse1": permute_multi_embedding_npu,
        "AutogradPrivateUse1": permute_multi_embedding_autograd,
    },
    PERMUTE_MULTI_EMBEDDING_FUNCTION: {"PrivateUse1": permute_multi_embedding_function_npu},
    KT_REGROUP_ARGUMENTS: {"PrivateUse1": kt_regroup_arguments_npu},
    REGROUP_KEYED_TENSOR: {
        "PrivateUse1": regroup_keyed_tensor_npu,
        "AutogradPrivateUse1": regroup_keyed_tensor_autograd,
    },
}
