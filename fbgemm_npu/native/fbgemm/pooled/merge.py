"""Gather pooled embeddings from several npu devices onto one: ``fbgemm::merge_pooled_embeddings``,
``fbgemm::all_to_one_device``, ``fbgemm::sum_reduce_to_one``.

Upstream's CUDA kernels move tensors between the GPUs of one host (peer-to-peer copies on each
source device's stream) and its CPU kernels are the single-device case; here the inputs may sit
on ``npu:0`` and ``npu:1`` and the moves are ``Tensor.to(target)`` copies, which the device runtime
orders like any other kernel (no host sync).  A ``target_device`` without an index (``"npu"``)
means the current npu device, as upstream's CUDA ``merge_pooled_embeddings`` reads it.

Semantics follow upstream's CPU kernels (fbgemm-gpu-cpu 1.8.0), measured:

* ``merge_pooled_embeddings``: ``torch.cat(pooled_embeddings, cat_dim)`` into a tensor of the
  first input's dtype (``cat``'s casting rules: floats after an integer first input are
  refused), then moved to ``target_device``; ``uncat_dim_size`` is not read (upstream's CPU
  kernel ignores it; its CUDA kernel checks it only when the inputs span devices).
* ``all_to_one_device``: a copy of each input on ``target_device``, also of the inputs already
  there (upstream's CUDA kernel returns those as they are, its CPU kernel every input; but the
  schema declares no alias, and AOTAutograd refuses an output that is an input).
* ``sum_reduce_to_one``: the sum of the inputs, on ``target_device``, in the first input's dtype
  and shape (``add_`` semantics: later inputs broadcast to it); the inputs are not modified
  (upstream's CUDA kernel accumulates into them in place).  The sum starts from a copy of the
  first input, upstream's CPU kernel from zeros: only the sign of a zero sum can differ.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._checks import allocation_of, check_tensor

__all__ = [
    "KERNELS",
    "all_to_one_device_npu",
    "merge_pooled_embeddings_npu",
    "sum_reduce_to_one_npu",
]

MERGE_POOLED_EMBEDDINGS = "fbgemm::merge_pooled_embeddings"
ALL_TO_ONE_DEVICE = "fbgemm::all_to_one_device"
SUM_REDUCE_TO_ONE = "fbgemm::sum_reduce_to_one"


def _npu_type() -> str:
    return torch._C._get_privateuse1_backend_name()


def _target(
    op: str, target_device: torch.device | str, kind: str, allow_cpu: bool = False
) -> torch.device:
    """``target_device`` as a concrete device of the inputs' ``kind`` (npu, with an index), or
    the CPU where allowed.  Called directly on CPU tensors, the kernels work on the CPU."""
    target = torch.device(target_device)
    if target.type == "cpu" and (allow_cpu or kind == "cpu"):
        return target
    if target.type != _npu_type():
        where = f"{_npu_type()} or cpu" if allow_cpu else _npu_type()
        raise ValueError(f"{op}: argument 'target_device' must be an {where} device, got {target}")
    count = torch.npu.device_count()
    index = torch.npu.current_device() if target.index is None else target.index
    if not 0 <= index < count:
        raise ValueError(
            f"{op}: argument 'target_device' is {target}, but there are {count} "
            f"{_npu_type()} devices"
        )
    return torch.device(_npu_type(), index)


def _inputs(op: str, arg: str, tensors: Sequence[torch.Tensor]) -> tuple[list[torch.Tensor], str]:
    """The inputs, checked to be tensors of one device type (npu; cpu for direct calls)."""
    if len(tensors) == 0:
        raise ValueError(f"{op}: argument '{arg}' must not be empty")
    out = [check_tensor(op, f"{arg}[{k}]", t) for k, t in enumerate(tensors)]
    kind = out[0].device.type
    for k, t in enumerate(out):
        if t.device.type != kind:
            raise RuntimeError(
                f"{op}: argument '{arg}[{k}]' is on {t.device} but '{arg}[0]' on "
                f"{out[0].device}; every input must be on an {_npu_type()} device"
            )
    return out, kind


def merge_pooled_embeddings_npu(
    pooled_embeddings: Sequence[torch.Tensor],
    uncat_dim_size: int,
    target_device: torch.device | str,
    cat_dim: int = 1,
) -> torch.Tensor:
    """Concatenate along ``cat_dim`` on ``target_device`` (an npu device or the CPU).

    Dtypes: any ``torch.cat`` takes; the result has the first input's dtype.  Launches: a copy of
    each input not on the target, then the ``cat``.  A CPU target costs a device-to-host copy of
    each input (the caller asked for host memory).  Launches and syncs: ``BUDGETS`` in
    ``budgets.py`` (docs/ops.md).
    """
    op = MERGE_POOLED_EMBEDDINGS
    inputs, kind = _inputs(op, "pooled_embeddings", pooled_embeddings)
    target = _target(op, target_device, kind, allow_cpu=True)
    moved = _moved(op, "pooled_embeddings", inputs, target)
    out = torch.empty(0, dtype=moved[0].dtype, device=target)
    try:
        with allocation_of(op, f"the concatenation along cat_dim={cat_dim}"):
            return torch.cat(moved, dim=cat_dim, out=out)
    except (RuntimeError, IndexError, TypeError) as exc:  # shapes, ranks, cat_dim, dtypes
        if str(exc).startswith(op):  # allocation_of's: says it already
            raise
        raise ValueError(
            f"{MERGE_POOLED_EMBEDDINGS}: argument 'pooled_embeddings' cannot be concatenated along "
            f"cat_dim={cat_dim} into {moved[0].dtype}: {exc}"
        ) from exc


def all_to_one_device_npu(
    input_tensors: Sequence[torch.Tensor], target_device: torch.device | str
) -> list[torch.Tensor]:
    """A copy of every input on the npu ``target_device``, fresh even for an input already there
    (the schema declares no alias: returning the input would alias it).

    Any dtype and shape; strides kept (``clone`` / ``to``).  Launches: one copy per input.
    Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    inputs, kind = _inputs(ALL_TO_ONE_DEVICE, "input_tensors", input_tensors)
    target = _target(ALL_TO_ONE_DEVICE, target_device, kind)
    return _moved(ALL_TO_ONE_DEVICE, "input_tensors", inputs, target, fresh=True)


