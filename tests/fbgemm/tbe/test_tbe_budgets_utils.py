"""The TBE utilities (``transpose_embedding_input``, ``reset_weight_momentum``) held to their
BUDGETS entries exactly, every path at two sizes (tables and indices: the counts must not depend
on them), with the data checks off and on; 0 syncs and 0 AI-CPU launches.  Each call is measured
after a warm-up call (the cached aranges grow, and ``reset_weight_momentum`` reads a new layout
back once)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.split_table import register_host_values
from fbgemm_npu.testing.budgets import assert_op_budget
from fbgemm_npu.testing.tbe_inputs import NPU

F = torch.ops.fbgemm
TRANSPOSE = "fbgemm::transpose_embedding_input"
RESET = "fbgemm::reset_weight_momentum"
SIZES = ((2, 3), (20, 50))  # (tables, batch); T <= 31 keeps the infos below 2**31
# path -> (call arguments); every path of the budget entry
TRANSPOSE_PATHS: dict[str | None, dict[str, Any]] = {
    None: {},
    "int32": {"dtype": torch.int32},
    "bits48": {"bits": 40},
    "nobag": {"nobag": True},
    "total_unique": {"total_unique_indices": 5},
    "info_wrap": {"info_B_num_bits": 30},
    "vbe": {"vbe": True},
    "vbe_nobag": {"vbe": True, "nobag": True},
    "index_select": {"is_index_select": True},
}


def _transpose(T: int, B: int, dtype: torch.dtype = torch.int64, bits: int = 20,
               vbe: bool = False, **kw: Any) -> Callable[[], Any]:  # fmt: skip
    g = torch.Generator().manual_seed(T * B)
    hsc = torch.arange(0, 10 * (T + 1), 10)
    lengths = torch.randint(1, 4, (T * B,), generator=g)
    off = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    idx = torch.randint(0, 10, (int(off[-1]),), generator=g)
    if vbe:
        b_t = torch.tensor([(t << 26) | b for t in range(T) for b in range(B)], dtype=torch.int32)
        kw.update(vbe_b_t_map=b_t.to(NPU), info_B_mask=(1 << 26) - 1)
    if kw.get("is_index_select"):
        tlo = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.view(T, B).sum(1).cumsum(0)])
        kw.update(total_L_offsets=tlo.to(NPU), fixed_L_per_warp=4, num_warps_per_feature=B)
    args = [t.to(dtype).to(NPU) for t in (hsc, idx, off)]
    return lambda: F.transpose_embedding_input(args[0], bits, args[1], args[2], **kw)


def _reset(T: int, B: int, new_layout: bool = False) -> Callable[[], Any]:
    """``T`` tables (dims 4, 8, 12, ...), ``B`` pruned rows each, buffer ``t`` in table ``t``."""
    g = torch.Generator().manual_seed(T * B)
    dims, rows = [4 * (1 + t % 3) for t in range(T)], [B + 3 + t for t in range(T)]
    ends = torch.tensor([r * d for r, d in zip(rows, dims, strict=True)]).cumsum(0)
    pruned = torch.cat([torch.randperm(rows[t], generator=g)[:B] for t in range(T)])
    ids = torch.arange(T, dtype=torch.int32)
    none = torch.zeros(0)
    a = {
        "dev_weights": torch.rand(int(ends[-1]), generator=g),
        "uvm_weights": none,
        "lxu_cache_weights": torch.zeros(0, 0),
        "weights_placements": torch.zeros(T, dtype=torch.int32),
        "weights_offsets": torch.cat([torch.zeros(1, dtype=torch.int64), ends[:-1]]),
        "momentum1_dev": torch.rand(sum(rows), generator=g),
        "momentum1_uvm": none,
        "momentum1_placements": torch.zeros(T, dtype=torch.int32),
        "momentum1_offsets": torch.tensor([0, *rows]).cumsum(0)[:-1],
        "D_offsets": torch.tensor([0, *dims], dtype=torch.int32).cumsum(0, dtype=torch.int32),
        "pruned_indices": pruned,
        "pruned_indices_offsets": torch.arange(0, T * B + 1, B),
        "logical_table_ids": ids,
        "buffer_ids": ids,
        "cache_hash_size_cumsum": torch.zeros(0, dtype=torch.int64),
        "lxu_cache_state": torch.zeros(0, dtype=torch.int64),
        "total_cache_hash_size": 0,
    }
    on = {k: v.to(NPU) if isinstance(v, torch.Tensor) else v for k, v in a.items()}
    if not new_layout:
        return lambda: F.reset_weight_momentum(**on)
    names = ("D_offsets", "weights_offsets", "momentum1_offsets")
    layouts = []  # a new layout for each call (warm-up, counted), registered as upstream's
    for _ in range(2):  # module on npu registers its own: no read-back
        layouts.append({n: a[n].to(NPU) for n in names})
        for n in names:
            register_host_values(layouts[-1][n], a[n].tolist())

    def fresh() -> None:
        F.reset_weight_momentum(**{**on, **layouts.pop(0)})

    return fresh


def _measure(qualname: str, path: str | None, build: Callable[[int, int], Any]) -> None:
    for T, B in SIZES:
        call = build(T, B)
        call()  # warm-up
        c = assert_op_budget(call, qualname, path=path, exact=True)
        assert c.ai_cpu == 0 and c.syncs == 0
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]


CASES = [(TRANSPOSE, p) for p in TRANSPOSE_PATHS] + [(RESET, None), (RESET, "new_layout")]


def _builder(qualname: str, path: str | None) -> Callable[[int, int], Any]:
    if qualname == RESET:
        return lambda T, B: _reset(T, B, new_layout=path == "new_layout")
    return lambda T, B: _transpose(T, B, **TRANSPOSE_PATHS[path])


@pytest.mark.parametrize(("qualname", "path"), CASES, ids=str)
def test_budget_with_the_checks_off(qualname: str, path: str | None, no_validation: None) -> None:
    _measure(qualname, path, _builder(qualname, path))


@pytest.mark.parametrize(("qualname", "path"), CASES, ids=str)
def test_budget_with_the_checks_on(qualname: str, path: str | None) -> None:
    _measure(qualname, path, _builder(qualname, path))


def test_every_path_is_measured() -> None:
    from fbgemm_npu.testing.budgets import budget_of

    for qualname in (TRANSPOSE, RESET):
        paths = {p for q, p in CASES if q == qualname}
        assert paths == {None, *budget_of(qualname).paths}, qualname
