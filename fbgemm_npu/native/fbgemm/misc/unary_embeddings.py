"""``fbgemm::batched_unary_embeddings`` on npu: sum-pooled lookups of 1-wide embedding tables,
``N`` tasks at once (``fbgemm_gpu.batched_unary_embeddings_ops.BatchedUnaryEmbeddingBag``).

Semantics, read from upstream's CPU kernel (``sparse_ops_cpu.cpp``:
``batched_unary_embeddings_forward_cpu``) and measured on fbgemm-gpu-cpu 1.8.0: ``N =
weight.size(0)``, ``T = table_offsets.numel() - 1``, ``B = (offsets.numel() - 1) // T``, ``E =
table_offsets[T]``; for bag ``(t, b)`` the indices ``offsets[tB + b] : offsets[tB + b + 1]``,

    out[n, b, t] = sum_l weight.flatten()[n * E + table_offsets[t] + indices[l]]

summed in float32, cast to ``weight``'s dtype (float32, float16, bfloat16; float64 is
``NotImplementedError`` as upstream); ``table_offsets``, ``offsets`` and ``indices`` share one
int dtype.  Upstream raises on ``N``, ``T`` or ``B`` of 0 (``T = 0`` divides by zero: a crash
there, a ``RuntimeError`` here), and on a flat index past ``weight`` (at the call); a negative
one it reads out of bounds.  Ours requires, as queued data checks (gathers clamped), the flat
index in ``[0, numel)``, ``E = weight.numel() / N`` (the layout ``BatchedUnaryEmbeddingBag``
builds) and offsets non-decreasing within ``[0, indices.numel()]`` (upstream takes a
decreasing pair as an empty bag).

Program: the bag of every index position by the segment-id marks of ``offsets[:TB + 1]``
(positions before the first offset land on row 0, after the last on row ``TB + 1``: two spare
rows, no mask), its table's offset by one gather, the ``[L, N]`` flat indices, one gather of the
weights, one float32 ``index_add_`` into ``TB + 2`` rows, the ``[N, B, T]`` transpose.
Backward (upstream's CUDA autograd: the gradient of ``weight`` only): the output gradient in the
same row layout, gathered back per position and ``index_add_``-ed at the flat indices.
"""

from __future__ import annotations

from typing import Any

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    DataChecks,
    check_same_device,
    check_tensor,
    non_decreasing,
    validation_enabled,
)
from fbgemm_npu.native._index import filled_i32
from fbgemm_npu.native.fbgemm.misc._errors import require

__all__ = ["KERNELS", "batched_unary_embeddings_npu"]

UNARY = "fbgemm::batched_unary_embeddings"
VALUE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _layout(
    weight: torch.Tensor, table_offsets: torch.Tensor, offsets: torch.Tensor, indices: torch.Tensor
) -> tuple[int, int, int]:
    """``(N, T, B)`` after upstream's checks, in its order (RuntimeError)."""
    op = UNARY
    for name, t in (("table_offsets", table_offsets), ("offsets", offsets), ("indices", indices)):
        check_tensor(op, name, t)
    check_same_device(
        op, weight=weight, table_offsets=table_offsets, offsets=offsets, indices=indices
    )
    require(weight.dim() >= 1, op, "argument 'weight' must have a task dimension (N, E, 1)")
    n, t = weight.size(0), table_offsets.numel() - 1
    require(n > 0, op, "argument 'weight' must have N > 0 tasks (its size(0))")
    require(t > 0, op, "argument 'table_offsets' must hold T + 1 > 1 values (T tables)")
    require(weight.numel() >= n, op, "argument 'weight' must have at least one row per task")
    b = (offsets.numel() - 1) // t
    require(b > 0, op, f"argument 'offsets' must hold T * B + 1 values with B > 0 (T = {t})")
    if weight.dtype not in VALUE_DTYPES:  # upstream's dispatch: float, half, bfloat16
        raise NotImplementedError(
            f"{op}: argument 'weight' of dtype {weight.dtype} is not "
            "supported (float32, float16 or bfloat16)"
        )
    require(
        table_offsets.dtype == offsets.dtype == indices.dtype
        and offsets.dtype in (torch.int32, torch.int64),
        op,
        "arguments 'table_offsets', 'offsets' and 'indices' must share one dtype, int32 or int64",
    )
    return n, t, b


