"""The traced TBE lookups' autograd functions and backward (see :mod:`.traced`).

:class:`TracedSplitLookup` is :class:`.lookup.SplitLookupFunction` for a traced call: the same
math -- de-duplicated rows (:func:`.backward.aggregate_rows`), the fused optimizer step written
into the weights and states in place, the per-sample-weight gradient, the ``none`` optimizer's
weights gradient -- with every row read and written through :func:`.traced.masked_rows` /
:func:`.traced.write_elements`.  Under AOTAutograd the in-place writes become the backward
graph's mutations of the weights and states it was given, so a compiled training step updates
the module's tables as the eager one does.  :class:`TracedDenseLookup` is
:class:`.dense.DenseLookupFunction`'s counterpart (a dense weights gradient).

The ``none`` optimizer's gradient is dense here (``[total_hash_size, max_D]``): a traced graph
has no sparse COO outputs; the eager kernel returns upstream's sparse layout where the device
has one.  Not budgeted, as :mod:`.traced` says.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from fbgemm_npu.native.fbgemm.tbe.backward import (
    RunSlots,
    aggregate_rows,
    index_scale,
    write_rows,
)
from fbgemm_npu.native.fbgemm.tbe.call import LookupCall
from fbgemm_npu.native.fbgemm.tbe.forward import POOLING_MEAN, POOLING_NONE, ForwardState
from fbgemm_npu.native.fbgemm.tbe.lookup import (
    apply_gwd,
    gwd_index_scale,
    indice_weights_grad_scaled,
)
from fbgemm_npu.native.fbgemm.tbe.optimizers import OPTIMIZERS
from fbgemm_npu.native.fbgemm.tbe.traced import (
    TracedLayout,
    at_most,
    masked_rows,
    traced_forward,
    traced_layout,
    write_elements,
)

__all__ = [
    "TracedDenseLookup",
    "TracedSplitLookup",
    "call_layout",
    "dense_forward",
    "grad_rows",
    "traced_backward",
    "traced_lookup",
    "traced_lookup_forward_only",
]


def call_layout(call: LookupCall) -> TracedLayout:
    """The traced layout of a pt2 lookup call."""
    return traced_layout(
        call.op,
        call.D_offsets,
        call.weights_offsets,
        [(off, rw) for (_, off), rw in zip(call.states, call.state_rowwise, strict=True)],
        call.weights.numel(),
        call.max_D,
        call.total_D,
    )


def _forward(
    call: LookupCall, lay: TracedLayout, indice_weights: torch.Tensor | None, for_backward: bool
) -> tuple[torch.Tensor, ForwardState]:
    return traced_forward(
        call.op,
        lay,
        call.weights,
        call.indices,
        call.offsets,
        call.pooling_mode,
        indice_weights,
        call.output_dtype,
        call.vbe,
        for_backward=for_backward,
        index_scale=gwd_index_scale(call),
    )


def grad_rows(
    lay: TracedLayout, mat: torch.Tensor, grad_output: torch.Tensor, pooling_mode: int
) -> torch.Tensor:
    """Each index's gradient row ``[L, max_D]`` (0 past its D and for indices of no feature):
    row 2 of the index matrix is its first element in ``grad_output`` (pooling NONE: row i)."""
    start = mat[2]
    if pooling_mode == POOLING_NONE:
        start = torch.arange(mat.size(1), device=mat.device) * lay.max_D
    # one zero appended: the masked reads have an element to address even when there are no
    # bags (B = 0: every index past the end, of width 0), whose size a trace may not know
    flat = torch.cat([grad_output.reshape(-1), grad_output.new_zeros(1)])
    return masked_rows(flat, start, mat[lay.width_row], lay.max_D)[0]


def _indice_weights_grad(
    call: LookupCall, state: ForwardState, rows: torch.Tensor, slots: RunSlots, w_old: torch.Tensor
) -> torch.Tensor:
    """``<gradient row, table row>`` per index, the table row read in the backward: ``w_old``,
    the rows of the index's run.  Read from the runs rather than gathered again per index, so
    that the trace cannot merge the read with the forward's: a second backward through a
    retained graph then sees the rows as the first one left them, as in eager."""
    assert slots.seg is not None and slots.perm is not None
    # the run of each index (from 1: slot run - 1)
    run_of = torch.empty_like(slots.seg).index_copy_(0, slots.perm, slots.seg)
    w = w_old.index_select(0, run_of - 1)
    dot = (rows.to(torch.float32) * w.to(torch.float32)).sum(1)
    return indice_weights_grad_scaled(call, state, torch.where(state.mats[0][1] > 0, dot, 0.0))


@dataclasses.dataclass
class _Rows:
    """The de-duplicated rows the step reads: weights and states, where they are, the masks."""

    w_old: torch.Tensor  # [L, max_D] in the weights' dtype, 0 past each row's D
    w_at: torch.Tensor  # [L, max_D] elements of the weights buffer
    keep: torch.Tensor  # [L, max_D] bool: valid slot and column
    invalid: torch.Tensor  # [L] bool: slots that change nothing
    width: torch.Tensor  # [L] int64: each slot's D
    s_old: list[torch.Tensor]
    s_at: list[torch.Tensor]


def _read(call: LookupCall, lay: TracedLayout, slots: RunSlots) -> _Rows:
    index = slots.index
    invalid = index[1] == 0
    width = index[lay.width_row]
    w_old, w_at, cols_ok = masked_rows(call.weights, index[0], width, lay.max_D)
    s_old, s_at = [], []
    for s, ((buf, _), rowwise) in enumerate(zip(call.states, call.state_rowwise, strict=True)):
        if rowwise:
            at = at_most(index[3 + s], buf.numel() - 1)
            s_old.append(buf.index_select(0, at))
        else:
            old, at, _ = masked_rows(buf, index[3 + s], width, lay.max_D)
            s_old.append(old)
        s_at.append(at)
    keep = cols_ok & ~invalid[:, None]
    return _Rows(w_old, w_at, keep, invalid, width, s_old, s_at)


def _step(call: LookupCall, slots: RunSlots, r: _Rows) -> None:
    """The fused optimizer step on the de-duplicated rows, written in place (the general form
    of :func:`.lookup._step_class`: a traced learning rate is a tensor)."""
    spec = OPTIMIZERS[call.optimizer]
    w_in = r.w_old.to(torch.float32)
    if call.gwd is not None:
        w_in = apply_gwd(call, call.gwd, r.s_at[0], r.w_old, w_in, r.invalid)
    step = dataclasses.replace(call.step, width=r.width.clamp(min=1).to(torch.float32))
    w_new, s_new = spec.step(slots.agg, w_in, [x.to(torch.float32) for x in r.s_old], step)
    write_elements(call.weights, r.w_at, r.w_old, w_new, r.keep)
    for (buf, _), rowwise, at, old, new in zip(
        call.states, call.state_rowwise, r.s_at, r.s_old, s_new, strict=True
    ):
        if rowwise:
            write_rows(buf, at, old, new, r.invalid)
        else:
            write_elements(buf, at, old, new, r.keep)


def _none_grad(call: LookupCall, lay: TracedLayout, slots: RunSlots) -> torch.Tensor:
    """The ``none`` optimizer's weights gradient, dense ``[total_hash_size, max_D]`` (one D)."""
    n = call.total_unique_indices
    rows = torch.div(slots.index[0][:n], max(lay.max_D, 1), rounding_mode="floor")
    values = slots.agg[:n].to(call.weights.dtype)
    dense = values.new_zeros((call.total_hash_size, lay.max_D))
    return dense.index_put_((rows,), values, accumulate=True)


