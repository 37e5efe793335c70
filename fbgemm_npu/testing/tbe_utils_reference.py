"""References for the TBE utility ops upstream serves on CUDA only (its CPU build has their
schemas and no kernel): ``transpose_embedding_input`` and ``reset_weight_momentum``, written
from the CUDA kernels' math (``src/split_embeddings_utils/transpose_embedding_input.cu``,
``src/split_embeddings_cache/reset_weight_momentum.cu``) as plain loops over host values --
independent of our tensor programs.  Test-only; valid inputs (offsets that cover the indices)."""

from __future__ import annotations

import torch

__all__ = ["reset_weight_momentum_reference", "transpose_embedding_input_reference"]


def _u32_to_i32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _wrap(v: int, dtype: torch.dtype) -> int:
    bits = 64 if dtype == torch.int64 else 32
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def transpose_embedding_input_reference(
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
    """The CUDA kernel's outputs, with ``run`` 0 past ``num_runs`` (uninitialised upstream)."""
    hsc = [int(v) for v in hash_size_cumsum.tolist()]
    idx = [int(v) for v in indices.tolist()]
    T, L, dt = len(hsc) - 1, len(idx), indices.dtype
    linear, infos = [0] * L, [0] * L
    if is_index_select:
        assert total_L_offsets is not None
        tlo = [int(v) for v in total_L_offsets.tolist()]
        for t in range(T):  # warp b of feature t: positions b * fixed + [0, fixed)
            for b in range(num_warps_per_feature):
                lo = b * fixed_L_per_warp
                for r in range(lo, min(lo + fixed_L_per_warp, tlo[t + 1] - tlo[t])):
                    p = tlo[t] + r
                    infos[p] = r * T + t
                    linear[p] = _wrap(hsc[t] + idx[p], dt)
    else:
        off = [int(v) for v in offsets.tolist()]
        total_B = len(off) - 1
        for k in range(total_B):
            if vbe_b_t_map is not None:
                info = int(vbe_b_t_map[k]) & 0xFFFFFFFF
                t, b = info >> info_B_num_bits, info & info_B_mask
            else:
                B = total_B // T
                t, b = k // B, k % B
                info = ((t << info_B_num_bits) | b) & 0xFFFFFFFF
            for p in range(off[k], off[k + 1]):
                infos[p] = p * T + t if nobag else _u32_to_i32(info)
                linear[p] = _wrap(hsc[t] + idx[p], dt)
    bits = total_hash_size_bits
    signed = bits >= (63 if dt == torch.int64 else 32)
    order = sorted(range(L), key=lambda p: linear[p] if signed else linear[p] % (1 << bits))
    srt = [linear[p] for p in order]
    runs: list[int] = []
    lengths: list[int] = []
    for v in srt:  # run-length encoding of the full values
        if runs and runs[-1] == v:
            lengths[-1] += 1
        else:
            runs.append(v)
            lengths.append(1)
    N = L if total_unique_indices < 0 else total_unique_indices
    assert len(runs) <= N
    pad = N - len(runs)
    cum = [0]
    for n in lengths + [0] * pad:
        cum.append(cum[-1] + n)
    i32 = torch.int32
    return (
        torch.tensor(linear, dtype=dt),
        torch.tensor(srt, dtype=dt),
        torch.tensor(
            [infos[p] for p in order], dtype=torch.int64 if nobag or is_index_select else i32
        ),  # fmt: skip
        torch.tensor(runs + [0] * pad, dtype=dt),
        torch.tensor(lengths + [0] * pad, dtype=i32),
        torch.tensor([len(runs)], dtype=i32),
        torch.tensor(cum, dtype=i32),
    )


def reset_weight_momentum_reference(
    weights: torch.Tensor,
    weights_offsets: torch.Tensor,
    momentum1: torch.Tensor,
    momentum1_offsets: torch.Tensor,
    D_offsets: torch.Tensor,
    pruned_indices: torch.Tensor,
    pruned_indices_offsets: torch.Tensor,
    logical_table_ids: torch.Tensor,
    buffer_ids: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weights, momentum1)`` after the reset, on copies: for each pruned table ``i`` (logical
    table ``l = logical_table_ids[i]``, buffer ``u = buffer_ids[i]``) and each pruned index ``p``
    of ``pruned_indices[pio[u] : pio[u + 1]]``: ``momentum1[m_off[l] + p] = 0`` and the first
    ``4 * (D_l // 4)`` elements of row ``p`` (``w_off[l] + p * D_l + d``) set to 0 -- the kernel
    resets rows in chunks of 4, the momentum with the first chunk (none for ``D_l < 4``)."""
    w, m = weights.clone(), momentum1.clone()
    d_off, w_off = D_offsets.tolist(), weights_offsets.tolist()
    m_off, pio, pruned = (
        momentum1_offsets.tolist(),
        pruned_indices_offsets.tolist(),
        pruned_indices.tolist(),
    )
    for logical, u in zip(logical_table_ids.tolist(), buffer_ids.tolist(), strict=True):
        D = d_off[logical + 1] - d_off[logical]
        chunk = 4 * (D // 4)
        for p in pruned[pio[u] : pio[u + 1]]:
            if chunk == 0:
                continue
            m[m_off[logical] + p] = 0
            start = w_off[logical] + p * D
            w[start : start + chunk] = 0
    return w, m
