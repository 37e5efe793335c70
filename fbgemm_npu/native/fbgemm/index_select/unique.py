"""``fbgemm::jagged_unique_indices`` on npu (upstream: a CUDA-only op).

Inputs: ``hash_size_cumsum`` (``T + 1``: feature ``t`` owns linear ids ``[hsc[t], hsc[t+1])``),
``hash_size_offsets`` (groups of features: group ``g`` is features ``[hso[g], hso[g+1])``, ``T``
groups), ``offsets`` (``T * B + 1``, the jagged layout of ``indices``: sample ``s`` of feature
``s // B`` holds ``indices[offsets[s]:offsets[s+1]]``) and ``indices``.  All four share one dtype,
int32 or int64, as upstream's kernels read them with one index type.  Outputs, as upstream's CUDA
kernel computes them:

* ``linear[i] = indices[i] + hsc[feature of i]``; ``U = sorted(unique(linear))``;
* ``reverse_index`` (int64): ``U[reverse_index[i]] == linear[i]``;
* ``unique_indices[j] = U[j] - hsc[owner of U[j]]``, the owner being the last feature whose
  first id is at most ``U[j]`` (upstream's current kernel: ``delinearize_unique_from_sorted``).
  It equals ``indices[i]`` wherever ``reverse_index[i] == j`` unless an index passes its own
  feature's size into the next feature's range (upstream's older kernel scattered ``indices``
  instead; its newer one, followed here, reads such an id as the next feature's);
* ``output_lengths`` (``T * B``): group ``g``'s ``total_g`` unique ids (those in
  ``[hsc[hso[g]], hsc[hso[g+1]])``) spread over its ``n_g = (hso[g+1] - hso[g]) * B`` samples, the
  first ``total_g % n_g`` of them getting one more: sample ``i`` of the group gets
  ``ceil((total_g - i) / n_g)``, which one ``floor_divide`` of ``(total_g + end_g - 1 - s)`` by
  ``n_g`` gives for every sample ``s`` at once;
* ``output_offsets`` = ``[0, cumsum(output_lengths)]``.

Contract checked on the data (upstream reads out of bounds or races otherwise): ``offsets`` start at
0, do not decrease and end at ``indices.numel()``; ``hash_size_offsets`` partition ``[0, T]``
(start at 0, do not decrease, ``hso[T] == T``; upstream's own ``jagged_hash_size_cumsum`` returns
``arange(T + 1)``), which makes every sample belong to exactly one group; every linear id is at
least ``hsc[0] >= 0`` (an id below belongs to no group: the lengths would not sum to the unique
count).  An id at or past ``hsc[T]`` is the last feature's (its owner, as upstream's
delinearization reads it) and counts in the last feature's group, as upstream's tests expect
(a last feature of hash size 0 in its multi-keys test).  Ids of one table's features that
share a hash range (torchrec's dedup: ``hsc`` repeats) are valid.

Launches: the linearization (the feature of every index by
:func:`~fbgemm_npu.native.fbgemm.index_select._utils.count_le` of every ``B``-th offset, a gather,
``add``), the merged keys (:func:`_unique_merged`: two ``add``), ``unique``, the unique ids, their
owners and the reverse index read from the merged order (no ``searchsorted``), the lengths
(:func:`_group_lengths`) and the offsets (an int32 ``cumsum`` and a ``cat`` that widens it).  Only
``torch.unique`` (``_unique2``) stays on a 910B's AI CPU: the op's contract needs the number of
unique ids, and no AI-Core route finds it (a sort of float keys is exact only below 2**24, and
no size bounds the ids: ``hash_size_cumsum`` is data).  ``unique`` reads that number back to the
host: it sizes the outputs; the fake kernel (:func:`jagged_unique_indices_fake`) gives it a
data-dependent size.  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    check_same_device,
    non_decreasing,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, filled_i32
from fbgemm_npu.native.fbgemm.index_select import _utils as _u

__all__ = ["KERNELS", "jagged_unique_indices_npu"]

JAGGED_UNIQUE_INDICES = "fbgemm::jagged_unique_indices"


def _check_args(
    hash_size_cumsum: object, hash_size_offsets: object, offsets: object, indices: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int, int]:
    op = JAGGED_UNIQUE_INDICES
    hsc = _u.check_index_tensor(op, "hash_size_cumsum", hash_size_cumsum)
    hso = _u.check_index_tensor(op, "hash_size_offsets", hash_size_offsets)
    offs = _u.check_index_tensor(op, "offsets", offsets)
    idx = _u.check_index_tensor(op, "indices", indices)
    check_same_device(op, hash_size_cumsum=hsc, hash_size_offsets=hso, offsets=offs, indices=idx)
    _u.same_dtype_or_raise(
        op, "indices", indices=idx, hash_size_cumsum=hsc, hash_size_offsets=hso, offsets=offs
    )
    if hsc.numel() < 1:
        raise ValueError(f"{op}: argument 'hash_size_cumsum' must have at least one entry")
    n_feat = hsc.numel() - 1
    if offs.numel() < 1:
        raise ValueError(f"{op}: argument 'offsets' must have at least one entry")
    total_b = offs.numel() - 1
    if n_feat == 0:
        if total_b or idx.numel():
            raise ValueError(
                f"{op}: argument 'hash_size_cumsum' has no feature but 'offsets' "
                f"has {total_b} samples"
            )
        return hsc, hso, offs, idx, 0, 0
    if total_b % n_feat != 0 or (total_b == 0 and idx.numel() > 0):
        raise ValueError(
            f"{op}: argument 'offsets' must hold T * B + 1 entries for T = "
            f"{n_feat} features, got {offs.numel()}"
        )
    if hso.numel() < n_feat + 1:
        raise ValueError(
            f"{op}: argument 'hash_size_offsets' must have at least T + 1 = "
            f"{n_feat + 1} entries, got {hso.numel()}"
        )
    return hsc, hso, offs, idx, n_feat, total_b // n_feat


def _add_checks(
    checks: DataChecks,
    hsc: torch.Tensor,
    hso: torch.Tensor,
    offs: torch.Tensor,
    n_idx: int,
    n_feat: int,
) -> None:
    """The contract in the module docstring; 5 reductions / differences."""
    checks.add(offs[0], 0, 0, "argument 'offsets' must start at 0")
    checks.add(offs[-1], n_idx, n_idx, f"argument 'offsets' must end at indices.numel() ({n_idx})")
    # compared, not subtracted: int32 steps across 2**31 wrap to non-negative ones
    if offs.numel() > 1:
        checks.require(non_decreasing(offs), "argument 'offsets' must be non-decreasing")
    checks.add(hso[0], 0, 0, "argument 'hash_size_offsets' must start at 0")
    what = f"argument 'hash_size_offsets' must reach T ({n_feat}) at entry T"
    checks.add(hso[n_feat], n_feat, n_feat, what)
    what = "argument 'hash_size_offsets' must be non-decreasing"
    checks.require(non_decreasing(hso[: n_feat + 1]), what)
    what = "argument 'hash_size_cumsum' must be non-decreasing"
    checks.require(non_decreasing(hsc), what)


def jagged_unique_indices_npu(
    hash_size_cumsum: torch.Tensor,
    hash_size_offsets: torch.Tensor,
    offsets: torch.Tensor,
    indices: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(output_lengths, output_offsets, unique_indices, reverse_index)``; see the module
    docstring.  ``unique``'s read-back is skipped when ``indices`` is empty.  Launches and syncs:
    ``BUDGETS`` in ``budgets.py`` (docs/ops.md)."""
    hsc, hso, offs, idx, n_feat, batch = _check_args(
        hash_size_cumsum, hash_size_offsets, offsets, indices
    )
    device, dtype = idx.device, idx.dtype
    n_idx = idx.numel()
    checks = DataChecks(JAGGED_UNIQUE_INDICES)
    validate = validation_enabled() and n_feat > 0
    if validate:
        _add_checks(checks, hsc, hso, offs, n_idx, n_feat)
    if n_idx == 0:
        checks.assert_on_device()
        uniq = idx.new_empty((0,))
        reverse = torch.empty(0, dtype=torch.int64, device=device)
        below = filled_i32(n_feat + 1, 0, device)  # no id under any boundary
    else:
        # linearize: the feature of element i is the number of features ending at or before it
        # (feature t ends at offsets[(t + 1) * B]: a strided view, no copy)
        feature = _u.count_le(offs[batch::batch], n_idx, clamp=validate)
        linear = idx + hsc.index_select(0, feature)
        if validate:
            _add_range_checks(checks, hsc, linear, n_feat)
        checks.assert_on_device()
        uniq, reverse, below = _unique_merged(hsc, linear, n_feat, validate)
    lengths = _group_lengths(hso, below, n_feat, batch, dtype, validate)
    zero = arange_cached(1, device, dtype)
    scan = torch.cumsum(lengths, 0, dtype=_u.scan_dtype(n_idx))
    return lengths, torch.cat([zero, scan]).to(dtype), uniq, reverse


