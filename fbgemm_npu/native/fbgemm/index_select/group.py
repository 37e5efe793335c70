"""``fbgemm::group_index_select_dim0`` on npu, forward and backward.

Output ``i`` is ``input_group[i].index_select(0, indices_group[i])`` (any rank, any dtype, one
dtype and one index dtype for the whole group: a mix is refused with upstream's CUDA kernel's
ValueError, "All inputs / indices in ... groups need to have the same dtype"; upstream's CPU
kernel takes a mix).  Rather than one gather per member, the members of one
dtype are concatenated (as rows when they share a row width, flat otherwise) and gathered once
with :func:`._tables.table_gather` (the ``batch_index_select_dim0`` program), and one
``split_with_sizes_copy`` gives every output its own tensor (views of one buffer would alias each
other, which a custom op's outputs must not).  The backward scatters every output gradient back
with one ``index_add_`` per dtype, split into one gradient per input.

Semantics measured on upstream's CPU kernel (fbgemm-gpu-cpu 1.8.0): each member is an
``index_select`` (any rank >= 1, zero rows or columns included; an index outside the member's rows
is an error).  Fewer index tensors than inputs: upstream silently returns one output per index
tensor, and so do we; more index tensors than inputs: upstream reads past the list (a crash), we
refuse.  An empty group: upstream's dispatcher has no tensor to dispatch on (an error); ours too.

Launches (the group's one dtype; the per-dtype program is kept general): one member alone is its
``index_select``; more members with one row width: inputs ``cat``, indices ``cat``, the row index,
the gather, the split copy; with mixed widths the element index instead of the row index. A member
that is not viewable as rows is copied first. The mixed-width case is over the catalogue's target:
the inputs must be concatenated before one gather can read them all, and the result split into the
outputs (a fused kernel reading the members in place, as upstream's CUDA kernel does, is the
remedy).
The backward: ``zeros`` and ``index_add_`` per dtype, after a ``cat`` of the output gradients.
Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    DataChecks,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native.fbgemm.index_select import _tables
from fbgemm_npu.native.fbgemm.index_select import _utils as _u

__all__ = ["KERNELS", "group_index_select_dim0_npu"]

GROUP_INDEX_SELECT_DIM0 = "fbgemm::group_index_select_dim0"

# (members of one dtype, the gather plan over their concatenation)
Plan = list[tuple[list[int], _tables.TableGather]]


def _check_group(
    input_group: Sequence[object], indices_group: Sequence[object]
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    op = GROUP_INDEX_SELECT_DIM0
    if len(indices_group) > len(input_group):
        raise ValueError(
            f"{op}: argument 'indices_group' has {len(indices_group)} tensors but "
            f"input_group only {len(input_group)}"
        )
    if not indices_group:
        raise ValueError(f"{op}: arguments 'input_group' and 'indices_group' must not be empty")
    inputs = [check_tensor(op, f"input_group[{i}]", x) for i, x in enumerate(input_group)]
    indices = [
        _u.check_index_tensor(op, f"indices_group[{i}]", x) for i, x in enumerate(indices_group)
    ]
    inputs = inputs[: len(indices)]  # upstream returns one output per index tensor
    check_same_device(
        op,
        **{f"input_group[{i}]": x for i, x in enumerate(inputs)},
        **{f"indices_group[{i}]": x for i, x in enumerate(indices)},
    )
    for i, x in enumerate(inputs):
        if x.dim() == 0:
            raise ValueError(f"{op}: argument 'input_group[{i}]' must have at least one dimension")
    # upstream's CUDA kernel refuses a group of mixed dtypes with these words (its tests match
    # them; its CPU kernel, a loop of index_select, takes any mix)
    for what, group in (("inputs", inputs), ("indices", indices)):
        arg = "input_group" if what == "inputs" else "indices_group"
        for i, x in enumerate(group):
            if x.dtype != group[0].dtype:
                raise ValueError(
                    f"{op}: All {what} in group_index_select_dim0 groups need to have the same "
                    f"dtype: argument '{arg}[{i}]' is {x.dtype}, '{arg}[0]' {group[0].dtype}"
                )
    return inputs, indices


def _row_width(x: torch.Tensor) -> int:
    width = 1
    for s in x.shape[1:]:
        width *= s
    return width


def _plan(inputs: list[torch.Tensor], indices: list[torch.Tensor]) -> Plan:
    """One gather plan per distinct input dtype; the data checks asserted before returning."""
    by_dtype: dict[torch.dtype, list[int]] = {}
    for i, x in enumerate(inputs):
        by_dtype.setdefault(x.dtype, []).append(i)
    checks = DataChecks(GROUP_INDEX_SELECT_DIM0) if validation_enabled() else None
    plans: Plan = []
    for members in by_dtype.values():
        counts = [int(indices[i].numel()) for i in members]
        if sum(counts) == 0:
            empty = torch.zeros(0, dtype=torch.int64, device=inputs[0].device)
            plans.append((members, _tables.TableGather(empty, 1)))
            continue
        # host constants of the shapes (int(): a traced SymInt specializes, as the plan's
        # host arithmetic needs concrete sizes)
        rows = [int(inputs[i].size(0)) for i in members]
        cols = [int(_row_width(inputs[i])) for i in members]
        if len(members) == 1 and cols[0] > 0:  # the member's own indices gather its rows
            i = members[0]
            if checks is not None:
                low, high = torch.aminmax(indices[i])
                what = f"argument 'indices_group[{i}]' must hold row indices in [0, {rows[0]})"
                checks.add(low, 0, None, what)
                checks.add(high, None, rows[0] - 1, what)
            plan = _tables.TableGather(indices[i], cols[0])
            if checks is not None:  # the gather runs before the checks are read: clamp
                arg = f"indices_group[{i}]"
                plan = _tables.inside_buffer(GROUP_INDEX_SELECT_DIM0, arg, plan, rows, cols, counts)
            plans.append((members, plan))
            continue
        idx = torch.cat([indices[i] for i in members]) if len(members) > 1 else indices[members[0]]
        plan = _tables.table_gather(idx, rows, cols, counts, checks, "indices_group")
        if checks is not None:
            plan = _tables.inside_buffer(
                GROUP_INDEX_SELECT_DIM0, "indices_group", plan, rows, cols, counts
            )
        plans.append((members, plan))
    if checks is not None:
        checks.assert_on_device()
    return plans


def _gather(
    plans: Plan, inputs: Sequence[torch.Tensor], indices: Sequence[torch.Tensor]
) -> list[torch.Tensor]:
    results: list[torch.Tensor] = list(inputs)
    for members, plan in plans:
        parts = [inputs[i].reshape(-1, plan.unit) for i in members]  # views where strides allow
        source = parts[0] if len(parts) == 1 else torch.cat(parts)
        flat = source.index_select(0, plan.src).view(-1)
        # each output its own tensor (narrowed views of one buffer would alias each other):
        # one split_with_sizes_copy writes them all
        sizes = [indices[i].numel() * _row_width(inputs[i]) for i in members]
        parts = [flat] if len(members) == 1 else [flat.new_empty((n,)) for n in sizes]
        if len(members) > 1:
            torch.split_with_sizes_copy(flat, sizes, out=parts)
        for i, part in zip(members, parts, strict=True):
            results[i] = part.view(indices[i].numel(), *inputs[i].shape[1:])
    return results


def _single(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    if validation_enabled() and idx.numel() > 0:
        if x.size(0) == 0:  # no row to gather: no valid call selects any (sizes alone)
            raise ValueError(
                f"{GROUP_INDEX_SELECT_DIM0}: argument 'indices_group[0]' selects "
                f"{idx.numel()} rows of an input with none"
            )
        checks = DataChecks(GROUP_INDEX_SELECT_DIM0)
        low, high = torch.aminmax(idx)
        what = f"argument 'indices_group[0]' must hold row indices in [0, {x.size(0)})"
        checks.add(low, 0, None, what)
        checks.add(high, None, x.size(0) - 1, what)
        checks.assert_on_device()
        idx = idx.clamp(0, x.size(0) - 1)  # the gather runs before the checks are read
    return x.index_select(0, idx)


def group_index_select_dim0_npu(
    input_group: list[torch.Tensor], indices_group: list[torch.Tensor]
) -> list[torch.Tensor]:
    """``[input_group[i].index_select(0, indices_group[i]) for i ...]`` as one program per dtype.

    Launches: see the module docstring.  Launches and syncs: ``BUDGETS`` in ``budgets.py``
    (docs/ops.md).
    """
    inputs, indices = _check_group(input_group, indices_group)
    if len(inputs) == 1:
        return [_single(inputs[0], indices[0])]
    return _gather(_plan(inputs, indices), inputs, indices)


class _GroupGather(torch.autograd.Function):
    """Forward: the gathers of :func:`_gather` (plans computed before); backward: per dtype one
    ``zeros`` + ``index_add_`` over the concatenated inputs, split back per input."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, meta: tuple, *inputs: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        plans, indices = meta
        ctx.plans = plans
        ctx.shapes = [x.shape for x in inputs]
        ctx.out_numels = [i.numel() * _row_width(x) for i, x in zip(indices, inputs, strict=True)]
        return tuple(_gather(plans, inputs, indices))

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, *grads: torch.Tensor | None
    ) -> tuple[object, ...]:
        out: list[torch.Tensor | None] = [None] * len(ctx.shapes)
        for members, plan in ctx.plans:
            if not any(ctx.needs_input_grad[1 + i] for i in members):
                continue
            ref = next((grads[i] for i in members if grads[i] is not None), None)
            if ref is None:
                continue
            parts = [
                g.reshape(-1) if (g := grads[i]) is not None else ref.new_zeros(ctx.out_numels[i])
                for i in members
            ]
            flat_grad = parts[0] if len(parts) == 1 else torch.cat(parts)
            sizes = [ctx.shapes[i].numel() for i in members]
            buf = ref.new_zeros((sum(sizes),))
            unit = plan.unit
            buf.view(-1, unit).index_add_(0, plan.src, flat_grad.view(-1, unit))
            for i, part in zip(members, buf.split(sizes), strict=True):
                out[i] = part.view(ctx.shapes[i])
        return (None, *out)


def _group_index_select_dim0_autograd(
    input_group: list[torch.Tensor], indices_group: list[torch.Tensor]
) -> list[torch.Tensor]:
    """AutogradPrivateUse1: differentiable in every input (upstream CPU's formula)."""
    if not needs_grad(*input_group):
        return below_autograd(torch.ops.fbgemm.group_index_select_dim0, input_group, indices_group)
    inputs, indices = _check_group(input_group, indices_group)
    plans = below_autograd(_plan, [x.detach() for x in inputs], indices)
    return list(_GroupGather.apply((plans, indices), *inputs))


KERNELS = {
    GROUP_INDEX_SELECT_DIM0: {
        "PrivateUse1": group_index_select_dim0_npu,
        "AutogradPrivateUse1": _group_index_select_dim0_autograd,
    },
}
