"""``fbgemm::transpose_embedding_input`` on npu: the TBE backward's index sort.

Upstream's CPU build has the schema and no kernel (CUDA only:
``src/split_embeddings_utils/transpose_embedding_input.cu``); this is that kernel's math, held
by a reference written from it (``fbgemm_npu/testing/tbe_utils_reference.py``).

Math, for the ``L`` indices (``T = hash_size_cumsum.numel() - 1`` features; ``p`` an index's
position, ``k`` its bag, ``offsets[k] <= p < offsets[k + 1]``):

* feature and sample: VBE ``info = vbe_b_t_map[k]`` (a uint32), ``t = info >> info_B_num_bits``;
  else ``B = total_B // T``, ``t = k // B``, ``b = k % B``; index-select mode: the feature ``t``
  of ``total_L_offsets[t] <= p < total_L_offsets[t + 1]``, ``r = p - total_L_offsets[t]``;
* ``linear_indices[p] = hash_size_cumsum[t] + indices[p]`` (in the indices' dtype);
* ``infos[p]``: pooled, int32 -- the map's ``info`` (VBE) or the uint32 ``(t << info_B_num_bits)
  | b``; ``nobag``, int64 ``p * T + t``; index-select, int64 ``r * T + t``;
* a stable sort of ``(linear_indices, infos)`` by the low ``total_hash_size_bits`` bits of the
  linear index (upstream's radix sort: ``key = linear mod 2**bits``; 63 bits or more: the signed
  value), giving ``linear_indices_sorted`` and ``infos_sorted``;
* run-length encoding of ``linear_indices_sorted`` (full values): ``run`` (the distinct values in
  order), ``run_lengths`` (int32), ``num_runs`` (``[1]`` int32) and the complete cumsum of the
  lengths (int32, one more element); ``N = total_unique_indices`` elements when given, else
  ``L``, the lengths past ``num_runs`` 0.  ``run`` past ``num_runs`` is uninitialised upstream;
  here 0.

Program (no host sync, nothing on a 910B's AI CPU for keys below ``2**48``: no searchsorted,
shift or integer sort): the bag of each index by segment ids (``_index.segment_ids``); ``t`` and
``b`` by ``floor_divide`` / ``remainder`` (no shifts); one gather of ``hash_size_cumsum``; the sort
by :func:`.backward.sort_keys` (float32 keys below ``2**24``, two 24-bit digits below ``2**48``);
runs by an int32 cumsum of "differs from its predecessor" and an int32 ``index_add`` count.
Launches: ``BUDGETS`` (budgets.py).

Checks: metadata (ranks, dtypes: ``offsets``, ``hash_size_cumsum``, ``total_L_offsets`` in the
indices' dtype, as upstream's accessors require; ``vbe_b_t_map`` int32 with a value per bag; the
``info_B_num_bits`` / ``info_B_mask`` / index-select preconditions upstream ``TORCH_CHECK`` s,
as RuntimeError) at no launch; queued data checks (docs/design.md) for what upstream leaves
undefined: offsets that do not start at 0, decrease or end elsewhere than ``L`` (indices in no
bag are never written upstream), a feature of ``vbe_b_t_map`` past ``T``, more runs than
``total_unique_indices`` (upstream writes past its buffers); every gather clamped meanwhile.
"""

from __future__ import annotations

from typing import Any

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    DataChecks,
    check_dtype,
    check_ndim,
    check_same_device,
    non_decreasing,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, filled_i32, segment_ids
from fbgemm_npu.native.fbgemm.tbe.backward import _run_ids, sort_keys

__all__ = ["KERNELS", "TRANSPOSE_EMBEDDING_INPUT"]

TRANSPOSE_EMBEDDING_INPUT = "fbgemm::transpose_embedding_input"
OP = TRANSPOSE_EMBEDDING_INPUT
_U32 = 1 << 32


