"""The TBE metadata ops held to their BUDGETS entries: ``bounds_check_indices`` in every mode,
``get_infos_metadata`` and ``generate_vbe_metadata``; none grows with the number of tables, and
VBE has paths of its own.  Each call is measured after a warm-up call (the first one grows a
cached workspace), and held to exactly its budget: these entries are the measured counts."""

from __future__ import annotations

import pytest
import torch
from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode

from fbgemm_npu.testing.budgets import assert_op_budget
from fbgemm_npu.testing.tbe_inputs import NPU

BOUNDS = "fbgemm::bounds_check_indices"
# The budget path of each mode: the V2 values do nothing in the op (upstream's Python handles
# them), like NONE.
MODE_PATHS = {
    BoundsCheckMode.WARNING: None,
    BoundsCheckMode.IGNORE: "ignore",
    BoundsCheckMode.FATAL: "fatal",
    BoundsCheckMode.NONE: "none",
    BoundsCheckMode.V2_IGNORE: "none",
    BoundsCheckMode.V2_WARNING: "none",
    BoundsCheckMode.V2_FATAL: "none",
}


def bounds_check_call(mode: BoundsCheckMode, T: int, vbe: bool) -> object:
    """A call on valid indices (FATAL must not raise) of ``T`` tables, 3 bags each."""
    B, L = 3, 2
    rows = torch.full((T,), 10, device=NPU)
    gen = torch.Generator().manual_seed(T)
    idx = torch.randint(0, 10, (T * B * L,), generator=gen).to(NPU)
    off = torch.arange(0, T * B * L + 1, L).to(NPU)
    warning = torch.zeros(1, dtype=torch.int64, device=NPU)
    b_offsets = torch.arange(0, T * B + 1, B, dtype=torch.int32).to(NPU) if vbe else None

    def call() -> None:
        torch.ops.fbgemm.bounds_check_indices(
            rows, idx, off, mode.value, warning, None, B_offsets=b_offsets, max_B=B if vbe else -1
        )

    return call


def budget_path(mode: BoundsCheckMode, vbe: bool) -> str | None:
    """The budget path of a mode, and of its VBE call (the features' first offsets are gathered
    by ``B_offsets``, after a clamp: 2 launches more) where the mode does anything."""
    path = MODE_PATHS[mode]
    if not vbe or path == "none":
        return path
    return "vbe" if path is None else f"vbe_{path}"


def held_bounds_check(mode: BoundsCheckMode, T: int, vbe: bool) -> tuple[int, int, int]:
    call = bounds_check_call(mode, T, vbe)
    call()  # warm-up
    # FATAL's raise is the mode's contract, data checks on or off: its flag is queued either way
    c = assert_op_budget(call, BOUNDS, path=budget_path(mode, vbe), exact=True)
    return c.launches, c.syncs, c.ai_cpu


@pytest.mark.parametrize("mode", list(BoundsCheckMode), ids=lambda m: m.name)
def test_bounds_check_indices_budget(mode: BoundsCheckMode) -> None:
    """Per mode, the data check (FATAL's device-side assert) included: the same for 1 table and
    32 tables, with VBE and without (each its own path); no AI-CPU launch."""
    for vbe in (False, True):
        counts = {held_bounds_check(mode, T, vbe) for T in (1, 32)}
        assert len(counts) == 1, counts
        assert counts.pop()[2] == 0


@pytest.mark.parametrize("mode", list(BoundsCheckMode), ids=lambda m: m.name)
def test_bounds_check_indices_budget_without_data_checks(
    no_validation: None, mode: BoundsCheckMode
) -> None:
    for vbe in (False, True):
        counts = {held_bounds_check(mode, T, vbe) for T in (1, 32)}
        assert len(counts) == 1, counts


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("mode", [BoundsCheckMode.WARNING, BoundsCheckMode.FATAL], ids=str)
def test_bounds_check_indices_budget_of_each_index_dtype(
    dtype: torch.dtype, mode: BoundsCheckMode
) -> None:
    """int32 and int64 indices and offsets alike: the same launches, none on the AI CPU (int64
    is where masked_fill_, cumsum and index_add would go to it)."""
    B, L, T = 3, 2, 4
    rows = torch.full((T,), 10, device=NPU)
    idx = torch.randint(0, 10, (T * B * L,), generator=torch.Generator().manual_seed(1))
    idx, off = idx.to(dtype).to(NPU), torch.arange(0, T * B * L + 1, L, dtype=dtype).to(NPU)
    warning = torch.zeros(1, dtype=torch.int64, device=NPU)

    def call() -> None:
        torch.ops.fbgemm.bounds_check_indices(rows, idx, off, mode.value, warning, None)

    call()
    c = assert_op_budget(call, BOUNDS, path=MODE_PATHS[mode], exact=True)
    assert c.ai_cpu == 0, [e.name for e in c.events if e.ai_cpu]


def test_get_infos_metadata_budget() -> None:
    d_offsets = torch.tensor([0, 4, 12, 24], dtype=torch.int32, device=NPU)
    c = assert_op_budget(
        lambda: torch.ops.fbgemm.get_infos_metadata(d_offsets, 13, 3),
        "fbgemm::get_infos_metadata",
        exact=True,
    )
    assert c.result == torch.ops.fbgemm.get_infos_metadata(d_offsets.cpu(), 13, 3)


def vbe_metadata_call(batch_sizes: list[list[int]], dims: list[int]) -> object:
    """``generate_vbe_metadata`` of features with ``batch_sizes[t][r]`` bags on rank ``r``."""
    T, R = len(batch_sizes), len(batch_sizes[0])
    d_offsets = torch.tensor([0, *torch.tensor(dims).cumsum(0).tolist()], dtype=torch.int32)
    per_feature = [sum(b) for b in batch_sizes]
    b_offsets = torch.tensor([0, *torch.tensor(per_feature).cumsum(0).tolist()], dtype=torch.int32)
    brpf = torch.tensor(
        [[0, *torch.tensor(b).cumsum(0).tolist()] for b in batch_sizes], dtype=torch.int32
    )
    ofr = [0]
    for r in range(R):
        for t in range(T):
            ofr.append(ofr[-1] + batch_sizes[t][r] * dims[t])
    args = [a.to(NPU) for a in (b_offsets, brpf, torch.tensor(ofr), d_offsets)]
    total_B = sum(per_feature)
    num_bits, _ = torch.ops.fbgemm.get_infos_metadata(d_offsets, total_B, T)

    def call() -> object:
        return torch.ops.fbgemm.generate_vbe_metadata(
            *args, max(dims), False, max(max(b) for b in batch_sizes), num_bits, total_B
        )

    return call


def test_generate_vbe_metadata_budget() -> None:
    counts = set()
    for batch_sizes, dims in (
        ([[1, 2, 0], [3, 0, 1], [2, 2, 2]], [4, 8, 12]),
        ([[2, 1]] * 32, [4] * 32),
    ):
        call = vbe_metadata_call(batch_sizes, dims)
        call()  # warm-up
        c = assert_op_budget(call, "fbgemm::generate_vbe_metadata", exact=True)
        counts.add((c.launches, c.syncs))
    assert len(counts) == 1, counts
