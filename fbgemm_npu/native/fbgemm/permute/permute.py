"""Permute family: ``fbgemm::permute_{1D,2D}_sparse_data``, ``permute_2D_sparse_data_input1D``,
``permute_sparse_features``, ``invert_permute`` and ``expand_into_jagged_permute`` on npu; also
``permute_2D_sparse_preallocated_out`` (the 2-D permute writing into given buffers) and
``permute_sparse_data`` (upstream's older name of the 2-D permute).

The sparse-data permutes reorder the segments of a jagged tensor (torchrec's KeyedJaggedTensor):
``lengths`` has one entry per segment, ``values`` (and optional per-value ``weights``) hold the
segments back to back.  With ``lengths`` of shape ``(T_in, B)`` (feature-major, as torchrec lays
a KJT out) and ``permute`` of ``T`` feature indices::

    permuted_lengths[t, b]      = lengths[permute[t], b]
    permuted_values[o[t,b] + i] = values[s[permute[t], b] + i]     0 <= i < lengths[permute[t], b]

with ``s``/``o`` the exclusive cumsums of ``lengths``/``permuted_lengths`` (row-major).  ``permute``
may repeat or drop features.  The 1-D form permutes single segments (``B = 1``).  The values are
one gather ``values[idx]`` with ``idx`` from :func:`._gather.source_index`: int32 scans,
scatters and index whenever the sizes allow (decided on the host: the values and the output
below 2**31 elements), so nothing runs on a 910B's AI CPU, int32 or int64 lengths alike.

Semantics measured on upstream's CPU kernels (fbgemm-gpu-cpu 1.8.0) and read from its CUDA ones:

* dtypes: ``permute`` int32 (int64 too: upstream's newest CUDA 1-D kernel takes it; its CPU
  kernels raise), ``lengths`` int32 / int64 (the output keeps it), ``values`` int32, int64,
  float32, float16, bfloat16 (float64 and the small ints are refused, as upstream does);
  ``weights`` float32, float16, bfloat16, float64, int32, int64 (the union of upstream's CUDA
  dispatches; its CPU kernels take only some of these);
* ``weights`` 1-D ``(N,)`` or 2-D ``(N, C)`` (rows permuted with the values, output ``(total, C)``,
  as upstream's CUDA kernels do; upstream's CPU kernels read a 2-D weight buffer as flat, which
  upstream's own tests call a different convention);
* ``values`` of any rank are read flat (upstream reads ``numel``); ``permute`` of any rank too;
* ``values`` (and ``weights``) may be longer than ``sum(lengths)``: the tail is ignored, as
  upstream does;
* empty ``permute`` or ``B = 0``: empty outputs of the right shapes (weights: an empty tensor, not
  None), as upstream's CPU kernels return;
* ``permute_sparse_features``: ``lengths`` and ``indices`` must share a dtype (upstream checks).

Inputs for which upstream reads or writes out of bounds are refused with an error naming the op
and the argument (``ValueError`` when the output size is read back anyway, else the
``RuntimeError`` of one device assert): a ``permute`` index outside ``[0, T_in)``, negative
``lengths``, ``sum(lengths)`` above ``values.numel()`` or ``weights.size(0)``, a
``permuted_lengths_sum`` other than the sum of the permuted lengths.  Upstream bugs not copied:
its 2-D CPU kernels read a non-contiguous ``permute`` through its raw data pointer (wrong result,
or a failed huge allocation).

Launches per call: the lengths gather, both scans into one buffer (``zero_``, two ``cumsum``),
the gather of the source rows' bounds, the index (two ``index_add``, a ``cumsum``:
:mod:`._gather`), one gather per output tensor: 10 with weights.  Without
``permuted_lengths_sum`` the output size is read back to the host and the data checks ride on
that read, so they cost less than the queued check they need when it is given (see
:mod:`._utils`).  Values or an output of 2**31 elements or more take the same program in int64
(AI CPU).  The fused Triton path (``_triton_permute.py``, where ``use_triton`` picks it) takes
2, forward and backward.  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native import _triton
from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import check_ndim, check_same_dtype, dynamic_size
from fbgemm_npu.native.fbgemm.permute import _utils as _pi

__all__ = [
    "KERNELS",
    "expand_into_jagged_permute_npu",
    "invert_permute_npu",
    "permute_1D_sparse_data_npu",
    "permute_2D_sparse_data_autograd_npu",
    "permute_2D_sparse_data_input1D_npu",
    "permute_2D_sparse_data_npu",
    "permute_2D_sparse_preallocated_out_npu",
    "permute_sparse_data_fake",
    "permute_sparse_data_npu",
    "permute_sparse_features_npu",
]

PERMUTE_1D_SPARSE_DATA = "fbgemm::permute_1D_sparse_data"
PERMUTE_2D_SPARSE_DATA = "fbgemm::permute_2D_sparse_data"
PERMUTE_2D_SPARSE_DATA_INPUT1D = "fbgemm::permute_2D_sparse_data_input1D"
PERMUTE_2D_SPARSE_PREALLOCATED_OUT = "fbgemm::permute_2D_sparse_preallocated_out"
PERMUTE_SPARSE_DATA = "fbgemm::permute_sparse_data"
PERMUTE_SPARSE_FEATURES = "fbgemm::permute_sparse_features"
INVERT_PERMUTE = "fbgemm::invert_permute"
EXPAND_INTO_JAGGED_PERMUTE = "fbgemm::expand_into_jagged_permute"

Out = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]
# gradients the Triton backward sums (in float32; a 910B has no float64 vector arithmetic)
_TRITON_GRAD_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _permute_2d(
    op: str,
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None,
    permuted_lengths_sum: int | None,
    outs: _pi.OutBuffers = (None, None, None),
) -> Out:
    """The checks and the program of the 2-D sparse-data permutes."""
    _pi.check_args(op, permute, lengths, values, weights, permuted_lengths_sum)
    check_ndim(op, "lengths", lengths, (2,))
    _pi.check_out_buffers(op, outs, permute, lengths, values, weights)
    return _pi.permute_rows(op, permute, lengths, values, weights, permuted_lengths_sum, outs=outs)


def permute_2D_sparse_data_npu(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
) -> Out:
    """Permute the features (rows) of a ``(T_in, B)`` jagged batch; see the module docstring.

    Returns ``(permuted_lengths (T, B), permuted_values (total,), permuted_weights (total[, C]) or
    None)``.  ``permuted_lengths_sum`` None reads the output size back to the host.
    Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    op = PERMUTE_2D_SPARSE_DATA
    return _permute_2d(op, permute, lengths, values, weights, permuted_lengths_sum)