def _add_range_checks(
    checks: DataChecks, hsc: torch.Tensor, linear: torch.Tensor, n_feat: int
) -> None:
    """Every linear id at least ``hsc[0]``, ``hsc[0] >= 0``: an id before the first feature
    belongs to no group, so the lengths would not sum to the unique count (ids past ``hsc[T]``
    are the last feature's).  With ``hsc[0] >= 0`` an index whose ``idx + hsc[t]`` wraps lands
    below ``hsc[0]`` and is caught.  ``hsc[T]`` and the largest id at most ``(2**63 - T - 2) /
    (T + 2)``: the merged keys of :func:`_unique_merged` stay in int64.  Launches: ``aminmax``
    and one difference."""
    low, high = torch.aminmax(linear)
    what = "argument 'indices' must lie in its feature's hash range (indices + hash_size_cumsum"
    checks.add(hsc[0], 0, None, "argument 'hash_size_cumsum' must start non-negative")
    checks.add(low - hsc[0], 0, None, f"{what} >= hash_size_cumsum[0])")
    limit = (2**63 - 1 - (n_feat + 1)) // (n_feat + 2)
    what = f"at most (2**63 - T - 2) / (T + 2) ({limit})"
    checks.add(hsc[n_feat], None, limit, f"argument 'hash_size_cumsum' must end {what}")
    # ids at or past hsc[T] are the last feature's (upstream's delinearization), not an error
    checks.add(high, None, limit, f"argument 'indices' + hash_size_cumsum must be {what}")


