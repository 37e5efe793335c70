"""The ``split_embedding_codegen_lookup_<opt>_function_pt2`` ops on npu.

Upstream's Python invokers (``fbgemm_gpu/split_embedding_codegen_lookup_invokers``) call one pt2
op per optimizer with the tables packed into lists (``weights``, ``momentum1``, ...) and the
rest into ``aux_*`` / ``optim_*`` lists; :func:`parse_call` unpacks them by name, whatever the
optimizer.  :class:`SplitLookupFunction` is our autograd function for all of them: its forward
is :func:`.forward.tbe_forward`; its backward de-duplicates the touched rows
(:mod:`.backward`) and applies the optimizer
(:mod:`fbgemm_npu.native.fbgemm.tbe.optimizers`) to the weights and states *in place*, as upstream's
fused backward does, returning no gradient for ``placeholder_autograd_tensor`` (upstream returns
an undefined tensor too), the per-sample-weight gradient when those require grad, and, for the
``none`` optimizer, the weights' gradient as upstream's sparse COO tensor ``[total_hash_size,
max_D]`` of the ``total_unique_indices`` touched rows.

Global weight decay (rowwise AdaGrad, ``WeightDecayMode.DECOUPLE_GLOBAL``,
``apply_global_weight_decay`` in ``aux_bool``), as upstream's CUDA kernels: the forward scales
each looked-up row by its pending decay ``max(gwd_lower_bound, (1 - lr wd)^max(iter - prev_iter
- 1, 0))`` (1 where ``prev_iter`` is 0); the backward decays the de-duplicated rows by the same
factor before the AdaGrad step and sets their ``prev_iter`` (``aux_tensor[5]``) to ``iter``.
Before ``start_iter`` the invoker does not ask for it and ``prev_iter`` is left alone, as
upstream's non-GWD kernel leaves it.

Layout arguments upstream's CPU path uses: weights ``[host_weights, placements, offsets]``
(ComputeDevice.CPU style) or ``[dev, uvm, placements, offsets, lxu_cache]`` (CUDA style); the
optimizer states alike.  One of dev / uvm must hold all tables (UVM caching is a CUDA feature).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from fbgemm_npu.native.fbgemm.tbe._utils import TableClass, TbePlan, class_view, get_plan
from fbgemm_npu.native.fbgemm.tbe.backward import (
    accumulate_rows,
    aggregate_class,
    grad_rows_unsorted,
    write_rows,
)
from fbgemm_npu.native.fbgemm.tbe.forward import (
    POOLING_MEAN,
    POOLING_NONE,
    ForwardState,
    VbeArgs,
    output_dtype_of,
    tbe_forward,
)
from fbgemm_npu.native.fbgemm.tbe.optimizers import OPTIMIZERS, StepArgs, gwd_factor

__all__ = ["LookupCall", "SplitLookupFunction", "lookup_forward_only", "parse_call", "run_lookup"]

# optim_int / optim_float / optim_bool names per optimizer, in the invokers' order (1.8.0).
_OPTIM_INT = {
    "rowwise_adagrad": ("weight_decay_mode",),
    "rowwise_adagrad_with_counter": (
        "counter_halflife", "adjustment_iter", "learning_rate_mode", "weight_decay_mode",
        "grad_sum_decay", "is_tail_id_thresh_ratio", "regularization_mode",
    ),
    "none": ("total_hash_size",),
}  # fmt: skip
_OPTIM_FLOAT = {
    "adagrad": ("eps",),
    "rowwise_adagrad": ("eps", "weight_decay", "max_norm"),
    "rowwise_adagrad_with_counter": (
        "eps", "weight_decay", "adjustment_ub", "max_counter", "tail_id_threshold",
        "weight_norm_coefficient", "lower_bound",
    ),
    "rowwise_rmsprop_ar": ("eps", "ar_alpha", "ema_beta", "min_shrinkage"),
    "adam": ("eps", "beta1", "beta2", "weight_decay"),
    "partial_rowwise_adam": ("eps", "beta1", "beta2", "weight_decay"),
    "lamb": ("eps", "beta1", "beta2", "weight_decay"),
    "partial_rowwise_lamb": ("eps", "beta1", "beta2", "weight_decay"),
    "lars_sgd": ("eta", "momentum", "weight_decay"),
}  # fmt: skip
_OPTIM_BOOL = {"adam": ("use_rowwise_bias_correction",)}


def op_name(optimizer: str) -> str:
    return f"fbgemm::split_embedding_codegen_lookup_{optimizer}_function_pt2"


@dataclass
class GwdArgs:
    """Global weight decay (``WeightDecayMode.DECOUPLE_GLOBAL`` past ``start_iter``, rowwise
    AdaGrad): ``prev_iter`` is the fp32 per-row buffer of the last iteration that touched each
    row, laid out like ``momentum1`` (row ``hash_size_cumsum[t] + idx``, as upstream indexes it)."""

    prev_iter: torch.Tensor
    lower_bound: float


@dataclass
class LookupCall:
    """One pt2 lookup call, unpacked."""

    op: str
    optimizer: str
    weights: torch.Tensor  # flat 1-D buffer of all tables
    dev_weights_param: torch.Tensor | None  # the `none` optimizer's differentiable weights
    weights_offsets: torch.Tensor
    D_offsets: torch.Tensor
    max_D: int
    hash_size_cumsum: torch.Tensor
    indices: torch.Tensor
    offsets: torch.Tensor
    pooling_mode: int
    indice_weights: torch.Tensor | None
    feature_requires_grad: torch.Tensor | None
    output_dtype: torch.dtype
    vbe: VbeArgs | None
    states: list[tuple[torch.Tensor, torch.Tensor]]  # (flat buffer, offsets)
    state_rowwise: list[bool]
    step: StepArgs
    gradient_clipping: bool
    max_gradient: float
    total_unique_indices: int
    total_hash_size: int
    gwd: GwdArgs | None = None

    def plan(self) -> TbePlan:
        return get_plan(
            self.D_offsets,
            self.weights_offsets,
            [(off, rw) for (_, off), rw in zip(self.states, self.state_rowwise, strict=True)],
        )


def _placed(op: str, arg: str, parts: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """(flat buffer, offsets) from ``[host, placements, offsets]`` or
    ``[dev, uvm, placements, offsets(, lxu_cache)]``."""
    if len(parts) == 3:
        return parts[0], parts[2]
    if len(parts) in (4, 5):
        dev, uvm = parts[0], parts[1]
        if len(parts) == 5 and parts[4] is not None and parts[4].numel() > 0:
            raise RuntimeError(
                f"{op}: argument '{arg}' has a non-empty LXU cache; UVM caching is a CUDA "
                "feature and is not supported on npu (use EmbeddingLocation.DEVICE or HOST)"
            )
        if dev.numel() > 0 and uvm.numel() > 0:
            raise RuntimeError(
                f"{op}: argument '{arg}' splits its tables between device and UVM buffers; on "
                "npu all tables must be in one (EmbeddingLocation.DEVICE or HOST)"
            )
        return (dev if dev.numel() > 0 or uvm.numel() == 0 else uvm), parts[3]
    raise ValueError(
        f"{op}: argument '{arg}' must be a list of 3, 4 or 5 tensors, got {len(parts)}"
    )


def parse_call(optimizer: str, a: dict[str, Any]) -> LookupCall:
    """Unpack the named arguments of a pt2 lookup call (see the invokers for the list orders)."""
    op = op_name(optimizer)
    weights, w_off = _placed(op, "weights", list(a["weights"]))
    dev_param = None
    if optimizer == "none":
        dev_param = weights
    flat = weights.reshape(-1) if weights.dim() != 1 else weights
    aux_t = list(a["aux_tensor"])
    aux_i = list(a["aux_int"])
    aux_f = list(a["aux_float"])
    aux_b = list(a["aux_bool"])
    vbe = None
    if aux_t and aux_t[0] is not None:
        vbe = VbeArgs(
            B_offsets=aux_t[0],
            output_offsets_feature_rank=aux_t[1],
            B_offsets_rank_per_feature=aux_t[2],
            output_size=int(a.get("vbe_output_size", -1)),
        )
    states, state_rowwise = [], []
    spec = OPTIMIZERS.get(optimizer)
    for name, rowwise in spec.states if spec else ():
        states.append(_placed(op, name, list(a[name])))
        state_rowwise.append(rowwise)
    hp: dict[str, float] = {}
    for key, names in ((_OPTIM_INT, "optim_int"), (_OPTIM_FLOAT, "optim_float")):
        for n, v in zip(key.get(optimizer, ()), a.get(names) or (), strict=False):
            hp[n] = float(v)
    for n, v in zip(_OPTIM_BOOL.get(optimizer, ()), a.get("optim_bool") or (), strict=False):
        hp[n] = float(bool(v))
    if optimizer == "adam" and hp.get("use_rowwise_bias_correction"):
        ot = list(a["optim_tensor"])
        host_form = ot[0] is not None and ot[0].numel() > 0
        parts = [ot[0], ot[3], ot[4]] if host_form else [ot[1], ot[2], ot[3], ot[4]]
        states.append(_placed(op, "row_counter", parts))
        state_rowwise.append(True)
    gwd = None
    if len(aux_b) > 3 and aux_b[3]:
        prev_iter = aux_t[5] if len(aux_t) > 5 else None
        if optimizer != "rowwise_adagrad" or prev_iter is None or prev_iter.numel() == 0:
            raise NotImplementedError(
                f"{op}: argument 'aux_bool' asks for global weight decay, which needs rowwise "
                "AdaGrad and a non-empty 'prev_iter_dev' in 'aux_tensor'"
            )
        gwd = GwdArgs(prev_iter=prev_iter, lower_bound=float(aux_f[0]) if aux_f else 0.0)
    lr_t = a.get("learning_rate_tensor")
    lr: float | torch.Tensor = 0.0
    if lr_t is not None:
        lr = float(lr_t.item()) if lr_t.device.type == "cpu" else lr_t.reshape(())
    return LookupCall(
        op=op,
        optimizer=optimizer,
        weights=flat,
        dev_weights_param=dev_param,
        weights_offsets=w_off,
        D_offsets=a["D_offsets"],
        max_D=int(a["max_D"]),
        hash_size_cumsum=a["hash_size_cumsum"],
        indices=a["indices"],
        offsets=a["offsets"],
        pooling_mode=int(a["pooling_mode"]),
        indice_weights=a.get("indice_weights"),
        feature_requires_grad=a.get("feature_requires_grad"),
        output_dtype=output_dtype_of(op, int(a["output_dtype"])),
        vbe=vbe,
        states=states,
        state_rowwise=state_rowwise,
        step=StepArgs(lr=lr, iter=int(aux_i[0]) if aux_i else 0, hp=hp),
        gradient_clipping=bool(aux_b[4]) if len(aux_b) > 4 else False,
        max_gradient=float(aux_f[1]) if len(aux_f) > 1 else 0.0,
        total_unique_indices=int(a.get("total_unique_indices", 0) or 0),
        total_hash_size=int(hp.get("total_hash_size", 0)),
        gwd=gwd,
    )


def _gwd_index_scale(call: LookupCall) -> Any:
    """The forward's per-index global-weight-decay factor (None without GWD): upstream's forward
    scales each looked-up row by the decay still pending on it.  Launches: 4 + those of
    :func:`~fbgemm_npu.native.fbgemm.tbe.optimizers.gwd_factor`."""
    gwd = call.gwd
    if gwd is None:
        return None

    def scale(t: torch.Tensor) -> torch.Tensor:
        # t == T past offsets[-1]: hash_size_cumsum[T] + idx, clamped, is read but never used
        lin = call.hash_size_cumsum.index_select(0, t) + call.indices
        lin = lin.clamp_(max=max(gwd.prev_iter.numel() - 1, 0))
        return gwd_factor(gwd.prev_iter.index_select(0, lin), call.step, gwd.lower_bound)

    return scale


def lookup_forward_only(call: LookupCall) -> torch.Tensor:
    """Forward without saving anything for a backward (PrivateUse1 kernel)."""
    out, _ = tbe_forward(
        call.op, call.plan(), call.weights, call.indices, call.offsets, call.pooling_mode,
        call.indice_weights, call.output_dtype, call.vbe, for_backward=False,
        index_scale=_gwd_index_scale(call),
    )  # fmt: skip
    return out


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
        out, state = tbe_forward(
            call.op, plan, call.weights, call.indices, call.offsets, call.pooling_mode,
            indice_weights, call.output_dtype, call.vbe, for_backward=True,
            index_scale=_gwd_index_scale(call),
        )  # fmt: skip
        ctx.call = call
        ctx.plan = plan
        ctx.state = state
        return out

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        call: LookupCall = ctx.call
        grads = run_backward(call, ctx.plan, ctx.state, grad_output, ctx.needs_input_grad[1])
        ctx.call = ctx.plan = ctx.state = None  # free the index matrices now
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
        if call.gradient_clipping:
            # upstream clips the output gradient itself, before any per-index scaling
            grad_output = grad_output.clamp(min=-call.max_gradient, max=call.max_gradient)
        iw_grad = None
        if need_indice_weights_grad and call.indice_weights is not None:
            iw_grad = _indice_weights_grad(call, plan, state, grad_output)
        if call.optimizer == "none":
            return iw_grad, _none_grad(call, plan, state, grad_output)
        for cls, mat in zip(plan.classes, state.mats, strict=True):
            _step_class(call, plan, cls, mat, state, grad_output)
        return iw_grad, None


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
    slots = aggregate_class(
        plan, cls, mat, grad_output, state, call.offsets, call.pooling_mode,
        call.indice_weights, call.vbe,
    )  # fmt: skip
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
        w_in = _apply_gwd(call, call.gwd, s_rows[0], w_old, w_in, invalid)
    w_new, s_new = spec.step(slots.agg, w_in, [x.to(torch.float32) for x in s_old], call.step)
    write_rows(w_view, w_rows, w_old, w_new, invalid)
    for view, rows, old, new in zip(s_views, s_rows, s_old, s_new, strict=True):
        write_rows(view, rows, old, new, invalid)


def _apply_gwd(
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
    rows in the rowwise ``momentum1`` buffer, which ``prev_iter`` shares.  Launches: 1 gather +
    gwd_factor (6) + 1 multiply (+2 for half-precision weights) + 3 for the ``prev_iter`` write;
    0 syncs."""
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
    slots = aggregate_class(
        plan, cls, mat, grad_output, state, call.offsets, call.pooling_mode, call.indice_weights,
        call.vbe,
    )  # fmt: skip
    n = call.total_unique_indices
    rows = slots.index[0][:n]
    values = slots.agg[:n].to(call.weights.dtype)
    size = (call.total_hash_size, call.max_D)
    try:
        return torch.sparse_coo_tensor(rows[None, :], values, size)
    except NotImplementedError:
        # A backend without sparse tensors (the simulator): the same gradient, dense.
        dense = values.new_zeros(size)
        return dense.index_put_((rows,), values, accumulate=True)


__all__ += ["POOLING_NONE", "run_backward", "op_name"]
