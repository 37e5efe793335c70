"""Index plans shared by the pooled family's kernels (:mod:`.pooled`, :mod:`.regroup`).

Every op of the family is a column permutation: output column ``c`` copies input column
``src[c]`` of the inputs concatenated along dim 1.  The kernels differ only in how they learn
``src``:

* from ``keys`` / ``lengths`` / ``groups`` (host lists): :func:`kt_rows` builds upstream's
  ``permutes`` rows on the host and :func:`host_src` turns them into ``src``, validating on the
  host with exact error messages; the kernels keep the uploaded ``src`` per host
  layout (:func:`cached`), so a warm call does no device work for it;
* from a ``permutes`` tensor on the device: :func:`device_src` derives ``src`` with a fixed
  number of AI-Core launches (no ``repeat_interleave``, no int64 ``cumsum``: docs/hardware.md)
  and queues one data check (``check_on_device``).

Caches are keyed on host values only (widths, keys), never on a device tensor: a plan derived
from a device tensor's data is not kept, since a memo keyed on the tensor (its identity and
``_version``) goes stale after writes the version counter does not see (``t.data.copy_(...)``,
``t.data = other``, a copy into ``t.untyped_storage()``), and its weak references made
``torch.utils.swap_tensors`` refuse the tensor; the cost of not keeping it is in ``budgets.py``.
The cached device tensors are never written (gathers and ``index_add`` read them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch

from fbgemm_npu.native._checks import check_on_device, validation_enabled
from fbgemm_npu.native._host import exclusive_cumsum
from fbgemm_npu.native._index import arange_cached, segment_ids, tracing
from fbgemm_npu.native._upload import upload

__all__ = [
    "apply_src",
    "cached",
    "device_src",
    "forget_layouts",
    "host_src",
    "kt_rows",
    "scatter_src",
    "to_device",
]

PERMUTE_COLUMNS = 6  # in_tensor, out_tensor, in_offset, out_offset, length, next
CACHE_SIZE = 64  # layouts kept per cache (least recently used dropped first)
_CACHE: OrderedDict[Hashable, Any] = OrderedDict()
_LOCK = threading.Lock()


def to_device(values: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on ``device``: a pinned, non-blocking copy (one launch, no stall:
    ``native/_upload.py``); a plain copy under a trace (fake tensors have no pinned memory)."""
    if tracing(values):
        return values.to(device)
    return upload(values, values.dtype, device)


def cached(key: Hashable, build: Callable[[], Any]) -> Any:
    """``build()`` for the host layout ``key`` (hashable host values only, never a device
    tensor: it cannot go stale), computed on the first call with that layout and kept for the
    last ``CACHE_SIZE`` layouts; computed afresh under a trace (the value would hold real device
    tensors foreign to it)."""
    if tracing():
        return build()
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    value = build()  # outside the lock: it may raise, and it launches an upload
    with _LOCK:
        _CACHE[key] = value
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return value


def forget_layouts() -> None:
    """Drop every kept layout: the next call with any layout is a first one (the budget tests
    measure both)."""
    with _LOCK:
        _CACHE.clear()


