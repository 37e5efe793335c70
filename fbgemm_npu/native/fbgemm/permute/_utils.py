"""The permute family's tensor programs, argument checks and folded data checks.

Every op of the family is one gather: output row ``t`` is a copy of some input row, and its
element ``j`` reads the input element ``j + d_t``.  :mod:`._gather` builds that per-element source
index from the rows' bounds with two ``index_add`` and a ``cumsum`` in int32 (AI Core) whenever
the sizes allow, decided on the host (:func:`._gather.index_dtype`), and no host sync.

Checks: the properties only the data knows (permute indices in range, lengths non-negative and
within the values, the lengths' sum within the values, a given output size equal to the lengths'
sum, no int32 scan wrapped) are gathered in a :class:`~fbgemm_npu.native._checks.DataChecks` as
0-d device tensors with an allowed range each, then verified in one go:

* :meth:`~fbgemm_npu.native._checks.DataChecks.read_with` when the op reads a size back to the
  host anyway (``permuted_lengths_sum`` is None): the checked scalars travel in the same
  device-to-host copy as the size, so the checks add no extra sync, the error names the exact
  argument that failed, and nothing after the read needs guarding;
* :meth:`~fbgemm_npu.native._checks.DataChecks.assert_on_device` otherwise: one queued check
  for every condition (``native/_checks.py``), whatever their number, no sync; the index is built
  memory-safe until it is read (row bounds clamped before the scatters, the index before the
  gathers).

Both are skipped when ``FBGEMM_NPU_VALIDATE=0`` (see :mod:`fbgemm_npu.native._checks`).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    DataChecks,
    allocation_of,
    check_dtype,
    check_ndim,
    check_on_device,
    check_same_device,
    check_tensor,
    dtype_name,
    non_decreasing,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native._triton import use_triton
from fbgemm_npu.native.fbgemm.permute._gather import (
    index_dtype,
    row_bounds,
    segment_arange,
    segment_arange_wide,
    source_index,
)

__all__ = [
    "VALUE_DTYPES",
    "WEIGHT_DTYPES",
    "check_args",
    "check_out_buffers",
    "expand",
    "gather_index",
    "invert",
    "permute_rows",
]

# What upstream's CPU and CUDA kernels both gather as values (FBGEMM_DISPATCH_ALL_TYPES).
VALUE_DTYPES: tuple[torch.dtype, ...] = (
    torch.int32,
    torch.int64,
    torch.float32,
    torch.float16,
    torch.bfloat16,
)
# The union of upstream's weight dispatches (CUDA: all of these; CPU: a subset per op).
WEIGHT_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int32,
    torch.int64,
)
Out = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]
OutBuffers = tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]


def check_args(
    op: str,
    permute: object,
    lengths: object,
    values: object,
    weights: object,
    permuted_lengths_sum: int | None,
    values_name: str = "values",
) -> None:
    """Metadata checks shared by the sparse-data permutes (no device work)."""
    check_dtype(op, "permute", check_tensor(op, "permute", permute), INDEX_DTYPES)
    check_dtype(op, "lengths", check_tensor(op, "lengths", lengths), INDEX_DTYPES)
    check_dtype(op, values_name, check_tensor(op, values_name, values), VALUE_DTYPES)
    if weights is not None:
        check_dtype(op, "weights", check_tensor(op, "weights", weights), WEIGHT_DTYPES)
        check_ndim(op, "weights", weights, (1, 2))
    check_same_device(
        op, permute=permute, lengths=lengths, weights=weights, **{values_name: values}
    )
    if permuted_lengths_sum is not None and permuted_lengths_sum < 0:
        raise ValueError(
            f"{op}: argument 'permuted_lengths_sum' must be non-negative, "
            f"got {permuted_lengths_sum}"
        )


def permute_rows(
    op: str,
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None,
    permuted_lengths_sum: int | None,
    values_name: str = "values",
    outs: OutBuffers = (None, None, None),
) -> Out:
    """The sparse-data permute on ``lengths`` of shape ``(T_in, B)``; see :mod:`.permute`.

    ``outs``: preallocated (lengths, values, weights) outputs, checked by
    :func:`check_out_buffers`; the gathers write into them (``out=``), no extra launch.
    """
    perm = permute.reshape(-1)
    t_in, b = lengths.shape
    t_out = perm.numel()
    flat_values = values.reshape(-1)
    if t_out == 0 or b == 0:  # nothing is read: empty outputs, no launch
        if permuted_lengths_sum not in (None, 0):
            raise ValueError(
                f"{op}: argument 'permuted_lengths_sum' must be 0 for an empty output (permute "
                f"has {t_out} entries, lengths {b} columns), got {permuted_lengths_sum}"
            )
        empty_weights = None if weights is None else weights.new_empty((0, *weights.shape[1:]))
        empty = (lengths.new_empty((t_out, b)), flat_values.new_empty((0,)), empty_weights)
        return _given_or(outs, empty, weights is not None)
    where = f"argument 'permute' must hold indices in [0, {t_in})"
    if t_in == 0:
        raise ValueError(f"{op}: {where}: 'lengths' has no rows")
    n_avail = flat_values.numel()
    limit = f"{values_name}.numel() ({n_avail})"
    if weights is not None:
        n_avail = min(n_avail, weights.size(0))
        limit += f" and weights.size(0) ({weights.size(0)})"
    if permuted_lengths_sum is not None:
        _check_room(op, permuted_lengths_sum, n_avail, limit, sized=True)
        if permuted_lengths_sum > t_out * n_avail:  # each output row sums to <= n_avail
            raise ValueError(  # refused before any allocation of that size (deferred checks)
                f"{op}: argument 'permuted_lengths_sum' ({permuted_lengths_sum}) must equal the "
                f"sum of the permuted lengths, at most permute.numel() ({t_out}) * {limit}"
            )
    bound = t_out * n_avail if permuted_lengths_sum is None else permuted_lengths_sum
    fits = index_dtype(n_avail, bound, t_in * b + 1, t_out * b + 1) == torch.int32
    if use_triton(op, lengths.device, supported=fits):  # 2 launches: _triton_permute
        from fbgemm_npu.native.fbgemm.permute._triton_permute import permute_rows_triton

        made = permute_rows_triton(
            op, perm, lengths, flat_values, weights, permuted_lengths_sum, n_avail, limit, outs
        )
        return _given_or(outs, made, weights is not None)
    bounds = DataChecks(op)
    index = perm
    if validation_enabled():
        low, high = torch.aminmax(perm)
        bounds.add(low, 0, None, where)
        bounds.add(high, None, t_in - 1, where)
        shortest, longest = torch.aminmax(lengths)
        bounds.add(shortest, 0, None, "argument 'lengths' must be non-negative")
        # a length past the values breaks the sum's bound too; refusing it also keeps the int32
        # cast of int64 lengths in the scans exact
        bounds.add(longest, None, n_avail, f"sum(lengths) must not exceed {limit}")
        index = perm.clamp(0, t_in - 1)  # gathers stay in bounds until the checks have run
    lengths_out = None if outs[0] is None else outs[0].view(t_out, b)
    permuted_lengths = torch.index_select(lengths, 0, index, out=lengths_out)
    total = permuted_lengths_sum
    if total is None and index_dtype(t_out * n_avail) != torch.int32:
        # Valid data can give an output of up to t_out * n_avail elements: past 2**31 an int32
        # scan could wrap, so the exact int64 size is read first (the read this path makes
        # anyway, one launch more), carrying the checks, which then hold for the rest.
        total = _read_total(bounds, lengths, permuted_lengths, n_avail, limit)
        bounds = DataChecks(op)
    bound = t_out * n_avail if total is None else total
    scans = row_bounds(lengths, permuted_lengths, index_dtype(n_avail, bound))
    safe = bool(bounds.items) and total is not None  # checks deferred: guard the gathers
    if bounds.items:
        in_sum, out_sum = scans[lengths.numel()], scans[-1]
        bounds.add(in_sum, None, n_avail, f"sum(lengths) must not exceed {limit}")
        # an int32 scan that wrapped went negative at its first wrap (every step is in
        # [0, 2**31)): its sum passed n_avail, or permuted_lengths_sum (below 2**31 here)
        wrapped = f"sum(lengths) must not exceed {limit}"
        if total is not None:
            wrapped += f", nor the permuted lengths' sum exceed permuted_lengths_sum ({total})"
            what = (
                f"argument 'permuted_lengths_sum' ({total}) must equal the sum of the permuted "
                "lengths"
            )
            bounds.add(out_sum, total, total, what)
        bounds.add(scans.amin(), 0, None, wrapped)
    if total is None:
        total = bounds.read_with([scans[-1]])[0]
    elif bounds.items:
        bounds.assert_on_device()
    _check_room(op, total, n_avail, limit, permuted_lengths_sum is not None)
    idx = source_index(scans, index, (t_in, t_out, b), total, safe)
    if safe and total > 0:
        idx.clamp_(0, n_avail - 1)
    for name, given in (("permuted_indices_out", outs[1]), ("permuted_weights_out", outs[2])):
        if given is not None and given.size(0) < total:
            raise ValueError(
                f"{op}: argument '{name}' must have at least {total} rows (the permuted lengths' "
                f"sum), got {given.size(0)}"
            )
    values_out = None if outs[1] is None else outs[1].narrow(0, 0, total)
    out_values = torch.index_select(flat_values, 0, idx, out=values_out)
    out_weights = None
    if weights is not None:
        weights_out = None if outs[2] is None else outs[2].narrow(0, 0, total)
        out_weights = torch.index_select(weights, 0, idx, out=weights_out)
    return _given_or(outs, (permuted_lengths, out_values, out_weights), weights is not None)


def _check_room(op: str, total: int, n_avail: int, limit: str, sized: bool) -> None:
    """Values asked for where there are none: the data is bad whatever it holds (metadata only)."""
    if total > 0 and n_avail == 0:
        what = f"{op}: sum(lengths) must not exceed {limit}"
        if sized:
            what += f", and argument 'permuted_lengths_sum' ({total}) must equal its permuted sum"
        raise ValueError(f"{what}: {total} values asked for")


def _read_total(
    bounds: DataChecks,
    lengths: torch.Tensor,
    permuted_lengths: torch.Tensor,
    n_avail: int,
    limit: str,
) -> int:
    """The permuted lengths' sum, read exactly (int64 reductions), with every condition of
    ``bounds`` and the lengths' sum checked in the same copy."""
    if bounds.items:
        what = f"sum(lengths) must not exceed {limit}"
        bounds.add(lengths.sum(dtype=torch.int64), None, n_avail, what)
    return bounds.read_with([permuted_lengths.sum(dtype=torch.int64)])[0]


