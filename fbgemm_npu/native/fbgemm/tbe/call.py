"""One ``split_embedding_codegen_lookup_<opt>_function_pt2`` call, unpacked.

Upstream's Python invokers (``fbgemm_gpu/split_embedding_codegen_lookup_invokers``) call one pt2
op per optimizer with the tables packed into lists (``weights``, ``momentum1``, ...) and the
rest into ``aux_*`` / ``optim_*`` lists; :func:`parse_call` unpacks them by name, whatever the
optimizer, into a :class:`LookupCall` that :mod:`.lookup` runs.

Layout arguments upstream's CPU path uses: weights ``[host_weights, placements, offsets]``
(ComputeDevice.CPU style) or ``[dev, uvm, placements, offsets, lxu_cache]`` (CUDA style); the
optimizer states alike.  One of dev / uvm must hold all tables (UVM caching is a CUDA feature).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
)
from fbgemm_npu.native.fbgemm.tbe._utils import TbePlan, get_plan, tracing
from fbgemm_npu.native.fbgemm.tbe.forward import VbeArgs, output_dtype_of
from fbgemm_npu.native.fbgemm.tbe.optimizers import OPTIMIZERS, StepArgs

__all__ = [
    "GwdArgs",
    "LookupCall",
    "check_lookup_inputs",
    "check_weights_dtype",
    "named_args",
    "op_name",
    "parse_call",
]

_WEIGHT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

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
    """The qualified name of the pt2 lookup op of ``optimizer``."""
    return f"fbgemm::split_embedding_codegen_lookup_{optimizer}_function_pt2"


_SCHEMAS: dict[str, Any] = {}


def named_args(qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A dispatcher call's arguments by their schema names (defaults filled in, ``None`` for
    optional arguments with no default); the op's schema is read once."""
    schema = _SCHEMAS.get(qualname)
    if schema is None:
        name = qualname.split("::", 1)[1]
        schema = _SCHEMAS[qualname] = getattr(torch.ops.fbgemm, name).default._schema
    named: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(args):
            named[arg.name] = args[i]
        elif arg.name in kwargs:
            named[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            named[arg.name] = arg.default_value
        else:
            named[arg.name] = None
    return named


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
    total_D: int
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
    traced: bool = False  # fake tensors: run the layout-free program of :mod:`.traced`

    def plan(self) -> TbePlan:
        return get_plan(
            self.op,
            self.D_offsets,
            self.weights_offsets,
            [(off, rw) for (_, off), rw in zip(self.states, self.state_rowwise, strict=True)],
            weights_numel=self.weights.numel(),
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


def check_weights_dtype(op: str, arg: str, weights: torch.Tensor) -> None:
    """The tables' buffer holds float rows of 2 bytes or more (fp32 / fp16 / bf16 as the module
    builds them).  FP8 rows (``weights_precision=SparseType.NFP8``, ``float8_e4m3fn``) raise
    ``NotImplementedError`` naming the argument, the class upstream's CPU kernel raises for them
    (its forward has no FP8 case: ``"split_embedding_cpu_forward_2" not implemented for
    'Float8_e4m3fn'``), before anything is launched; so do byte rows (``SparseType.INT8`` /
    ``FP8``, quantized rows the module cannot build on npu) and other dtypes."""
    dtype = weights.dtype
    if dtype.is_floating_point and dtype.itemsize >= 2:
        return
    if dtype.is_floating_point:
        raise NotImplementedError(
            f"{op}: argument '{arg}' holds {dtype} rows (weights_precision=SparseType.NFP8): "
            "FP8 TBE weights have no lookup on npu, as upstream's CPU kernel has none (it "
            "raises NotImplementedError too); build the TBE with weights_precision FP32, FP16 "
            "or BF16"
        )
    if dtype == torch.uint8:
        raise NotImplementedError(
            f"{op}: argument '{arg}' holds uint8 (quantized, SparseType.INT8 / FP8) rows: a "
            "training lookup on npu takes float32, float16 or bfloat16 weights"
        )
    raise NotImplementedError(  # upstream's CPU kernel: NotImplementedError for these too
        f"{op}: argument '{arg}' must hold float32, float16 or bfloat16 rows, got {dtype}"
    )


def check_lookup_inputs(
    op: str,
    weights: torch.Tensor,
    D_offsets: torch.Tensor,
    indices: Any,
    offsets: Any,
    indice_weights: Any,
    vbe: bool,
    weights_arg: str = "weights",
) -> None:
    """The batch of a lookup call, from its metadata alone (no launch, no sync): float tables
    (:func:`check_weights_dtype`; ``weights_arg`` names them); 1-D int32 / int64 ``indices`` and
    ``offsets``; ``B * T + 1`` offsets without VBE (``T`` features, at least one offset with
    VBE); per-sample weights (``indice_weights``; ``per_sample_weights`` of the module) a float
    vector of one value per index; every one on the tables' device.  ``ValueError`` /
    ``RuntimeError`` naming ``op`` and the argument (docs/design.md rule 9)."""
    check_weights_dtype(op, weights_arg, weights)
    check_ndim(op, "indices", check_tensor(op, "indices", indices), (1,))
    check_ndim(op, "offsets", check_tensor(op, "offsets", offsets), (1,))
    check_dtype(op, "indices", indices, INDEX_DTYPES)
    check_dtype(op, "offsets", offsets, INDEX_DTYPES)
    T = D_offsets.numel() - 1
    n = offsets.numel()
    if n < 1 or (not vbe and T > 0 and (n - 1) % T != 0):
        raise ValueError(
            f"{op}: argument 'offsets' has {n} elements; it must have B * T + 1 for T = {T} "
            "features (B bags each)" + ("" if vbe else f", i.e. 1 more than a multiple of {T}")
        )
    if indice_weights is not None:
        what = "argument 'indice_weights' (the module's per_sample_weights)"
        check_tensor(op, "indice_weights", indice_weights)
        if indice_weights.dtype not in _WEIGHT_DTYPES or indice_weights.dim() != 1:
            raise ValueError(
                f"{op}: {what} must be a 1-D float32, float16 or bfloat16 tensor, got a "
                f"{indice_weights.dim()}-D {indice_weights.dtype} tensor"
            )
        if indice_weights.numel() != indices.numel():
            raise ValueError(
                f"{op}: {what} has {indice_weights.numel()} elements; it must have one per "
                f"index ({indices.numel()})"
            )
    check_same_device(
        op, weights=weights, indices=indices, offsets=offsets, indice_weights=indice_weights
    )


def _size(value: Any) -> Any:
    """A SymInt argument: an int when concrete, else the symbol itself (a traced call)."""
    return value if isinstance(value, torch.SymInt) else int(value)


def _vbe_output(op: str, vbe: VbeArgs, a: dict[str, Any], offsets: Any) -> None:
    """Upstream's pre-allocated VBE output: ``vbe_output`` (1-D, the output dtype) receives
    rank ``r``'s feature ``t`` at ``vbe_output_offsets[r, t]`` (``[R, T]``, other lookups'
    parts of the buffer are kept) and is the forward's result.  Launches: a cast and a ``cat``
    (the offsets, ending at its size), and in the forward a ``cat`` and a ``copy_``."""
    out = a.get("vbe_output")
    if out is None:
        return
    dtype = output_dtype_of(op, int(a["output_dtype"]))
    if not isinstance(out, torch.Tensor) or out.dim() != 1 or out.dtype != dtype:
        raise ValueError(f"{op}: argument 'vbe_output' must be a 1-D {dtype} tensor")
    n_rt = vbe.output_offsets_feature_rank.numel() - 1
    if not isinstance(offsets, torch.Tensor) or offsets.numel() != n_rt:
        raise ValueError(
            f"{op}: argument 'vbe_output_offsets' must be given with 'vbe_output', one start "
            f"per rank and feature ({n_rt})"
        )
    check_same_device(op, vbe_output=out, vbe_output_offsets=offsets, B_offsets=vbe.B_offsets)
    end = torch.full((1,), out.numel(), dtype=torch.int64, device=out.device)
    vbe.output_offsets_feature_rank = torch.cat([offsets.reshape(-1).to(torch.int64), end])
    vbe.output_size, vbe.out = out.numel(), out


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
            # traced, a data-dependent size stays symbolic (int() would need its value)
            output_size=_size(a.get("vbe_output_size", -1)),
        )
        _vbe_output(op, vbe, a, aux_t[6] if len(aux_t) > 6 else None)
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
    check_lookup_inputs(
        op,
        weights,
        a["D_offsets"],
        a["indices"],
        a["offsets"],
        a.get("indice_weights"),
        vbe is not None,
    )
    traced = tracing(weights, a["D_offsets"], a["indices"])
    lr_t = a.get("learning_rate_tensor")
    lr: float | torch.Tensor = 0.0
    if lr_t is not None:
        if lr_t.device.type != "cpu":
            lr = lr_t.reshape(())
        elif traced:
            # a traced graph takes the rate as an input (a host float would be baked in, and
            # set_learning_rate would not reach it): a 0-D tensor on the weights' device
            lr = lr_t.reshape(()).to(weights.device)
        else:
            lr = float(lr_t.item())  # a host tensor: no device sync
    return LookupCall(
        op=op,
        optimizer=optimizer,
        weights=flat,
        dev_weights_param=dev_param,
        weights_offsets=w_off,
        D_offsets=a["D_offsets"],
        max_D=int(a["max_D"]),
        total_D=int(a["total_D"]),
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
        traced=traced,
    )