def _check(
    hash_size_cumsum: torch.Tensor,
    total_hash_size_bits: int,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    nobag: bool,
    vbe_b_t_map: torch.Tensor | None,
    info_B_num_bits: int,
    info_B_mask: int,
    total_unique_indices: int,
    is_index_select: bool,
    total_L_offsets: torch.Tensor | None,
    fixed_L_per_warp: int,
    num_warps_per_feature: int,
) -> tuple[int, int]:
    """Metadata checks (no launch); returns ``(T, B)`` (``B`` 0 where unused)."""
    vbe = vbe_b_t_map is not None
    if not (nobag or not vbe or info_B_num_bits > 0):
        raise RuntimeError(f"{OP}: argument 'info_B_num_bits' must be > 0 with a vbe_b_t_map")
    if vbe and info_B_mask <= 0:
        raise RuntimeError(f"{OP}: argument 'info_B_mask' must be > 0 with a vbe_b_t_map")
    if is_index_select and (fixed_L_per_warp <= 0 or num_warps_per_feature <= 0):
        raise RuntimeError(
            f"{OP}: arguments 'fixed_L_per_warp' and 'num_warps_per_feature' must be > 0 "
            "with is_index_select"
        )
    for arg, t in (("hash_size_cumsum", hash_size_cumsum), ("indices", indices)):
        check_ndim(OP, arg, t, (1,))
    check_dtype(OP, "indices", indices, INDEX_DTYPES)
    T = hash_size_cumsum.numel() - 1
    if T < 1:
        raise ValueError(f"{OP}: argument 'hash_size_cumsum' must have T + 1 >= 2 elements")
    named = {"hash_size_cumsum": hash_size_cumsum, "offsets": offsets}
    if is_index_select:
        if total_L_offsets is None or total_L_offsets.numel() != T + 1:
            raise RuntimeError(
                f"{OP}: argument 'total_L_offsets' must be given with is_index_select, with T + 1 "
                f"= {T + 1} elements"
            )
        named = {"hash_size_cumsum": hash_size_cumsum, "total_L_offsets": total_L_offsets}
    for arg, t in named.items():
        check_ndim(OP, arg, t, (1,))
        if t.dtype != indices.dtype:  # upstream's accessors read them as the indices' type
            raise RuntimeError(
                f"{OP}: argument '{arg}' must have the indices' dtype {indices.dtype}, got "
                f"{t.dtype}"
            )
    if not 0 <= total_hash_size_bits <= 64:
        raise ValueError(f"{OP}: argument 'total_hash_size_bits' must be in [0, 64]")
    if total_unique_indices < -1:
        raise RuntimeError(f"{OP}: argument 'total_unique_indices' must be -1 or >= 0")
    check_same_device(
        OP, indices=indices, offsets=offsets, hash_size_cumsum=hash_size_cumsum,
        vbe_b_t_map=vbe_b_t_map, total_L_offsets=total_L_offsets,
    )  # fmt: skip
    if is_index_select:
        return T, 0
    if offsets.numel() < 1:
        raise ValueError(f"{OP}: argument 'offsets' must have at least one element")
    total_B = offsets.numel() - 1
    if vbe:
        assert vbe_b_t_map is not None
        check_ndim(OP, "vbe_b_t_map", vbe_b_t_map, (1,))
        check_dtype(OP, "vbe_b_t_map", vbe_b_t_map, (torch.int32,))
        if vbe_b_t_map.numel() < total_B or (not nobag and not 0 < info_B_num_bits < 32):
            raise ValueError(
                f"{OP}: argument 'vbe_b_t_map' must hold one info per bag ({total_B}), with "
                "'info_B_num_bits' in (0, 32)"
            )
        return T, 0
    B = total_B // T
    if total_B % T != 0 or (total_B > 0 and B == 0):  # upstream would read past its buffers
        raise ValueError(
            f"{OP}: argument 'offsets' must hold B * T + 1 elements (B >= 1 bags of each of the "
            f"T = {T} features), got {offsets.numel()}"
        )
    if not nobag and not (0 <= info_B_num_bits < 32 and B <= 1 << info_B_num_bits):
        raise ValueError(
            f"{OP}: argument 'info_B_num_bits' ({info_B_num_bits}) leaves no room for batch "
            f"size {B} in the 32-bit infos"
        )
    return T, B