def _given_or(outs: OutBuffers, made: Out, weighted: bool) -> Out:
    """The preallocated buffers where given (whole, as upstream returns them), else ``made``."""
    weights_out = (outs[2] if outs[2] is not None else made[2]) if weighted else None
    return (
        made[0] if outs[0] is None else outs[0],
        made[1] if outs[1] is None else outs[1],
        weights_out,
    )


def check_out_buffers(
    op: str,
    outs: OutBuffers,
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None,
) -> None:
    """Metadata of ``permute_2D_sparse_preallocated_out``'s buffers (sizes: see permute_rows)."""
    names = ("permuted_lengths_out", "permuted_indices_out", "permuted_weights_out")
    like = (lengths, values, weights)
    for name, buf, ref in zip(names, outs, like, strict=True):
        if buf is None or ref is None:
            continue
        check_tensor(op, name, buf)
        check_same_device(op, lengths=lengths, **{name: buf})
        if torch._debug_has_internal_overlap(buf) == 1:  # stride 0: elements share memory
            raise ValueError(
                f"{op}: argument '{name}' must not overlap itself (strides {buf.stride()}): "
                "every element it is given is written"
            )
        if buf.dtype != ref.dtype:
            raise ValueError(
                f"{op}: argument '{name}' must have dtype {dtype_name(ref.dtype)}, got "
                f"{dtype_name(buf.dtype)}"
            )
    if outs[0] is not None:
        try:  # upstream writes the lengths flat through the buffer's pointer
            outs[0].view(permute.numel(), lengths.size(1))
        except RuntimeError as exc:
            raise ValueError(
                f"{op}: argument 'permuted_lengths_out' must be viewable as ({permute.numel()}, "
                f"{lengths.size(1)}), got shape {tuple(outs[0].shape)}"
            ) from exc
    if outs[1] is not None and outs[1].dim() != 1:
        raise ValueError(
            f"{op}: argument 'permuted_indices_out' must be 1-D, got {outs[1].dim()}-D"
        )
    if outs[2] is not None and weights is not None and outs[2].shape[1:] != weights.shape[1:]:
        raise ValueError(
            f"{op}: argument 'permuted_weights_out' must have shape (n, *weights.shape[1:]) = "
            f"(n, {', '.join(map(str, weights.shape[1:]))}), got {tuple(outs[2].shape)}"
        )