def permute_sparse_data_npu(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
) -> Out:
    """``fbgemm::permute_sparse_data``, upstream's older name of :func:`permute_2D_sparse_data_npu`
    (same kernel upstream; no autograd there)."""
    return _permute_2d(PERMUTE_SPARSE_DATA, permute, lengths, values, weights, permuted_lengths_sum)


def permute_2D_sparse_preallocated_out_npu(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
    permuted_lengths_out: torch.Tensor | None = None,
    permuted_indices_out: torch.Tensor | None = None,
    permuted_weights_out: torch.Tensor | None = None,
) -> Out:
    """:func:`permute_2D_sparse_data_npu` writing into preallocated outputs where given, which
    are returned (whole) in place of new tensors; the gathers write straight into them.

    Buffers: ``permuted_lengths_out`` viewable as ``(T, B)`` (upstream writes it flat),
    ``permuted_indices_out`` 1-D with at least ``total`` rows and ``permuted_weights_out`` with at
    least ``total`` rows of ``weights``' row shape: the first ``total`` rows are written, the rest
    left as they were (as upstream does); each with its source's dtype.  Upstream writes past a
    buffer that is too short (heap corruption); ours refuses it.  A non-contiguous buffer is
    written element by element (upstream writes through its raw pointer).  Without ``weights`` the
    third output is None, as upstream returns.  Launches and syncs as
    :func:`permute_2D_sparse_data_npu`.
    """
    outs = (permuted_lengths_out, permuted_indices_out, permuted_weights_out)
    op = PERMUTE_2D_SPARSE_PREALLOCATED_OUT
    return _permute_2d(op, permute, lengths, values, weights, permuted_lengths_sum, outs)