def kt_rows(
    op: str,
    keys: Sequence[Sequence[str]],
    lengths: Sequence[Sequence[int]],
    groups: Sequence[Sequence[str]],
) -> tuple[list[list[int]], list[int], list[int]]:
    """Upstream's ``kt_regroup_arguments`` on the host: ``(rows, in_lengths, out_lengths)``.

    One row per key of ``groups`` (group by group): ``[in_tensor, out_tensor, in_offset,
    out_offset, length, next]``.  ``next`` links the appearances of a key that is used more than
    once (upstream's backward uses it): 0 for a key used once; for a repeated key the first row
    holds the index of the second (positive), each later row ``-index`` of the following one and
    the last ``-len(rows)``.  A key listed twice in ``keys`` keeps its first position, as
    upstream's lookup table does; ``keys[i]`` beyond ``len(lengths[i])`` are not known.
    """
    if len(lengths) != len(keys):
        raise ValueError(
            f"{op}: argument 'lengths' must have one list per list of 'keys' "
            f"({len(keys)}), got {len(lengths)}"
        )
    lookup: dict[str, tuple[int, int, int]] = {}
    in_lengths = []
    for i, (names, sizes) in enumerate(zip(keys, lengths, strict=True)):
        if len(sizes) > len(names):
            raise ValueError(
                f"{op}: argument 'lengths[{i}]' has {len(sizes)} entries but 'keys[{i}]' "
                f"names only {len(names)} keys"
            )
        offset = 0
        for name, size in zip(names, sizes, strict=False):
            lookup.setdefault(name, (i, int(size), offset))
            offset += int(size)
        in_lengths.append(offset)
    rows: list[list[int]] = []
    out_lengths = []
    last_seen: dict[str, int] = {}
    n_rows = sum(len(g) for g in groups)
    for o, group in enumerate(groups):
        out_offset = 0
        for name in group:
            if name not in lookup:
                raise ValueError(f"{op}: argument 'groups[{o}]' names key {name!r}, not in keys")
            i, size, in_offset = lookup[name]
            row = [i, o, in_offset, out_offset, size, 0]
            prev = last_seen.get(name)
            if prev is not None:
                row[5] = -n_rows
                rows[abs(prev)][5] = len(rows) if prev >= 0 else -len(rows)
                last_seen[name] = -len(rows)
            else:
                last_seen[name] = len(rows)
            rows.append(row)
            out_offset += size
        out_lengths.append(out_offset)
    return rows, in_lengths, out_lengths


def host_src(
    op: str,
    rows: Sequence[Sequence[int]],
    in_widths: Sequence[int],
    out_widths: Sequence[int],
    arg: str = "permutes",
) -> torch.Tensor:
    """``src`` (int64, host) of ``(P, 6)`` host ``rows`` (lists of ints); raises on invalid rows.

    Valid rows copy inside their input (``0 <= in_offset``, ``in_offset + length <=
    in_widths[in_tensor]``) and tile every output in row order, as ``kt_regroup_arguments``
    makes them: row ``r`` fills global output columns ``[sum(length[:r]), sum(length[:r+1]))``,
    which must be ``out_offset`` onwards of output ``out_tensor``, and the rows fill all
    ``sum(out_widths)`` columns.  Upstream reads out of bounds or leaves garbage there.  ``arg``
    names the argument the rows came from in error messages.

    The checks are plain Python on the rows (one per key, as ``kt_rows`` makes them), not host
    tensor ops: under fake tensors (``torch.compile``, AOTAutograd) host tensors are faked too,
    and a ``bool()`` of a faked comparison is data-dependent.  Then ``src[c] = c + start[r]`` for
    the row ``r`` of column ``c``: a ``repeat_interleave`` and an ``arange`` on the host.
    """
    in_cum, out_cum = exclusive_cumsum(in_widths), exclusive_cumsum(out_widths)
    starts: list[int] = []
    sizes: list[int] = []
    filled = 0
    for r, (it, ot, io, oo, ln, *_) in enumerate(rows):
        what = None
        if io < 0 or oo < 0 or ln < 0:
            what = "has a negative offset or length"
        elif not 0 <= it < len(in_widths) or io + ln > in_widths[it]:
            what = "reads outside its input tensor (or names no input)"
        elif not 0 <= ot < len(out_widths) or oo + ln > out_widths[ot]:
            what = "writes outside its output tensor (or names no output)"
        elif out_cum[ot] + oo != filled:
            what = "does not continue where the previous row ended"
        if what is not None:
            raise ValueError(
                f"{op}: argument '{arg}' gives row {r} {list(rows[r])} of permutes, which "
                f"{what}; inputs have widths {list(in_widths)}, outputs {list(out_widths)}"
            )
        starts.append(in_cum[it] + io - filled)
        sizes.append(ln)
        filled += ln
    total = sum(out_widths)
    if filled != total:
        raise ValueError(
            f"{op}: argument 'out_lengths' {list(out_widths)} asks for {total} columns but "
            f"'permutes' fills {filled}"
        )
    start = torch.tensor(starts, dtype=torch.int64)
    row_sizes = torch.tensor(sizes, dtype=torch.int64)
    return torch.repeat_interleave(start, row_sizes, output_size=total) + torch.arange(total)


_TILING = (
    "argument 'permutes' must copy inside the inputs and tile every output of 'out_lengths' in "
    "row order, as kt_regroup_arguments makes it"
)


