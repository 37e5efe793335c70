"""The autograd function of the ``split_embedding_codegen_lookup_<opt>_function_pt2`` ops on npu.

:class:`SplitLookupFunction` serves every optimizer, given the call :mod:`.call` unpacked: its
forward is :func:`.forward.tbe_forward`; its backward de-duplicates the touched rows
(:mod:`.backward`) and applies the optimizer (:mod:`.optimizers`) to the weights and states *in
place*, as upstream's fused backward does, returning no gradient for
``placeholder_autograd_tensor`` (upstream returns an undefined tensor too), the per-sample-weight
gradient when those require grad, and, for the ``none`` optimizer, the weights' gradient as
upstream's sparse COO tensor ``[total_hash_size, max_D]`` of the ``total_unique_indices`` touched
rows.

The forward's state (index matrices, bags, features) is kept as saved tensors: autograd frees it
after a backward, and keeps it through ``retain_graph=True`` for a second backward, which then
returns the same gradients and -- a fused optimizer's update being the backward's side effect --
steps the weights and states again from their current values, as upstream's autograd function
does on its CPU kernels; a second backward without a retained graph raises autograd's own
error.

Global weight decay (rowwise AdaGrad, ``WeightDecayMode.DECOUPLE_GLOBAL``,
``apply_global_weight_decay`` in ``aux_bool``), as upstream's CUDA kernels: the forward scales
each looked-up row by its pending decay ``max(gwd_lower_bound, (1 - lr wd)^max(iter - prev_iter
- 1, 0))`` (1 where ``prev_iter`` is 0); the backward decays the de-duplicated rows by the same
factor before the AdaGrad step and sets their ``prev_iter`` (``aux_tensor[5]``) to ``iter``.
Before ``start_iter`` the invoker does not ask for it and ``prev_iter`` is left alone, as
upstream's non-GWD kernel leaves it.
"""

from __future__ import annotations

from typing import Any

import torch

from fbgemm_npu.native._triton import kernel_mode
from fbgemm_npu.native._triton import mode as kernel_mode_now
from fbgemm_npu.native.fbgemm.tbe._utils import TableClass, TbePlan, class_view
from fbgemm_npu.native.fbgemm.tbe.backward import (
    RunSlots,
    accumulate_rows,
    aggregate_class,
    grad_rows_unsorted,
    run_triton_backward,
    triton_backward,
    write_rows,
)
from fbgemm_npu.native.fbgemm.tbe.call import GwdArgs, LookupCall
from fbgemm_npu.native.fbgemm.tbe.forward import POOLING_MEAN, ForwardState, tbe_forward
from fbgemm_npu.native.fbgemm.tbe.optimizers import OPTIMIZERS, gwd_factor

__all__ = [
    "SplitLookupFunction",
    "apply_gwd",
    "gwd_index_scale",
    "indice_weights_grad_scaled",
    "lookup_forward_only",
    "no_gradient",
    "rows_gradient",
    "run_backward",
    "run_lookup",
]


