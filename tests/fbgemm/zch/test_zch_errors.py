"""Bad input to the zch family's ops on npu: a ``RuntimeError`` (upstream's class: its
``TORCH_CHECK``s) naming the op and the argument; where upstream refuses too, both refuse.
Where upstream crashes (division by zero, a null ``offsets``, reads past the identities), ours
refuses by name: host checks for shapes, queued data checks read by ``fbgemm_npu.check()``."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import fbgemm_npu

F = torch.ops.fbgemm
NPU = "npu"
IDS = torch.tensor([3, 9, -1, 12])
TABLE = torch.full((8, 1), -1)

MURMUR_BAD = {
    "int32": (torch.tensor([5], dtype=torch.int32), "input"),
    "0-D": (torch.tensor(5), "input"),
    "2-D": (torch.tensor([[5]]), "input"),
    "two elements": (torch.tensor([1, 2]), "input"),
    "empty": (torch.zeros(0, dtype=torch.int64), "input"),
    "float": (torch.tensor([1.0]), "input"),
}


@pytest.mark.parametrize("name", list(MURMUR_BAD))
def test_murmur_hash3_refuses_what_upstream_refuses(name: str) -> None:
    t, arg = MURMUR_BAD[name]
    with pytest.raises(RuntimeError):
        F.murmur_hash3(t, 0, 0)
    with pytest.raises(RuntimeError, match="murmur_hash3") as info:
        F.murmur_hash3(t.to(NPU), 0, 0)
    assert arg in str(info.value)


def test_murmur_hash3_none() -> None:
    with pytest.raises((RuntimeError, ValueError, TypeError), match="input|Tensor"):
        F.murmur_hash3(None, 0, 0)


RO: dict[str, Any] = {"circular_probe": True, "readonly": True}
# name: (ids, identities, kwargs, argument named, upstream also refuses)
ZCH_BAD: dict[str, tuple[torch.Tensor, torch.Tensor, dict[str, Any], str, bool]] = {
    "readonly False": (IDS, TABLE, {"circular_probe": True}, "readonly", True),
    "exp_hours": (IDS, TABLE, {**RO, "exp_hours": 3}, "exp_hours", True),
    "metadata": (IDS, TABLE, {**RO, "metadata": TABLE.int()}, "metadata", True),
    "input_metadata": (IDS, TABLE, {**RO, "input_metadata": IDS.int()}, "input_metadata", True),
    "eviction_threshold": (IDS, TABLE, {**RO, "eviction_threshold": 5}, "eviction", True),
    "opt_in_rands": (IDS, TABLE, {**RO, "opt_in_rands": IDS.int()}, "opt_in_rands", True),
    "not circular": (IDS, TABLE, {"readonly": True}, "circular_probe", True),
    "modulo identity": (IDS, TABLE, {**RO, "_modulo_identity_DPRECATED": True}, "_modulo", True),
    "1-D identities": (IDS, TABLE.view(-1), RO, "identities", True),
    "2-D ids": (IDS.view(2, 2), TABLE, RO, "input", True),
    "float ids": (IDS.float(), TABLE, RO, "input", True),
    "float identities": (IDS, TABLE.float(), RO, "identities", True),
    "int32 ids, int64 identities": (IDS.int(), TABLE, RO, "identities", True),
    "opt_in_prob 0": (
        IDS,
        TABLE,
        {**RO, "opt_in_prob": 0, "num_reserved_slots": 2},
        "opt_in",
        True,
    ),
    "opt_in_prob 101": (
        IDS,
        TABLE,
        {**RO, "opt_in_prob": 101, "num_reserved_slots": 2},
        "opt_in",
        True,
    ),
    "no reserved slots": (IDS, TABLE, {**RO, "opt_in_prob": 50}, "num_reserved_slots", True),
    "reserved without opt in": (IDS, TABLE, {**RO, "num_reserved_slots": 2}, "num_reserved", True),
    "local_sizes count": (
        IDS,
        TABLE,
        {
            **RO,
            "local_sizes": torch.ones(3, dtype=torch.int64),
            "offsets": torch.zeros(3, dtype=torch.int64),
        },
        "local_sizes",
        True,
    ),
    "offsets count": (
        IDS,
        TABLE,
        {**RO, "offsets": torch.zeros(2, dtype=torch.int64)},
        "offsets",
        True,
    ),
    "int32 local_sizes": (
        IDS,
        TABLE,
        {
            **RO,
            "local_sizes": torch.ones(4, dtype=torch.int32),
            "offsets": torch.zeros(4, dtype=torch.int64),
        },
        "local_sizes",
        True,
    ),
    # upstream crashes on these (SIGFPE, a null pointer): not called on CPU
    "no identity rows": (IDS, TABLE[:0], RO, "identities", False),
    "all slots reserved": (
        IDS,
        TABLE,
        {**RO, "opt_in_prob": 100, "num_reserved_slots": 8},
        "identities",
        False,
    ),
    "local_sizes without offsets": (
        IDS,
        TABLE,
        {**RO, "local_sizes": torch.ones(4, dtype=torch.int64)},
        "offsets",
        False,
    ),
}


def _on(x: Any) -> Any:
    return x.to(NPU) if isinstance(x, torch.Tensor) else x


@pytest.mark.parametrize("name", list(ZCH_BAD))
def test_zero_collision_hash_refuses_by_name(name: str) -> None:
    ids, table, kw, arg, upstream_refuses = ZCH_BAD[name]
    if upstream_refuses:
        with pytest.raises(RuntimeError):
            F.zero_collision_hash(ids, table, 4, **kw)
    with pytest.raises(RuntimeError, match="zero_collision_hash") as info:
        F.zero_collision_hash(ids.to(NPU), table.to(NPU), 4, **{k: _on(v) for k, v in kw.items()})
    assert arg in str(info.value)


def test_zero_collision_hash_none_identities() -> None:
    with pytest.raises((RuntimeError, ValueError, TypeError), match="identities|Tensor"):
        F.zero_collision_hash(IDS.to(NPU), None, 4, True, readonly=True)


def test_zero_collision_hash_mixed_devices() -> None:
    with pytest.raises(RuntimeError, match="zero_collision_hash.*identities"):
        F.zero_collision_hash(IDS.to(NPU), TABLE, 4, True, readonly=True)


CHUNK_BAD = {
    "offsets past the identities": ([4, 4, 4, 4], [0, 4, 6, 0], "offsets"),
    "negative offsets": ([4, 4, 4, 4], [0, -1, 0, 0], "offsets"),
    "zero local size": ([4, 0, 4, 4], [0, 0, 0, 0], "local_sizes"),
    "sum wraps": ([2**62, 4, 4, 4], [2**62, 0, 0, 0], "local_sizes"),
}


@pytest.mark.parametrize("name", list(CHUNK_BAD))
def test_bad_chunks_raise_at_the_check_and_stay_in_bounds(name: str) -> None:
    sizes, offs, arg = CHUNK_BAD[name]
    out, _ = F.zero_collision_hash(
        IDS.to(NPU),
        TABLE.to(NPU),
        4,
        True,
        readonly=True,
        local_sizes=torch.tensor(sizes).to(NPU),
        offsets=torch.tensor(offs).to(NPU),
    )
    assert out.shape == (4,)  # computed inside the buffers, the error queued
    with pytest.raises(RuntimeError, match="zero_collision_hash") as info:
        fbgemm_npu.check()
    assert arg in str(info.value)
