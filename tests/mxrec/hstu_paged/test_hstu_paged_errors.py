"""``mxrec::hstu_paged`` on hostile input (docs/design.md rule 9): argument errors raise at the
call naming the op and the argument; bad data (page ids out of range, ``last_page_len`` 0 or past
the page size, non-monotone ``page_offsets``, ``num_target`` past its q length, offsets that
disagree with the pages) runs without a sync, inside its buffers, and fails the queued check
naming the op and the argument -- while the same call on good data passes it."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.hstu_paged.inputs import paged_case
from fbgemm_npu.native._checks import validation_enabled
from fbgemm_npu.native._pending import check
from fbgemm_npu.testing.counters import count

OP = "hstu_paged"


def _kw() -> dict:
    return paged_case([40, 5, 70], [3, 2, 1], [1, 0, 2], page_size=32)


def _call(kw: dict) -> torch.Tensor:
    placed = {n: (t.npu() if isinstance(t, torch.Tensor) else t) for n, t in kw.items()}
    return torch.ops.mxrec.hstu_paged(**placed)


def _with(**over: object) -> dict:
    kw = _kw()
    kw.update(over)
    return kw


ARGUMENT_ERRORS = {
    "kv_cache rank 4": ({"kv_cache": torch.zeros(6, 2, 32, 2)}, "kv_cache"),
    "kv_cache not K and V": ({"kv_cache": torch.zeros(6, 3, 32, 2, 8)}, "kv_cache"),
    "kv_cache heads": ({"kv_cache": torch.zeros(6, 2, 32, 3, 8)}, "kv_cache"),
    "kv_cache head dim": ({"kv_cache": torch.zeros(6, 2, 32, 2, 4)}, "kv_cache"),
    "kv_cache dtype": ({"kv_cache": torch.zeros(6, 2, 32, 2, 8, dtype=torch.float16)}, "kv_cache"),
    "kv_cache missing": ({"kv_cache": None}, "kv_cache"),
    "seq_offset missing": ({"seq_offset": None}, "seq_offset"),
    "page_ids missing": ({"page_ids": None}, "page_ids"),
    "page_ids float": ({"page_ids": torch.zeros(6)}, "page_ids"),
    "page_offsets 2-D": ({"page_offsets": torch.zeros(2, 2, dtype=torch.int64)}, "page_offsets"),
    "page_offsets length": ({"page_offsets": torch.tensor([0, 2, 3])}, "page_offsets"),
    "last_page_len length": ({"last_page_len": torch.tensor([8, 5])}, "last_page_len"),
    "seq_offset_k length": ({"seq_offset_k": torch.tensor([0, 41])}, "seq_offset_k"),
    "num_target length": ({"num_target": torch.tensor([1, 0])}, "num_target"),
    "num_target without a group": ({"target_group_size": 0}, "target_group_size"),
    "mask_type 1": ({"mask_type": 1}, "mask_type"),
    "mask_type 3 without a mask": ({"mask_type": 3}, "mask"),
    "attn_bias shape": ({"attn_bias": torch.zeros(3, 4, 4, 4)}, "attn_bias"),
    "negative max_seq_len_k": ({"max_seq_len_k": -1}, "max_seq_len_k"),
    "v head dim": ({"v": torch.zeros(9, 2, 5)}, "head dim"),
    "q not 3-D": ({"q": torch.zeros(7, 4, 8, 1)}, "'q'"),
}


@pytest.mark.parametrize("name", list(ARGUMENT_ERRORS))
def test_argument_errors_name_the_op_and_argument(name: str) -> None:
    over, arg = ARGUMENT_ERRORS[name]
    with pytest.raises((ValueError, RuntimeError), match=rf"{OP}.*{arg}"):
        _call(_with(**over))


def _bad(name: str) -> dict:
    kw = _kw()
    if name == "page id out of range":
        kw["page_ids"][1] = 99  # type: ignore[index]
    elif name == "negative page id":
        kw["page_ids"][0] = -3  # type: ignore[index]
    elif name == "last_page_len 0":
        kw["last_page_len"][0] = 0  # type: ignore[index]
    elif name == "last_page_len > page_size":
        kw["last_page_len"][2] = 33  # type: ignore[index]
    elif name == "page_offsets not monotone":
        kw["page_offsets"] = torch.tensor([0, 2, 1, 5])
    elif name == "num_target > q length":
        kw["num_target"] = torch.tensor([1, 0, 5])
        kw.pop("seq_offset_t")
    elif name == "negative num_target":
        kw["num_target"] = torch.tensor([1, -1, 2])
        kw.pop("seq_offset_t")
    elif name == "seq_offset_k disagrees":
        kw["seq_offset_k"] = kw["seq_offset_k"] + torch.tensor([0, 1, 1, 1])  # type: ignore[operator]
    elif name == "seq_offset_t disagrees":
        kw["seq_offset_t"] = torch.tensor([0, 1, 1, 2])
    elif name == "cache longer than max_seq_len_k":
        kw["max_seq_len_k"] = 50
    elif name == "seq_offset not monotone":
        kw["seq_offset"] = torch.tensor([0, 4, 2, 7])
    return kw


DATA_ERRORS = {
    "page id out of range": "page_ids",
    "negative page id": "page_ids",
    "last_page_len 0": "last_page_len",
    "last_page_len > page_size": "last_page_len",
    "page_offsets not monotone": "page_offsets",
    "num_target > q length": "num_target",
    "negative num_target": "num_target",
    "seq_offset_k disagrees": "seq_offset_k",
    "seq_offset_t disagrees": "seq_offset_t",
    "cache longer than max_seq_len_k": "max_seq_len_k",
    "seq_offset not monotone": "seq_offset",
}


@pytest.mark.skipif(not validation_enabled(), reason="FBGEMM_NPU_VALIDATE=0: no data checks")
@pytest.mark.parametrize("name", list(DATA_ERRORS))
def test_bad_data_is_queued_memory_safe_and_named(name: str) -> None:
    check()
    _call(_kw())
    check()  # the good call passes its checks: the failure below is the mutation's
    with count() as c:
        out = _call(_bad(name))  # no index past a buffer: the simulator's gathers would raise
    assert c.syncs == 0 and out.shape == (9, 4, 8)
    with pytest.raises(RuntimeError, match=rf"{OP}.*{DATA_ERRORS[name]}"):
        check()


@pytest.mark.skipif(not validation_enabled(), reason="FBGEMM_NPU_VALIDATE=0: no data checks")
@pytest.mark.parametrize("name", ["num_target > q length", "seq_offset not monotone"])
def test_bad_data_with_sizes_read_back_names_the_condition(name: str) -> None:
    """Without max_seq_len the call reads its checks with the sizes: the first failed one."""
    kw = _bad(name)
    kw.update(max_seq_len=0, max_seq_len_k=0)
    with pytest.raises(ValueError, match=rf"{OP}: .*{DATA_ERRORS[name]}"):
        _call(kw)
