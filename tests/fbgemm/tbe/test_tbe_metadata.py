"""The TBE metadata ops on npu against upstream's CPU kernels: ``bounds_check_indices`` in every
BoundsCheckMode on random (often broken) indices and offsets, VBE included, with the errors
naming op and argument; ``get_infos_metadata`` and ``generate_vbe_metadata``."""

from __future__ import annotations

import pytest
import torch
from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode

import fbgemm_npu
from fbgemm_npu.testing.tbe_inputs import NPU


def _bounds_check(
    mode: int,
    idx: torch.Tensor,
    off: torch.Tensor,
    rows: torch.Tensor,
    device: str,
    B_offsets: torch.Tensor | None = None,
) -> object:
    """``(indices, offsets, warning)`` after the check on ``device``, or ``"raises"``."""
    idx, off = idx.clone().to(device), off.clone().to(device)
    warn = torch.zeros(1, dtype=torch.int64, device=device)
    try:
        torch.ops.fbgemm.bounds_check_indices(
            rows.to(device),
            idx,
            off,
            mode,
            warn,
            None,
            B_offsets=None if B_offsets is None else B_offsets.to(device),
            max_B=-1 if B_offsets is None else 8,
        )
        fbgemm_npu.check()  # where a caller reads the result: the data checks deferred
    except RuntimeError:
        return "raises"
    return idx.tolist(), off.tolist(), warn.tolist()


@pytest.mark.parametrize("mode", [m.value for m in BoundsCheckMode])
def test_bounds_check_indices_matches_upstream_cpu(mode: int) -> None:
    g = torch.Generator().manual_seed(mode)
    for _ in range(40):
        T, B = (
            int(torch.randint(1, 4, (1,), generator=g)),
            int(torch.randint(1, 4, (1,), generator=g)),
        )
        N = int(torch.randint(0, 12, (1,), generator=g))
        rows = torch.randint(1, 6, (T,), generator=g)
        idx = torch.randint(-2, 7, (N,), generator=g)
        off = torch.sort(torch.randint(0, N + 1, (T * B + 1,), generator=g)).values
        # upstream's CPU kernel reads indices through unrepaired offsets in modes NONE / V2_*
        # (it segfaults on broken ones): break offsets only where it repairs or raises
        if mode <= BoundsCheckMode.IGNORE.value and torch.rand(1, generator=g) < 0.6:
            off[torch.randint(0, T * B + 1, (1,), generator=g)] = torch.randint(
                -3, N + 4, (1,), generator=g
            )
        vbe = None
        if torch.rand(1, generator=g) < 0.3:  # VBE: the same bags, per-feature counts
            vbe = torch.tensor([0, *[B * (t + 1) for t in range(T)]], dtype=torch.int32)
        expected = _bounds_check(mode, idx, off, rows, "cpu", vbe)
        assert _bounds_check(mode, idx, off, rows, "npu", vbe) == expected, (idx, off, rows)


