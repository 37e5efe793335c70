"""The search of ``block_bucketize_pos``: each index among its feature's sorted boundaries.

Upstream binary-searches ``pos[t]`` for every element (``upper_bound(pos[t], v) - 1``, unsigned
order).  ``searchsorted`` is an AI-CPU op on a 910B, so the search here is built from AI-Core
ops on a padded table of every feature's boundaries, laid out on the host from the shapes alone:

* ``table[t] = [s, b_0, ..., b_{n_t - 1}, b_{n_t - 1}, ...]`` (``W`` columns): column 0 an unused
  slot, then the boundaries, then the last one repeated (the row stays sorted), sign-flipped so
  that a signed comparison orders like upstream's unsigned one;
* ``c = #{1 <= j < W : table[t][j] <= v}``: while ``L * W <= COMPARE_LIMIT`` (decided on the
  host) a gather of each element's row, a broadcast ``le`` and a ``sum``; past it a branchless
  binary search, ``log2(W)`` rounds of (add, gather, ``le``, ``where``) over a table padded to a
  power of two, memory ``O(L)``;
* the repeated last boundary is counted when ``v >= b_{n_t - 1}``, so the true count is
  ``min(c, n_t)`` (the caller's ``minimum`` with the per-feature ``n_t``), and ``table[t][c]`` is
  the boundary ``b_lb`` at ``lb = min(c, n_t) - 1`` whenever ``lb >= 0`` (the repeats equal it).

Every gather index lies inside the table whatever the data, so a call whose data check failed
(unsorted boundaries) stays memory-safe until the check is read.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fbgemm_npu.native._upload import upload
from fbgemm_npu.native.fbgemm.bucketize import _order
from fbgemm_npu.native.fbgemm.bucketize._utils import sign_flip, udivmod

__all__ = ["Boundaries", "prepare_boundaries", "search", "variable_buckets"]


@dataclass
class Boundaries:
    """Every feature's boundaries, laid out for :func:`search`."""

    table: torch.Tensor  # (T, W) sign-flipped, padded rows (see the module docstring)
    last: torch.Tensor  # (T,) each feature's last boundary, as given
    count: torch.Tensor  # (T,) n_t, the index dtype
    binary: bool  # search by rounds of gathers (large inputs) rather than one compare

    @property
    def width(self) -> int:
        return self.table.shape[1]


def prepare_boundaries(pos: list[torch.Tensor], dtype: torch.dtype, n_idx: int) -> Boundaries:
    """Concatenate and lay out every feature's boundaries (``pos``: non-empty, ``dtype``).

    The layout (which flat boundary fills each table slot, and ``n_t``) is known from the shapes;
    the host builds it and sends it in one pinned, non-blocking copy (no stall).  Launches: that
    copy, the ``cat`` (none for one feature), one gather of the table and the last boundaries,
    and the sign flip of the table."""
    sizes = torch.tensor([p.numel() for p in pos], dtype=torch.int64)
    n_feat, widest = len(pos), int(sizes.max())
    width = widest + 1
    binary = n_idx * width > _order.COMPARE_LIMIT
    if binary:
        width = 1 << (width - 1).bit_length()  # rounds of halving steps cover every column
    starts = torch.cumsum(sizes, 0) - sizes
    col = torch.arange(width).clamp(1)[None, :] - 1  # slot 0 repeats b_0: never counted
    slots = starts[:, None] + torch.minimum(col, sizes[:, None] - 1)
    host = torch.cat([slots.reshape(-1), starts + sizes - 1, sizes])
    aux = upload(
        host, dtype if int(sizes.sum()) < _order.INT32_LIMIT else torch.int64, pos[0].device
    )
    flat = pos[0].reshape(-1) if n_feat == 1 else torch.cat([p.reshape(-1) for p in pos])
    cells = n_feat * width
    got = flat.index_select(0, aux[: cells + n_feat])
    table = sign_flip(got[:cells]).view(n_feat, width)
    return Boundaries(table, got[cells:], aux[cells + n_feat :], binary)


