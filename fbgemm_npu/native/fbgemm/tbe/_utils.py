"""Host-side plans for the table-batched-embedding (TBE) kernels.

A TBE call gets its table layout as small device tensors (``D_offsets``, ``weights_offsets``, the
optimizer states' offsets).  The kernels need parts of that layout on the host -- which features
share an embedding dim, at which residue modulo D each table starts in the flat buffer -- to pick
tensor views and launch one program per group of tables.  Reading a device tensor on the host is a
sync, so the host values are cached per tensor object (validated by a weak reference and the
tensor's version counter) and a :class:`TbePlan` built from them is cached per layout:

* the first call with a new layout reads every missing offsets tensor in one device-to-host copy;
* later calls, or calls after :func:`register_host_values` seeded the cache from the host lists the
  Python module already has, read nothing back.

Tables are grouped into :class:`TableClass` es: features whose tables have the same embedding dim D
and start at the same residue modulo D in every element-wise buffer (weights, and the
non-rowwise optimizer states).  A class reads and writes its tables through one ``[rows, D]``
strided view of the flat buffer -- a proper, non-overlapping 2-D tensor that a device kernel can
index without copying the table.  Tables built by upstream's TBE with one D (or dims that divide
each other's row offsets) form one class per distinct D; the kernels' launches are counted per
class.
"""

from __future__ import annotations

import bisect
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from fbgemm_npu.native._index import arange_cached, segment_ids, tracing
from fbgemm_npu.native._upload import upload

__all__ = [
    "StateLayout",
    "TableClass",
    "TbePlan",
    "arange_cached",
    "get_plan",
    "host_values",
    "register_host_values",
    "segment_ids",
    "tracing",
    "zeros_cached",
]

_HOST: dict[int, tuple[weakref.ref, int, tuple[int, ...]]] = {}
_PLANS: OrderedDict[tuple, tuple[tuple[weakref.ref, ...], TbePlan]] = OrderedDict()
_PLAN_CACHE_SIZE = 64


def _lookup(t: torch.Tensor) -> tuple[int, ...] | None:
    hit = _HOST.get(id(t))
    if hit is None:
        return None
    ref, version, values = hit
    if ref() is not t or version != t._version:
        return None
    return values


def register_host_values(t: torch.Tensor, values: Sequence[int]) -> None:
    """Tell the TBE kernels the contents of the device tensor ``t`` (e.g. ``D_offsets``).

    The module-level code knows its layout on the host when it builds the TBE; seeding the cache
    with it lets even the first forward run without a host sync.  The entry is dropped when ``t``
    is freed or modified in place (its version changes).
    """
    values = tuple(int(v) for v in values)
    if len(values) != t.numel():
        raise ValueError(
            f"register_host_values: {len(values)} values given for a tensor of {t.numel()} elements"
        )
    key = id(t)

    def _drop(_ref: weakref.ref) -> None:
        entry = _HOST.get(key)
        if entry is not None and entry[0] is _ref:
            del _HOST[key]

    _HOST[key] = (weakref.ref(t, _drop), t._version, values)


def host_values(*tensors: torch.Tensor) -> list[tuple[int, ...]]:
    """Host copies of small integer device tensors; the misses cost one device-to-host copy."""
    out: list[tuple[int, ...] | None] = [_lookup(t) for t in tensors]
    missing = [t for t, v in zip(tensors, out, strict=True) if v is None]
    if missing:
        # One copy for all misses: a device-side cat (after int64 casts), then one read-back.
        flat = torch.cat([m.reshape(-1).to(torch.int64) for m in missing]).cpu().tolist()
        pos = 0
        for m in missing:
            register_host_values(m, flat[pos : pos + m.numel()])
            pos += m.numel()
        out = [_lookup(t) for t in tensors]
    return [v for v in out if v is not None]


@dataclass(frozen=True)
class StateLayout:
    """Where an optimizer state lives: per-feature element (or row) offsets; rowwise states hold
    one value per embedding row, the others D values per row like the weights."""

    offsets: tuple[int, ...]
    rowwise: bool