def traced_backward(
    call: LookupCall,
    lay: TracedLayout,
    state: ForwardState,
    grad_output: torch.Tensor,
    need_indice_weights_grad: bool,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """:func:`.lookup.run_backward` for a traced call."""
    with torch.no_grad():
        if call.gradient_clipping:
            grad_output = grad_output.clamp(min=-call.max_gradient, max=call.max_gradient)
        mat = state.mats[0]
        rows = grad_rows(lay, mat, grad_output, call.pooling_mode)
        # the keys are flat elements + 1: bounded by the weights' size when the trace knows it
        numel = call.weights.numel()
        slots = aggregate_rows(
            mat,
            rows,
            True,
            state,
            call.offsets,
            call.pooling_mode,
            call.indice_weights,
            numel + 1 if isinstance(numel, int) else None,
        )
        read = _read(call, lay, slots)
        iw_grad = None
        if need_indice_weights_grad and call.indice_weights is not None:
            iw_grad = _indice_weights_grad(call, state, rows, slots, read.w_old)
        if call.optimizer == "none":
            return iw_grad, _none_grad(call, lay, slots)
        _step(call, slots, read)
        return iw_grad, None


def _stashed_on_ctx(*tensors: torch.Tensor | None) -> None:
    """Tell AOTAutograd that ``tensors`` are stashed on ``ctx`` (not ``save_for_backward``):
    saved for the backward graph without a version-counter check, as eager autograd keeps a
    ``ctx`` attribute.  The fused step writes the tables and states in place, so a second
    backward through a retained graph reads them updated -- upstream's semantics, and ours in
    eager -- instead of failing the check.  The node meta is torch's own mark for such tensors
    (``Note [Activations with no version counter checks in eager]``, set by dynamo for an
    autograd.Function it traces); without a tracer (or should the private helper move) nothing
    is marked and a second backward raises torch's version-counter error."""
    try:
        from torch.fx.experimental.proxy_tensor import _get_proxies
    except ImportError:  # pragma: no cover - a torch without the helper
        return
    for t in tensors:
        if isinstance(t, torch.Tensor):
            for proxy in _get_proxies(t):
                proxy.node.meta["saved_tensor_with_no_vc_check"] = True


class TracedSplitLookup(torch.autograd.Function):
    """Forward: the traced lookup.  Backward: the fused optimizer step, in place."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        placeholder: torch.Tensor,
        indice_weights: torch.Tensor | None,
        dev_weights: torch.Tensor | None,
        call: LookupCall,
    ) -> torch.Tensor:
        lay = call_layout(call)
        out, state = _forward(call, lay, indice_weights, for_backward=True)
        ctx.call, ctx.lay = call, lay
        state.save(ctx)
        gwd = call.gwd.prev_iter if call.gwd is not None else None
        _stashed_on_ctx(call.weights, *(buf for buf, _ in call.states), gwd)
        return out

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        state = ForwardState.saved(ctx)
        grads = traced_backward(ctx.call, ctx.lay, state, grad_output, ctx.needs_input_grad[1])
        return None, grads[0], grads[1], None


def traced_lookup(call: LookupCall, placeholder: torch.Tensor) -> torch.Tensor:
    """Autograd entry of a traced pt2 lookup."""
    return TracedSplitLookup.apply(placeholder, call.indice_weights, call.dev_weights_param, call)


def traced_lookup_forward_only(call: LookupCall) -> torch.Tensor:
    """A traced pt2 lookup without a backward."""
    return _forward(call, call_layout(call), call.indice_weights, for_backward=False)[0]


class TracedDenseLookup(torch.autograd.Function):
    """:class:`.dense.DenseLookupFunction` for a traced call: the dense weights gradient."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        dev_weights: torch.Tensor,
        indice_weights: torch.Tensor | None,
        args: dict[str, Any],
    ) -> torch.Tensor:
        out, lay, state = dense_forward(args, dev_weights, indice_weights, for_backward=True)
        ctx.args, ctx.lay = args, lay
        state.save(ctx)
        ctx.dev_weights, ctx.indice_weights = dev_weights, indice_weights
        return out

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        args, lay, state = ctx.args, ctx.lay, ForwardState.saved(ctx)
        mode, weights = args["pooling_mode"], ctx.dev_weights
        mat = state.mats[0]
        width = mat[lay.width_row]
        rows = grad_rows(lay, mat, grad_output, mode).to(torch.float32)
        member = mat[1] > 0
        grad_w = grad_iw = None
        if ctx.needs_input_grad[1] and ctx.indice_weights is not None:
            w = masked_rows(weights.reshape(-1), mat[0], width, lay.max_D)[0]
            dot = (rows * w.to(torch.float32)).sum(1)
            if mode == POOLING_MEAN:
                dot = dot * index_scale(state, args["offsets"], mode, None)
            grad_iw = torch.where(member, dot, 0.0)
        if ctx.needs_input_grad[0]:
            scale = index_scale(state, args["offsets"], mode, ctx.indice_weights)
            if scale is not None:
                rows = rows * scale[:, None]
            _, at, ok = masked_rows(weights.reshape(-1), mat[0], width, lay.max_D)
            rows = torch.where(ok & member[:, None], rows, 0.0).to(weights.dtype)
            flat = torch.zeros_like(weights).reshape(-1)
            flat.index_put_((at.reshape(-1),), rows.reshape(-1), accumulate=True)
            grad_w = flat.view_as(weights)
        return grad_w, grad_iw, None


def dense_forward(
    args: dict[str, Any],
    dev_weights: torch.Tensor,
    indice_weights: torch.Tensor | None,
    for_backward: bool,
) -> tuple[torch.Tensor, TracedLayout, ForwardState]:
    """The traced dense lookup of ``args`` (:func:`.dense._args`): output, layout, state."""
    op = "fbgemm::dense_embedding_codegen_lookup_function"
    flat = dev_weights.reshape(-1)
    a = args
    lay = traced_layout(
        op, a["D_offsets"], a["weights_offsets"], [], flat.numel(), a["max_D"], a["total_D"]
    )
    out, state = traced_forward(
        op,
        lay,
        flat,
        a["indices"],
        a["offsets"],
        a["pooling_mode"],
        indice_weights,
        a["output_dtype"],
        a["vbe"],
        for_backward=for_backward,
    )
    return out, lay, state
