"""What the reorder family's ops share: their argument checks and the two gather indices.

Layout (upstream's inference batching, ``sparse_ops_cpu.cpp``): ``B`` requests, request ``b``
holding the ``n_b = batch_offsets[b + 1] - batch_offsets[b]`` ads ``batch_offsets[b] : ...[b+1]``
of ``NA = num_ads_in_batch``, each with ``T`` tables.  The input lists one *slot* (a length, or
a run of indices / embedding rows) per ``(b, t, ad)`` in request-major order ``[B][T][n_b]``
(``broadcast``: one slot per ``(b, t)``, ``[B][T]``, shared by the request's ads); the output
lists them table-major ``[T][NA]`` (``[T][OB]`` with ``OB = max_batch_size`` where given: the
ads past ``NA`` are padding, of length 0).  Output slot ``(t, a)``, ``a`` in request ``b``,
copies input slot

    s(t, a) = T * bo[b] + t * n_b + (a - bo[b])      (broadcast: T * b + t)

so every op is one gather.  :func:`slot_sources` builds ``s`` for all ``T * NA`` slots from the
``NA`` requests' bounds alone: ``b`` per ad by :func:`~fbgemm_npu.native._index.segment_ids`
(int32 ``index_add`` + ``cumsum``, AI Core; no ``searchsorted`` / ``repeat_interleave``), then
``s = base[a] + t * step[a]`` with ``base = (T - 1) bo[b] + a``, ``step = n_b`` (broadcast: ``T b``
and 1), int64 (``add`` / ``mul``: AI Core).  :func:`element_sources` extends it to the elements of
slots given by offsets: element ``j`` of output slot ``q`` (``R[q] <= j < R[q + 1]``) reads
input element ``C[s(q)] + j - R[q]``: ``d[q] = C[s(q)] - R[q]`` per slot, then ``d[q(j)] + j``
with ``q(j)`` by ``segment_ids`` again.  Indices are clamped before each gather, so bad data
(checks deferred, or off) never reads outside a buffer.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    check_tensor,
    dtype_name,
    join_words,
    non_decreasing,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, segment_ids

__all__ = [
    "ALL_TYPES",
    "EMBEDDING_TYPES",
    "FLOAT_TYPES",
    "INDEX_TYPES",
    "batch_count",
    "check_batch_offsets",
    "check_offsets",
    "element_sources",
    "refuse_dtype",
    "same_device",
    "slot_sources",
    "source_spans",
]

# upstream's dispatch macros: FBGEMM_DISPATCH_ALL_TYPES, FBGEMM_DISPATCH_FLOATING_TYPES,
# AT_DISPATCH_INDEX_TYPES (measured on fbgemm-gpu-cpu 1.8.0: float64 and the small integer
# types are refused by every op of the family)
ALL_TYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)
FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16)
# sequence embeddings: upstream's CUDA kernel takes uint8 rows too (FLOATING_TYPES_AND Byte; the
# CPU kernel does not): a drop-in for the CUDA build serves them
EMBEDDING_TYPES = (*FLOAT_TYPES, torch.uint8)
INDEX_TYPES = (torch.int32, torch.int64)


def refuse_dtype(
    op: str, arg: str, t: object, allowed: tuple[torch.dtype, ...], cls: type = RuntimeError
) -> torch.Tensor:
    """``t`` if a tensor of one of ``allowed``; else the error upstream raises for it
    (``NotImplementedError`` from its dispatch macros, ``RuntimeError`` from a typed
    ``data_ptr``), with our message naming the op and the argument."""
    t = check_tensor(op, arg, t)
    if t.dtype not in allowed:
        names = join_words([dtype_name(d) for d in allowed])
        raise cls(f"{op}: argument '{arg}' must have dtype {names}, got {dtype_name(t.dtype)}")
    return t


def same_device(op: str, device: torch.device, **tensors: torch.Tensor) -> None:
    """Every tensor on ``device`` (upstream's CPU kernel wants all of them on the CPU:
    ``RuntimeError``)."""
    for arg, t in tensors.items():
        if t.device != device:
            raise RuntimeError(
                f"{op}: argument '{arg}' is on {t.device}, expected {device} like the others"
            )


def batch_count(op: str, batch_offsets: torch.Tensor, num_ads_in_batch: int) -> int:
    """``B = batch_offsets.numel() - 1`` (read flat, as upstream does), at least 1, and
    ``num_ads_in_batch >= 1`` (upstream divides by both: a crash for 0)."""
    nb = batch_offsets.numel() - 1
    if nb < 1:
        raise ValueError(
            f"{op}: argument 'batch_offsets' must hold B + 1 >= 2 offsets, got "
            f"{batch_offsets.numel()}"
        )
    if num_ads_in_batch < 1:
        raise ValueError(f"{op}: argument 'num_ads_in_batch' must be >= 1, got {num_ads_in_batch}")
    return nb


def check_batch_offsets(checks: DataChecks, bo: torch.Tensor, num_ads: int) -> None:
    """Queue ``bo`` non-decreasing from 0 to ``num_ads`` (launches: ``ge``, ``all``; the ends
    are views, compared in the DataChecks' one clamp)."""
    if not validation_enabled():
        return
    what = f"argument 'batch_offsets' must be non-decreasing from 0 to num_ads_in_batch = {num_ads}"
    checks.require(non_decreasing(bo), what)
    checks.add(bo[0], 0, 0, what)
    checks.add(bo[-1], num_ads, num_ads, what)


def slot_sources(
    bo: torch.Tensor, num_ads: int, tables: int, broadcast: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(s, b)``: ``s[t, a]`` the input slot of output slot ``(t, a)`` (``[T, NA]``, int64,
    module docstring) and ``b[a]`` the request of ad ``a`` (int32, in ``[0, B)``).
    ``s`` is not clamped (the callers clamp it to their slot count); ``bo`` contiguous.

    ``b`` counts the requests' starts ``bo[1 : B]`` at or below ``a`` (``segment_ids`` of
    ``bo[:-1]``): in ``[0, B)`` whatever the data, and the same as of ``bo`` where ``bo[B] =
    NA``, which no ad reaches; so broadcast ``s`` is in ``[0, B T)`` whatever the data.
    Launches: ``segment_ids`` (clamp, index_add, cumsum); then for the request-major layout
    the gather of each ad's ``(bo[b], bo[b + 1])`` (an overlapping view of ``bo``), ``sub``
    (``n_b``), ``add`` (``base``), ``mul`` and ``add`` over ``[T, NA]``; broadcast: one
    ``add`` (``t + T b``).
    """
    nb = bo.numel() - 1
    b = segment_ids(bo[:-1], num_ads)
    t = arange_cached(tables, bo.device).view(-1, 1)  # int64: the products may pass 2**31
    if broadcast:
        return torch.add(t, b.view(1, -1), alpha=tables), b
    spans = bo.as_strided((nb, 2), (1, 1), bo.storage_offset()).index_select(0, b)
    start = spans[:, 0]
    step = torch.sub(spans[:, 1], start)
    base = torch.add(arange_cached(num_ads, bo.device), start, alpha=tables - 1)
    return torch.add(base.view(1, -1), t * step.view(1, -1)), b


def element_sources(
    names: tuple[str, str],
    checks: DataChecks,
    offsets: tuple[torch.Tensor, torch.Tensor],
    slots: torch.Tensor,
    n: int,
    shift: torch.Tensor | None = None,
) -> torch.Tensor:
    """The input element of each of the ``n`` output elements (``offsets`` dtype; module
    docstring), not clamped.

    ``offsets = (C, R)`` (contiguous, named ``names`` in the errors): the input slots' offsets
    (``C``, ``S + 1``) and the output's (``R``, ``Q + 1``); ``slots``: ``[T, OB, 2]``: each
    output slot's source ``(C[s], C[s + 1])``, zeros for padding (``Q = T * OB`` slots).
    ``shift`` (``[NA]``, cat): subtracted from ``d`` of each ad's slots, after the check.
    Queues ``R`` from 0 to ``n`` with each slot as long as its source, ``C[s + 1] - R[q + 1]
    == C[s] - R[q]`` (``sub``, ``eq``, ``all``).  Launches: ``sub`` (``d``, into a buffer of
    ``Q + 1``: the spare one is read by elements past ``R[-1]`` of bad data), ``shift``'s
    ``sub_``, ``segment_ids`` (3), the gather ``d[q(j)]``, ``add_`` of the cached arange.
    """
    c, r = offsets
    q_slots = r.numel() - 1
    d = torch.empty(q_slots + 1, dtype=c.dtype, device=c.device)
    flat = slots.reshape(q_slots, 2)
    torch.sub(flat[:, 0], r[:-1], out=d[:q_slots])
    if validation_enabled():
        what = (
            f"argument '{names[1]}' must run from 0 to {n} with each slot as long as the "
            f"'{names[0]}' slot it is reordered from"
        )
        checks.require(torch.eq(torch.sub(flat[:, 1], r[1:]), d[:q_slots]).all(), what)
        checks.add(r[0], 0, 0, what)
        checks.add(r[-1], n, n, what)
    if shift is not None:
        d[:q_slots].view(slots.size(0), slots.size(1))[:, : shift.numel()].sub_(shift)
    q = segment_ids(r, n)
    return d.index_select(0, q).add_(arange_cached(n, c.device, c.dtype))


def check_offsets(checks: DataChecks, name: str, c: torch.Tensor, values: int | None) -> None:
    """Queue ``C`` (argument ``name``) non-decreasing in ``[0, values]`` (``ge``, ``all``; the
    ends are views; ``values`` None: no range, cat's offsets count from each request's start)."""
    if not validation_enabled():
        return
    if values is None:
        checks.require(non_decreasing(c), f"argument '{name}' must be non-decreasing")
        return
    what = f"argument '{name}' must be non-decreasing in [0, {values}]"
    checks.require(non_decreasing(c), what)
    checks.add(c[0], 0, None, what)
    checks.add(c[-1], None, values, what)


def source_spans(c: torch.Tensor, s: torch.Tensor, slots: int, clamp: bool) -> torch.Tensor:
    """``(C[s], C[s + 1])`` for each ``s`` (``clamp``: clamped to ``[0, slots)`` first, in
    place; broadcast slots need none): an overlapping view of ``C`` gathered (launches:
    ``clamp_``, ``index_select``)."""
    spans = c.as_strided((slots, 2), (1, 1), c.storage_offset())
    index = s.reshape(-1).clamp_(0, slots - 1) if clamp else s.reshape(-1)
    return spans.index_select(0, index).view(*s.shape, 2)
