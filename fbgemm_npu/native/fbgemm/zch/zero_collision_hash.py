"""``fbgemm::zero_collision_hash`` on npu: upstream's CPU (inference, read-only) lookup.

Contract, read from upstream's CPU kernel (``faster_hash.cpp``: ``zero_collision_hash_cpu``,
``process_item_zch``) and measured on fbgemm-gpu-cpu 1.8.0.  Upstream's CPU kernel is
read-only: it refuses ``readonly=False``, ``exp_hours != -1``, ``metadata``,
``input_metadata``, ``eviction_threshold != -1`` and ``opt_in_rands`` (``RuntimeError``), so it
never writes ``identities`` or ``metadata``; inserting ids (training, eviction) exists only in
upstream's CUDA kernel, whose result depends on the order its threads win ``atomicCAS``.  Ours
serves the CPU contract and refuses the rest in upstream's words and order, naming the
argument.  For each input id ``x_i`` (1-D int32 / int64):

- ``h = murmur_hash3_2x64(uint64(x_i), 0, 0)``; ``m = identities.size(0)``, offset 0, or with
  ``local_sizes`` ``m = local_sizes[i]``, offset ``offsets[i]``; the probe block is ``b = m``,
  or ``b = m - num_reserved_slots`` when ``opt_in_prob != -1``;
- the identity is ``x_i`` when ``identities`` has the input's dtype, else (int64 ids, int32
  identities) ``int32(x_i % (2**31 - 1))`` with C's truncating ``%``;
- probe ``k = 0 .. max_probe - 1`` visits slot ``s_k = (h % b + k) % b`` (``%`` unsigned);
  the first ``k`` with ``identities[offset + s_k, 0] == identity`` gives ``offset + s_k`` (an
  empty slot, -1, is no match, except for the id -1 itself, as upstream);
- none: ``-1`` with ``disable_fallback``, else ``offset + h % m`` (no opt-in) or ``offset + b +
  h % num_reserved_slots``.

Read-only, so no result depends on an order: all ids and all probes at once, a ``[N, P]``
table of slots, one gather of ``identities[:, 0]``, the first match by ``amin`` of
``where(match, k, P)``, with ``P = min(max_probe, b)`` (the probing is circular: past ``b``
probes the slots repeat, so the answer is the same).  Memory: ``N * P`` int64 slots and their
gather (an allocation failure is an error naming the op and ``max_probe``).
The second output is upstream's undefined tensor (``None``).  Where upstream divides by zero
(0 identity rows, a block of 0 slots) or reads out of bounds (offsets past the identities,
``local_sizes`` without ``offsets``: a segfault), ours refuses by name: host checks for shapes,
queued data checks (gathers clamped) for ``local_sizes`` / ``offsets`` values.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    allocation_of,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, filled_i32
from fbgemm_npu.native.fbgemm.zch._hash import murmur_hash3_2x64, unsigned_mod
from fbgemm_npu.native.fbgemm.zch._utils import require, runtime_dtype, runtime_ndim

__all__ = ["KERNELS", "zero_collision_hash_npu"]

ZCH = "fbgemm::zero_collision_hash"
IDS = (torch.int32, torch.int64)  # upstream's AT_DISPATCH_INTEGER_TYPES
MAX_IDENTITY = 2**31 - 1  # kMaxIdentityNum


def _refuse_write_mode(
    exp_hours: int,
    readonly: bool,
    metadata: torch.Tensor | None,
    input_metadata: torch.Tensor | None,
    eviction_threshold: int,
    opt_in_rands: torch.Tensor | None,
) -> None:
    """Upstream's first checks, in its order: the CPU kernel only looks ids up."""
    why = "(upstream's CPU kernel is read-only; inserting and evicting ids is its CUDA kernel's)"
    require(exp_hours == -1, ZCH, f"argument 'exp_hours' must be -1, got {exp_hours} {why}")
    require(bool(readonly), ZCH, f"argument 'readonly' must be True {why}")
    require(metadata is None, ZCH, f"argument 'metadata' must be None {why}")
    require(input_metadata is None, ZCH, f"argument 'input_metadata' must be None {why}")
    require(
        eviction_threshold == -1,
        ZCH,
        f"argument 'eviction_threshold' must be -1, got {eviction_threshold} {why}",
    )
    require(opt_in_rands is None, ZCH, f"argument 'opt_in_rands' must be None {why}")


