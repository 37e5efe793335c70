"""Hostile input to the pruning ops: a clear error naming the op and the argument, never a crash,
a hang or a silently wrong result.  Upstream's own checks raise ``RuntimeError`` (dtype
mismatch, the int64 accessor, ``B > 0``): ours raise the same class; data conditions
(upstream reads out of bounds, leaves outputs unwritten or probes for ever) are refused by
name, ``ValueError`` where the op reads them anyway, queued ``RuntimeError`` (``fbgemm_npu.check``)
where it reads nothing back."""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu

F = torch.ops.fbgemm
NPU = "npu"
I32 = torch.int32


def _hash_args() -> list[torch.Tensor]:
    table = torch.full((64, 2), -1, dtype=I32)
    hto = torch.tensor([0, 32, 64])
    F.pruned_hashmap_insert(
        torch.arange(10, dtype=I32),
        torch.arange(10, dtype=I32),
        torch.tensor([0, 5, 10], dtype=I32),
        table,
        hto,
    )
    return [torch.tensor([1, 2, 3, 4], dtype=I32), torch.tensor([0, 2, 4], dtype=I32), table, hto]


def _npu(args: list) -> list:
    return [a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args]


HOST_CASES = [
    # (what, position, replacement, error class, argument named)
    ("float indices", 0, torch.ones(4), ValueError, "indices"),
    ("int64 offsets, int32 indices", 1, torch.tensor([0, 2, 4]), RuntimeError, "offsets"),
    (
        "int32 table offsets",
        3,
        torch.tensor([0, 32, 64], dtype=I32),
        RuntimeError,
        "hash_table_offsets",
    ),
    ("no table (T = 0)", 3, torch.tensor([0]), ValueError, "hash_table_offsets"),
    ("B = 0", 1, torch.tensor([0], dtype=I32), RuntimeError, "offsets"),
    ("1-D table", 2, torch.full((64,), -1, dtype=I32), ValueError, "hash_table"),
    ("one column", 2, torch.full((64, 1), -1, dtype=I32), ValueError, "hash_table"),
    ("float table", 2, torch.full((64, 2), -1.0), ValueError, "hash_table"),
    ("2-D offsets", 1, torch.tensor([[0, 2, 4]], dtype=I32), ValueError, "offsets"),
]


@pytest.mark.parametrize("case", HOST_CASES, ids=lambda c: c[0])
def test_hash_lookup_host_checks(case: tuple) -> None:
    _, pos, bad, cls, arg = case
    args = _hash_args()
    args[pos] = bad
    with pytest.raises(cls, match="pruned_hashmap_lookup") as info:
        F.pruned_hashmap_lookup(*_npu(args))
    assert arg in str(info.value)


DATA_CASES = [
    ("offsets not from 0", 1, torch.tensor([1, 2, 4], dtype=I32), "offsets"),
    ("offsets short of the indices", 1, torch.tensor([0, 2, 3], dtype=I32), "offsets"),
    ("offsets past the indices", 1, torch.tensor([0, 2, 9], dtype=I32), "offsets"),
    ("offsets decreasing", 1, torch.tensor([0, 5, 4], dtype=I32), "offsets"),
    ("table offsets past the table", 3, torch.tensor([0, 32, 65]), "hash_table_offsets"),
    ("table offsets decreasing", 3, torch.tensor([0, 40, 30]), "hash_table_offsets"),
    ("table offsets negative", 3, torch.tensor([-1, 32, 64]), "hash_table_offsets"),
]


@pytest.mark.parametrize("case", DATA_CASES, ids=lambda c: c[0])
def test_hash_lookup_data_checks(case: tuple) -> None:
    _, pos, bad, arg = case
    args = _hash_args()
    args[pos] = bad
    with pytest.raises(ValueError, match="pruned_hashmap_lookup") as info:
        F.pruned_hashmap_lookup(*_npu(args))  # the probe count's read raises at once
    assert arg in str(info.value)


def _array_args() -> list[torch.Tensor]:
    q = torch.tensor([1, 2, 0, 4], dtype=I32)
    return [
        q,
        torch.tensor([0, 2, 4], dtype=I32),
        torch.arange(10, dtype=I32),
        torch.tensor([0, 5, 10]),
    ]


@pytest.mark.parametrize(
    "case",
    [
        ("float remappings", 2, torch.arange(10.0), ValueError, "index_remappings"),
        (
            "int32 offsets",
            3,
            torch.tensor([0, 5, 10], dtype=I32),
            RuntimeError,
            "index_remappings_offsets",
        ),
        ("B = 0", 1, torch.tensor([0], dtype=I32), RuntimeError, "offsets"),
        ("T = 0", 3, torch.tensor([0]), ValueError, "index_remappings_offsets"),
    ],
    ids=lambda c: c[0],
)
def test_array_lookup_host_checks(case: tuple) -> None:
    _, pos, bad, cls, arg = case
    args = _array_args()
    args[pos] = bad
    with pytest.raises(cls, match="pruned_array_lookup") as info:
        F.pruned_array_lookup(*_npu(args))
    assert arg in str(info.value)


