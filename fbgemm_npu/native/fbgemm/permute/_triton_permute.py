"""Fused Triton kernels of the sparse-data permutes (``permute_rows`` of :mod:`._utils`): 2
launches where the tensor program takes 9-10.

Math (:mod:`.permute`): with ``lengths`` ``(T_in, B)`` (any strides), ``permute`` of ``T`` rows and
``s`` / ``o`` the exclusive row-major scans of ``lengths`` / ``permuted_lengths``::

    permuted_lengths[t, b]        = lengths[permute[t], b]
    out[o[t B + b] + i]           = values[s[permute[t] B + b] + i]      0 <= i < that length

Kernels:

* ``_offsets_kernel``, grid ``(1,)``: one program scans the input lengths (``s``, int32) and then
  the permuted ones (writes ``permuted_lengths`` in the lengths' dtype and ``o`` with the total
  at ``o[T B]``), in blocks of ``BLOCK`` with a carried sum (``tl.cumsum`` per block; no int64
  scan, which a 910B runs on its AI CPU).  It also computes the data checks: ``permute`` in
  ``[0, T_in)``, ``lengths`` in ``[0, n_avail]``, no scan above ``n_avail`` (an int32 scan that
  wraps goes negative at its first wrap: every step is in ``[0, 2**31)``), and with
  ``permuted_lengths_sum`` given the permuted total equal to it: an int32 stats row ``[total,
  permute ok, lengths ok, sum ok]`` and a byte, all of them and the total's.  Memory-safe
  whatever the data: the permute is clamped into ``[0, T_in)`` and the lengths into ``[0,
  n_avail]`` before use.
* ``_copy_kernel``, grid ``(min(T B, MAX_PROGRAMS),)``: each program copies whole segments
  ``j = pid, pid + grid, ...`` (Ascend runs programs past its core count in waves, so the grid is
  capped and the programs loop), in blocks of ``BLOCK``: the values, and the weights' rows
  (``C`` columns of a 2-D weight, flat ``row * C + col`` over the segment) in the same program.
  Reads are masked to ``[0, n_avail)`` and writes to ``[0, total)``: bad data (checks deferred)
  never leaves the buffers.

Dtypes: lengths int32 / int64 (read and written as such; the scans are int32: the Triton path is
taken only when every size is below 2**31, the caller's ``supported``), permute int32 / int64,
values and weights of any dtype the op takes, copied as the same-width integers of their bits
(exact for every float; no float64 arithmetic on the device).  Index math is int32; pointer
offsets of strided inputs widen to int64 where a stride passes it (Triton specialises int
arguments).  Without ``permuted_lengths_sum`` the stats row is read back (the one sync the op
needs anyway: the output size), carrying the checks (a ``ValueError`` naming the condition).
With it the ``all ok`` flag is queued as the op's one data check (``check_on_device``), no
launch.  Launches: 2 (1 when the output is empty by its given size); data checks: 0 more.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fbgemm_npu.native._checks import check_on_device, validation_enabled
from fbgemm_npu.native._triton import launch

__all__ = ["MAX_PROGRAMS", "permute_grads_triton", "permute_rows_triton"]

MAX_PROGRAMS = 65535  # the copy kernel's grid cap (a grid dimension's limit); tests lower it
SCAN_BLOCK = 128
COPY_BLOCK = 128
_BITS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
Out = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]


@triton.jit
def _offsets_kernel(
    perm, perm_s, lengths, len_s0, len_s1, plen, plen_s0, plen_s1, starts, ends, stats, flag,
    t_in, t_out, b, n_avail, given, BLOCK: tl.constexpr,
):  # fmt: skip
    lane = tl.arange(0, BLOCK)
    n_in = t_in * b
    carry = 0
    bad_len = 0
    big = 0  # a length past the values: its sum passes them too (and an int64 one is cut)
    low = 0
    for first in range(0, n_in, BLOCK):
        j = first + lane
        m = j < n_in
        r = j // b
        ln = tl.load(lengths + r * len_s0 + (j - r * b) * len_s1, mask=m, other=0)
        bad_len += tl.sum((m & (ln < 0)).to(tl.int32), axis=0)
        big += tl.sum((m & (ln > n_avail)).to(tl.int32), axis=0)
        step = tl.minimum(tl.maximum(ln, 0), n_avail).to(tl.int32)
        incl = tl.cumsum(step, axis=0) + carry
        tl.store(starts + j, incl - step, mask=m)
        low = tl.minimum(low, tl.min(tl.where(m, incl, 0), axis=0))
        carry += tl.sum(step, axis=0)
    tl.store(starts + n_in, carry)
    sum_ok = (low >= 0) & (carry <= n_avail) & (big == 0)
    n_out = t_out * b
    carry = 0
    bad_perm = 0
    for first in range(0, n_out, BLOCK):
        j = first + lane
        m = j < n_out
        t = j // b
        c = j - t * b
        p = tl.load(perm + t * perm_s, mask=m, other=0)
        bad_perm += tl.sum((m & ((p < 0) | (p >= t_in))).to(tl.int32), axis=0)
        p = tl.minimum(tl.maximum(p, 0), t_in - 1).to(tl.int32)
        ln = tl.load(lengths + p * len_s0 + c * len_s1, mask=m, other=0)
        tl.store(plen + t * plen_s0 + c * plen_s1, ln, mask=m)
        step = tl.minimum(tl.maximum(ln, 0), n_avail).to(tl.int32)
        incl = tl.cumsum(step, axis=0) + carry
        tl.store(ends + j, incl - step, mask=m)
        low = tl.minimum(low, tl.min(tl.where(m, incl, 0), axis=0))
        carry += tl.sum(step, axis=0)
    tl.store(ends + n_out, carry)
    total_ok = (given < 0) | ((carry == given) & (low >= 0))
    perm_ok = bad_perm == 0
    len_ok = bad_len == 0
    tl.store(stats, carry)
    tl.store(stats + 1, perm_ok.to(tl.int32))
    tl.store(stats + 2, len_ok.to(tl.int32))
    tl.store(stats + 3, sum_ok.to(tl.int32))
    tl.store(flag, (perm_ok & len_ok & sum_ok & total_ok).to(tl.uint8))


@triton.jit
def _copy_kernel(
    perm, perm_s, starts, ends, values, val_s, out, out_s,
    weights, w_s0, w_s1, wout, wo_s0, wo_s1,
    t_in, n_seg, b, n_avail, total, cols,
    HAS_W: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    lane = tl.arange(0, BLOCK)
    for j in range(tl.program_id(0), n_seg, tl.num_programs(0)):
        t = j // b
        p = tl.load(perm + t * perm_s)
        p = tl.minimum(tl.maximum(p, 0), t_in - 1).to(tl.int32)
        src = tl.load(starts + p * b + (j - t * b))
        dst = tl.load(ends + j)
        n = tl.minimum(tl.maximum(tl.load(ends + j + 1) - dst, 0), n_avail)
        for i in range(0, n, BLOCK):
            k = i + lane
            s = src + k
            d = dst + k
            m = (k < n) & (s >= 0) & (s < n_avail) & (d >= 0) & (d < total)
            v = tl.load(values + s.to(tl.int64) * val_s, mask=m)
            tl.store(out + d.to(tl.int64) * out_s, v, mask=m)
        if HAS_W:
            for i in range(0, n * cols, BLOCK):
                k = i + lane
                row = k // cols
                col = k - row * cols
                s = src + row
                d = dst + row
                m = (k < n * cols) & (s >= 0) & (s < n_avail) & (d >= 0) & (d < total)
                w = tl.load(weights + s.to(tl.int64) * w_s0 + col * w_s1, mask=m)
                tl.store(wout + d.to(tl.int64) * wo_s0 + col * wo_s1, w, mask=m)


@triton.jit
def _grad_kernel(
    perm, perm_s, starts, ends, grad, g_s0, g_s1, gx, n_seg, t_out, b, n_x, cols,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """Input segment ``j = (p, c)``: ``gx[s_j + i] = sum over t with permute[t] = p of
    grad[o[t B + c] + i]`` (float32 sums in the order of t: deterministic, no atomics); program
    ``n_seg`` zeroes the tail past the lengths' sum.  ``cols`` columns per row (flat)."""
    lane = tl.arange(0, BLOCK)
    for j in range(tl.program_id(0), n_seg + 1, tl.num_programs(0)):
        p = j // b  # t_in for the tail: no permute entry hits it
        c = j - p * b
        src = tl.load(starts + j)
        stop = tl.load(starts + tl.minimum(j + 1, n_seg))
        n = tl.maximum(tl.where(j < n_seg, stop, n_x) - src, 0) * cols
        for i in range(0, n, BLOCK):
            k = i + lane
            m = k < n
            row = k // cols
            col = k - row * cols
            acc = tl.zeros((BLOCK,), tl.float32)
            for t in range(0, t_out):
                # broadcast before the compare: the interpreter refuses a 0-d bool in a mask
                hit = k * 0 + tl.load(perm + t * perm_s) == p
                dst = tl.load(ends + t * b + c)
                at = (dst + row).to(tl.int64) * g_s0 + col * g_s1
                acc += tl.load(grad + at, mask=m & hit, other=0.0).to(tl.float32)
            tl.store(
                gx + (src + row).to(tl.int64) * cols + col, acc.to(gx.dtype.element_ty), mask=m
            )