@pytest.mark.parametrize("validate", ["1", "0"])
def test_bounds_check_fatal_names_op_and_argument(
    validate: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FATAL raising is the mode's contract, not our validation: FBGEMM_NPU_VALIDATE=0 keeps it."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", validate)
    idx = torch.tensor([0, 9], device=NPU)
    off = torch.tensor([0, 1, 2], device=NPU)
    warn = torch.zeros(1, dtype=torch.int64, device=NPU)
    rows = torch.tensor([5, 5], device=NPU)
    with pytest.raises(RuntimeError, match="bounds_check_indices: argument 'indices'"):
        torch.ops.fbgemm.bounds_check_indices(rows, idx, off, 0, warn)
        fbgemm_npu.check()  # FATAL's assert is queued like any data check
    with pytest.raises(ValueError, match="bounds_check_indices: argument 'offsets'"):
        torch.ops.fbgemm.bounds_check_indices(rows, idx, off[:2], 1, warn)


@pytest.mark.parametrize(
    ("rows", "idx", "arg"),
    [
        ([4, 3], [1.0, 5.0, 2.0], "indices"),
        ([4, 3], torch.tensor([1, 5, 2], dtype=torch.float64), "indices"),
        ([4.5, 3.0], [1, 5, 2], "rows_per_table"),
        (torch.tensor([4.0, 3.0], dtype=torch.float64), [1, 5, 2], "rows_per_table"),
        (torch.tensor([4, 3], dtype=torch.int32), [1, 5, 2], "rows_per_table"),
    ],
)
@pytest.mark.parametrize("mode", [m.value for m in BoundsCheckMode])
def test_bounds_check_refuses_the_dtypes_upstream_refuses(
    mode: int, rows: object, idx: object, arg: str
) -> None:
    """Upstream's CPU kernel refuses non-int64 row counts and non-integer indices in every mode
    (a float would be truncated, not checked): ours raises a ValueError naming the argument."""
    rows_t, idx_t = torch.as_tensor(rows), torch.as_tensor(idx)
    off = torch.tensor([0, 1, 3])
    with pytest.raises(RuntimeError):
        torch.ops.fbgemm.bounds_check_indices(rows_t, idx_t, off, mode, torch.zeros(1).long())
    warn = torch.zeros(1, dtype=torch.int64, device=NPU)
    with pytest.raises(ValueError, match=f"bounds_check_indices: argument '{arg}' must have dtype"):
        torch.ops.fbgemm.bounds_check_indices(
            rows_t.to(NPU), idx_t.to(NPU), off.to(NPU), mode, warn
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bounds_check_takes_float_offsets_like_upstream(dtype: torch.dtype) -> None:
    """Upstream converts float offsets to the indices' dtype (and writes nothing back)."""
    idx, rows = torch.tensor([1, 5, 2, 1, 0]), torch.tensor([4, 3])
    off = torch.tensor([0, 1.5, 7], dtype=dtype)
    for mode in (BoundsCheckMode.WARNING.value, BoundsCheckMode.FATAL.value):
        expected = _bounds_check(mode, idx, off, rows, "cpu")
        assert _bounds_check(mode, idx, off, rows, "npu") == expected


def test_vbe_and_infos_metadata_match_upstream_cpu() -> None:
    bs = [[1, 2, 0], [3, 0, 1], [2, 2, 2]]
    dims = [4, 8, 12]
    T, R = len(bs), len(bs[0])
    D_offsets = torch.tensor([0, 4, 12, 24], dtype=torch.int32)
    B_offsets = torch.tensor([0, 3, 7, 13], dtype=torch.int32)
    brpf = torch.tensor([[0, *torch.tensor(b).cumsum(0).tolist()] for b in bs], dtype=torch.int32)
    ofr = [0]
    for r in range(R):
        for t in range(T):
            ofr.append(ofr[-1] + bs[t][r] * dims[t])
    args = (B_offsets, brpf, torch.tensor(ofr), D_offsets)
    nb, mask = torch.ops.fbgemm.get_infos_metadata(D_offsets, 13, T)
    assert torch.ops.fbgemm.get_infos_metadata(D_offsets.to(NPU), 13, T) == (nb, mask)
    expected = torch.ops.fbgemm.generate_vbe_metadata(*args, 12, False, 3, nb, 13)
    actual = torch.ops.fbgemm.generate_vbe_metadata(
        *[a.to(NPU) for a in args], 12, False, 3, nb, 13
    )
    for a, e in zip(actual, expected, strict=True):
        assert a.device.type == "npu" and a.dtype == e.dtype
        assert torch.equal(a.cpu(), e)


def _checked(mode: int, idx: torch.Tensor, off: torch.Tensor, rows: torch.Tensor,
             device: str, B_offsets: torch.Tensor | None, max_B: int) -> object:  # fmt: skip
    """:func:`_bounds_check` with VBE's ``max_B``, FATAL's flag read by ``fbgemm_npu.check``."""
    idx, off = idx.clone().to(device), off.clone().to(device)
    warn = torch.zeros(1, dtype=torch.int64, device=device)
    try:
        torch.ops.fbgemm.bounds_check_indices(
            rows.to(device), idx, off, mode, warn, None,
            B_offsets=None if B_offsets is None else B_offsets.to(device), max_B=max_B,
        )  # fmt: skip
        fbgemm_npu.check()
    except RuntimeError:
        return "raises"
    return idx.tolist(), off.tolist(), warn.tolist()


@pytest.mark.parametrize("mode", [BoundsCheckMode.FATAL, BoundsCheckMode.WARNING,
                                  BoundsCheckMode.IGNORE], ids=lambda m: m.name)  # fmt: skip
def test_bounds_check_repairs_broken_offsets_like_upstream_cpu(mode: BoundsCheckMode) -> None:
    """Offsets broken in several places at once (below 0, past N, decreasing, a wrong last
    one), no bags at all, int32 and int64, VBE with per-feature batch sizes that differ (empty
    features included): the repair (a running max without cummax), the feature of each index
    (segment ids of the features' first offsets) and the count equal upstream's."""
    g = torch.Generator().manual_seed(10 + mode.value)
    for it in range(150):
        T = int(torch.randint(1, 5, (1,), generator=g))
        B = int(torch.randint(0, 4, (1,), generator=g))
        N = int(torch.randint(0, 15, (1,), generator=g))
        dtype = (torch.int32, torch.int64)[it % 2]
        rows = torch.randint(1, 6, (T,), generator=g)
        idx = torch.randint(-2, 7, (N,), generator=g).to(dtype)
        off = torch.sort(torch.randint(0, N + 1, (T * B + 1,), generator=g)).values
        if mode != BoundsCheckMode.FATAL or it % 3 == 0:
            for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
                at = torch.randint(0, T * B + 1, (1,), generator=g)
                off[at] = torch.randint(-3, N + 4, (1,), generator=g)
        off = off.to(dtype if it % 3 else torch.int64)
        b_off, max_B = None, -1
        if B > 0 and torch.rand(1, generator=g) < 0.4:
            cuts = torch.sort(torch.randint(0, T * B + 1, (T - 1,), generator=g)).values
            b_off = torch.tensor([0, *cuts.tolist(), T * B], dtype=torch.int32)
            max_B = T * B
        expected = _checked(mode.value, idx, off, rows, "cpu", b_off, max_B)
        got = _checked(mode.value, idx, off, rows, NPU, b_off, max_B)
        assert got == expected, (idx, off, rows, b_off)


@pytest.mark.parametrize(
    "bs",
    [[[2, 1, 3]], [[0, 0], [2, 1], [0, 3]], [[1], [0], [4]], [[0, 2, 1], [0, 0, 0], [3, 0, 2]]],
    ids=["one_feature", "empty_first", "one_rank", "empty_feature"],
)
def test_generate_vbe_metadata_block_ids_match_upstream_cpu(bs: list[list[int]]) -> None:
    """The block of each bag by segment ids over the blocks' bounds (each feature's end
    included): one rank, empty features and empty blocks, as upstream's CPU kernel says."""
    T, R = len(bs), len(bs[0])
    dims = [4 * (t + 1) for t in range(T)]
    D_offsets = torch.tensor([0, *torch.tensor(dims).cumsum(0).tolist()], dtype=torch.int32)
    per_feature = [sum(b) for b in bs]
    total_B = sum(per_feature)
    B_offsets = torch.tensor([0, *torch.tensor(per_feature).cumsum(0).tolist()], dtype=torch.int32)
    brpf = torch.tensor([[0, *torch.tensor(b).cumsum(0).tolist()] for b in bs], dtype=torch.int32)
    ofr = [0]
    for r in range(R):
        for t in range(T):
            ofr.append(ofr[-1] + bs[t][r] * dims[t])
    args = (B_offsets, brpf, torch.tensor(ofr), D_offsets)
    nb, _ = torch.ops.fbgemm.get_infos_metadata(D_offsets, max(total_B, 1), T)
    expected = torch.ops.fbgemm.generate_vbe_metadata(*args, max(dims), False, 4, nb, total_B)
    actual = torch.ops.fbgemm.generate_vbe_metadata(
        *[a.to(NPU) for a in args], max(dims), False, 4, nb, total_B
    )
    for a, e in zip(actual, expected, strict=True):
        assert torch.equal(a.cpu(), e), (a, e)