def _chunk_args(
    ids: torch.Tensor, local_sizes: torch.Tensor | None, offsets: torch.Tensor | None
) -> None:
    """``local_sizes`` / ``offsets``: int64 (upstream reads ``int64_t``), one per id, on the
    ids' device; ``local_sizes`` needs ``offsets`` (upstream reads a null pointer)."""
    n = ids.numel()
    for name, t in (("local_sizes", local_sizes), ("offsets", offsets)):
        if t is None:
            continue
        check_tensor(ZCH, name, t)
        check_same_device(ZCH, input=ids, **{name: t})
        runtime_dtype(ZCH, name, t, (torch.int64,))
        require(
            t.numel() == n,
            ZCH,
            f"argument '{name}' must hold one value per input id ({n}), got {t.numel()}",
        )
    require(
        local_sizes is None or offsets is not None,
        ZCH,
        "argument 'offsets' must be given with 'local_sizes' (each chunk's start)",
    )


def _opt_in(opt_in_prob: int, num_reserved_slots: int) -> bool:
    if opt_in_prob != -1:
        require(
            0 < opt_in_prob <= 100,
            ZCH,
            f"argument 'opt_in_prob' must be -1 or in (0, 100], got {opt_in_prob}",
        )
        require(
            num_reserved_slots > 0,
            ZCH,
            f"argument 'num_reserved_slots' must be > 0 with opt_in_prob, got {num_reserved_slots}",
        )
    if num_reserved_slots != -1:
        require(opt_in_prob != -1, ZCH, "argument 'num_reserved_slots' needs 'opt_in_prob' != -1")
    return opt_in_prob != -1