def _bounds_table(in_widths: Sequence[int], out_widths: Sequence[int]) -> torch.Tensor:
    """The host table of :func:`device_src`, flat int64: ``(n_ids, 2, 2)`` bounds, then the
    tiling's two end points ``[0, sum(out_widths)]``."""
    n_in, n_out = len(in_widths), len(out_widths)
    n_ids = max(n_in, n_out) + 1
    table = torch.zeros((n_ids, 2, 2), dtype=torch.int64)
    table[:, :, 0] = 1  # padding: the empty interval [1, 0)
    table[:n_in, 0, 0] = torch.tensor(exclusive_cumsum(in_widths), dtype=torch.int64)
    table[:n_in, 0, 1] = table[:n_in, 0, 0] + torch.tensor(list(in_widths), dtype=torch.int64)
    table[:n_out, 1, 0] = torch.tensor(exclusive_cumsum(out_widths), dtype=torch.int64)
    table[:n_out, 1, 1] = table[:n_out, 1, 0] + torch.tensor(list(out_widths), dtype=torch.int64)
    ends = torch.tensor([0, sum(out_widths)], dtype=torch.int64)
    return torch.cat([table.view(-1), ends])


def device_src(
    op: str, permutes: torch.Tensor, in_widths: Sequence[int], out_widths: Sequence[int]
) -> torch.Tensor:
    """``src`` (int64) of a ``(P, 6)`` int32 ``permutes`` tensor on the device, with no host sync.

    Same validity rules as :func:`host_src`, queued as one data check.  Math, per row ``r``:
    global input start ``gi = in_cum[in_tensor] + in_offset``, global output start ``go =
    out_cum[out_tensor] + out_offset``; rows tile the output in order, so output column ``c``
    lies in row ``row(c) = #{r >= 1 : go[r] <= c}`` (:func:`~fbgemm_npu.native._index.segment_ids`
    of the starts: an int32 ``index_add`` + ``cumsum``, where ``repeat_interleave`` would run on
    a 910B's AI CPU) and ``src[c] = c + gi[row(c)] - go[row(c)]``.  The bounds of each row come
    from one ``index_select`` in a table cached per ``(in_widths, out_widths)`` (host values):
    for tensor id ``k``, ``[k, 0] = [in_cum, in_cum + width]`` and ``[k, 1]`` the same for
    outputs; ids out of range are clamped onto a padding row whose interval is empty, which
    fails the check.  The check, without a scan: every row inside its tensors (``0 <= offsets,
    length``, ``ends <= hi``), each row starting where the previous one ends, the first at 0 and
    the last ending at ``sum(out_widths)``; ``src`` is clamped into the inputs while checking, so
    the gather stays inside its buffer until the check is read (``FBGEMM_NPU_VALIDATE=0``: inputs
    trusted, no clamp).  All index arithmetic int64 (``add`` / ``sub``) or int32 (the segment
    ids): no AI-CPU route.

    What the host knows is checked there: no more columns asked for than the rows can fill
    (each at most the widest input), so the plan's size is bounded before it is allocated.

    Launches: the table upload (first call with a layout only), clamp ids, index_select, starts,
    start difference, segment ids (clamp, index_add, cumsum), index_select, add; the check: ends,
    three comparisons and the end points' ``eq`` into one bool buffer (one fewer for one row),
    ``all``, and the clamp of ``src``.
    """
    device = permutes.device
    n_rows = permutes.size(0)
    n_ids = max(len(in_widths), len(out_widths)) + 1
    width, total = sum(in_widths), sum(out_widths)
    widest = max(in_widths, default=0)
    if total > n_rows * widest:
        # each row copies inside one input: P rows fill at most P * widest columns, which the
        # host knows without reading a value (and the plan would allocate `total` entries)
        raise RuntimeError(
            f"{op}: {_TILING}; 'out_lengths' asks for {total} columns, more than its "
            f"{n_rows} rows can fill from inputs of at most {widest} columns"
        )
    if n_rows == 0:
        return arange_cached(0, device)
    layout = ("device_src", device, tuple(in_widths), tuple(out_widths))
    flat = cached(layout, lambda: to_device(_bounds_table(in_widths, out_widths), device))
    table, tiling_ends = flat[: 4 * n_ids].view(n_ids, 2, 2), flat[4 * n_ids :]
    ids = permutes[:, 0:2].clamp(0, n_ids - 1)  # safe to index with; bad ids fail the check
    picked = table.index_select(0, ids.reshape(-1)).view(n_rows, 2, 2, 2)
    # picked[r, a, b] = table[ids[r, a], b]: keep a == b (input ids read the input half)
    bounds = picked.diagonal(dim1=1, dim2=2).transpose(1, 2)  # (P, 2, 2): [r, in/out, lo/hi]
    # se[0] = starts, se[1] = ends: [start/end, r, in/out]
    se = torch.empty((2, n_rows, 2), dtype=torch.int64, device=device)
    starts = torch.add(bounds[:, :, 0], permutes[:, 2:4], out=se[0])
    validating = validation_enabled()
    if validating:  # before the plan: a check read at once raises before its allocations
        _check_rows(op, permutes, bounds, se, tiling_ends)
    delta = starts[:, 0] - starts[:, 1]
    row_of = segment_ids(starts[:, 1], total)
    src = arange_cached(total, device) + delta.index_select(0, row_of)
    if validating:
        src.clamp_(0, width - 1)
    return src


