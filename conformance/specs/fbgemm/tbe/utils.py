"""Specs for the TBE utilities upstream serves on CUDA only: ``transpose_embedding_input`` and
``reset_weight_momentum``.  Upstream's CPU build has their schemas and no kernel, so it cannot
judge: each spec's op runs the reference written from the CUDA kernels' math
(``fbgemm_npu/testing/tbe_utils_reference.py``: plain loops) on CPU tensors and ours on npu
tensors, and the harness compares values, shapes and dtypes (integers and the zeroed rows
exactly: nothing is computed in floating point).

``transpose_embedding_input``: 1 to 5 features of 1 to 40 rows, 1 to 6 bags each (VBE: its own
count per feature) of 0 to 4 indices; one argument path per example -- pooled (the main path),
int32, keys past 2**24 (``bits48``), nobag, ``total_unique_indices`` below L, infos past 2**31
(``info_wrap``), VBE (pooled or nobag), index-select -- held to that path's budget; bits from
the smallest that holds the hash size up, ``total_unique_indices`` the run count plus 0 to 3.
``reset_weight_momentum``: 1 to 5 tables (D a multiple of 4 as upstream's module builds them, or
any D in a direct call), 0 to 6 pruned rows per buffer (repeats allowed), buffers mapped to tables
in any order, some tables not reset; the layout registered as upstream's module does
(``register_host_values``), so that no call reads it back.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from fbgemm_npu.split_table import register_host_values
from fbgemm_npu.testing.tbe_utils_reference import (
    reset_weight_momentum_reference,
    transpose_embedding_input_reference,
)

F = torch.ops.fbgemm
PATHS = (None, "int32", "bits48", "nobag", "total_unique", "info_wrap", "vbe", "vbe_nobag",
         "index_select")  # fmt: skip


def _transpose_op(**kw: Any) -> Any:
    path = kw.pop("path")
    del path  # the budget's business
    if kw["indices"].device.type == "cpu":
        return transpose_embedding_input_reference(**kw)
    return F.transpose_embedding_input(**kw)


@st.composite
def _transpose_inputs(draw: st.DrawFn) -> dict[str, Any]:
    path = draw(st.sampled_from(PATHS))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    T = draw(st.integers(1, 5))
    rows = torch.randint(1, 41, (T,), generator=g)
    hsc = torch.cat([torch.zeros(1, dtype=torch.int64), rows.cumsum(0)])
    vbe = path in ("vbe", "vbe_nobag")
    B = draw(st.integers(1, 6))
    per_t = torch.randint(1, 7, (T,), generator=g) if vbe else torch.full((T,), B)
    bags_t = torch.repeat_interleave(torch.arange(T), per_t)
    lengths = torch.randint(0, 5, (bags_t.numel(),), generator=g)
    off = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    t_of = torch.repeat_interleave(bags_t, lengths)
    idx = (torch.rand(t_of.numel(), generator=g) * rows[t_of]).long()
    need = max(int(hsc[-1]).bit_length(), 1)
    bits = draw(st.integers(25, 40)) if path == "bits48" else draw(st.integers(need, 24))
    kw: dict[str, Any] = {"path": path, "nobag": path in ("nobag", "vbe_nobag")}
    if path == "info_wrap":
        kw["info_B_num_bits"] = 30
    if vbe:
        b = torch.cat([torch.arange(int(n)) for n in per_t])
        kw["vbe_b_t_map"] = ((bags_t << 26) | b).to(torch.int32)
        kw["info_B_mask"] = (1 << 26) - 1
    if path == "index_select":
        per_feature = torch.zeros(T, dtype=torch.int64).index_add_(0, bags_t, lengths)
        kw.update(is_index_select=True, fixed_L_per_warp=4, num_warps_per_feature=6)
        kw["total_L_offsets"] = torch.cat(
            [torch.zeros(1, dtype=torch.int64), per_feature.cumsum(0)]
        )
    if path == "total_unique" and idx.numel() > 1:
        runs = int(torch.unique(hsc[t_of] + idx).numel())
        kw["total_unique_indices"] = min(runs + draw(st.integers(0, 3)), idx.numel() - 1)
        if kw["total_unique_indices"] < runs:
            kw["total_unique_indices"] = runs
    dtype = torch.int32 if path == "int32" else torch.int64
    return {"hash_size_cumsum": hsc.to(dtype), "total_hash_size_bits": bits,
            "indices": idx.to(dtype), "offsets": off.to(dtype), **kw}  # fmt: skip


def _transpose_budget(**kw: Any) -> BudgetUse:
    path = kw["path"]
    unique = kw.get("total_unique_indices", -1)
    if path == "total_unique" and not 0 <= unique < kw["indices"].numel():
        path = None  # no clamp: the main path
    return BudgetUse(op="fbgemm::transpose_embedding_input", path=path)


_RESET_ARGS = ("weights_offsets", "momentum1_offsets", "D_offsets", "pruned_indices",
               "pruned_indices_offsets", "logical_table_ids", "buffer_ids")  # fmt: skip


def _reset_op(**kw: Any) -> tuple[torch.Tensor, torch.Tensor]:
    w, m = kw["dev_weights"], kw["momentum1_dev"]
    if w.device.type == "cpu":
        rest = (kw[a] for a in _RESET_ARGS[1:])
        return reset_weight_momentum_reference(w, kw["weights_offsets"], m, *rest)
    for name, values in kw.pop("host").items():  # what upstream's module registers
        register_host_values(kw[name], values)
    none, empty = kw["none"], kw["empty_i64"]
    F.reset_weight_momentum(
        w, none, none.view(0, 0), kw["placements"], kw["weights_offsets"], m, none,
        kw["placements"], kw["momentum1_offsets"], kw["D_offsets"], kw["pruned_indices"],
        kw["pruned_indices_offsets"], kw["logical_table_ids"], kw["buffer_ids"], empty, empty, 0,
    )  # fmt: skip
    return w, m


@st.composite
def _reset_inputs(draw: st.DrawFn) -> dict[str, Any]:
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    T = draw(st.integers(1, 5))
    by4 = draw(st.booleans())
    dims = [4 * draw(st.integers(1, 4)) if by4 else draw(st.integers(1, 13)) for _ in range(T)]
    rows = [draw(st.integers(1, 12)) for _ in range(T)]
    w_off = [sum(r * d for r, d in zip(rows[:t], dims[:t], strict=True)) for t in range(T)]
    m_off = [sum(rows[:t]) for t in range(T)]
    d_off = [0, *torch.tensor(dims).cumsum(0).tolist()]
    n = draw(st.integers(1, T))  # pruned tables: distinct logical tables, buffers permuted
    tables = torch.randperm(T, generator=g)[:n]
    buffers = torch.randperm(n, generator=g)
    counts = torch.randint(0, 7, (n,), generator=g)
    owner = torch.empty(n, dtype=torch.int64)
    owner[buffers] = tables
    pruned = torch.cat([torch.randint(0, rows[int(owner[u])], (int(counts[u]),), generator=g)
                        for u in range(n)])  # fmt: skip
    i32 = torch.int32
    host = {"D_offsets": d_off, "weights_offsets": w_off, "momentum1_offsets": m_off}
    return {
        "dev_weights": torch.rand(w_off[-1] + rows[-1] * dims[-1], generator=g) + 1,
        "momentum1_dev": torch.rand(sum(rows), generator=g) + 1,
        "placements": torch.zeros(T, dtype=i32),
        "weights_offsets": torch.tensor(w_off),
        "momentum1_offsets": torch.tensor(m_off),
        "D_offsets": torch.tensor(d_off, dtype=i32),
        "pruned_indices": pruned,
        "pruned_indices_offsets": torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]),
        "logical_table_ids": tables.to(i32),
        "buffer_ids": buffers.to(i32),
        "none": torch.zeros(0),
        "empty_i64": torch.zeros(0, dtype=torch.int64),
        "host": host,
    }


SPECS = [
    OpSpec(
        name="transpose_embedding_input",
        op=_transpose_op,
        inputs=_transpose_inputs(),
        compare=Compare({}),
        budget=_transpose_budget,
        notes="reference: the CUDA kernel's math (upstream's CPU build has no kernel)",
    ),
    OpSpec(
        name="reset_weight_momentum",
        op=_reset_op,
        inputs=_reset_inputs(),
        compare=Compare({torch.float32: Tol(0.0, 0.0)}),  # zeroed or untouched: exact
        # every example a new layout: its per-layout table is uploaded in the call
        budget=BudgetUse(op="fbgemm::reset_weight_momentum", path="new_layout"),
        notes="reference: the CUDA kernel's math (upstream's CPU build has no kernel)",
    ),
]
