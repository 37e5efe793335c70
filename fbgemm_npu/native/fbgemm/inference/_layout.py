"""The host-side plan of an IntNBit (inference) TBE layout: per-feature rows, bytes and columns.

The lookup's layout arrives as small device tensors (``D_offsets``, ``weights_offsets``,
``weights_tys``, ``weights_placements``).  The program needs it on the host -- which weight
types are present, the byte width of each type's rows, the column granule -- so it reads them
through the tbe family's host-value cache (``tbe/_utils.py``: :func:`host_values`; one copy on the
first call with a new layout, none once :func:`fbgemm_npu.split_table.register_host_values` or
the npu module seeded it), and caches the :class:`Plan` built from them per layout.

A plan holds one device table ``ftab [T + 2, K]`` int64, one row per *slot feature*: row 0 for
index positions before ``offsets[0]``, rows ``1..T`` the features, row ``T + 1`` positions past
``offsets[T B]`` (ignored, as upstream ignores them).  One row gather gives every per-index value
the program needs (columns :data:`COLS`, then one ``lim`` column per weight type present: the
feature's column chunks if it has that type, else 0).

Row layout (upstream's ``nbit::padded_row_size_in_bytes``, scale / bias first as the inference
TBE stores them): FP32 ``4 D`` bytes, FP16 ``2 D``, FP8 ``D``, INT8 ``4 + D``, INT4 ``4 + D / 2``,
INT2 ``4 + D / 4`` (the 4 bytes: half scale, half bias), each row rounded up to ``row_alignment``.
Rows of a feature: upstream's count, ``(next table start or the buffer's end - start) // row
bytes`` (the tables sorted by start), so a padding row past the last real one reads as upstream.
"""

from __future__ import annotations

import bisect
import math
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import torch

from fbgemm_npu.native._upload import upload
from fbgemm_npu.native.fbgemm.tbe._utils import host_values

__all__ = ["COLS", "FP8", "INT_TYPES", "NAMES", "Plan", "get_plan", "row_bytes"]

# SparseType codes (fbgemm_gpu.split_embedding_configs.SparseType.as_int())
FP32, FP16, INT8, INT4, INT2, BF16, FP8 = 0, 1, 2, 3, 4, 5, 6
NAMES = {FP32: "FP32", FP16: "FP16", INT8: "INT8", INT4: "INT4", INT2: "INT2", FP8: "FP8"}
INT_TYPES = {INT8: 8, INT4: 4, INT2: 2}  # bits per value; 4 bytes of half scale / bias first
_FLOAT_BYTES = {FP32: 4, FP16: 2, FP8: 1}
# placements (fbgemm_gpu's PlacementType): DEVICE, MANAGED, MANAGED_CACHING, HOST
DEVICE, MANAGED, MANAGED_CACHING, HOST = 0, 1, 2, 3
# ftab columns: row base and row width (both in granules of Plan.q bytes), largest row
# (clamp), check bounds lo / hi, keep bound, output granule row; then one lim column per type
# present
BASE, ROWB, RMAX, LO, HI, KEEP, DCOL = range(7)
COLS = 7
_FAR = 1 << 62
_PLANS: OrderedDict[tuple, tuple[tuple[weakref.ref, ...], Plan]] = OrderedDict()
_CACHE_SIZE = 64


def row_bytes(D: int, ty: int, row_alignment: int) -> int:
    """Bytes of one row of ``D`` values of type ``ty``, padded to ``row_alignment``."""
    if ty in INT_TYPES:
        raw = 4 + (D * INT_TYPES[ty] + 7) // 8
    else:
        raw = D * _FLOAT_BYTES[ty]
    a = max(row_alignment, 1)
    return (raw + a - 1) // a * a


@dataclass(frozen=True)
class Plan:
    """One layout: ``types`` present (in code order), each type's widest ``D`` (``dims``) and
    whether all its features have it (``uniform``), the column granule ``g`` (every feature's
    ``D`` and column start are multiples of it), the byte window ``W`` read per index, the
    per-feature device table ``ftab`` and ``total_D``; ``uvm``: some feature reads
    ``uvm_weights``."""

    T: int
    total_D: int
    types: tuple[int, ...]
    dims: tuple[int, ...]
    uniform: tuple[bool, ...]
    g: int
    W: int
    ftab: torch.Tensor
    uvm: bool
    cols: torch.Tensor | None  # [total_D] int64: the feature of each output column (pooled)
    pad: int  # spare granule rows after the pooled output's (they take what is dropped)
    q: int  # bytes per gathered granule (ftab's base and row bytes are in granules)


def _refuse(op: str, arg: str, what: str) -> ValueError:
    return ValueError(f"{op}: argument '{arg}' {what}")