def permute_grads_triton(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    grads: tuple[torch.Tensor | None, torch.Tensor | None],
    shapes: tuple[torch.Size, torch.Size | None],
) -> list[torch.Tensor | None]:
    """The adjoint of the 2-D permute (``_Permute2DFunction.backward``): for each given output
    gradient (values ``(total,)``, weights ``(total[, C])``) the input's, summed over repeated
    features, zero where no output reads (dropped features, the tail).  Inputs valid (the
    forward checked them).  Launches: the offsets kernel, then one ``_grad_kernel`` per
    gradient: 2 or 3."""
    perm = permute.reshape(-1)
    t_in, b = lengths.shape
    t_out = perm.numel()
    n_x = shapes[0].numel()
    plen = lengths.new_empty((t_out, b))
    starts, ends, _, _ = _offsets(perm, lengths, plen, n_x, -1)
    out: list[torch.Tensor | None] = []
    for grad, shape in zip(grads, shapes, strict=True):
        if grad is None or shape is None:
            out.append(None)
            continue
        flat = shape if len(shape) == 2 else torch.Size((shape.numel(),))
        gx = grad.new_empty(flat)
        cols = flat[1] if len(flat) == 2 else 1
        g_s = (grad.stride(0), grad.stride(1) if grad.dim() > 1 else 0)
        grid = (min(t_in * b + 1, MAX_PROGRAMS),)
        args = (perm, perm.stride(0), starts, ends, grad, *g_s, gx, t_in * b, t_out, b, flat[0])
        launch("permute_grad", _grad_kernel, grid, *args, cols, BLOCK=COPY_BLOCK)
        out.append(gx.view(shape))
    return out