def zero_collision_hash_npu(
    input: torch.Tensor,  # noqa: A002
    identities: torch.Tensor,
    max_probe: int,
    circular_probe: bool = False,
    exp_hours: int = -1,
    readonly: bool = False,
    local_sizes: torch.Tensor | None = None,
    offsets: torch.Tensor | None = None,
    metadata: torch.Tensor | None = None,
    output_on_uvm: bool = False,
    disable_fallback: bool = False,
    _modulo_identity_DPRECATED: bool = False,  # noqa: N803 - upstream's name
    input_metadata: torch.Tensor | None = None,
    eviction_threshold: int = -1,
    eviction_policy: int = 0,
    opt_in_prob: int = -1,
    num_reserved_slots: int = -1,
    opt_in_rands: torch.Tensor | None = None,
    runtime_meta: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The slot of each id in ``identities`` (int64 ``[N]``), and ``None`` (module docstring).

    Dtypes: ``input`` int32 / int64, ``identities`` ``[S, C]`` int32 / int64 (int32 ids need
    int32 identities), ``local_sizes`` / ``offsets`` int64.  ``output_on_uvm``,
    ``eviction_policy`` and ``runtime_meta`` are ignored, as upstream's CPU kernel does.
    Launches: the hash (44), ``h % b`` (5; + 4 with ``local_sizes``), the identity (int32
    identities of int64 ids: ``fmod`` and a cast), the slot table (add, remainder; offsets: add,
    clamp), the gather, ``eq``, ``where``, ``amin``, ``lt``, the gather of the found slot and the
    fallback's arithmetic, ``where``.  Budget: ``budgets.py``; 0 syncs.
    """
    _refuse_write_mode(
        exp_hours, readonly, metadata, input_metadata, eviction_threshold, opt_in_rands
    )
    ids = check_tensor(ZCH, "input", input).detach()
    table = check_tensor(ZCH, "identities", identities).detach()
    runtime_ndim(ZCH, "input", ids, (1,))
    if ids.numel() == 0:  # upstream returns before any other check
        return torch.empty(0, dtype=torch.int64, device=ids.device), None
    require(bool(circular_probe), ZCH, "argument 'circular_probe' must be True (upstream's CPU)")
    require(
        not _modulo_identity_DPRECATED, ZCH, "argument '_modulo_identity_DPRECATED' must be False"
    )
    runtime_ndim(ZCH, "identities", table, (2,))
    check_same_device(ZCH, input=ids, identities=table)
    runtime_dtype(ZCH, "input", ids, IDS)
    runtime_dtype(ZCH, "identities", table, IDS)
    require(
        ids.dtype == torch.int64 or table.dtype == torch.int32,
        ZCH,
        "argument 'identities' must be int32 for int32 ids",
    )
    _chunk_args(ids, local_sizes, offsets)
    opt_in = _opt_in(opt_in_prob, num_reserved_slots)
    rows = table.size(0)
    require(table.size(1) >= 1, ZCH, "argument 'identities' must have at least one column")
    reserved = num_reserved_slots if opt_in else 0
    chunked = local_sizes is not None
    if not chunked:  # the modulo is a host int: the division by zero is caught here
        require(
            rows - reserved > 0,
            ZCH,
            f"argument 'identities' must have more rows ({rows}) than reserved slots "
            f"({reserved}): the probe block is empty",
        )
    x = ids.to(torch.int64)
    h = murmur_hash3_2x64(x, 0, 0)
    modulo: torch.Tensor | int = rows
    offset: torch.Tensor | int = 0
    if chunked:
        assert local_sizes is not None and offsets is not None
        modulo, offset = local_sizes.detach(), offsets.detach()
        local_block = modulo - reserved
        if validation_enabled():  # every probed slot offset + [0, b) is a row, b > 0
            checks = DataChecks(ZCH)
            checks.add(
                local_block.amin(),
                1,
                None,
                "argument 'local_sizes' must exceed "
                f"num_reserved_slots ({reserved}): the probe block is empty",
            )
            checks.add(offset.amin(), 0, None, "argument 'offsets' must be non-negative")
            # each bound alone first, so that the sum cannot wrap
            checks.add(
                torch.maximum(offset, modulo).amax(),
                None,
                rows,
                "arguments 'offsets' "
                f"and 'local_sizes' must be at most the identities' {rows} rows",
            )
            checks.add(
                (offset + modulo).amax(),
                None,
                rows,
                f"arguments 'offsets' + 'local_sizes' must stay within the identities' {rows} rows",
            )
            checks.assert_on_device()
        # b >= 1 whatever the data: a zero block would divide by zero
        block: torch.Tensor | int = local_block.clamp_(min=1)
    else:
        block = rows - reserved
    base = unsigned_mod(h, block)
    if disable_fallback:
        fallback: torch.Tensor | int = -1
    elif opt_in:
        fallback = unsigned_mod(h, reserved).add_(block)
        if chunked:
            fallback.add_(offset)
    else:  # the block is the whole chunk: h % m is the first probe
        fallback = base + offset if chunked else base
    # probing is circular: past b probes the slots repeat, so the first match (or none) is
    # found within min(max_probe, b) of them (b <= rows for valid chunks): memory N * that
    probes = min(max(int(max_probe), 0), rows if chunked else rows - reserved)
    if probes == 0:  # upstream's loop never runs: every id falls back
        return torch.full_like(x, fallback) if isinstance(fallback, int) else fallback, None
    if table.dtype == ids.dtype:
        identity = ids
    else:  # int64 ids against int32 identities: upstream's item % kMaxIdentityNum
        identity = torch.fmod(ids, MAX_IDENTITY).to(torch.int32)
    dev = ids.device
    steps = arange_cached(probes + 1, dev, torch.int32)  # k = 0 .. P - 1, and P (no match)
    k, none = steps[:probes], steps[probes:]
    blk = block.unsqueeze(1) if isinstance(block, torch.Tensor) else block
    with allocation_of(ZCH, f"the [{ids.numel()}, {probes}] probe table ('max_probe')"):
        slots = torch.remainder(base.unsqueeze(1) + k, blk)  # [N, P], local to the chunk
        if chunked:  # the rows probed; clamped so that bad chunks stay inside the identities
            slots.add_(offset.unsqueeze(1)).clamp_(0, rows - 1)
        found = table[:, 0].index_select(0, slots.reshape(-1)).view_as(slots)
    # the first probe that matches (P where none does): cached constants, no fill launch
    first = torch.where(found == identity.unsqueeze(1), k, none).amin(1)
    hit = torch.remainder(base + first, block)
    if chunked:
        hit.add_(offset)
    missed = filled_i32(1, -1, dev) if isinstance(fallback, int) else fallback
    return torch.where(first < probes, hit, missed), None


KERNELS = {ZCH: {"PrivateUse1": zero_collision_hash_npu}}