def _build(
    op: str,
    device: torch.device,
    values: list[tuple[int, ...]],
    numels: tuple[int, int],
    row_alignment: int,
    nobag_D: int | None,
) -> Plan:
    d_off, w_off, tys, places = values
    T = len(w_off)
    if len(d_off) != T + 1:  # pooling NONE reads no D_offsets either: a layout of other T
        raise _refuse(op, "D_offsets", f"must have {T + 1} elements (weights_offsets has {T}), "
                      f"got {len(d_off)}")  # fmt: skip
    for arg, v in (("weights_tys", tys), ("weights_placements", places)):
        if len(v) != T:
            raise _refuse(op, arg, f"must have {T} elements, as weights_offsets, got {len(v)}")
    dims = [nobag_D if nobag_D is not None else d_off[t + 1] - d_off[t] for t in range(T)]
    for t, (D, ty, p) in enumerate(zip(dims, tys, places, strict=True)):
        if ty not in NAMES:
            raise RuntimeError(
                f"{op}: argument 'weights_tys' gives feature {t} the unsupported SparseType {ty} "
                f"(supported: {', '.join(f'{n} ({c})' for c, n in NAMES.items())})"
            )
        if w_off[t] < 0:
            raise _refuse(op, "weights_offsets", f"holds {w_off[t]} for feature {t}: expected >= 0")
        if D < 0:
            raise _refuse(op, "D_offsets", f"must be non-decreasing, got {list(d_off)}")
        if ty in INT_TYPES and D * INT_TYPES[ty] % 8:
            raise _refuse(op, "D_offsets", f"gives feature {t} ({NAMES[ty]}) D = {D}, which does "
                          "not pack into whole bytes")  # fmt: skip
        if p not in (DEVICE, MANAGED, MANAGED_CACHING, HOST):
            raise _refuse(op, "weights_placements", f"holds {p} for feature {t}: expected 0-3")
    rbytes = [row_bytes(D, ty, row_alignment) for D, ty in zip(dims, tys, strict=True)]
    # upstream's row count: up to the next table start (any buffer's: upstream sorts them all
    # together) or the end of the feature's buffer, whichever comes first (upstream reads past
    # that end in such a layout)
    uses_uvm = [p in (MANAGED, MANAGED_CACHING) for p in places]
    starts = sorted({*w_off})
    types = tuple(sorted({*tys}))
    g = math.gcd(*dims) or 1
    # the byte granule q: every row start is a multiple (the gather reads [N, W / q] granules
    # of q bytes, an index per granule instead of per byte)
    q = math.gcd(*w_off, *rbytes, *([numels[False]] if any(uses_uvm) else [])) or 1
    pad = max(max(dims, default=0) // g, 1)  # spare rows after the output's: dropped values
    rows = []
    for t in range(T):
        start, numel, rb = w_off[t], numels[uses_uvm[t]], rbytes[t]
        k = bisect.bisect_right(starts, start)
        end = min(starts[k] if k < len(starts) else numel, numel) if start < numel else start
        n = max((end - start) // rb, 0) if rb else 0
        base = start + (numels[False] if uses_uvm[t] else 0)
        lims = [dims[t] // g if tys[t] == ty else 0 for ty in types]
        dcol = 0 if nobag_D is not None else d_off[t] // g
        rows.append([base // q, rb // q, max(n - 1, 0), -1, n, 0, dcol, *lims])
    dummy = [0, 0, 0, -_FAR, _FAR, _FAR, 0, *([0] * len(types))]
    tdims = tuple(max(d for d, ty in zip(dims, tys, strict=True) if ty == x) for x in types)
    uniform = tuple(
        all(d == tdims[i] for d, ty in zip(dims, tys, strict=True) if ty == x)
        for i, x in enumerate(types)
    )
    step = q * 4 // math.gcd(q, 4)  # FP32 rows are read as a float32 view of the window
    W = max((max(rbytes, default=0) + step - 1) // step * step, step)
    ftab = upload([dummy, *rows, dummy], torch.int64, device)
    total_D = d_off[-1] if nobag_D is None else nobag_D
    cols = None
    if nobag_D is None:
        cols = upload([t for t in range(T) for _ in range(dims[t])], torch.int64, device)
    return Plan(T, total_D, types, tdims, uniform, g, W, ftab, any(uses_uvm), cols, pad, q)


def get_plan(
    op: str,
    tensors: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    numels: tuple[int, int],
    row_alignment: int,
    nobag_D: int | None,
) -> Plan:
    """The cached plan of ``(D_offsets, weights_offsets, weights_tys, weights_placements)`` with
    ``numels = (dev_weights.numel(), uvm_weights.numel())`` (built on first use; the host values
    the cache misses are read in one copy).  ``nobag_D``: pooling NONE's row width (every
    feature reads ``max_D`` values, as upstream), else ``None``."""
    key = (
        tensors[0].device,
        tuple((id(t), t._version) for t in tensors),
        numels,
        row_alignment,
        nobag_D,
    )
    hit = _PLANS.get(key)
    if hit is not None and all(r() is t for r, t in zip(hit[0], tensors, strict=True)):
        _PLANS.move_to_end(key)
        return hit[1]
    plan = _build(op, tensors[0].device, host_values(*tensors), numels, row_alignment, nobag_D)
    _PLANS[key] = (tuple(weakref.ref(t) for t in tensors), plan)
    while len(_PLANS) > _CACHE_SIZE:
        _PLANS.popitem(last=False)
    return plan