def search(
    bounds: Boundaries, vflip: torch.Tensor, feature: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(c, b_lb)`` for each element: ``c = #{1 <= j < W : table[t][j] <= v}`` (int64; the
    caller takes ``min(c, n_t)``) and ``table[t][c]`` (sign-flipped).  ``vflip``: the searched
    value, sign-flipped; ``feature``: its feature ``t``.  Launches: the row gather, ``le``,
    ``sum`` and the gather of ``b_lb``; or, binary, the row base (``mul``), ``log2(W)`` rounds of
    add, gather, ``le`` and ``where``, the subtraction of the base and the gather of ``b_lb``
    (``c`` int32 there)."""
    table, width = bounds.table, bounds.width
    if not bounds.binary:
        rows = table.index_select(0, feature)  # (L, W)
        c = torch.le(rows[:, 1:], vflip[:, None]).sum(1)
        return c, rows.gather(1, c[:, None]).squeeze(1)
    flat = table.reshape(-1)
    base = torch.mul(feature, width)  # int32 like feature: the table is far below 2**31 slots
    at = base
    step = width // 2
    while step:
        cand = torch.add(at, step)
        ok = torch.le(flat.index_select(0, cand), vflip)
        at = torch.where(ok, cand, at)
        step //= 2
    return torch.sub(at, base), flat.index_select(0, at)


def variable_buckets(
    x: torch.Tensor,
    neg: torch.Tensor | None,
    bounds: Boundaries,
    feature: torch.Tensor,
    cols: list[torch.Tensor],
    my_size: int,
    keep_all: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(bucket, new index)`` for ``block_bucketize_pos`` boundaries (math: :mod:`.bucketize`).

    ``cols`` per element: block size ``b``, the feature's last boundary and its count ``n_t``,
    and optionally ``G`` (``total_num_blocks``, clamped to >= 1) with its ``K, M``.  The value
    searched is ``u`` (``b != 0``) or ``(u % G) * last // G`` (``b == 0``; unsigned, the product
    wrapping as upstream's); ``lb = min(c, n_t) - 1``, bucket ``lb`` where ``0 <= lb < P`` else
    ``u % P``; new index ``u // G`` (``b == 0``), ``u - pos[t][lb]`` (the sign flips cancel in
    the subtraction) or ``u // P``.  ``keep_all``: the new index is not needed (``None``, its
    launches skipped).  Launches beyond the search: the unsigned divmods (by ``G``; and by ``P``
    with ``total_num_blocks``), the product and its division, ``eq``, ``where``, the flip,
    ``minimum``, the subtraction, ``clamp``, ``eq``, ``where``; the new index two ``where`` and a
    subtraction."""
    block, last, count = cols[:3]
    total: int | torch.Tensor = my_size
    k = m = None
    if len(cols) > 3:
        total, k, m = cols[3:]
    q_g, r_g = udivmod(x, neg, total, k, m)
    assert r_g is not None
    scaled = torch.mul(r_g, last)  # upstream: (u % G) * pos[t][-1] / G, unsigned, wrapping
    q_s, _ = udivmod(scaled, None, total, k, m, want_remainder=False)
    zero = torch.eq(block, 0)
    vflip = sign_flip(torch.where(zero, q_s, x))
    c, b_lb = search(bounds, vflip, feature)
    lb = torch.sub(torch.minimum(c, count), 1)
    inside = torch.eq(torch.clamp(lb, 0, my_size - 1), lb)
    if isinstance(total, int):
        q_p, r_p = q_g, r_g
    else:
        q_p, r_p = udivmod(x, neg, my_size)
    bucket = torch.where(inside, lb, r_p)
    if keep_all:
        return bucket, None
    offset = torch.sub(vflip, b_lb)  # x - pos[t][lb] where b != 0 (there v = x)
    return bucket, torch.where(zero, q_g, torch.where(inside, offset, q_p))
