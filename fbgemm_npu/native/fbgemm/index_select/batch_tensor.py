"""``fbgemm::batch_index_select_dim0_tensor`` on npu: ``batch_index_select_dim0`` with its three
per-table lists given as tensors.

Upstream added the form for PT2 (a graph with tensor-valued sizes instead of ``SymInt[]``).  The
math, dtypes and autograd are ``batch_index_select_dim0``'s (``batch.py``): the selected rows of
every table, flat, differentiable in ``inputs``.  ``input_num_indices``, ``input_rows`` and
``input_columns`` are 1-D int64 tensors of one entry per table (upstream's CPU kernel refuses any
other dtype: "expected scalar type Long").

The lists size the output and the gather index, so they are read on the host: tensors on the CPU
(upstream's usage) cost nothing; tensors on the npu are read in one copy (one sync: the size of
the output is data, as with any op whose output size a tensor holds).  Then the list form's
kernels run: launches and checks are ``batch_index_select_dim0``'s (``BUDGETS`` in
``budgets.py``, docs/ops.md).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import check_dtype, check_ndim, check_tensor
from fbgemm_npu.native.fbgemm.index_select.batch import (
    _batch_index_select_dim0_autograd,
    batch_index_select_dim0_npu,
)

__all__ = ["KERNELS"]

OP = "fbgemm::batch_index_select_dim0_tensor"
_NAMES = ("input_num_indices", "input_rows", "input_columns")


def _host_lists(*sizes: object) -> tuple[list[int], ...]:
    """The three size tensors as host lists: one device read for those on a device, none for
    those on the CPU; refuses a non-tensor, a rank other than 1, a dtype other than int64 and
    lists of different lengths, naming the argument."""
    tensors = [
        check_dtype(OP, n, check_ndim(OP, n, check_tensor(OP, n, t), (1,)), (torch.int64,))
        for n, t in zip(_NAMES, sizes, strict=True)
    ]
    counts = {n: t.numel() for n, t in zip(_NAMES, tensors, strict=True)}
    if not tensors[0].numel() == tensors[1].numel() == tensors[2].numel():
        raise ValueError(
            f"{OP}: {', '.join(_NAMES)} need one entry per table each; got {counts} entries"
        )
    on_device = [t for t in tensors if t.device.type != "cpu"]
    read = torch.cat(on_device).tolist() if on_device else []  # one sync for all of them
    out, taken = [], 0
    for t in tensors:
        if t.device.type == "cpu":
            out.append(t.tolist())
        else:
            out.append(read[taken : taken + t.numel()])
            taken += t.numel()
    return tuple(out)


def batch_index_select_dim0_tensor_npu(
    inputs: torch.Tensor,
    indices: torch.Tensor,
    input_num_indices: torch.Tensor,
    input_rows: torch.Tensor,
    input_columns: torch.Tensor,
    permute_output_dim_0_1: bool = False,
) -> torch.Tensor:
    """PrivateUse1: the list form's kernel on the host lists (``inputs``' dtype, flat)."""
    lists = _host_lists(input_num_indices, input_rows, input_columns)
    return batch_index_select_dim0_npu(inputs, indices, *lists, permute_output_dim_0_1)


def _batch_index_select_dim0_tensor_autograd(
    inputs: torch.Tensor,
    indices: torch.Tensor,
    input_num_indices: torch.Tensor,
    input_rows: torch.Tensor,
    input_columns: torch.Tensor,
    permute_output_dim_0_1: bool = False,
) -> torch.Tensor:
    """AutogradPrivateUse1: the list form's autograd (differentiable in ``inputs``)."""
    lists = _host_lists(input_num_indices, input_rows, input_columns)
    return _batch_index_select_dim0_autograd(inputs, indices, *lists, permute_output_dim_0_1)


KERNELS = {
    OP: {
        "PrivateUse1": batch_index_select_dim0_tensor_npu,
        "AutogradPrivateUse1": _batch_index_select_dim0_tensor_autograd,
    },
}