def _check_rows(
    op: str, permutes: torch.Tensor, bounds: torch.Tensor, se: torch.Tensor, ends: torch.Tensor
) -> None:
    """Queue :func:`device_src`'s check: ``se[1] = se[0] + length`` written here; then offsets
    and lengths non-negative, ends within the tensors' bounds, row ``r + 1`` starting (in the
    output) where row ``r`` ends, row 0 at 0 and the last row ending at ``ends[1]``."""
    n = permutes.size(0)
    torch.add(se[0], permutes[:, 4:5], out=se[1])
    ok = torch.empty(8 * n + 1, dtype=torch.bool, device=se.device)
    torch.ge(permutes[:, 0:5], 0, out=ok[: 5 * n].view(n, 5))
    torch.le(se[1], bounds[:, :, 1], out=ok[5 * n : 7 * n].view(n, 2))
    if n > 1:
        torch.eq(se[0, 1:, 1], se[1, :-1, 1], out=ok[7 * n : 8 * n - 1])
    # the flat elements 1 and 4n - 1: row 0's output start, the last row's output end
    torch.eq(se.view(-1)[1 :: 4 * n - 2], ends, out=ok[8 * n - 1 :])
    check_on_device(op, ok.all(), _TILING)


def apply_src(
    inputs: Sequence[torch.Tensor], src: torch.Tensor, out_widths: Sequence[int]
) -> list[torch.Tensor]:
    """Outputs of widths ``out_widths``: column ``c`` of their concatenation is column
    ``src[c]`` of the inputs' concatenation.  Each output is a fresh contiguous tensor.

    Launches: a ``cat`` (none for one input), an ``index_select`` and a
    ``split_with_sizes_copy`` (none for one output).
    """
    x = inputs[0] if len(inputs) == 1 else torch.cat(list(inputs), dim=1)
    gathered = x.index_select(1, src)
    return _split(gathered, out_widths)


def scatter_src(
    grads: Sequence[torch.Tensor], src: torch.Tensor, in_widths: Sequence[int], batch: int
) -> list[torch.Tensor]:
    """The adjoint of :func:`apply_src`: input column ``src[c]`` accumulates output column
    ``c`` (in column order, as upstream's backward does); columns no output reads get 0.

    Launches: a ``cat`` (none for one grad), ``zeros``, ``index_add`` and a
    ``split_with_sizes_copy`` (none for one input).
    """
    g = grads[0] if len(grads) == 1 else torch.cat(list(grads), dim=1)
    acc = g.new_zeros((batch, sum(in_widths)))
    acc = torch.index_add(acc, 1, src, g)
    return _split(acc, in_widths)


def _split(t: torch.Tensor, widths: Sequence[int]) -> list[torch.Tensor]:
    if len(widths) == 1:
        return [t]
    outs = [t.new_empty((t.size(0), w)) for w in widths]
    if outs:
        torch.split_with_sizes_copy(t, list(widths), dim=1, out=outs)
    return outs