def _unique_merged(
    hsc: torch.Tensor, linear: torch.Tensor, n_feat: int, validate: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(unique_indices, reverse_index, below)`` from one ``unique`` of the ids merged with the
    feature boundaries, ``below[t]`` the number of unique ids under ``hsc[t]``.

    Keys (int64): id ``x`` is ``x * (T + 2) + T + 1``, boundary ``t`` is ``hsc[t] * (T + 2) +
    t``: a boundary sorts after the ids below its hash value and before those at or above it,
    the boundaries in their own order (``hsc`` does not decrease) and never equal to an id or to
    each other, so the sorted merge holds exactly ``U + T + 1`` keys (``U`` unique ids: known on
    the host from ``unique``'s one read) and boundary ``t`` sits after ``t`` boundaries and
    ``below[t]`` ids.  Unique id ``j`` then sits after boundary 0 (``below[0] = 0``: no id
    under ``hsc[0]``) and its owner's ``o[j] = #{t >= 1 : below[t] <= j}`` boundaries
    (:func:`._utils.count_le`), ``o[j]`` being its owner feature (upstream's delinearization:
    the last feature whose first id is at most it), at place ``j + 1 + o[j]``.  The reverse
    index maps each key's place to its rank among the ids (an ``index_copy_``; validating, the
    index is clamped, as bad data can leave a place unwritten), the unique ids are the ids
    written at their rank.  Launches: two ``add`` (the keys),
    ``unique``, ``sub`` (``below``), ``count_le`` (2; 3 validating), ``add`` (the places),
    ``clamp_max_`` (owners at most ``T - 1``: an id at or past ``hsc[T]`` is the last
    feature's) and ``fill_`` (``below[T]``: every unique id, so the last group counts them),
    ``index_copy`` and a gather (the reverse index), ``index_copy`` of the ids, a gather of the
    owners' first ids, ``sub``: 15.  Without the merge, ``below`` and the owners would take a
    ``searchsorted`` each (AI CPU).
    """
    n, dev = linear.numel(), linear.device
    ar = arange_cached(n_feat + 2, dev)
    keys = torch.empty(n + n_feat + 1, dtype=torch.int64, device=dev)
    torch.add(ar[n_feat + 1 :], linear, alpha=n_feat + 2, out=keys[:n])
    torch.add(ar[: n_feat + 1], hsc, alpha=n_feat + 2, out=keys[n:])
    merged, inverse = torch.unique(keys, sorted=True, return_inverse=True)
    n_unique = merged.numel() - (n_feat + 1)
    below = inverse[n:] - ar[: n_feat + 1]
    boundaries = _u.count_le(below[1:], n_unique, clamp=validate)  # in [0, T] whatever the data
    ranks = arange_cached(n_unique + 1, dev)
    place = ranks[1:] + boundaries
    # an id at or past hsc[T] is the last feature's and counts in the last group (upstream's
    # delinearization and lengths): owners capped at T - 1, below[T] is every unique id
    owner = boundaries.clamp_max_(n_feat - 1)
    below[n_feat:].fill_(n_unique)
    rank_at = torch.empty(merged.numel(), dtype=torch.int64, device=dev)
    reverse = rank_at.index_copy_(0, place, ranks[:-1]).index_select(0, inverse[:n])
    if validate:  # bad data (refused by the checks) may leave a key's place unwritten
        reverse = reverse.clamp_(0, max(n_unique - 1, 0))
    uniq = linear.new_empty((n_unique,)).index_copy_(0, reverse, linear)
    return uniq - hsc.index_select(0, owner), reverse, below


def _group_lengths(
    hso: torch.Tensor,
    below: torch.Tensor,
    n_feat: int,
    batch: int,
    dtype: torch.dtype,
    validate: bool,
) -> torch.Tensor:
    """``output_lengths`` (module docstring) in ``dtype``, from ``below[t]`` (the unique ids
    under ``hsc[t]``).  Launches: the boundaries' gather, ``mul``, ``stack``, ``sub``, ``add_``,
    the group of every feature (:func:`._utils.count_le`, 2), its gather, ``sub``,
    ``floor_divide`` (written in ``dtype``): 10; validating, ``hso`` is clamped into
    ``[0, T]`` and the group sizes to at least 1 (bad data, refused by the checks, then gathers
    and divides harmlessly)."""
    device = below.device
    total_b = n_feat * batch
    if total_b == 0:
        return torch.zeros(0, dtype=dtype, device=device)
    groups = hso[: n_feat + 1]
    if validate:
        groups = groups.clamp(0, n_feat)
    ids_below = below.index_select(0, groups)
    sample_ends = groups * batch
    # per boundary: ids below, samples below, features below; their steps per group are
    # (total_g, n_g, features in g); the feature counts sum to T (hso partitions [0, T])
    stacked = torch.stack([ids_below, sample_ends, groups])
    per_group = stacked[:, 1:] - stacked[:, :-1]
    per_group[0].add_(sample_ends[1:])  # total_g + end_g (the -1 is folded into s + 1 below)
    if validate:
        per_group[1].clamp_min_(1)
    # the group of every feature: the group boundaries after the first at or below it
    feature_group = _u.count_le(groups[1:n_feat], n_feat, clamp=False)  # clamped when validating
    per_feature = per_group[:2].index_select(1, feature_group)
    s1 = arange_cached(total_b + 1, device)[1:].view(n_feat, batch)
    numer = per_feature[0].view(-1, 1) - s1
    # written in dtype by the division itself (an int32 out= of int64 operands: no cast)
    lengths = torch.empty((n_feat, batch), dtype=dtype, device=device)
    return torch.floor_divide(numer, per_feature[1].view(-1, 1), out=lengths).view(-1)


def jagged_unique_indices_fake(
    hash_size_cumsum: torch.Tensor,
    hash_size_offsets: torch.Tensor,
    offsets: torch.Tensor,
    indices: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fake / Meta kernel (upstream has none): lengths ``(T * B,)`` and offsets ``(T * B + 1,)``
    in the index dtype, ``unique_indices`` of a data-dependent size (``new_dynamic_size``, at
    most ``indices.numel()``; 0 without indices), ``reverse_index`` int64 like ``indices``."""
    hsc, _, offs, idx, n_feat, batch = _check_args(
        hash_size_cumsum, hash_size_offsets, offsets, indices
    )
    total_b, n_idx = n_feat * batch, idx.numel()
    n_unique = 0 if n_idx == 0 else _u.dynamic_size(JAGGED_UNIQUE_INDICES, "unique ids", n_idx)
    return (
        idx.new_empty((total_b,)),
        idx.new_empty((total_b + 1,)),
        idx.new_empty((n_unique,)),
        idx.new_empty((n_idx,), dtype=torch.int64),
    )


KERNELS = {
    JAGGED_UNIQUE_INDICES: {
        "PrivateUse1": jagged_unique_indices_npu,
        "Meta": jagged_unique_indices_fake,
    }
}
