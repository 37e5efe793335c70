"""TBE metadata ops on npu: ``bounds_check_indices``, ``get_infos_metadata``,
``generate_vbe_metadata``.

Semantics measured on upstream's CPU kernels (fbgemm-gpu-cpu 1.8.0); see each kernel.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    assert_on_device,
    check_dtype,
    check_same_device,
    check_tensor,
)
from fbgemm_npu.native.fbgemm.tbe._utils import arange_cached, segment_ids
from fbgemm_npu.native.fbgemm.tbe.vbe import vbe_row_output_offsets

__all__ = [
    "KERNELS",
    "bounds_check_indices_npu",
    "generate_vbe_metadata_npu",
    "get_infos_metadata_npu",
]

BOUNDS_CHECK_INDICES = "fbgemm::bounds_check_indices"
GET_INFOS_METADATA = "fbgemm::get_infos_metadata"
GENERATE_VBE_METADATA = "fbgemm::generate_vbe_metadata"

FATAL, WARNING, IGNORE = 0, 1, 2
I64 = (torch.int64,)
DEFAULT_INFO_NUM_BITS = 32


def bounds_check_indices_npu(
    rows_per_table: torch.Tensor,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    bounds_check_mode: int,
    warning: torch.Tensor,
    weights: torch.Tensor | None = None,
    B_offsets: torch.Tensor | None = None,
    max_B: int = -1,
    b_t_map: torch.Tensor | None = None,
    info_B_num_bits: int = -1,
    info_B_mask: int = -1,
    bounds_check_version: int = 1,
    prefetch_pipeline: bool = False,
) -> None:
    """Check (FATAL) or repair (WARNING / IGNORE) the indices and offsets of a TBE batch.

    Upstream's CPU semantics, in data-parallel form (``N = indices.numel()``):

    * WARNING / IGNORE first set ``offsets[-1] = N``; the bag offsets are then repaired bag by
      bag, which amounts to ``offsets = cummax(clamp(offsets, 0, N))``;
    * an index of bag ``k`` (feature ``t``) outside ``[0, rows_per_table[t])`` becomes 0;
      ``-1`` (a pruned row) is left alone; indices before ``offsets[0]`` are in no bag;
    * WARNING: ``warning[0]`` = the number of repairs (a wrong last offset, each bag whose start
      < 0, start > end or end > N -- start taken after the previous bag's repair -- and each bad
      index); IGNORE repairs silently; FATAL raises ``RuntimeError`` naming the op and argument
      (through one device-side assert, no host sync) and changes nothing; NONE and the V2 mode
      values (handled by upstream's Python) do nothing.
    * dtypes, as upstream's CPU kernel checks them in every mode: ``rows_per_table`` int64,
      ``indices`` int32 or int64 (``ValueError`` naming the argument otherwise); ``offsets`` of
      any dtype, converted to the indices' dtype as upstream converts them;
    * ``weights``, ``b_t_map``, ``info_B_*``, ``bounds_check_version`` do not change the result;
      int32 indices with int64 offsets repair a converted copy of the offsets, as upstream's
      CPU kernel does, so the caller's offsets stay as they were.

    Launches (WARNING): the repaired offsets (:func:`_repaired_offsets`: a running max without
    ``cummax``, 6), each index's table size (:func:`segment_ids` over the features' first offsets,
    a gather; VBE gathers those offsets by ``B_offsets`` first), the index check (written into
    one flag buffer with the offsets' flags: no ``cat``), the repairs (a ``where`` into
    ``indices``, the offsets' copy) and the count; FATAL repairs nothing, so it
    needs no running max: the offsets are good iff non-decreasing from ``>= 0`` to ``N``, and it
    raises through the device-side assert.  Nothing a 910B runs on its AI CPU (no ``cummax``,
    ``searchsorted`` or int64 ``masked_fill_``), for int32 and int64 inputs alike.  Launches and
    syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    op = BOUNDS_CHECK_INDICES
    # upstream's CPU kernel refuses these dtypes in every mode (NotImplementedError / "expected
    # scalar type Long"): a float index or row count would be truncated, not checked
    check_dtype(op, "rows_per_table", check_tensor(op, "rows_per_table", rows_per_table), I64)
    check_dtype(op, "indices", check_tensor(op, "indices", indices), INDEX_DTYPES)
    check_tensor(op, "offsets", offsets)
    check_same_device(
        op,
        rows_per_table=rows_per_table,
        indices=indices,
        offsets=offsets,
        warning=warning,
        weights=weights,
        B_offsets=B_offsets,
    )
    mode = int(bounds_check_mode)
    if mode not in (FATAL, WARNING, IGNORE):
        return
    T = rows_per_table.numel()
    total_B = offsets.numel() - 1
    if total_B < 0:
        # upstream's CPU kernel reads offsets[-1] regardless (a segfault for empty offsets)
        raise ValueError(f"{op}: argument 'offsets' is empty; it must have B * T + 1 elements")
    if T == 0:
        return
    vbe = B_offsets is not None
    B = total_B // T
    if not vbe and offsets.numel() != B * T + 1:
        raise ValueError(
            f"{op}: argument 'offsets' has {offsets.numel()} elements, but B * T + 1 is expected "
            f"for T = {T} tables (B = {B})"
        )
    N = indices.numel()
    if weights is not None and weights.size(0) != N:
        # RuntimeError: upstream's kernel raises it here ("weights size .. is not equal to ..")
        raise RuntimeError(
            f"{op}: argument 'weights' has {weights.size(0)} elements; it must match "
            f"'indices' ({N})"
        )
    write_offsets = offsets.dtype == indices.dtype
    if mode != FATAL:
        # the repairs are written in place: into a tensor whose elements share memory (an
        # expand()ed one) they cannot be (torch refuses; upstream's kernel would race)
        for arg, t in (("indices", indices), ("offsets", offsets if write_offsets else None)):
            if t is not None and torch._debug_has_internal_overlap(t) == 1:
                raise ValueError(
                    f"{op}: argument '{arg}' has elements that share memory (stride 0, e.g. "
                    "expand()); WARNING and IGNORE repair it in place: pass a contiguous copy"
                )
    o = offsets if write_offsets else offsets.to(indices.dtype)
    n = o.numel()
    # every flag in one bool buffer, the offsets' first, the indices' after: no cat
    flags = torch.empty(n + N + (mode == FATAL), dtype=torch.bool, device=o.device)
    if mode == FATAL:
        # No repair: the offsets are good iff non-decreasing from >= 0 to N -- then they equal
        # their repair, and the bag of each index comes from them (no running max needed)
        fixed = o
        torch.ge(o[1:], o[:-1], out=flags[: n - 1])
        torch.ge(o[:1], 0, out=flags[n - 1 : n])
        torch.eq(o[-1:], N, out=flags[n : n + 1])
        idx_flags = flags[n + 1 :]
    else:
        # Repaired offsets, upstream's bag-by-bag repair: the last one set to N, then a running
        # max of the clamped values (without cummax: the AI CPU)
        fixed = _repaired_offsets(o, N)
        idx_flags = flags[n:]
    # The feature of every index: segment_ids of the features' first offsets (the bag of each
    # index without searchsorted, which a 910B runs on its AI CPU, int32), and its table's size
    if vbe:
        first = fixed.index_select(0, B_offsets.clamp(0, total_B))
    else:
        first = fixed[:: max(B, 1)]  # offsets of bags 0, B, 2B, ...: a view
    t = segment_ids(first, N)
    if vbe or mode == FATAL:
        # past the last feature only through a bad B_offsets or FATAL's unrepaired last offset
        # (a repaired one is N, which no index reaches)
        t = t.clamp_(max=T - 1)
    n_rows = rows_per_table.index_select(0, t)
    # -1 marks a pruned row; indices before offsets[0] are in no bag
    ar = arange_cached(N, o.device, o.dtype)
    if mode == FATAL:
        good = (indices >= -1) & (indices < n_rows)
        torch.bitwise_or(good, ar < fixed[:1], out=idx_flags)
        assert_on_device(
            op,
            flags.all(),
            "argument 'indices' / 'offsets' out of bounds: every index must lie in "
            "[0, rows_per_table[t]) (or be -1), offsets must be non-decreasing within [0, "
            "indices.numel()] and end at indices.numel()",
        )
        return
    bad = (indices < -1) | (indices >= n_rows)
    idx_bad = torch.bitwise_and(bad, ar >= fixed[:1], out=idx_flags)
    # where, not an int64 masked_fill_ (AI CPU); written into the caller's tensor
    zero = arange_cached(1, indices.device, indices.dtype)  # a cached [0]: no fill launch
    torch.where(idx_bad, zero, indices, out=indices)
    if mode == WARNING:
        # The repairs: a wrong last offset (the last flag) and each bag whose start or end
        # moved -- bag k's start is bag k - 1's end, so bag k >= 1 is counted by its end, bag 0
        # by either, once: its start's flag keeps only a start that moved alone -- and each
        # bad index.
        torch.ne(o, fixed, out=flags[:n])
        if n >= 3:
            torch.gt(flags[:1], flags[1:2], out=flags[:1])
        warning.copy_(flags.sum().reshape(warning.shape))
    if write_offsets:
        offsets.copy_(fixed)


# The running max of the offsets repair: S windowed max passes of radix q, q ** S >= n.
# Three passes up to 64 ** 3 bags keep the launch count independent of the batch.
_SCAN_PASSES, _SCAN_RADIX = 3, 64


def _scan_shape(n: int) -> tuple[int, int]:
    """``(passes, radix)`` of the running max of ``n`` values: 3 passes while ``n <= 64 ** 3``
    (the radix the smallest that covers ``n``, so each pass reads ``q n`` values), one more per
    factor of 64 beyond."""
    passes = _SCAN_PASSES
    while _SCAN_RADIX**passes < n:
        passes += 1
    q = 2
    while q**passes < n:
        q += 1
    return passes, q


def _repaired_offsets(o: torch.Tensor, N: int) -> torch.Tensor:
    """``cummax(clamp(o, 0, N) with its last element set to N)``: upstream's bag-by-bag repair
    of the offsets (WARNING / IGNORE), on the AI Core: ``cummax`` has no AI-Core kernel on a
    910B (docs/hardware.md).

    A running max of non-negative values by windowed max passes: pass ``i`` takes, at every
    position ``k``, the ``amax`` of the values at ``k, k - s, ..., k - (q - 1) s`` with ``s =
    q ** i`` -- an overlapping strided view of a buffer whose first ``P`` elements are zeros
    (the max's neutral element here) -- so after pass ``i`` each position holds the max of its
    last ``q ** (i + 1)`` values, and after ``S`` passes (``q ** S >= n``) of all before it.
    Two buffers alternate; the last pass writes the result.  Launches: the zero prefixes, the
    clamp, the last offset, ``S`` amax (3 up to ``64 ** 3`` offsets); each pass reads ``q n``
    values.
    """
    n = o.numel()
    S, q = _scan_shape(n)
    P = (q - 1) * q ** (S - 1)  # the farthest any pass looks back
    buf = torch.empty((2, P + n), dtype=o.dtype, device=o.device)
    buf[:, :P].zero_()
    torch.clamp(o, 0, N, out=buf[0, P:])
    buf[0, -1:].fill_(N)
    for i in range(S - 1):
        torch.amax(_window(buf[i % 2], n, q, q**i, P), 1, out=buf[(i + 1) % 2, P:])
    return torch.amax(_window(buf[(S - 1) % 2], n, q, q ** (S - 1), P), 1)


def _window(src: torch.Tensor, n: int, q: int, s: int, P: int) -> torch.Tensor:
    """``[n, q]`` view: row ``k`` holds ``src[P + k - m s]`` for ``m = q - 1, ..., 0``."""
    return src.as_strided((n, q), (1, s), src.storage_offset() + P - (q - 1) * s)


def _num_bits(n: int) -> int:
    return n.bit_length()


def get_infos_metadata_npu(unused: torch.Tensor, B: int, T: int) -> tuple[int, int]:
    """``(info_B_num_bits, info_B_mask)``: the bits of a 32-bit (feature, sample) code left for
    the sample once the feature takes ``bit_length(T)`` bits (upstream's CPU rule).

    Raises ``RuntimeError`` when ``B`` does not fit.  Host arithmetic only: nothing runs on the
    device.
    """
    op = GET_INFOS_METADATA
    if B <= 0 or T <= 0:
        raise RuntimeError(f"{op}: arguments 'B' and 'T' must be positive, got B={B}, T={T}")
    num_bits = DEFAULT_INFO_NUM_BITS - _num_bits(T)
    mask = (1 << num_bits) - 1
    if B > mask:
        raise RuntimeError(
            f"{op}: not enough bits for T = {T} and B = {B}: T takes {_num_bits(T)} bits, "
            f"leaving {num_bits} for B (max {mask})"
        )
    return num_bits, mask


def generate_vbe_metadata_npu(
    B_offsets: torch.Tensor,
    B_offsets_rank_per_feature: torch.Tensor,
    output_offsets_feature_rank: torch.Tensor,
    D_offsets: torch.Tensor,
    D: int,
    nobag: bool,
    max_B_feature_rank: int,
    info_B_num_bits: int,
    total_B: int,
    vbe_output_offsets: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-bag VBE metadata ``(row_output_offsets, b_t_map)``, ``total_B`` entries each.

    Bag ``k`` of feature ``t``, rank ``r``, local sample ``b``:
    ``row_output_offsets[k] = output_offsets_feature_rank[r * T + t] + b * D_t`` (int64) and
    ``b_t_map[k] = (t << info_B_num_bits) | (k - B_offsets[t])`` (int32 bit pattern).  A given
    ``vbe_output_offsets`` replaces the first output.  ``D`` and ``nobag`` are unused, as on
    upstream's CPU.  Launches: the per-bag output offsets (as the forward's VBE path builds
    them) and ``b_t_map``.  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    op = GENERATE_VBE_METADATA
    if B_offsets.dim() != 1 or B_offsets_rank_per_feature.dim() != 2:
        raise ValueError(
            f"{op}: arguments 'B_offsets' and 'B_offsets_rank_per_feature' must be 1-D and 2-D"
        )
    T = B_offsets.numel() - 1
    R = B_offsets_rank_per_feature.size(1) - 1
    if T <= 0 or R <= 0 or D_offsets.numel() != T + 1:
        raise ValueError(
            f"{op}: argument 'B_offsets' / 'B_offsets_rank_per_feature' / 'D_offsets' describe "
            f"T={T} features and {R} ranks; both must be positive and D_offsets must have T + 1 "
            "entries"
        )
    if output_offsets_feature_rank.numel() != R * T + 1:
        raise ValueError(
            f"{op}: argument 'output_offsets_feature_rank' must have num_ranks * T + 1 = "
            f"{R * T + 1} entries, got {output_offsets_feature_rank.numel()}"
        )
    if vbe_output_offsets is not None and vbe_output_offsets.numel() != total_B:
        raise ValueError(
            f"{op}: argument 'vbe_output_offsets' must have total_B = {total_B} entries"
        )
    dims = (D_offsets[1:] - D_offsets[:-1]).to(torch.int64)
    rows, ids = vbe_row_output_offsets(
        B_offsets, B_offsets_rank_per_feature, output_offsets_feature_rank, dims, total_B
    )
    # a real bag's block id is (R + 1) t + r with r < R (.vbe)
    t = torch.div(ids[:total_B], R + 1, rounding_mode="floor")
    b = arange_cached(total_B, ids.device) - B_offsets.index_select(0, t)
    b_t_map = torch.add(b, t, alpha=1 << info_B_num_bits).to(torch.int32)
    if rows.dtype != output_offsets_feature_rank.dtype:
        rows = rows.to(output_offsets_feature_rank.dtype)
    return (rows if vbe_output_offsets is None else vbe_output_offsets), b_t_map


KERNELS = {
    BOUNDS_CHECK_INDICES: {"PrivateUse1": bounds_check_indices_npu},
    GET_INFOS_METADATA: {"PrivateUse1": get_infos_metadata_npu},
    GENERATE_VBE_METADATA: {"PrivateUse1": generate_vbe_metadata_npu},
}