@pytest.mark.parametrize(
    "case",
    [
        ("index past its table", 0, torch.tensor([1, 5, 0, 4], dtype=I32), "indices"),
        ("negative index", 0, torch.tensor([1, 2, -1, 4], dtype=I32), "indices"),
        ("offsets not from 0", 1, torch.tensor([1, 2, 4], dtype=I32), "offsets"),
        (
            "remapping offsets past the array",
            3,
            torch.tensor([0, 5, 11]),
            "index_remappings_offsets",
        ),
    ],
    ids=lambda c: c[0],
)
def test_array_lookup_queued_checks(case: tuple) -> None:
    """Nothing is read back: the check is queued, raised at the next read (``check``), and the
    gather stays inside the array meanwhile."""
    _, pos, bad, arg = case
    args = _array_args()
    args[pos] = bad
    out = F.pruned_array_lookup(*_npu(args))
    assert out.shape == (4,)
    with pytest.raises(RuntimeError, match="pruned_array_lookup") as info:
        fbgemm_npu.check()
    assert arg in str(info.value)


def _insert_args() -> list[torch.Tensor]:
    k = torch.arange(8, dtype=I32)
    return [
        k,
        k * 2,
        torch.tensor([0, 4, 8], dtype=I32),
        torch.full((64, 2), -1, dtype=I32),
        torch.tensor([0, 32, 64]),
    ]


@pytest.mark.parametrize(
    "case",
    [
        ("int64 dense", 1, torch.arange(8), RuntimeError, "dense_indices"),
        ("short dense", 1, torch.arange(7, dtype=I32), ValueError, "dense_indices"),
        ("offsets past the indices", 2, torch.tensor([0, 4, 9], dtype=I32), ValueError, "offsets"),
        ("offsets decreasing", 2, torch.tensor([0, 6, 5], dtype=I32), ValueError, "offsets"),
        (
            "table offsets past the table",
            4,
            torch.tensor([0, 32, 65]),
            ValueError,
            "hash_table_offsets",
        ),
        (
            "table offsets decreasing",
            4,
            torch.tensor([0, 40, 30]),
            ValueError,
            "hash_table_offsets",
        ),
        ("B = 0", 2, torch.tensor([0], dtype=I32), RuntimeError, "offsets"),
        ("float table", 3, torch.full((64, 2), -1.0), ValueError, "hash_table"),
    ],
    ids=lambda c: c[0],
)
def test_insert_checks(case: tuple) -> None:
    _, pos, bad, cls, arg = case
    args = _insert_args()
    args[pos] = bad
    table = _npu(args)
    before = table[3].cpu().clone()
    with pytest.raises(cls, match="pruned_hashmap_insert") as info:
        F.pruned_hashmap_insert(*table)
    assert arg in str(info.value)
    assert torch.equal(table[3].cpu(), before)  # nothing written


def test_insert_into_a_full_table_is_refused_not_a_hang() -> None:
    """33 distinct keys into 32 slots: upstream's CPU kernel would probe for ever (not called
    here); ours refuses naming the table, and leaves it as it was."""
    k = torch.arange(33, dtype=I32)
    args = _npu(
        [
            k,
            k,
            torch.tensor([0, 33], dtype=I32),
            torch.full((32, 2), -1, dtype=I32),
            torch.tensor([0, 32]),
        ]
    )
    with pytest.raises(ValueError, match="pruned_hashmap_insert") as info:
        F.pruned_hashmap_insert(*args)
    assert "hash_table" in str(info.value) and (args[3].cpu() == -1).all()
    # 32 keys fit exactly; a key -1 afterwards would find no empty slot either
    k = torch.cat([torch.arange(32, dtype=I32), torch.tensor([-1], dtype=I32)])
    args = _npu(
        [
            k,
            k + 1,
            torch.tensor([0, 33], dtype=I32),
            torch.full((32, 2), -1, dtype=I32),
            torch.tensor([0, 32]),
        ]
    )
    with pytest.raises(ValueError, match="hash_table"):
        F.pruned_hashmap_insert(*args)


def test_insert_int64_keys_outside_an_int32_table() -> None:
    k = torch.tensor([1, 2**33])
    args = _npu(
        [k, k, torch.tensor([0, 2]), torch.full((32, 2), -1, dtype=I32), torch.tensor([0, 32])]
    )
    with pytest.raises(ValueError, match="pruned_hashmap_insert") as info:
        F.pruned_hashmap_insert(*args)
    assert "indices" in str(info.value)


@pytest.mark.parametrize("op", ["pruned_hashmap_lookup", "pruned_array_lookup"])
def test_none_and_objects(op: str) -> None:
    args = _hash_args() if op == "pruned_hashmap_lookup" else _array_args()
    fn = getattr(F, op)
    with pytest.raises((ValueError, RuntimeError, TypeError), match=op):
        fn(None, *_npu(args[1:]))


def test_mixed_devices() -> None:
    args = _npu(_hash_args())
    args[2] = args[2].cpu()
    with pytest.raises(RuntimeError, match="pruned_hashmap_lookup") as info:
        F.pruned_hashmap_lookup(*args)
    assert "hash_table" in str(info.value)
