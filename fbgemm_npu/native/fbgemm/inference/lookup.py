"""``fbgemm::int_nbit_split_embedding_codegen_lookup_function`` on npu: the inference TBE lookup.

Semantics, upstream's CPU kernel (fbgemm-gpu-cpu 1.8.0, ``embedding_forward_quantized_cpu_
template.cpp``): ``T = weights_offsets.numel()`` features, ``B = (offsets.numel() - 1) // T``
bags each; bag ``(t, b)`` holds the indices ``offsets[t B + b] : offsets[t B + b + 1]``; feature
``t``'s rows start at byte ``weights_offsets[t]`` of ``dev_weights`` (``uvm_weights`` for the
MANAGED placements), ``weights_tys[t]`` their type (FP32, FP16, FP8, INT8, INT4, INT2; layout:
``_layout.py``), ``D_t = D_offsets[t + 1] - D_offsets[t]`` values each.  Pooled (SUM / MEAN)::

    out[b, D_offsets[t] + d] = c_tb * sum_{i in bag (t, b), idx_i != -1} w_i * row_t(idx_i)[d]

``w_i`` the ``indice_weights`` (1 when absent), ``c_tb = 1 / len`` for MEAN (``len`` counts the
-1 entries too; 1 for an empty bag or SUM); ``row`` dequantized as ``scale * q + bias``.  NONE:
``out[i, :] = row(idx_i)`` with every feature read at ``D = max(max_*_D)`` values (an INT8
output copies the row's ``4 + D`` bytes), a zero row for -1.  Index -1 is a pruned row (skipped);
an index outside ``[-1, rows_t)`` is an error upstream: here a queued data check naming
'indices', the row clamped (memory-safe).  Output FP32, FP16 or BF16 (upstream's conversion:
round half away from zero) and, for NONE with INT8 weights, INT8.

The program (no loop over features or bags; a loop over the weight types present, at most 6):
slot of every index position by segment ids over ``offsets``; its feature's plan row (one
gather of ``ftab``: byte base, row bytes, bounds, output column, per-type column counts); the
byte window of every index's row in one uint8 gather ``[N, W]`` (of ``q``-byte granules,
``q`` the gcd of the row starts and widths: one index per granule, not per byte); then per
type, the rows decoded (``_dequant.py``), scaled by the weights, and pooled by one
``index_add_`` into a float32 ``[B total_D / g + pad, g]`` buffer (``g`` the gcd of the dims:
a row of ``D`` values is ``D / g`` granules), rows of other types, other columns and -1
indices sent to its ``pad`` spare rows at the end.
MEAN then multiplies by ``1 / len`` per output column.  Mixed types cost one pass each over
every index (rows of other types are decoded, then discarded).  Budgets: ``budgets.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    DataChecks,
    check_dtype,
    check_ndim,
    check_same_device,
    non_decreasing,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, filled_i32
from fbgemm_npu.native.fbgemm.inference._dequant import dequantize
from fbgemm_npu.native.fbgemm.inference._layout import (
    BASE,
    COLS,
    DCOL,
    FP8,
    HI,
    INT8,
    KEEP,
    LO,
    RMAX,
    ROWB,
    get_plan,
)

__all__ = ["KERNELS", "int_nbit_split_embedding_codegen_lookup_function_npu"]

OP = "fbgemm::int_nbit_split_embedding_codegen_lookup_function"
SUM, MEAN, NONE = 0, 1, 2
_OUT = {0: torch.float32, 1: torch.float16, 5: torch.bfloat16, 2: torch.uint8}


def _metadata(
    dev_weights: torch.Tensor,
    uvm_weights: torch.Tensor,
    layout: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    indices: torch.Tensor,
    offsets: torch.Tensor,
    indice_weights: torch.Tensor | None,
    pooling_mode: int,
    output_dtype: int,
) -> None:
    op = OP
    check_dtype(op, "dev_weights", dev_weights, (torch.uint8,))
    check_dtype(op, "uvm_weights", uvm_weights, (torch.uint8,))
    for name, t, dtype in zip(
        ("weights_placements", "weights_offsets", "weights_tys", "D_offsets"),
        layout,
        (torch.int32, torch.int64, torch.uint8, torch.int32),
        strict=True,
    ):
        check_dtype(op, name, t, (dtype,))
        check_ndim(op, name, t, (1,))
    for name, t in (("indices", indices), ("offsets", offsets)):
        check_dtype(op, name, t, INDEX_DTYPES)
        check_ndim(op, name, t, (1,))
    if pooling_mode not in (SUM, MEAN, NONE):
        raise ValueError(f"{op}: argument 'pooling_mode' must be 0 (SUM), 1 (MEAN) or 2 (NONE), "
                         f"got {pooling_mode}")  # fmt: skip
    if output_dtype not in _OUT or (output_dtype == INT8 and pooling_mode != NONE):
        raise ValueError(
            f"{op}: argument 'output_dtype' must be 0 (FP32), 1 (FP16), 5 (BF16) or, with "
            f"pooling_mode NONE, 2 (INT8), got {output_dtype} (pooling_mode {pooling_mode})"
        )
    if indice_weights is not None and indice_weights.numel() > 0 and pooling_mode != NONE:
        check_dtype(op, "indice_weights", indice_weights, (torch.float32,))
        if indice_weights.dim() != 1 or indice_weights.numel() != indices.numel():
            raise ValueError(
                f"{op}: argument 'indice_weights' must be 1-D with one weight per index "
                f"({indices.numel()}), got shape {tuple(indice_weights.shape)}"
            )
    check_same_device(
        op,
        dev_weights=dev_weights,
        uvm_weights=uvm_weights,
        **dict(
            zip(
                ("weights_placements", "weights_offsets", "weights_tys", "D_offsets"),
                layout,
                strict=True,
            )
        ),  # fmt: skip
        indices=indices,
        offsets=offsets,
        indice_weights=indice_weights,
    )


def _offsets_checks(checks: DataChecks, off: torch.Tensor, N: int) -> None:
    """Queue: the bags' offsets never decrease, start at 0 or more, end at ``N`` or less."""
    checks.require(non_decreasing(off), "argument 'offsets' must be non-decreasing")
    checks.add(off[0], 0, None, "argument 'offsets' must start at 0 or more")
    checks.add(off[-1], None, N, f"argument 'offsets' must end at {N} (indices) or less")


