"""Jagged index-select: ``fbgemm::jagged_index_select`` (forward and backward),
``jagged_index_select_2d_forward_v2`` and its backward op ``jagged_index_add_2d_forward_v2`` on
npu (``keyed_jagged_index_select_dim1`` is in :mod:`.keyed`).

A jagged tensor is ``values`` (one row per element) cut into segments; selecting segments
``indices`` copies whole segments, so output row ``r`` of output segment ``s`` reads input row::

    src[r] = r + d[s],   d[s] = (start of input segment indices[s]) - (start of output segment s)

``s`` the number of output segments ending at or before ``r``; every op below is a few ops
building ``d``, then :func:`~fbgemm_npu.native.fbgemm.index_select._utils.rows_gather_index` (the
segment of every row by an int32 ``index_add`` + ``cumsum``: no ``searchsorted`` or
``repeat_interleave``, which a 910B runs on its AI CPU) and one gather.  The backward
(``jagged_index_add``) is the adjoint: ``zeros.index_add_(0, src, grad)``.

Index arithmetic is int32 where the host sees from sizes alone that it fits
(:func:`~fbgemm_npu.native.fbgemm.index_select._utils.scan_dtype`): ``jagged_index_select``'s
scans when ``len(indices) * values.size(0)`` (a bound on the selected lengths' sum) and the
output size are below 2**31, else int64 (AI CPU on a 910B, never a wrap).  The v2 ops' offsets
are int64 (their contract): their starts are a ``cat`` behind a cached zero, not an int64
``constant_pad_nd`` (AI CPU).

Semantics measured on upstream's CPU kernels (fbgemm-gpu-cpu 1.8.0) and read from its CUDA ones:

* ``*_2d_forward_v2`` / ``jagged_index_add_2d_forward_v2``: ``values`` 2-D of float32, float16,
  bfloat16, int32 or int64 (upstream refuses float64 and the small ints); ``indices`` int32 or
  int64; both offset tensors are *inclusive* cumsums (no leading 0) and int64 (upstream's CPU and
  CUDA kernels both read them as int64 and refuse int32);
* ``num_dense_output_rows`` smaller than ``output_offsets[-1]`` truncates the output (upstream
  does the same); larger makes upstream read out of bounds (a crash on CPU): refused here;
* ``jagged_index_add_2d_forward_v2`` adds every row of ``values`` (upstream's CPU kernel ignores
  ``num_dense_input_rows``, its CUDA kernel walks that many rows: the same in every caller);
* ``jagged_index_select``: ``values`` 2-D (upstream refuses 1-D), ``lengths`` int32/int64 (the
  output lengths keep its dtype); ``sum(lengths)`` may be below ``values.size(0)`` (the tail is
  ignored, as upstream does);

Empty ``indices`` with no output size: upstream reads ``output_offsets[-1]`` and fails; so do we,
with a ``ValueError`` naming the argument.  Bad data (an index out of range, offsets that
decrease, a size above the data, reads past ``values``) is refused by folded device checks (see
:class:`~fbgemm_npu.native._checks.DataChecks`; ``FBGEMM_NPU_VALIDATE=0`` skips them).

Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).  An output size not given is
read back to the host (it is data-dependent), and the data checks ride on that read.  The
backward of ``jagged_index_select`` launches ``zeros`` and ``index_add_`` with the gather index
the forward saved; without ``num_dense_output_rows`` the forward is the op itself (so that a
trace records the op, sized by its fake kernel, not the host read) and the backward rebuilds
the index first.
"""

from __future__ import annotations

import functools

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    DataChecks,
    allocation_of,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native.fbgemm.index_select import _utils as _u

__all__ = [
    "KERNELS",
    "VALUE_DTYPES",
    "jagged_index_add_2d_forward_v2_npu",
    "jagged_index_select_2d_forward_v2_npu",
    "jagged_index_select_npu",
]

