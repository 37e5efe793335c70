"""``fbgemm::reset_weight_momentum`` on npu: zero pruned rows and their rowwise momentum.

Upstream's CPU build has the schema and no kernel (CUDA only:
``src/split_embeddings_cache/reset_weight_momentum.cu``); upstream's
``SplitTableBatchedEmbeddingBagsCodegen.reset_embedding_weight_momentum`` calls it for
``EXACT_ROWWISE_ADAGRAD`` (torchrec's ITEP pruning and managed-collision eviction).  Held by a
reference written from the kernel (``fbgemm_npu/testing/tbe_utils_reference.py``).

Math: pruned table ``i`` is logical table ``l = logical_table_ids[i]`` reading buffer ``u =
buffer_ids[i]``; for each pruned index ``p`` in ``pruned_indices[pio[u] : pio[u + 1]]`` (``pio =
pruned_indices_offsets``), with ``D = D_offsets[l + 1] - D_offsets[l]``:
``momentum1[momentum1_offsets[l] + p] = 0`` and ``weights[weights_offsets[l] + p * D + d] = 0``
for ``d < 4 * (D // 4)`` -- the kernel works in chunks of 4 elements and resets the momentum with
a row's first chunk, so a row's last ``D % 4`` elements stay, and nothing is reset for
``D < 4``.  Dtypes: weights fp32 / fp16 / bf16, momentum1 fp32; the offsets int64 (D_offsets
int32), ids int32, as upstream's accessors read them.

On npu every table is in one buffer (device or UVM, as the lookups require: placements are then
implied), and there is no LXU cache: a non-empty cache with ``total_cache_hash_size > 0`` is
refused (UVM caching is a CUDA feature).  Each buffer is reset by one table at most (torchrec's
callers pass distinct ``buffer_ids``; a repeated one is a queued data check).

Program (no host sync once the layout is known -- the first call with a new layout reads
``D_offsets`` / ``weights_offsets`` / ``momentum1_offsets`` back once, as the lookups do -- and
nothing on a 910B's AI CPU): each pruned position's buffer by segment ids over ``pio``, the
buffer's table by one out-of-place ``index_put`` of ``arange`` at ``buffer_ids`` and a gather,
the table's ``(weights offset, momentum offset, D, reset width, last row)`` by one gather of a
per-layout table, then one ``index_put_`` of zeros per buffer at ``[P, 4 * (max D // 4)]``
element addresses.  Masked addresses (columns past a row's width, positions of no table) cannot
be dropped without a data-dependent size: they write 0 into an element the call resets anyway
(the least one), or, when the call resets nothing, an element's own value back -- no write that
changes what the kernel's math does not.  Launches: ``BUDGETS`` (budgets.py).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    check_dtype,
    check_ndim,
    check_same_device,
    non_decreasing,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, filled_i32, segment_ids
from fbgemm_npu.native._upload import upload
from fbgemm_npu.native.fbgemm.tbe._utils import _table_rows, host_values
from fbgemm_npu.native.fbgemm.tbe.call import check_weights_dtype

__all__ = ["KERNELS", "RESET_WEIGHT_MOMENTUM"]

RESET_WEIGHT_MOMENTUM = "fbgemm::reset_weight_momentum"
OP = RESET_WEIGHT_MOMENTUM
_LAYOUTS: OrderedDict[tuple, tuple[tuple[weakref.ref, ...], torch.Tensor, int]] = OrderedDict()


def _buffer(
    names: tuple[str, str], dev: torch.Tensor, uvm: torch.Tensor
) -> tuple[str, torch.Tensor]:
    """The one buffer holding every table (device or UVM) and its argument name, as the
    lookups' ``_placed`` choose it."""
    if dev.numel() > 0 and uvm.numel() > 0:
        raise RuntimeError(
            f"{OP}: arguments '{names[0]}' and '{names[1]}' split the tables between device "
            "and UVM buffers; on npu all tables must be in one"
        )
    return (names[0], dev) if dev.numel() > 0 or uvm.numel() == 0 else (names[1], uvm)