def sum_reduce_to_one_npu(
    input_tensors: Sequence[torch.Tensor], target_device: torch.device | str
) -> torch.Tensor:
    """``input_tensors[0] + input_tensors[1] + ...`` (left to right) on the npu ``target_device``.

    Dtype and shape of the first input.  Launches: a copy of the first input, then per later input
    an ``add_``, after its copy when it is not on the target.  Launches and syncs: ``BUDGETS`` in
    ``budgets.py`` (docs/ops.md).
    """
    op = SUM_REDUCE_TO_ONE
    inputs, kind = _inputs(op, "input_tensors", input_tensors)
    target = _target(op, target_device, kind)
    first = inputs[0]
    for k, t in enumerate(inputs[1:], 1):
        if not torch.can_cast(torch.result_type(first, t), first.dtype):
            raise ValueError(
                f"{op}: argument 'input_tensors[{k}]' ({t.dtype}) cannot be added into "
                f"the sum, which has input_tensors[0]'s dtype {first.dtype}"
            )
        try:
            shape = torch.broadcast_shapes(first.shape, t.shape)
        except RuntimeError:
            shape = None
        if shape != first.shape:
            raise ValueError(
                f"{op}: argument 'input_tensors[{k}]' of shape {tuple(t.shape)} does "
                f"not broadcast to input_tensors[0]'s shape {tuple(first.shape)}"
            )
    # A copy even on the target: the inputs are the caller's and are not written to.
    acc = _moved(op, "input_tensors", inputs[:1], target, fresh=True)[0]
    for k, t in enumerate(inputs[1:], 1):
        acc.add_(t if t.device == target else _moved(op, f"input_tensors[{k}]", [t], target)[0])
    return acc


def _moved(
    op: str, arg: str, inputs: Sequence[torch.Tensor], target: torch.device, fresh: bool = False
) -> list[torch.Tensor]:
    """Each input on ``target`` (copied there; ``fresh``: copied even when it is there), an
    allocation failure named after the input (an expanded input copies out in full)."""
    out = []
    for k, t in enumerate(inputs):
        name = arg if len(inputs) == 1 and arg.endswith("]") else f"{arg}[{k}]"
        with allocation_of(op, f"a copy of '{name}' (shape {tuple(t.shape)}) on {target}"):
            out.append(t.to(target) if t.device != target else t.clone() if fresh else t)
    return out


KERNELS = {
    MERGE_POOLED_EMBEDDINGS: {"PrivateUse1": merge_pooled_embeddings_npu},
    ALL_TO_ONE_DEVICE: {"PrivateUse1": all_to_one_device_npu},
    SUM_REDUCE_TO_ONE: {"PrivateUse1": sum_reduce_to_one_npu},
}