JAGGED_INDEX_SELECT = "fbgemm::jagged_index_select"
JAGGED_INDEX_SELECT_2D_FORWARD_V2 = "fbgemm::jagged_index_select_2d_forward_v2"
JAGGED_INDEX_ADD_2D_FORWARD_V2 = "fbgemm::jagged_index_add_2d_forward_v2"

# upstream's jagged index select/add dispatch (CPU and CUDA): no float64, no small ints
VALUE_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.int32,
    torch.int64,
)
_I64 = (torch.int64,)


def _values_2d(op: str, values: object) -> torch.Tensor:
    t = check_dtype(op, "values", check_tensor(op, "values", values), VALUE_DTYPES)
    return check_ndim(op, "values", t, (2,))


def _check_v2_args(
    op: str, values: object, indices: object, input_offsets: object, output_offsets: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Metadata checks of the ``*_2d_forward_v2`` ops: 2-D values, int64 offsets, one device."""
    v = _values_2d(op, values)
    idx = _u.check_index_tensor(op, "indices", indices)
    ins = _u.check_index_tensor(op, "input_offsets", input_offsets, dtypes=_I64)
    outs = _u.check_index_tensor(op, "output_offsets", output_offsets, dtypes=_I64)
    check_same_device(op, values=v, indices=idx, input_offsets=ins, output_offsets=outs)
    return v, idx, ins, outs


def jagged_index_select_2d_forward_v2_npu(
    values: torch.Tensor,
    indices: torch.Tensor,
    input_offsets: torch.Tensor,
    output_offsets: torch.Tensor,
    num_dense_output_rows: int | None = None,
) -> torch.Tensor:
    """``out[r] = values[src[r]]`` for ``r < num_dense_output_rows`` (default
    ``output_offsets[-1]``): output segment ``s`` is a copy of input segment ``indices[s]``.

    Offsets are inclusive ends: segment ``j`` of the input spans
    ``[input_offsets[j-1], input_offsets[j])`` (``input_offsets[-1] := 0``), likewise the output.
    Returns ``(num_dense_output_rows, values.size(1))`` of ``values``' dtype.
    Launches: one ``cat`` for the starts (``_utils.segment_starts``), a gather and a difference
    for ``d``, the ``src`` index (5: ``_utils.rows_gather_index``; 4 unsized, no clamp), the row
    gather: 9.  ``num_dense_output_rows`` None reads the size back to the host.  Launches and
    syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    op = JAGGED_INDEX_SELECT_2D_FORWARD_V2
    values, indices, input_offsets, output_offsets = _check_v2_args(
        op, values, indices, input_offsets, output_offsets
    )
    _u.check_non_negative(op, "num_dense_output_rows", num_dense_output_rows)
    b, b_in = indices.numel(), input_offsets.numel()
    if output_offsets.numel() != b:
        raise ValueError(
            f"{op}: argument 'output_offsets' must have one entry per index ({b}), "
            f"got {output_offsets.numel()}"
        )
    if b == 0:
        if num_dense_output_rows is None:
            raise ValueError(
                f"{op}: argument 'output_offsets' is empty, so the output size is unknown; "
                "give num_dense_output_rows"
            )
        if num_dense_output_rows > 0:
            raise ValueError(
                f"{op}: argument 'num_dense_output_rows' must be 0 when no segment is selected, "
                f"got {num_dense_output_rows}"
            )
        return values.new_empty((0, values.size(1)))
    if b_in == 0:
        raise ValueError(f"{op}: argument 'input_offsets' is empty but 'indices' selects {b}")
    # each output segment reads at most values.size(0) rows
    _u.check_selected_size(op, "num_dense_output_rows", num_dense_output_rows, b, values.size(0))
    validate = validation_enabled()
    checks = DataChecks(op)
    idx = _u.index_range(checks, indices, b_in, "indices")
    in_pad, out_starts = _u.segment_starts(input_offsets, output_offsets)  # in_pad[j]: a start
    starts = in_pad.index_select(0, idx)
    d = starts - out_starts
    n_rows = values.size(0)
    if validate:
        out_len = output_offsets - out_starts
        what = "argument 'output_offsets' must be non-decreasing and non-negative"
        checks.add(out_len.amin(), 0, None, what)
    if num_dense_output_rows is None:
        if validate:
            # every selected segment must lie inside values (upstream would read past it)
            checks.add(starts.amin(), 0, None, "argument 'input_offsets' must be non-negative")
            what = (
                f"argument 'input_offsets' selects segments ending past values.size(0) ({n_rows})"
            )
            checks.add((starts + out_len).amax(), None, n_rows, what)
        total = checks.read_with([output_offsets[-1]])[0]
        src = _u.rows_gather_index(d, output_offsets, total, clamp=validate)
    else:
        total = num_dense_output_rows
        # the size is checked against the offsets with the other conditions, after the index is
        # built: a size no memory holds fails here first, named
        with allocation_of(op, f"the output of 'num_dense_output_rows' = {total} rows"):
            src = _u.rows_gather_index(d, output_offsets, total)
        if validate:
            what = f"argument 'num_dense_output_rows' ({total}) must not exceed output_offsets[-1]"
            checks.add(output_offsets[-1], total, None, what)
            if total > 0:
                low, high = torch.aminmax(src)
                what = f"argument 'input_offsets' selects rows outside values.size(0) ({n_rows})"
                checks.add(low, 0, None, what)
                checks.add(high, None, n_rows - 1, what)
                src = src.clamp(0, n_rows - 1)  # the gather runs before deferred checks are read
            checks.assert_on_device()
    return values.index_select(0, src)


def jagged_index_add_2d_forward_v2_npu(
    values: torch.Tensor,
    indices: torch.Tensor,
    input_offsets: torch.Tensor,
    output_offsets: torch.Tensor,
    num_output_rows: int,
    num_dense_input_rows: int,
) -> torch.Tensor:
    """The adjoint of the select: ``out = zeros(num_output_rows, D)``, then every row ``r`` of
    ``values`` (segment ``s`` of ``input_offsets``) is added to ``out[r + d[s]]``, where ``d[s]``
    is ``start of output segment indices[s] - start of input segment s``.  Repeated indices add up.

    ``num_dense_input_rows`` is not read (upstream's CPU kernel ignores it too).  Float outputs
    accumulate in their own dtype, as upstream's do.  Launches: a ``cat``
    (``_utils.segment_starts``), a gather and a difference for ``d``, the destination index (5),
    ``zeros``, ``index_add_``: 10.  int64 ``values`` add with an int64 ``index_add_``, which a
    910B runs on its AI CPU (it has no AI-Core kernel for it).  Launches and syncs: ``BUDGETS``
    in ``budgets.py`` (docs/ops.md).
    """
    op = JAGGED_INDEX_ADD_2D_FORWARD_V2
    values, indices, input_offsets, output_offsets = _check_v2_args(
        op, values, indices, input_offsets, output_offsets
    )
    _u.check_non_negative(op, "num_output_rows", num_output_rows)
    b, m = indices.numel(), values.size(0)
    if input_offsets.numel() != b:
        raise ValueError(
            f"{op}: argument 'input_offsets' must have one entry per index ({b}), "
            f"got {input_offsets.numel()}"
        )
    with allocation_of(op, f"the output of 'num_output_rows' = {num_output_rows} rows"):
        out = values.new_zeros((num_output_rows, values.size(1)))
    if m == 0:
        return out
    if b == 0 or output_offsets.numel() == 0:
        raise ValueError(f"{op}: 'values' has {m} rows but there is no segment to add them to")
    if num_output_rows == 0:
        raise ValueError(f"{op}: argument 'num_output_rows' is 0 but 'values' has {m} rows to add")
    validate = validation_enabled()
    checks = DataChecks(op)
    idx = _u.index_range(checks, indices, output_offsets.numel(), "indices")
    out_pad, in_starts = _u.segment_starts(output_offsets, input_offsets)
    d = out_pad.index_select(0, idx) - in_starts
    dst = _u.rows_gather_index(d, input_offsets, m)
    if validate:
        in_len = input_offsets - in_starts
        what = "argument 'input_offsets' must be non-decreasing and non-negative"
        checks.add(in_len.amin(), 0, None, what)
        what = f"argument 'input_offsets' must cover the {m} rows of values"
        checks.add(input_offsets[-1], m, None, what)
        low, high = torch.aminmax(dst)
        what = f"rows must be added within argument 'num_output_rows' ({num_output_rows})"
        checks.add(low, 0, None, what)
        checks.add(high, None, num_output_rows - 1, what)
        checks.assert_on_device()
        # the scatter runs before the queued checks are read: stay inside the output
        dst = dst.clamp_(0, num_output_rows - 1)
    return out.index_add_(0, dst, values)


def _jagged_select_index(
    op: str,
    values: torch.Tensor,
    lengths: torch.Tensor,
    indices: torch.Tensor,
    num_dense_output_rows: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(gather index over ``values``' rows, output lengths) of ``jagged_index_select``."""
    checks = DataChecks(op)
    validate = validation_enabled()
    b_in = lengths.numel()
    if indices.numel() > 0 and b_in == 0:
        raise ValueError(f"{op}: argument 'lengths' is empty but 'indices' selects segments")
    idx = _u.index_range(checks, indices, b_in, "indices")
    out_lengths = lengths.index_select(0, idx)
    # inclusive sums, int32 where the sizes bound them below 2**31 (_scan_dtypes); d = in_end[idx]
    # - out_end is the start distance because an output segment has its input segment's length
    in_dtype, out_dtype = _scan_dtypes(values.size(0), indices.numel(), num_dense_output_rows)
    in_incl = torch.cumsum(lengths, 0, dtype=in_dtype)
    out_incl = torch.cumsum(out_lengths, 0, dtype=out_dtype)
    if indices.numel() == 0:
        if num_dense_output_rows is None:
            raise ValueError(
                f"{op}: argument 'indices' is empty, so the output size is unknown; "
                "give num_dense_output_rows"
            )
        if num_dense_output_rows > 0:
            raise ValueError(
                f"{op}: argument 'num_dense_output_rows' must be 0 when no segment is selected, "
                f"got {num_dense_output_rows}"
            )
        return torch.zeros(0, dtype=torch.int64, device=values.device), out_lengths
    d = in_incl.index_select(0, idx) - out_incl
    if validate:
        low, high = torch.aminmax(lengths)
        checks.add(low, 0, None, "argument 'lengths' must be non-negative")
        # every length within values, before the int32 scans narrow int64 lengths
        what = f"argument 'lengths' must not sum past values.size(0) ({values.size(0)})"
        checks.add(high, None, values.size(0), what)
        checks.add(in_incl[-1], None, values.size(0), what)
        # sums of non-negative terms wrap to a negative one first: the last sum alone is no proof
        checks.add(in_incl.amin(), 0, None, _u.sum_fits("lengths", in_dtype))
        checks.add(out_incl.amin(), 0, None, _u.sum_fits("lengths[indices]", out_dtype))
    size_arg = "num_dense_output_rows"
    src = _u.select_rows_index(
        checks, d, out_incl, num_dense_output_rows, size_arg, n_src=values.size(0)
    )
    return src, out_lengths


def _scan_dtypes(n_in: int, n_sel: int, num_rows: int | None) -> tuple[torch.dtype, torch.dtype]:
    """The dtypes of ``jagged_index_select``'s two scans, from sizes (host): the input lengths sum
    to at most ``values.size(0)`` (``n_in``, checked), so each length is at most that and the
    ``n_sel`` selected ones sum to at most ``n_sel * n_in``.  int32 below 2**31 (the output rows'
    index too: ``num_rows``), int64 above (AI CPU on a 910B; exact)."""
    rows = 0 if num_rows is None else num_rows
    return _u.scan_dtype(n_in), _u.scan_dtype(max(n_sel, 1) * n_in, rows)


def _check_jagged_select_args(
    op: str, values: object, lengths: object, indices: object, num_rows: int | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    values = _values_2d(op, values)
    lengths = _u.check_index_tensor(op, "lengths", lengths)
    indices = _u.check_index_tensor(op, "indices", indices)
    check_same_device(op, values=values, lengths=lengths, indices=indices)
    _u.check_non_negative(op, "num_dense_output_rows", num_rows)
    # each selected length is within values (checked)
    _u.check_selected_size(op, "num_dense_output_rows", num_rows, indices.numel(), values.size(0))
    return values, lengths, indices


def jagged_index_select_npu(
    values: torch.Tensor,
    lengths: torch.Tensor,
    indices: torch.Tensor,
    num_dense_output_rows: int | None = None,
) -> list[torch.Tensor]:
    """``[out_values, out_lengths]``: segments ``indices`` of the jagged ``(values, lengths)``.

    ``out_lengths = lengths[indices]``; ``out_values`` holds the selected segments back to back,
    its first ``num_dense_output_rows`` rows when that is given (default: all of them).
    Launches: the lengths gather, two cumsums, a gather and a difference for ``d``, the row
    index, the row gather.  ``num_dense_output_rows`` None reads the size back to the host.
    Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    op = JAGGED_INDEX_SELECT
    values, lengths, indices = _check_jagged_select_args(
        op, values, lengths, indices, num_dense_output_rows
    )
    src, out_lengths = _jagged_select_index(op, values, lengths, indices, num_dense_output_rows)
    return [values.index_select(0, src), out_lengths]


def _jagged_index_select_autograd(
    values: torch.Tensor,
    lengths: torch.Tensor,
    indices: torch.Tensor,
    num_dense_output_rows: int | None = None,
) -> list[torch.Tensor]:
    """AutogradPrivateUse1: differentiable in ``values``.

    With ``num_dense_output_rows`` the kernel's program (no host read: it traces) computes the
    gather index, which the backward reuses (``zeros``, ``index_add_``).  Without, the output size
    is read back to the host: the forward is then the op below autograd (its fake kernel sizes a
    traced call) and the backward rebuilds the index from ``lengths``, ``indices`` and the output
    lengths (:func:`._utils.jagged_select_src`)."""
    args = (lengths, indices, num_dense_output_rows)
    if not needs_grad(values):
        return below_autograd(torch.ops.fbgemm.jagged_index_select, values, *args)
    op = JAGGED_INDEX_SELECT
    values, lengths, indices = _check_jagged_select_args(
        op, values, lengths, indices, num_dense_output_rows
    )
    if num_dense_output_rows is not None:
        src, out_lengths = below_autograd(
            _jagged_select_index, op, values.detach(), lengths, indices, num_dense_output_rows
        )
        return list(_u.GatherRows.apply(values, src, out_lengths))

    def call(x: torch.Tensor) -> list[torch.Tensor]:
        return below_autograd(torch.ops.fbgemm.jagged_index_select, x, *args)

    index = functools.partial(_u.jagged_select_src, n_in=values.size(0))
    return list(_u.SelectedRows.apply(values, call, index, (lengths, indices)))


KERNELS = {
    JAGGED_INDEX_SELECT: {
        "PrivateUse1": jagged_index_select_npu,
        "AutogradPrivateUse1": _jagged_index_select_autograd,
    },
    JAGGED_INDEX_SELECT_2D_FORWARD_V2: {"PrivateUse1": jagged_index_select_2d_forward_v2_npu},
    JAGGED_INDEX_ADD_2D_FORWARD_V2: {"PrivateUse1": jagged_index_add_2d_forward_v2_npu},
}