def gather_index(
    permute: torch.Tensor, lengths: torch.Tensor, total: int, n_values: int
) -> torch.Tensor:
    """The forward's gather index, rebuilt for the backward (inputs known valid, so unchecked).

    ``n_values``: the length of the gathered tensor (bounds the index, picks its dtype)."""
    perm = permute.reshape(-1)
    if perm.numel() == 0 or lengths.size(1) == 0:
        return torch.zeros(0, dtype=torch.int64, device=lengths.device)
    permuted_lengths = lengths.index_select(0, perm)
    scans = row_bounds(lengths, permuted_lengths, index_dtype(n_values, total))
    rows = (lengths.size(0), perm.numel(), lengths.size(1))
    return source_index(scans, perm, rows, total, safe=False)


def invert(op: str, permute: object) -> torch.Tensor:
    """``fbgemm::invert_permute``; see ``permute.invert_permute_npu``."""
    perm = check_dtype(op, "permute", check_tensor(op, "permute", permute), INDEX_DTYPES)
    flat = perm.reshape(-1)
    n = flat.numel()
    out = perm.new_empty(perm.shape)
    if n == 0:
        return out
    positions = arange_cached(n, perm.device, perm.dtype)  # read only: launch-free once warm
    validate = validation_enabled()
    index = flat.clamp(0, n - 1) if validate else flat
    out.view(-1).index_put_((index,), positions)
    if validate:
        # A permutation maps back onto itself: out[permute[i]] == i for every i (a repeated index
        # loses one of its writes), and no index was clamped.
        ok = ((out.view(-1).index_select(0, index) == positions) & (index == flat)).all()
        check_on_device(
            op, ok, f"argument 'permute' must be a permutation of 0..{n - 1} (each index once)"
        )
    return out