def _bits(t: torch.Tensor) -> torch.Tensor:
    """``t`` viewed as the signed integers of its element width (a copy kernel moves bits)."""
    want = _BITS[t.element_size()]
    return t if t.dtype == want else t.view(want)


def _strides2(t: torch.Tensor) -> tuple[int, int]:
    return (t.stride(0), t.stride(1) if t.dim() > 1 else 0)


def _offsets(
    perm: torch.Tensor, lengths: torch.Tensor, plen: torch.Tensor, n_avail: int, given: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The offsets kernel: ``(starts (T_in B + 1), ends (T B + 1), stats, flag)``, int32 scans
    ending in their totals; ``plen`` receives the permuted lengths."""
    t_in, b = lengths.shape
    t_out, dev = perm.numel(), lengths.device
    starts = torch.empty(t_in * b + 1, dtype=torch.int32, device=dev)
    ends = torch.empty(t_out * b + 1, dtype=torch.int32, device=dev)
    stats = torch.empty(4, dtype=torch.int32, device=dev)
    flag = torch.empty(1, dtype=torch.uint8, device=dev)
    args = (perm, perm.stride(0), lengths, *lengths.stride(), plen, *plen.stride())
    args += (starts, ends, stats, flag, t_in, t_out, b, n_avail, given)
    launch("permute_offsets", _offsets_kernel, (1,), *args, BLOCK=SCAN_BLOCK)
    return starts, ends, stats, flag


def permute_rows_triton(
    op: str,
    perm: torch.Tensor,
    lengths: torch.Tensor,
    flat_values: torch.Tensor,
    weights: torch.Tensor | None,
    permuted_lengths_sum: int | None,
    n_avail: int,
    limit: str,
    outs: tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None],
) -> Out:
    """``permute_rows`` (:mod:`._utils`) on the two kernels of the module docstring.

    ``perm`` flat (1-D, any stride), ``lengths`` ``(T_in, B)`` with ``T_in, T, B > 0``,
    ``flat_values`` 1-D, ``n_avail`` the values (and weight rows) readable, ``limit`` its text
    for the errors, ``outs`` the preallocated outputs or None (their metadata checked)."""
    t_in, b = lengths.shape
    t_out = perm.numel()
    plen = lengths.new_empty((t_out, b)) if outs[0] is None else outs[0].view(t_out, b)
    given = -1 if permuted_lengths_sum is None else permuted_lengths_sum
    starts, ends, stats, flag = _offsets(perm, lengths, plen, n_avail, given)
    where = f"argument 'permute' must hold indices in [0, {t_in})"
    texts = [
        where,
        "argument 'lengths' must be non-negative",
        f"sum(lengths) must not exceed {limit}",
    ]
    if permuted_lengths_sum is None:
        got = stats.tolist()  # the one sync: the output size, with the checks' flags
        if validation_enabled():
            for ok, what in zip(got[1:], texts, strict=True):
                if not ok:
                    raise ValueError(f"{op}: {what}")
        total = got[0]
        if total < 0:  # only bad data with the checks off wraps the int32 scan
            raise ValueError(f"{op}: {texts[2]} (its scan wrapped)")
    else:
        total = permuted_lengths_sum
        if validation_enabled():
            texts.append(
                f"argument 'permuted_lengths_sum' ({total}) must equal the sum of the permuted "
                "lengths"
            )
            ok = flag.view(torch.bool)[0]  # a view: no launch
            check_on_device(op, ok, f"expected all of: {'; '.join(texts)}")
    for name, buf in (("permuted_indices_out", outs[1]), ("permuted_weights_out", outs[2])):
        if buf is not None and buf.size(0) < total:
            raise ValueError(
                f"{op}: argument '{name}' must have at least {total} rows (the permuted lengths' "
                f"sum), got {buf.size(0)}"
            )
    out_values = flat_values.new_empty((total,)) if outs[1] is None else outs[1].narrow(0, 0, total)
    out_weights = None
    if weights is not None:
        shape = (total, *weights.shape[1:])
        out_weights = weights.new_empty(shape) if outs[2] is None else outs[2].narrow(0, 0, total)
    if total > 0:
        cols = 1 if weights is None or weights.dim() == 1 else weights.size(1)
        w = _bits(flat_values if weights is None else weights)
        wout = _bits(out_values if out_weights is None else out_weights)
        grid = (min(t_out * b, MAX_PROGRAMS),)
        args = (perm, perm.stride(0), starts, ends, _bits(flat_values), flat_values.stride(0))
        args += (_bits(out_values), out_values.stride(0), w, *_strides2(w), wout, *_strides2(wout))
        args += (t_in, t_out * b, b, n_avail, total, cols)
        launch(
            "permute_copy", _copy_kernel, grid, *args, HAS_W=weights is not None, BLOCK=COPY_BLOCK
        )
    return plen, out_values, out_weights