def _permute_flat(
    op: str,
    permute: torch.Tensor,
    rows: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None,
    permuted_lengths_sum: int | None,
) -> Out:
    """The sparse-data permute of the ``(T_in, B)`` view ``rows`` of a flat ``lengths``; the
    permuted lengths come back flat."""
    out = _pi.permute_rows(op, permute, rows, values, weights, permuted_lengths_sum)
    return out[0].view(-1), out[1], out[2]


def permute_1D_sparse_data_npu(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
) -> Out:
    """Permute single segments: ``permuted_lengths[i] = lengths[permute[i]]`` (any number of
    segments, repeats and drops allowed); ``lengths`` of any rank is read flat, as upstream does.

    Returns ``(permuted_lengths (T,), permuted_values, permuted_weights or None)``.  Launches and
    syncs as :func:`permute_2D_sparse_data_npu` (it is that kernel with ``B = 1``).
    """
    op = PERMUTE_1D_SPARSE_DATA
    _pi.check_args(op, permute, lengths, values, weights, permuted_lengths_sum)
    rows = lengths.reshape(-1, 1)
    return _permute_flat(op, permute, rows, values, weights, permuted_lengths_sum)


def permute_2D_sparse_data_input1D_npu(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    stride: int,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
) -> Out:
    """:func:`permute_2D_sparse_data_npu` on ``lengths.view(-1, stride)``; the permuted lengths come
    back flat ``(T * stride,)``.  ``lengths`` must be viewable so (upstream calls ``view``).

    Launches and syncs as :func:`permute_2D_sparse_data_npu`.
    """
    op = PERMUTE_2D_SPARSE_DATA_INPUT1D
    _pi.check_args(op, permute, lengths, values, weights, permuted_lengths_sum)
    if stride <= 0 or lengths.numel() % stride != 0:
        raise ValueError(
            f"{op}: argument 'stride' must be positive and divide lengths.numel() "
            f"({lengths.numel()}), got {stride}"
        )
    try:
        rows = lengths.view(-1, stride)
    except RuntimeError as exc:  # strides that no view can split: upstream's view fails too
        raise ValueError(
            f"{op}: argument 'lengths' (shape {tuple(lengths.shape)}, strides "
            f"{lengths.stride()}) cannot be viewed as (-1, {stride}): {exc}"
        ) from exc
    return _permute_flat(op, permute, rows, values, weights, permuted_lengths_sum)