def _layout(
    d_off: torch.Tensor, w_off: torch.Tensor, m_off: torch.Tensor, numel: int, m_numel: int
) -> tuple[torch.Tensor, int]:
    """The per-layout device table ``[T, 5]`` int64 (weights offset, momentum offset, D, reset
    width ``4 * (D // 4)``, last row of the table or -1) and the widest reset width, cached per
    layout like the lookups' plans (one host read of the offsets on a miss).  A table that does
    not fit its buffers (``numel`` weights, ``m_numel`` momentum values) is a ValueError naming
    the offsets: the kernel would write outside them."""
    tensors = (d_off, w_off, m_off)
    key = (d_off.device, tuple((id(t), t._version) for t in tensors), numel, m_numel)
    hit = _LAYOUTS.get(key)
    if hit is not None and all(r() is t for r, t in zip(hit[0], tensors, strict=True)):
        return hit[1], hit[2]
    d, w, m = host_values(*tensors)
    if any(v < 0 for v in (*w, *m, *d)):
        raise ValueError(f"{OP}: arguments 'weights_offsets', 'momentum1_offsets' and "
                         "'D_offsets' must not hold negative values")  # fmt: skip
    rows = _table_rows(OP, d, w, numel)
    dims = [d[t + 1] - d[t] for t in range(len(w))]
    for t, D in enumerate(dims):
        if D > 0 and m[t] + rows[t] > m_numel:
            raise ValueError(
                f"{OP}: argument 'momentum1_offsets' puts table {t}'s {rows[t]} rows at "
                f"{m[t]} of a momentum buffer of {m_numel} values"
            )
    table = [[w[t], m[t], D, 4 * (D // 4), rows[t] - 1] for t, D in enumerate(dims)]
    tab = upload(table, torch.int64, d_off.device)
    width = max((r[3] for r in table), default=0)
    _LAYOUTS[key] = (tuple(weakref.ref(t) for t in tensors), tab, width)
    while len(_LAYOUTS) > 64:
        _LAYOUTS.popitem(last=False)
    return tab, width


def _zero_at(buf: torch.Tensor, elem: torch.Tensor, mask: torch.Tensor) -> None:
    """``buf[elem[mask]] = 0`` in place without a data-dependent selection: masked entries
    address the least element the call zeroes (writing 0 there too) or, when it zeroes none,
    the buffer's last element with its own value.  Launches: where (and its fill), amin, clamp,
    zeros, lt, index_select, 2 where, index_put_."""
    n = buf.numel()
    elem, mask = elem.reshape(-1), mask.reshape(-1)
    first = torch.where(mask, elem, n).amin()
    fallback = first.clamp(max=n - 1).reshape(1)
    zero = torch.zeros((), dtype=buf.dtype, device=buf.device)  # no cache: any weights dtype
    own = torch.where(first < n, zero, buf.index_select(0, fallback))  # [1]
    target = torch.where(mask, elem, fallback)
    buf.index_put_((target,), torch.where(mask, zero, own))


def reset_weight_momentum_npu(
    dev_weights: torch.Tensor,
    uvm_weights: torch.Tensor,
    lxu_cache_weights: torch.Tensor,
    weights_placements: torch.Tensor,
    weights_offsets: torch.Tensor,
    momentum1_dev: torch.Tensor,
    momentum1_uvm: torch.Tensor,
    momentum1_placements: torch.Tensor,
    momentum1_offsets: torch.Tensor,
    D_offsets: torch.Tensor,
    pruned_indices: torch.Tensor,
    pruned_indices_offsets: torch.Tensor,
    logical_table_ids: torch.Tensor,
    buffer_ids: torch.Tensor,
    cache_hash_size_cumsum: torch.Tensor,
    lxu_cache_state: torch.Tensor,
    total_cache_hash_size: int,
) -> None:
    """Zero the pruned rows of the weights and their momentum in place (module docstring)."""
    if total_cache_hash_size > 0 and lxu_cache_weights.numel() > 0:
        raise RuntimeError(
            f"{OP}: argument 'lxu_cache_weights' is a non-empty LXU cache; UVM caching is a CUDA "
            "feature and is not supported on npu (use EmbeddingLocation.DEVICE or HOST)"
        )
    w_arg, weights = _buffer(("dev_weights", "uvm_weights"), dev_weights, uvm_weights)
    m_arg, mom = _buffer(("momentum1_dev", "momentum1_uvm"), momentum1_dev, momentum1_uvm)
    check_weights_dtype(OP, w_arg, weights)
    check_dtype(OP, m_arg, mom, (torch.float32,))
    index_args = {
        "weights_offsets": (weights_offsets, torch.int64),
        "momentum1_offsets": (momentum1_offsets, torch.int64),
        "D_offsets": (D_offsets, torch.int32),
        "pruned_indices": (pruned_indices, torch.int64),
        "pruned_indices_offsets": (pruned_indices_offsets, torch.int64),
        "logical_table_ids": (logical_table_ids, torch.int32),
        "buffer_ids": (buffer_ids, torch.int32),
    }
    for arg, (t, dtype) in index_args.items():
        check_ndim(OP, arg, t, (1,))
        check_dtype(OP, arg, t, (dtype,))
    for arg, t in ((w_arg, weights), (m_arg, mom)):
        check_ndim(OP, arg, t, (1,))
    T = weights_offsets.numel()
    if D_offsets.numel() != T + 1 or momentum1_offsets.numel() != T:
        raise ValueError(
            f"{OP}: arguments 'D_offsets' ({D_offsets.numel()}) and 'momentum1_offsets' "
            f"({momentum1_offsets.numel()}) must have T + 1 and T elements for the T = {T} "
            "tables of 'weights_offsets'"
        )
    if logical_table_ids.numel() != buffer_ids.numel() or pruned_indices_offsets.numel() < 1:
        raise ValueError(
            f"{OP}: arguments 'logical_table_ids' and 'buffer_ids' must have one element per "
            "pruned table, and 'pruned_indices_offsets' at least one"
        )
    tensors = {n: t for n, (t, _) in index_args.items()}
    check_same_device(OP, **{w_arg: weights, m_arg: mom}, **tensors)
    P, NB, n = pruned_indices.numel(), pruned_indices_offsets.numel() - 1, buffer_ids.numel()
    if P == 0 or NB == 0 or n == 0 or T == 0 or weights.numel() == 0:
        return  # nothing names a row to reset
    tab, width = _layout(
        D_offsets, weights_offsets, momentum1_offsets, weights.numel(), mom.numel()
    )
    dev = weights.device
    checks = DataChecks(OP)
    pio = pruned_indices_offsets
    if validation_enabled():
        checks.add(pio[0], 0, 0, "argument 'pruned_indices_offsets' must start at 0")
        checks.add(pio[-1], None, P, "argument 'pruned_indices_offsets' must end within the "
                   f"{P} pruned_indices")  # fmt: skip
        checks.require(non_decreasing(pio), "'pruned_indices_offsets' non-decreasing")
        checks.add(buffer_ids.amin(), 0, None, "argument 'buffer_ids' must be >= 0")
        checks.add(buffer_ids.amax(), None, NB - 1, f"argument 'buffer_ids' must be < {NB}")
        checks.add(logical_table_ids.amin(), 0, None, "argument 'logical_table_ids' must be >= 0")
        checks.add(logical_table_ids.amax(), None, T - 1, "argument 'logical_table_ids' must "
                   f"be < {T}")  # fmt: skip
    bid = buffer_ids.clamp(0, NB - 1)
    if validation_enabled():
        once = torch.index_add(filled_i32(NB, 0, dev), 0, bid, filled_i32(n, 1, dev)).amax()
        checks.add(once, None, 1, "argument 'buffer_ids' names a buffer twice (npu resets each "
                   "buffer's rows in one table)")  # fmt: skip
    # the pruned table of each buffer (-1: none), then of each pruned position (-1 past pio[-1])
    owner = torch.index_put(filled_i32(NB + 1, -1, dev), (bid,), arange_cached(n, dev, torch.int32))
    own = owner.index_select(0, segment_ids(pio, P))
    table = logical_table_ids.index_select(0, own.clamp(min=0)).clamp_(0, T - 1)
    row = tab.index_select(0, table)  # [P, 5]
    zero = arange_cached(1, dev)[0]  # cached: a Python 0 would cost a fill
    p = torch.clamp(pruned_indices, min=zero, max=row[:, 4])
    reset = torch.where(own >= 0, row[:, 3], zero)  # 0: nothing to reset (upstream reads none)
    if validation_enabled():
        ok = (torch.eq(p, pruned_indices) | (reset == 0)).all()
        checks.require(ok, "argument 'pruned_indices' holds an index outside its table")
    checks.assert_on_device()
    _zero_at(mom, torch.add(row[:, 1], p), reset > 0)
    if width > 0:
        cols = arange_cached(width, dev)
        start = torch.addcmul(row[:, 0], p, row[:, 2])
        _zero_at(weights, start[:, None] + cols[None, :], cols[None, :] < reset[:, None])


def reset_weight_momentum_meta(*args: Any, **kwargs: Any) -> None:
    """Meta kernel (upstream registers none): no output, nothing to compute."""
    return None


KERNELS: dict[str, dict[str, Any]] = {
    RESET_WEIGHT_MOMENTUM: {
        "PrivateUse1": reset_weight_momentum_npu,
        "Meta": reset_weight_momentum_meta,
    },
}