def _features(
    indices: torch.Tensor,
    offsets: torch.Tensor,
    T: int,
    B: int,
    nobag: bool,
    vbe_b_t_map: torch.Tensor | None,
    info_B_num_bits: int,
    is_index_select: bool,
    total_L_offsets: torch.Tensor | None,
    cover: int,
    checks: DataChecks,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(t, infos)``: each index's feature (int64 or int32, in ``[0, T]``) and its info."""
    L = indices.numel()
    dev = indices.device
    if is_index_select:
        assert total_L_offsets is not None
        t = segment_ids(total_L_offsets, L)  # T past the last feature
        rel = arange_cached(L, dev) - total_L_offsets.index_select(0, t).to(torch.int64)
        if validation_enabled():  # what upstream leaves unwritten: positions no warp covers
            checks.add(total_L_offsets[0], 0, 0, "argument 'total_L_offsets' must start at 0")
            checks.add(total_L_offsets[-1], L, L, f"argument 'total_L_offsets' must end at {L}")
            checks.require(non_decreasing(total_L_offsets), "'total_L_offsets' non-decreasing")
            checks.add(rel.amax(), None, cover - 1, "argument 'total_L_offsets' holds a "
                       "feature longer than fixed_L_per_warp x num_warps_per_feature")  # fmt: skip
        return t, torch.add(t, rel, alpha=T)  # r * T + t, int64
    total_B = offsets.numel() - 1
    if validation_enabled():
        checks.add(offsets[0], 0, 0, "argument 'offsets' must start at 0")
        checks.add(offsets[-1], L, L, f"argument 'offsets' must end at indices.numel() = {L}")
        checks.require(non_decreasing(offsets), "argument 'offsets' must not decrease")
    bag = segment_ids(offsets, L)  # int32, total_B past offsets[-1]
    if vbe_b_t_map is not None:
        info = vbe_b_t_map.index_select(0, bag.clamp(max=max(total_B - 1, 0)))
        # uint32 info >> bits, without a shift (a 910B has none): (info mod 2**32) // 2**bits
        t = torch.div(
            torch.remainder(info.to(torch.int64), _U32), 1 << info_B_num_bits, rounding_mode="floor"
        )
        if validation_enabled():
            checks.add(t.amax(), None, T, f"argument 'vbe_b_t_map' names a feature past T = {T}")
        t = t.clamp(max=T)
        if nobag:
            return t, torch.add(t, arange_cached(L, dev), alpha=T)
        return t, info
    t = torch.div(bag, max(B, 1), rounding_mode="floor")  # <= T: total_B = B * T
    if nobag:
        return t, torch.add(t, arange_cached(L, dev), alpha=T)  # p * T + t, int64
    b = torch.remainder(bag, max(B, 1))
    if (T + 1) << info_B_num_bits < 1 << 31:  # (t << bits) | b fits an int32: b < 2**bits
        return t, torch.add(b, t, alpha=1 << info_B_num_bits)
    # the uint32 wraps into the int32's sign: (t * 2**bits + b) mod 2**32, minus 2**32 at 2**31
    v = torch.remainder(torch.add(b.to(torch.int64), t, alpha=1 << info_B_num_bits), _U32)
    return t, torch.where(v >= 1 << 31, v - _U32, v).to(torch.int32)


def transpose_embedding_input_npu(
    hash_size_cumsum: torch.Tensor,
    total_hash_size_bits: int,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    nobag: bool = False,
    vbe_b_t_map: torch.Tensor | None = None,
    info_B_num_bits: int = 26,
    info_B_mask: int = 0,
    total_unique_indices: int = -1,
    is_index_select: bool = False,
    total_L_offsets: torch.Tensor | None = None,
    fixed_L_per_warp: int = 0,
    num_warps_per_feature: int = 0,
) -> tuple[torch.Tensor, ...]:
    """The sorted, run-length-encoded linear indices of a TBE batch (see the module docstring).
    Returns ``(linear_indices, linear_indices_sorted, infos_sorted, run, run_lengths, num_runs,
    cumulative_run_lengths)``.  Dtypes: indices int32 / int64 (``hash_size_cumsum``, ``offsets``
    alike); infos int32 pooled, int64 ``nobag`` / index-select."""
    T, B = _check(
        hash_size_cumsum, total_hash_size_bits, indices, offsets, nobag, vbe_b_t_map,
        info_B_num_bits, info_B_mask, total_unique_indices, is_index_select, total_L_offsets,
        fixed_L_per_warp, num_warps_per_feature,
    )  # fmt: skip
    L, dev = indices.numel(), indices.device
    N = L if total_unique_indices < 0 else total_unique_indices
    wide = nobag or is_index_select
    if L == 0:  # no index: no run (upstream's run values are uninitialised: 0 here)
        i32 = torch.int32
        return (
            indices.new_empty((0,)),
            indices.new_empty((0,)),
            torch.empty((0,), dtype=torch.int64 if wide else i32, device=dev),
            indices.new_zeros((N,)),
            torch.zeros((N,), dtype=i32, device=dev),
            torch.zeros((1,), dtype=i32, device=dev),
            torch.zeros((N + 1,), dtype=i32, device=dev),
        )
    checks = DataChecks(OP)
    indices = indices.contiguous()
    t, infos = _features(
        indices, offsets, T, B, nobag, vbe_b_t_map, info_B_num_bits, is_index_select,
        total_L_offsets, fixed_L_per_warp * num_warps_per_feature, checks,
    )  # fmt: skip
    linear = torch.add(hash_size_cumsum.index_select(0, t), indices)  # t in [0, T]
    bits = total_hash_size_bits
    if bits >= (63 if indices.dtype == torch.int64 else 32):  # the sign bit: signed order
        perm = torch.sort(linear, stable=True).indices  # an integer sort: a 910B's AI CPU
    else:  # upstream's radix sort reads the low `bits` bits: the key mod 2**bits
        perm = sort_keys(torch.remainder(linear.to(torch.int64), 1 << bits), 1 << bits)[1]
    linear_sorted = linear.index_select(0, perm)
    infos_sorted = infos.index_select(0, perm)
    run = _run_ids(linear_sorted, torch.int32)  # [L], from 1
    if N < L:
        if validation_enabled():
            checks.add(run[-1], None, N, "argument 'total_unique_indices' is less than the "
                       "number of distinct linear indices")  # fmt: skip
        run = run.clamp(max=N)  # upstream writes past its buffers: stay inside ours
    counts = torch.index_add(filled_i32(N + 1, 0, dev), 0, run, filled_i32(L, 1, dev))
    cumulative = torch.cumsum(counts, 0, dtype=torch.int32)  # [N + 1]: 0, then the ends
    lengths = counts[1:]
    first = linear_sorted.index_select(0, cumulative[:N].clamp(max=L - 1))
    zero = arange_cached(1, dev, first.dtype)[0]  # cached: a Python 0 would cost a fill
    values = torch.where(lengths > 0, first, zero)  # 0 past the runs (upstream: uninitialised)
    checks.assert_on_device()
    return linear, linear_sorted, infos_sorted, values, lengths, run[-1:], cumulative


def transpose_embedding_input_meta(
    hash_size_cumsum: torch.Tensor,
    total_hash_size_bits: int,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    nobag: bool = False,
    vbe_b_t_map: torch.Tensor | None = None,
    info_B_num_bits: int = 26,
    info_B_mask: int = 0,
    total_unique_indices: int = -1,
    is_index_select: bool = False,
    total_L_offsets: torch.Tensor | None = None,
    fixed_L_per_warp: int = 0,
    num_warps_per_feature: int = 0,
) -> tuple[torch.Tensor, ...]:
    """Meta kernel (upstream registers none): shapes and dtypes, and the kernel's views -- the
    run lengths are ``counts[1:]`` of the ``[N + 1]`` counts, ``num_runs`` the last of the ``[L]``
    run ids (storage offsets 1 and ``L - 1``), fresh tensors for ``L = 0``."""
    L = indices.shape[0]
    N = L if total_unique_indices < 0 else total_unique_indices
    wide = nobag or is_index_select
    infos = indices.new_empty((L,), dtype=torch.int64 if wide else torch.int32)
    i32 = torch.int32
    if L == 0:
        lengths, num_runs = indices.new_empty((N,), dtype=i32), indices.new_empty((1,), dtype=i32)
    else:
        lengths = indices.new_empty((N + 1,), dtype=i32)[1:]
        num_runs = indices.new_empty((L,), dtype=i32)[L - 1 :]
    return (
        indices.new_empty((L,)),
        indices.new_empty((L,)),
        infos,
        indices.new_empty((N,)),
        lengths,
        num_runs,
        indices.new_empty((N + 1,), dtype=i32),
    )


KERNELS: dict[str, dict[str, Any]] = {
    TRANSPOSE_EMBEDDING_INPUT: {
        "PrivateUse1": transpose_embedding_input_npu,
        "Meta": transpose_embedding_input_meta,
    },
}