def _to_output(out: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float32 -> the output dtype; bfloat16 as upstream rounds it (half away from zero: add
    ``2**15`` to the bit pattern, keep the top 16 bits by an int32 floor_divide; no shifts)."""
    if dtype == torch.float32:
        return out
    if dtype != torch.bfloat16:
        return out.to(dtype)
    bits = torch.floor_divide(out.view(torch.int32) + 2**15, 2**16)
    return bits.to(torch.int16).view(torch.bfloat16)


def int_nbit_split_embedding_codegen_lookup_function_npu(
    dev_weights: torch.Tensor,
    uvm_weights: torch.Tensor,
    weights_placements: torch.Tensor,
    weights_offsets: torch.Tensor,
    weights_tys: torch.Tensor,
    D_offsets: torch.Tensor,
    total_D: int,
    max_int2_D: int,
    max_int4_D: int,
    max_int8_D: int,
    max_float16_D: int,
    max_float32_D: int,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    pooling_mode: int,
    indice_weights: torch.Tensor | None = None,
    output_dtype: int = 1,
    lxu_cache_weights: torch.Tensor | None = None,
    lxu_cache_locations: torch.Tensor | None = None,
    row_alignment: int | None = None,
    max_float8_D: int | None = 0,
    fp8_exponent_bits: int | None = -1,
    fp8_exponent_bias: int | None = -1,
) -> torch.Tensor:
    """The inference TBE lookup (module docstring: math, dtypes, program).  Launches: segment
    ids (3), slot feature (3), the plan gather, clamp, row starts, the byte window (add, clamp,
    gather); per type its decode (0-4), the weights' multiply, target rows (0-3) and the
    ``index_add_``; the buffer's zeros, (MEAN) lengths (4) and scaling, the output cast.  The
    cache arguments are ignored, as upstream's CPU kernel ignores them.  Budgets: ``budgets.py``.
    """
    op = OP
    layout = (weights_placements, weights_offsets, weights_tys, D_offsets)
    _metadata(dev_weights, uvm_weights, layout, indices, offsets, indice_weights, pooling_mode,
              output_dtype)  # fmt: skip
    nobag = pooling_mode == NONE
    max_D = max(max_int2_D, max_int4_D, max_int8_D, max_float8_D or 0, max_float16_D,
                max_float32_D)  # fmt: skip
    T = weights_offsets.numel()
    if T == 0:
        raise RuntimeError(f"{op}: argument 'weights_offsets' must hold at least one feature")
    if nobag and max_D <= 0:
        raise RuntimeError(f"{op}: pooling_mode NONE needs a max_*_D > 0, got {max_D}")
    plan = get_plan(
        op,
        (D_offsets, weights_offsets, weights_tys, weights_placements),
        (dev_weights.numel(), uvm_weights.numel()),
        row_alignment or 1,
        max_D if nobag else None,
    )
    if not nobag and (int(total_D) != plan.total_D or plan.total_D <= 0):
        raise ValueError(f"{op}: argument 'total_D' must be D_offsets[-1] = {plan.total_D} > 0, "
                         f"got {total_D}")  # fmt: skip
    if FP8 in plan.types and not ((fp8_exponent_bits or -1) > 0 and (fp8_exponent_bias or -1) > 0):
        raise RuntimeError(f"{op}: FP8 requires fp8_exponent_bits > 0 (got {fp8_exponent_bits}) "
                           f"and fp8_exponent_bias > 0 (got {fp8_exponent_bias})")  # fmt: skip
    out_dtype = _OUT[output_dtype]
    if out_dtype == torch.uint8 and plan.types != (INT8,):
        raise RuntimeError(f"{op}: int8 output are only supported for int8 weights "
                           "(argument 'output_dtype')")  # fmt: skip
    dev = dev_weights.device
    B = max((offsets.numel() - 1) // T, 0)
    N = indices.numel()
    width = plan.total_D + (4 if out_dtype == torch.uint8 else 0)
    off = offsets[: T * B + 1]
    checks = DataChecks(op)
    if B == 0 or N == 0:  # upstream's zeros (NONE: one row per index)
        if B > 0 and validation_enabled():  # no index, yet the bags' offsets must be right
            _offsets_checks(checks, off, N)
            checks.assert_on_device()
        return torch.zeros((N if nobag else B), width, dtype=out_dtype, device=dev)
    # slot s of each index position: 0 before offsets[0], t B + b + 1 in bag (t, b), T B + 1 past
    marks = torch.index_add(filled_i32(N + 1, 0, dev), 0, off.clamp(0, N),
                            filled_i32(T * B + 1, 1, dev))  # fmt: skip
    s = torch.cumsum(marks[:N], 0, dtype=torch.int32)
    u = s + (B - 1)
    f = torch.floor_divide(u, B)  # slot feature: 0 before, t + 1, T + 1 past
    info = plan.ftab.index_select(0, f)
    idx = indices
    if validation_enabled():
        _offsets_checks(checks, off, N)
        ok = torch.logical_and(idx >= info[:, LO], idx < info[:, HI]).all()
        checks.require(ok, "argument 'indices' must hold -1 or a row of its feature's table")
        checks.assert_on_device()
    row = torch.clamp(idx, info[:, KEEP], info[:, RMAX])  # dummies: clamp to 0
    start = torch.addcmul(info[:, BASE], row, info[:, ROWB])
    src = torch.cat([dev_weights.reshape(-1), uvm_weights.reshape(-1)]) if plan.uvm \
        else dev_weights.reshape(-1)  # fmt: skip
    q, M = plan.q, src.numel() // plan.q
    # [M, q] granules of the buffer (every row starts at a granule); none: a zero granule
    grains = src[: M * q].view(M, q) if M else torch.zeros(1, q, dtype=torch.uint8, device=dev)
    pos = (start.unsqueeze(1) + arange_cached(plan.W // q, dev)).clamp_(0, max(M - 1, 0))
    raw = grains.index_select(0, pos.view(-1)).view(N, plan.W)
    keep = idx >= info[:, KEEP]  # a real feature's row, not -1
    fp8 = (fp8_exponent_bits or -1, fp8_exponent_bias or -1)
    if nobag:
        return _nobag(plan, raw, info, keep, out_dtype, fp8)
    g, single = plan.g, len(plan.types) == 1
    rows_out, pad = B * plan.total_D // g, plan.pad
    bag = torch.sub(u, f, alpha=B)  # b of bag (t, b)
    # a dropped value (-1, no bag, another type, a column past its D) goes to the spare rows
    # past the output's; their index is a 0-d view of the cached arange (a where with a Python
    # scalar would fill a tensor for it)
    spare = arange_cached(rows_out + 1, dev)[rows_out]
    tgt = torch.where(keep, torch.add(info[:, DCOL], bag, alpha=plan.total_D // g), spare)
    acc = torch.zeros(rows_out + pad, g, dtype=torch.float32, device=dev)
    weighted = indice_weights is not None and indice_weights.numel() > 0
    for k, (ty, D) in enumerate(zip(plan.types, plan.dims, strict=True)):
        vals = dequantize(raw, ty, D, fp8)
        if weighted:
            vals = vals * indice_weights.unsqueeze(1)
        j = D // g
        if single and plan.uniform[k]:
            target = tgt if j == 1 else tgt.unsqueeze(1) + arange_cached(j, dev)
        else:
            cols = arange_cached(j, dev)
            mine = cols < info[:, COLS + k].unsqueeze(1)
            target = torch.where(mine, tgt.unsqueeze(1) + cols, spare)
        acc.index_add_(0, target.reshape(-1), vals.reshape(-1, g))
    out = acc[:rows_out].view(B, plan.total_D)
    if pooling_mode == MEAN:
        inv = torch.reciprocal((off[1:] - off[:-1]).clamp_min_(1))
        out.mul_(inv.view(plan.T, B).index_select(0, plan.cols).t())
    return _to_output(out, out_dtype)


def _nobag(
    plan: object,
    raw: torch.Tensor,
    info: torch.Tensor,
    keep: torch.Tensor,
    out_dtype: torch.dtype,
    fp8: tuple[int, int],
) -> torch.Tensor:
    """Pooling NONE: row ``i`` of the output is index ``i``'s row (zeros for -1 and for
    positions outside the bags), every feature read at ``D = plan.total_D`` values."""
    D = plan.total_D
    if out_dtype == torch.uint8:  # INT8 weights only: the row's bytes, scale / bias first
        return torch.where(keep.unsqueeze(1), raw[:, : D + 4], 0)
    out: torch.Tensor | float = 0.0
    for k, ty in enumerate(plan.types):
        mine = keep if len(plan.types) == 1 else keep & (info[:, COLS + k] > 0)
        out = torch.where(mine.unsqueeze(1), dequantize(raw, ty, D, fp8), out)
    return _to_output(out, out_dtype)


KERNELS = {OP: {"PrivateUse1": int_nbit_split_embedding_codegen_lookup_function_npu}}