def gwd_index_scale(call: LookupCall) -> Any:
    """The forward's per-index global-weight-decay factor (None without GWD): upstream's forward
    scales each looked-up row by the decay still pending on it.  ``prev_iter`` shares the rowwise
    ``momentum1`` layout, whose row is row 3 of a training forward's index matrices (0 for a
    class's non-members, so the classes' rows add up); an inference forward (no state rows)
    computes ``hash_size_cumsum[t] + idx`` instead.  Launches: a gather of ``prev_iter`` (an add
    per further class; without state rows a gather, an add and a clamp first), then
    :func:`.optimizers.gwd_factor`."""
    gwd = call.gwd
    if gwd is None:
        return None

    def scale(
        t: torch.Tensor, indices: torch.Tensor, mats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        if mats and all(m.size(0) > 3 for m in mats):
            lin = mats[0][3]
            for mat in mats[1:]:
                lin = lin + mat[3]
        else:
            # t == T past offsets[-1]: hash_size_cumsum[T] + idx, clamped, is read but never used
            lin = call.hash_size_cumsum.index_select(0, t) + indices
            lin = lin.clamp_(max=max(gwd.prev_iter.numel() - 1, 0))
        return gwd_factor(gwd.prev_iter.index_select(0, lin), call.step, gwd.lower_bound)

    return scale


def _forward(
    call: LookupCall, plan: TbePlan, indice_weights: torch.Tensor | None, for_backward: bool
) -> tuple[torch.Tensor, ForwardState]:
    return tbe_forward(
        call.op,
        plan,
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


def lookup_forward_only(call: LookupCall) -> torch.Tensor:
    """Forward without saving anything for a backward (PrivateUse1 kernel)."""
    return _forward(call, call.plan(), call.indice_weights, for_backward=False)[0]


class SplitLookupFunction(torch.autograd.Function):
    """Forward: the lookup.  Backward: the fused optimizer step, in place."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        placeholder: torch.Tensor,
        indice_weights: torch.Tensor | None,
        dev_weights: torch.Tensor | None,
        call: LookupCall,
    ) -> torch.Tensor:
        plan = call.plan()
        out, state = _forward(call, plan, indice_weights, for_backward=True)
        ctx.call = call
        ctx.plan = plan
        # autograd runs a device's backward on its own thread, which does not see the
        # forward's kernel_mode (a context variable): the backward selects as the forward did
        ctx.kernel_mode = kernel_mode_now()
        state.save(ctx)  # freed after the backward unless the graph is retained
        return out

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        # A second backward (retain_graph=True) runs all of this again: the same gradients and,
        # with a fused optimizer, a second step on the weights and states as they are now --
        # what upstream's autograd function does on its CPU kernels.
        call: LookupCall = ctx.call
        state = ForwardState.saved(ctx)
        with kernel_mode(ctx.kernel_mode):
            grads = run_backward(call, ctx.plan, state, grad_output, ctx.needs_input_grad[1])
        return None, grads[0], grads[1], None


def run_lookup(call: LookupCall, placeholder: torch.Tensor) -> torch.Tensor:
    """Autograd entry: the lookup bound to our backward."""
    return SplitLookupFunction.apply(placeholder, call.indice_weights, call.dev_weights_param, call)


def _indice_weights_grad(
    call: LookupCall, plan: TbePlan, state: ForwardState, grad_output: torch.Tensor
) -> torch.Tensor:
    """``d out / d w_i = <grad rows of bag(i), table row of i>`` (/ bag length for MEAN), for
    features with ``feature_requires_grad`` (all when it is None); from the rows before update."""
    L = call.indices.numel()
    grad = torch.zeros(L, dtype=torch.float32, device=grad_output.device)
    for cls, mat in zip(plan.classes, state.mats, strict=True):
        rows = grad_rows_unsorted(plan, cls, mat, grad_output, state, call.pooling_mode, call.vbe)
        w = class_view(call.weights, cls.D, cls.w_residue).index_select(0, mat[0])
        dot = (rows.to(torch.float32) * w.to(torch.float32)).sum(1)
        grad = torch.where(mat[1] > 0, dot, grad)
    return indice_weights_grad_scaled(call, state, grad)


def indice_weights_grad_scaled(
    call: LookupCall, state: ForwardState, grad: torch.Tensor
) -> torch.Tensor:
    """The per-index dot products ``grad`` (0 for indices of no feature) scaled as the forward
    scaled the rows: by the global-weight-decay factor, 1 / bag length for MEAN, and
    ``feature_requires_grad``."""
    if state.index_scale is not None:
        grad = grad * state.index_scale  # the rows the forward saw (global weight decay)
    if call.pooling_mode == POOLING_MEAN:
        lengths = (call.offsets[1:] - call.offsets[:-1]).clamp_(min=1)
        grad = grad / lengths.index_select(0, state.bag.clamp(max=max(lengths.numel() - 1, 0)))
    if call.feature_requires_grad is not None:
        frg = torch.cat(
            [call.feature_requires_grad.reshape(-1), call.feature_requires_grad.new_zeros(1)]
        )
        grad = grad * frg.index_select(0, state.t).to(grad.dtype)
    return grad


def run_backward(
    call: LookupCall,
    plan: TbePlan,
    state: ForwardState,
    grad_output: torch.Tensor,
    need_indice_weights_grad: bool,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """De-duplicate, apply the optimizer in place; returns (indice_weights grad, weights grad)."""
    with torch.no_grad():
        if grad_output.numel() > 0 and triton_backward(call, plan, state, grad_output):
            # the fused Triton step: clipping, scaling and the per-sample-weight gradient (from
            # the rows before the update) in its kernels
            need = need_indice_weights_grad and call.indice_weights is not None
            return run_triton_backward(call, plan, state, grad_output, need), None
        if call.gradient_clipping:
            # upstream clips the output gradient itself, before any per-index scaling
            grad_output = grad_output.clamp(min=-call.max_gradient, max=call.max_gradient)
        if grad_output.numel() == 0:
            return no_gradient(call, need_indice_weights_grad)
        iw_grad = None
        if need_indice_weights_grad and call.indice_weights is not None:
            iw_grad = _indice_weights_grad(call, plan, state, grad_output)
        if call.optimizer == "none":
            return iw_grad, _none_grad(call, plan, state, grad_output)
        for cls, mat in zip(plan.classes, state.mats, strict=True):
            _step_class(call, plan, cls, mat, state, grad_output)
        return iw_grad, None


def _aggregate(
    call: LookupCall,
    plan: TbePlan,
    cls: TableClass,
    mat: torch.Tensor,
    state: ForwardState,
    grad_output: torch.Tensor,
) -> RunSlots:
    """One table class's de-duplicated rows and their aggregated gradients (:mod:`.backward`)."""
    return aggregate_class(
        plan,
        cls,
        mat,
        grad_output,
        state,
        call.offsets,
        call.pooling_mode,
        call.indice_weights,
        call.vbe,
    )


def _step_class(
    call: LookupCall,
    plan: TbePlan,
    cls: TableClass,
    mat: torch.Tensor,
    state: ForwardState,
    grad_output: torch.Tensor,
) -> None:
    """De-duplicate one table class's rows and apply the optimizer to them in place."""
    spec = OPTIMIZERS[call.optimizer]
    slots = _aggregate(call, plan, cls, mat, state, grad_output)
    w_view = class_view(call.weights, cls.D, cls.w_residue)
    w_rows = slots.index[0]
    s_views, s_rows = [], []
    for s, ((buf, _), rw) in enumerate(zip(call.states, call.state_rowwise, strict=True)):
        s_views.append(buf if rw else class_view(buf, cls.D, cls.state_residues[s]))
        s_rows.append(slots.index[3 + s])
    s_old = [v.index_select(0, r) for v, r in zip(s_views, s_rows, strict=True)]
    all_fp32 = all(b.dtype == torch.float32 for b in (call.weights, *(x for x, _ in call.states)))
    if call.gwd is None and spec.delta is not None and all_fp32 and spec.delta_ok(call.step):
        # Fast form: the optimizer gives updates that are exact zeros on the slots to skip.
        keep = torch.clamp(slots.index[1], max=1)
        dw, ds = spec.delta(slots.agg, s_old, keep, call.step)
        accumulate_rows(w_view, w_rows, dw)
        for view, rows, d in zip(s_views, s_rows, ds, strict=True):
            accumulate_rows(view, rows, d)
        return
    invalid = slots.index[1] == 0
    w_old = w_view.index_select(0, w_rows)
    w_in = w_old.to(torch.float32)
    if call.gwd is not None:
        w_in = apply_gwd(call, call.gwd, s_rows[0], w_old, w_in, invalid)
    w_new, s_new = spec.step(slots.agg, w_in, [x.to(torch.float32) for x in s_old], call.step)
    write_rows(w_view, w_rows, w_old, w_new, invalid)
    for view, rows, old, new in zip(s_views, s_rows, s_old, s_new, strict=True):
        write_rows(view, rows, old, new, invalid)


def apply_gwd(
    call: LookupCall,
    gwd: GwdArgs,
    rows: torch.Tensor,
    w_old: torch.Tensor,
    w_in: torch.Tensor,
    invalid: torch.Tensor,
) -> torch.Tensor:
    """Global weight decay of the de-duplicated rows before the AdaGrad step (upstream's
    ``compute_global_weight_decay``): ``w *= factor(prev_iter)``, rounded to the weights' dtype
    as upstream stores it, and ``prev_iter := iter`` at every valid slot.  ``rows``: the slots'
    rows in the rowwise ``momentum1`` buffer, which ``prev_iter`` shares.  Launches: a gather,
    :func:`.optimizers.gwd_factor`, a multiply (and the rounding casts for half-precision
    weights), then ``rsub``, ``masked_fill_`` and ``index_add`` for the ``prev_iter`` write; no
    host sync."""
    prev = gwd.prev_iter.index_select(0, rows)
    factor = gwd_factor(prev, call.step, gwd.lower_bound)
    w_in = w_in * factor[:, None]
    if w_old.dtype != torch.float32:
        w_in = w_in.to(w_old.dtype).to(torch.float32)
    # iter - prev is exact in fp32 for iterations below 2^24, as upstream's fp32 buffer needs
    delta = torch.rsub(prev, float(call.step.iter)).masked_fill_(invalid, 0.0)
    accumulate_rows(gwd.prev_iter, rows, delta)
    return w_in


def _none_grad(
    call: LookupCall, plan: TbePlan, state: ForwardState, grad_output: torch.Tensor
) -> torch.Tensor:
    """The ``none`` optimizer: the weights' gradient, upstream's sparse COO layout."""
    if len(plan.classes) != 1:
        raise RuntimeError(f"{call.op}: the none optimizer needs one embedding dim (no mixed D)")
    cls, mat = plan.classes[0], state.mats[0]
    slots = _aggregate(call, plan, cls, mat, state, grad_output)
    n = call.total_unique_indices
    return rows_gradient(call, slots.index[0][:n], slots.agg[:n].to(call.weights.dtype))


def rows_gradient(call: LookupCall, rows: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """The ``none`` optimizer's gradient of the weights, ``values`` at ``rows``: upstream's
    sparse COO ``[total_hash_size, max_D]`` (dense where the device has no sparse tensors)."""
    size = (call.total_hash_size, call.max_D)
    try:
        return torch.sparse_coo_tensor(rows[None, :], values, size)
    except NotImplementedError:
        # A backend without sparse tensors (the simulator): the same gradient, dense.
        dense = values.new_zeros(size)
        return dense.index_put_((rows,), values, accumulate=True)


def no_gradient(
    call: LookupCall, need_indice_weights_grad: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The backward of a lookup whose output is empty (no bags: ``B = 0``, every index past
    ``offsets[-1]``): no row is touched, no optimizer step; zero per-sample-weight gradients
    and, for the ``none`` optimizer, an empty weights gradient."""
    iw_grad = None
    if need_indice_weights_grad and call.indice_weights is not None:
        iw_grad = call.indice_weights.new_zeros(call.indice_weights.shape, dtype=torch.float32)
    if call.optimizer != "none":
        return iw_grad, None
    rows = torch.zeros(0, dtype=torch.int64, device=call.weights.device)
    return iw_grad, rows_gradient(call, rows, call.weights.new_zeros((0, call.max_D)))