def _plan(
    weight: torch.Tensor, table_offsets: torch.Tensor, offsets: torch.Tensor, indices: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, int, int, int]:
    """``(rows, flat, N, T, B)``: each index position's row in ``[0, TB + 2)`` (1..TB its bag) and
    the ``[L, N]`` flat weight indices (clamped), with the data checks queued."""
    n, t, b = _layout(weight, table_offsets, offsets, indices)
    tb, length, size = t * b, indices.numel(), weight.numel()
    stride = size // n
    dev = weight.device
    bounds = offsets.detach()[: tb + 1]
    # rows[l] = #{j : bounds[j] <= l}: 0 before the first bag, TB + 1 after the last
    marks = torch.index_add(
        filled_i32(length + 1, 0, dev), 0, bounds.clamp(0, length), filled_i32(tb + 1, 1, dev)
    )
    rows = torch.cumsum(marks[:length], 0, dtype=torch.int32)
    # each row's table offset (the spare rows take table 0's), then the column in a task
    # table t's offset for its B bags: one copy whatever B (no repeat_interleave: a sync)
    per_bag = table_offsets.new_empty(t, b).copy_(table_offsets[:t].unsqueeze(1)).view(-1)
    row_tables = torch.cat([table_offsets[:1], per_bag, table_offsets[:1]])
    cols = row_tables.index_select(0, rows).add_(indices)  # the index dtype; flat is int64
    if validation_enabled():
        checks = DataChecks(UNARY)
        if length > 0:
            inside = torch.remainder(rows, tb + 1).ne_(0)  # rows 1..TB: inside a bag
            low, high = torch.aminmax(cols * inside)
            checks.add(low, 0, None, "arguments 'table_offsets' + 'indices' must be non-negative")
            checks.add(
                high,
                None,
                stride - 1,
                "arguments 'table_offsets' + 'indices' must stay "
                f"within the weight's {stride} rows per task",
            )
        checks.add(
            table_offsets[t],
            stride,
            stride,
            f"argument 'table_offsets' must end at weight.numel() / N = {stride}",
        )
        checks.require(non_decreasing(bounds), "argument 'offsets' must be non-decreasing")
        first, last = torch.aminmax(bounds)
        checks.add(first, 0, None, "argument 'offsets' must be non-negative")
        checks.add(last, None, length, f"argument 'offsets' must end within the {length} indices")
        checks.assert_on_device()
    tasks = torch.arange(0, size, stride, device=dev)[:n]
    flat = (cols.unsqueeze(1) + tasks).clamp_(0, size - 1)
    return rows, flat, n, t, b


def batched_unary_embeddings_npu(
    weight: torch.Tensor, table_offsets: torch.Tensor, offsets: torch.Tensor, indices: torch.Tensor
) -> torch.Tensor:
    """``out[n, b, t]`` (``[N, B, T]``, ``weight``'s dtype) as upstream (module docstring).

    Launches: the bag marks (clamp, ``index_add``, ``cumsum``), the row tables
    (an expand's copy, ``cat``, gather, add), the flat indices (add, clamp),
    the weight gather, its float32 cast (half dtypes), ``index_add_`` into zeros, the transpose
    copy (and the cast back).  Budget: ``budgets.py``; 0 syncs.
    """
    w = check_tensor(UNARY, "weight", weight).detach()
    rows, flat, n, t, b = _plan(w, table_offsets, offsets, indices)
    values = w.reshape(-1).index_select(0, flat.view(-1)).view(flat.shape).float()
    sums = torch.zeros(t * b + 2, n, dtype=torch.float32, device=w.device)
    sums.index_add_(0, rows, values)
    out = sums[1:-1].view(t, b, n).permute(2, 1, 0)
    # one copy: contiguous [N, B, T] in the weight's dtype (.to would keep the strides)
    return w.new_empty(n, b, t).copy_(out)


class _UnaryEmbeddings(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        weight: torch.Tensor,
        table_offsets: torch.Tensor,
        offsets: torch.Tensor,
        indices: torch.Tensor,
    ) -> torch.Tensor:
        out = below_autograd(
            torch.ops.fbgemm.batched_unary_embeddings, weight, table_offsets, offsets, indices
        )
        ctx.save_for_backward(weight, table_offsets, offsets, indices)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        weight, table_offsets, offsets, indices = ctx.saved_tensors
        rows, flat, n, t, b = _plan(weight.detach(), table_offsets, offsets, indices)
        padded = grad.new_zeros(t * b + 2, n, dtype=torch.float32)
        padded[1:-1].view(t, b, n).copy_(grad.permute(2, 1, 0))
        per_position = padded.index_select(0, rows)  # [L, N]; spare rows give 0
        g = torch.zeros(weight.numel(), dtype=torch.float32, device=weight.device)
        g.index_add_(0, flat.view(-1), per_position.view(-1))
        return g.view(weight.shape).to(weight.dtype), None, None, None


def batched_unary_embeddings_autograd(
    weight: torch.Tensor, table_offsets: torch.Tensor, offsets: torch.Tensor, indices: torch.Tensor
) -> torch.Tensor:
    """Records the call when ``weight`` needs a gradient (upstream's CUDA autograd function);
    else the kernel below autograd."""
    if not needs_grad(weight):
        return below_autograd(
            torch.ops.fbgemm.batched_unary_embeddings, weight, table_offsets, offsets, indices
        )
    return _UnaryEmbeddings.apply(weight, table_offsets, offsets, indices)


KERNELS = {
    UNARY: {
        "PrivateUse1": batched_unary_embeddings_npu,
        "AutogradPrivateUse1": batched_unary_embeddings_autograd,
    }
}