@dataclass
class TableClass:
    """Features whose tables share D and their residues mod D in every element-wise buffer.

    ``rows``: the index tables of the class as one device tensor ``[T + 1, 2 m + 2]`` (``m``
    bases, then ``m`` multipliers per feature, then the bounds ``lo, hi`` of the feature's
    indices, so that one row gather serves all of them): for feature ``t`` and embedding row
    ``idx`` (first clamped to ``[rows[t, 2 m], rows[t, 2 m + 1]]``), row ``k`` of the class's
    index matrix is ``rows[t, k] + idx * rows[t, m + k]``:

    * ``k = 0``: the row in the class's ``[n, D]`` view of the weights (non-members: 0, a valid
      row whose value is never used);
    * ``k = 1``: the de-duplication key, ``weights row + 1`` (non-members: 0, "not mine");
    * ``k = 2``: the member's position ``j`` in the class (non-members: 0), used to find its
      gradient columns;
    * ``k = 3 + s``: the row of optimizer state ``s`` (its ``[n, D]`` view, or its element for a
      rowwise state).

    The bounds are the same in every class and cover every feature: ``[0, E_t - 1]``, ``E_t`` the
    rows of feature ``t``'s table (:func:`_table_rows`), so that an index outside its table
    reads and writes a row of its own table, never another's; unbounded for zero-width features
    (they read nothing) and the dummy.

    Column ``T`` is the dummy feature of indices past ``offsets[-1]`` (a non-member everywhere).
    """

    D: int
    members: tuple[int, ...]
    w_residue: int
    state_residues: tuple[int, ...]  # 0 for rowwise states
    rows: torch.Tensor
    fwd_rows: torch.Tensor  # [T + 1, 4]: rows[:, (0, m, 2m, 2m + 1)], all the forward needs
    member_index: torch.Tensor  # [T_c] feature ids, int64
    cols: torch.Tensor  # [T_c, D] output columns of the members, int64
    # an exclusive bound of the de-duplication keys (row 1 of the index matrix): the rows of
    # the class's [n, D] view of the weights, plus one; the backward's sort route depends on it
    key_bound: int = 1 << 62
    member_mask: torch.Tensor | None = None  # [T + 1] bool: the class's features (VBE scatter)

    @property
    def n_members(self) -> int:
        return len(self.members)

    @property
    def member_flags(self) -> torch.Tensor:
        """``[T + 1]`` int64: 1 for the class's features, 0 otherwise (a strided view)."""
        return self.rows[:, (self.rows.size(1) - 2) // 2 + 1]


@dataclass
class TbePlan:
    """One TBE layout: per-feature dims, column offsets and the table classes."""

    T: int
    dims: tuple[int, ...]
    D_offsets: tuple[int, ...]
    total_D: int
    classes: list[TableClass]
    dims_t: torch.Tensor  # [T] int64 on the device
    vbe_cache: dict = field(default_factory=dict)  # num_ranks -> VBE block tables

    @property
    def single_class(self) -> bool:
        """One class covering every feature in column order: the output needs no scatter."""
        return len(self.classes) == 1 and self.classes[0].members == tuple(range(self.T))


def _table_rows(
    op: str, d_offsets: tuple[int, ...], w_offsets: tuple[int, ...], weights_numel: int
) -> list[int]:
    """Rows of each feature's table, from where the tables start in the flat weights buffer.

    Upstream packs the tables one after the other (``construct_split_state``), so table ``t``
    ends where the next table starts (or the buffer ends): ``E_t = (next start - start) // D_t``,
    exactly upstream's row count in every layout its modules build (shared tables included, in
    any ``feature_table_map`` order).  A zero-row table starts where the next one does and
    cannot be told from it in this layout; upstream's CPU kernels (the next non-zero
    ``hash_size_cumsum`` step) do not tell them apart either.  0 for zero-width features."""
    starts = sorted({*w_offsets, weights_numel})
    out = []
    for t, start in enumerate(w_offsets):
        D = d_offsets[t + 1] - d_offsets[t]
        if D <= 0:
            out.append(0)
            continue
        end = starts[bisect.bisect_right(starts, start)] if start < weights_numel else start
        rows = (end - start) // D
        if rows <= 0:
            raise ValueError(
                f"{op}: argument 'weights_offsets' puts feature {t}'s table (D = {D}) at element "
                f"{start} of a weights buffer of {weights_numel} elements: it has no rows"
            )
        out.append(rows)
    return out


def _build_plan(
    op: str,
    device: torch.device,
    d_offsets: tuple[int, ...],
    w_offsets: tuple[int, ...],
    states: Sequence[StateLayout],
    weights_numel: int,
) -> TbePlan:
    T = len(d_offsets) - 1
    dims = tuple(d_offsets[t + 1] - d_offsets[t] for t in range(T))
    groups: dict[tuple[int, int, tuple[int, ...]], list[int]] = {}
    for t in range(T):
        D = dims[t]
        if D <= 0:
            # A zero-width feature contributes no output columns and no gradient.
            continue
        res = tuple(0 if s.rowwise else s.offsets[t] % D for s in states)
        groups.setdefault((D, w_offsets[t] % D, res), []).append(t)
    i64 = torch.iinfo(torch.int64)
    table_rows = _table_rows(op, d_offsets, w_offsets, weights_numel)
    bounds = [(0, e - 1) if e > 0 else (i64.min, i64.max) for e in table_rows]
    bounds.append((i64.min, i64.max))  # the dummy feature T: never read
    classes = []
    m = 3 + len(states)
    for (D, w_res, res), members in groups.items():
        base = [[0] * (T + 1) for _ in range(m)]
        mul = [[0] * (T + 1) for _ in range(m)]
        for j, t in enumerate(members):
            wrow = (w_offsets[t] - w_res) // D
            base[0][t], mul[0][t] = wrow, 1
            base[1][t], mul[1][t] = wrow + 1, 1
            base[2][t] = j
            for s, st in enumerate(states):
                if st.rowwise:
                    base[3 + s][t] = st.offsets[t]
                else:
                    base[3 + s][t] = (st.offsets[t] - res[s]) // D
                mul[3 + s][t] = 1
        table = [
            [base[k][t] for k in range(m)] + [mul[k][t] for k in range(m)] + list(bounds[t])
            for t in range(T + 1)
        ]
        rows = upload(table, torch.int64, device)
        cols = [[d_offsets[t] + c for c in range(D)] for t in members]
        classes.append(
            TableClass(
                D=D,
                members=tuple(members),
                w_residue=w_res,
                state_residues=res,
                rows=rows,
                # from the host table: a list index on the device tensor would upload the
                # list with a blocking copy
                fwd_rows=upload(
                    [[r[k] for k in (0, m, 2 * m, 2 * m + 1)] for r in table], torch.int64, device
                ),
                member_index=upload(members, torch.int64, device),
                cols=upload(cols, torch.int64, device),
                key_bound=max((weights_numel - w_res) // D, 0) + 1,
                member_mask=upload([t in members for t in range(T + 1)], torch.bool, device),
            )
        )
    return TbePlan(
        T=T,
        dims=dims,
        D_offsets=d_offsets,
        total_D=d_offsets[-1],
        classes=classes,
        dims_t=upload(dims, torch.int64, device),
    )


def get_plan(
    op: str,
    D_offsets: torch.Tensor,
    weights_offsets: torch.Tensor,
    state_offsets: Sequence[tuple[torch.Tensor, bool]] = (),
    *,
    weights_numel: int,
) -> TbePlan:
    """The cached plan for this layout (built on first use, reading back only the offsets the
    host cache misses).  ``weights_numel``: the flat weights buffer's size, which bounds the
    last table's rows; ``op`` names the op in errors."""
    tensors = (D_offsets, weights_offsets, *(s for s, _ in state_offsets))
    key = (
        D_offsets.device,
        tuple((id(t), t._version) for t in tensors),
        tuple(r for _, r in state_offsets),
        weights_numel,
    )
    hit = _PLANS.get(key)
    if hit is not None and all(r() is t for r, t in zip(hit[0], tensors, strict=True)):
        _PLANS.move_to_end(key)
        return hit[1]
    values = host_values(*tensors)
    states = [
        StateLayout(offsets=v, rowwise=r)
        for v, (_, r) in zip(values[2:], state_offsets, strict=True)
    ]
    plan = _build_plan(op, D_offsets.device, values[0], values[1], states, weights_numel)
    _PLANS[key] = (tuple(weakref.ref(t) for t in tensors), plan)
    while len(_PLANS) > _PLAN_CACHE_SIZE:
        _PLANS.popitem(last=False)
    return plan


_ZEROS: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}


def zeros_cached(n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``n`` zeros as a prefix view of a cached, growing buffer: the source of out-of-place
    scatters (``index_put`` / ``index_add`` into zeros: one launch, no ``zeros`` first); a fresh
    tensor when traced.  Callers must not write to it."""
    if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None:
        return torch.zeros(n, dtype=dtype, device=device)
    key = (device, dtype)
    buf = _ZEROS.get(key)
    if buf is None or buf.numel() < n:
        buf = torch.zeros(max(n, 1024, 0 if buf is None else 2 * buf.numel()), dtype=dtype,
                          device=device)  # fmt: skip
        _ZEROS[key] = buf
    return buf[:n]


def class_view(flat: torch.Tensor, D: int, residue: int) -> torch.Tensor:
    """The ``[n, D]`` row view of a flat buffer starting at element ``residue``: no copy."""
    n = max((flat.numel() - residue) // D, 0)
    return flat.as_strided((n, D), (D, 1), flat.storage_offset() + residue)