def permute_sparse_features_npu(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    indices: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> Out:
    """:func:`permute_2D_sparse_data_npu` without a size argument; ``lengths`` and ``indices``
    must share a dtype (int32 or int64), as upstream requires.

    Launches: as :func:`permute_2D_sparse_data_npu` with ``permuted_lengths_sum`` None: the
    output size is data-dependent and no argument gives it, so it is read back to the host
    (except for empty outputs).  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    _pi.check_args(
        PERMUTE_SPARSE_FEATURES, permute, lengths, indices, weights, None, values_name="indices"
    )
    check_ndim(PERMUTE_SPARSE_FEATURES, "lengths", lengths, (2,))
    check_same_dtype(PERMUTE_SPARSE_FEATURES, lengths=lengths, indices=indices)
    return _pi.permute_rows(PERMUTE_SPARSE_FEATURES, permute, lengths, indices, weights, None)


def invert_permute_npu(permute: torch.Tensor) -> torch.Tensor:
    """``inverse[permute[i]] = i``: the inverse of a permutation of ``0..n-1`` (any shape, read
    flat; output of ``permute``'s shape and dtype, int32 or int64).

    ``permute`` must be a permutation: upstream writes out of bounds for indices outside ``[0, n)``
    and leaves entries uninitialised for repeats, so both are refused.  Launches: ``index_put_`` of
    a cached ``arange``; the permutation check adds a clamp for safe writes, a gather back, two
    compares, ``and``, ``all`` (then queued).  Launches and syncs: ``BUDGETS`` in
    ``budgets.py`` (docs/ops.md).
    """
    return _pi.invert(INVERT_PERMUTE, permute)


def expand_into_jagged_permute_npu(
    permute: torch.Tensor,
    input_offset: torch.Tensor,
    output_offset: torch.Tensor,
    output_size: int,
) -> torch.Tensor:
    """Expand a segment permutation into an element permutation::

        out[output_offset[t] + i] = input_offset[permute[t]] + i,  0 <= i < output_offset[t+1] -
                                                                         output_offset[t]

    ``permute`` (``T > 0`` entries) and both offset tensors (``T + 1`` entries) share one dtype,
    int32 or int64, which the output has.  ``output_offset`` must run from 0 to ``output_size``
    without decreasing and ``permute`` must index ``[0, T)``: upstream writes out of bounds or
    leaves garbage otherwise.  Launches: the starts gather, then int64 (values may pass 2**31):
    their distance to the output starts, the segment of each element by int32 segment ids, a
    gather and an add (:func:`._gather.segment_arange_wide`); int32: the distance, two
    ``index_add`` and a ``cumsum`` (:func:`._gather.segment_arange`).  No AI-CPU launch either
    way.  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    return _pi.expand(EXPAND_INTO_JAGGED_PERMUTE, permute, input_offset, output_offset, output_size)


def permute_sparse_data_fake(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
) -> Out:
    """Fake / Meta kernel of ``permute_sparse_data`` (upstream has none): the shapes of
    :func:`permute_sparse_data_npu`, lengths ``(T, B)``, values ``(n,)``, weights ``(n,
    *weights.shape[1:])``, with ``n = permuted_lengths_sum`` or, omitted, a data-dependent size
    (``new_dynamic_size``, as upstream's fake of ``permute_2D_sparse_data`` asks); ``n = 0`` for an
    empty output, as the kernel returns."""
    op = PERMUTE_SPARSE_DATA
    _pi.check_args(op, permute, lengths, values, weights, permuted_lengths_sum)
    check_ndim(op, "lengths", lengths, (2,))
    t_out, b = permute.numel(), lengths.size(1)
    n = permuted_lengths_sum
    if n is None and (t_out == 0 or b == 0):
        n = 0
    elif n is None:
        n = dynamic_size(op, "'permuted_lengths_sum' omitted")
    out_weights = None if weights is None else weights.new_empty((n, *weights.shape[1:]))
    return lengths.new_empty((t_out, b)), values.new_empty((n,)), out_weights


class _Permute2DFunction(torch.autograd.Function):
    """Gradients of ``permute_2D_sparse_data`` w.r.t. ``values`` and ``weights``.

    The forward is a gather ``out = x[idx]``; its adjoint scatters the output gradient back,
    ``grad_x = zeros_like(x).index_add_(0, idx, grad_out)``.  For a true permutation this is
    upstream's formula (upstream permutes the gradient back with ``invert_permute``); with repeated
    or dropped features upstream's backward reads out of bounds, ours sums the repeats' gradients.
    ``idx`` is recomputed in the backward from ``permute`` and ``lengths`` (no sync: the total is
    the gradient's length).  Where ``use_triton`` picks it (float32 / float16 / bfloat16
    gradients, sizes below 2**31): ``_triton_permute.permute_grads_triton``, the offsets kernel
    and one deterministic sum kernel per gradient (2-3 launches, no zeros, no atomics).
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        permute: torch.Tensor,
        lengths: torch.Tensor,
        values: torch.Tensor,
        weights: torch.Tensor | None,
        permuted_lengths_sum: int | None,
    ) -> Out:
        args = (permute, lengths, values, weights, permuted_lengths_sum)
        out = below_autograd(torch.ops.fbgemm.permute_2D_sparse_data, *args)
        ctx.save_for_backward(permute, lengths)
        ctx.kernel = _triton.mode()  # the backward may run in the device's autograd thread
        ctx.values_shape = values.shape
        ctx.weights_shape = None if weights is None else weights.shape
        ctx.mark_non_differentiable(out[0])
        return out

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        _grad_lengths: torch.Tensor | None,
        grad_values: torch.Tensor | None,
        grad_weights: torch.Tensor | None,
    ) -> tuple[None, None, torch.Tensor | None, torch.Tensor | None, None]:
        permute, lengths = ctx.saved_tensors
        pairs = ((grad_values, ctx.values_shape), (grad_weights, ctx.weights_shape))
        given = [g if s is not None and ctx.needs_input_grad[2 + i] else None
                 for i, (g, s) in enumerate(pairs)]  # fmt: skip
        sizes = [ctx.values_shape.numel(), permute.numel() * lengths.size(1), lengths.numel()]
        sizes += [g.numel() for g in given if g is not None]
        fits = lengths.size(1) > 0 and max(sizes) < 2**31 - 1  # Triton: float32 sums, int32
        fits = fits and all(g is None or g.dtype in _TRITON_GRAD_DTYPES for g in given)
        with _triton.kernel_mode(ctx.kernel):
            fused = _triton.use_triton(PERMUTE_2D_SPARSE_DATA, lengths.device, supported=fits)
        if fused:
            from fbgemm_npu.native.fbgemm.permute._triton_permute import permute_grads_triton

            shapes = (ctx.values_shape, ctx.weights_shape)
            gv, gw = permute_grads_triton(permute, lengths, (given[0], given[1]), shapes)
            return None, None, gv, gw, None
        grads: list[torch.Tensor | None] = [None, None]
        for i, (grad, shape) in enumerate(pairs):
            if grad is None or shape is None or not ctx.needs_input_grad[2 + i]:
                continue
            flat = (shape.numel(),) if i == 0 else shape
            idx = _pi.gather_index(permute, lengths, grad.size(0), flat[0])
            grads[i] = grad.new_zeros(flat).index_add_(0, idx, grad).view(shape)
        return None, None, grads[0], grads[1], None


def permute_2D_sparse_data_autograd_npu(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
) -> Out:
    """AutogradPrivateUse1: differentiable in ``values`` and ``weights``; without a gradient to
    track it goes straight to the PrivateUse1 kernel (no extra launch)."""
    if needs_grad(values, weights):
        return _Permute2DFunction.apply(permute, lengths, values, weights, permuted_lengths_sum)
    args = (permute, lengths, values, weights, permuted_lengths_sum)
    return below_autograd(torch.ops.fbgemm.permute_2D_sparse_data, *args)


KERNELS = {
    PERMUTE_1D_SPARSE_DATA: {"PrivateUse1": permute_1D_sparse_data_npu},
    PERMUTE_2D_SPARSE_DATA: {
        "PrivateUse1": permute_2D_sparse_data_npu,
        "AutogradPrivateUse1": permute_2D_sparse_data_autograd_npu,
    },
    PERMUTE_2D_SPARSE_DATA_INPUT1D: {"PrivateUse1": permute_2D_sparse_data_input1D_npu},
    PERMUTE_2D_SPARSE_PREALLOCATED_OUT: {"PrivateUse1": permute_2D_sparse_preallocated_out_npu},
    PERMUTE_SPARSE_DATA: {"PrivateUse1": permute_sparse_data_npu, "Meta": permute_sparse_data_fake},
    PERMUTE_SPARSE_FEATURES: {"PrivateUse1": permute_sparse_features_npu},
    INVERT_PERMUTE: {"PrivateUse1": invert_permute_npu},
    EXPAND_INTO_JAGGED_PERMUTE: {"PrivateUse1": expand_into_jagged_permute_npu},
}