def expand(
    op: str, permute: object, input_offset: object, output_offset: object, output_size: int
) -> torch.Tensor:
    """``fbgemm::expand_into_jagged_permute``; see ``permute.expand_into_jagged_permute_npu``."""
    perm = check_dtype(op, "permute", check_tensor(op, "permute", permute), INDEX_DTYPES)
    offsets = {"input_offset": input_offset, "output_offset": output_offset}
    for name, t in offsets.items():
        check_tensor(op, name, t)
        if t.dtype != perm.dtype:  # upstream reads all three with permute's index type
            raise ValueError(
                f"{op}: argument '{name}' must have permute's dtype ({dtype_name(perm.dtype)}), "
                f"got {dtype_name(t.dtype)}"
            )
    check_same_device(op, permute=perm, **offsets)
    n = perm.numel()
    if n == 0:
        raise ValueError(f"{op}: argument 'permute' must not be empty")
    for name, t in offsets.items():
        if t.numel() != n + 1:
            raise ValueError(
                f"{op}: argument '{name}' must have permute.numel() + 1 = {n + 1} elements, "
                f"got {t.numel()}"
            )
    if output_size < 0:
        raise ValueError(f"{op}: argument 'output_size' must be non-negative, got {output_size}")
    if perm.dtype == torch.int32 and output_size > torch.iinfo(torch.int32).max:
        raise ValueError(  # no int32 offset reaches it: the data is bad whatever it holds
            f"{op}: argument 'output_offset' must end at output_size ({output_size}), past the "
            "range of its dtype int32"
        )
    alloc = f"the output of 'output_size' = {output_size} elements"
    with allocation_of(op, alloc):  # before any check is queued: a size no memory holds is
        # its own error, not one of bad data reaching a launch
        out = torch.empty(output_size, dtype=perm.dtype, device=perm.device)
    flat = perm.reshape(-1)
    starts_in = input_offset.reshape(-1)
    ends = output_offset.reshape(-1)
    safe = validation_enabled()
    if safe:
        bounds = DataChecks(op)
        low, high = torch.aminmax(flat)
        bounds.add(low, 0, None, f"argument 'permute' must hold indices in [0, {n})")
        bounds.add(high, None, n - 1, f"argument 'permute' must hold indices in [0, {n})")
        # compared, not subtracted: int32 steps across 2**31 wrap to non-negative ones
        what = "argument 'output_offset' must be non-decreasing"
        bounds.require(non_decreasing(ends), what)
        bounds.add(ends[0], 0, 0, "argument 'output_offset' must start at 0")
        what = f"argument 'output_offset' must end at output_size ({output_size})"
        bounds.add(ends[-1], output_size, output_size, what)
        bounds.assert_on_device()
        flat = flat.clamp(0, n - 1)  # the gather stays in bounds until the checks are read
    starts = starts_in.index_select(0, flat)
    with allocation_of(op, alloc):
        if perm.dtype == torch.int64:  # values may pass 2**31: int32 row ids, int64 arithmetic
            return segment_arange_wide(starts, ends, output_size, out)
        if safe:  # the checks are deferred: keep the scatters inside their buffer
            ends = ends.clamp(0, output_size)
        return segment_arange(starts, ends, output_size, out)
