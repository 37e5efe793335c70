"""Index-select / ranges / segment family: upstream's jagged benchmark defaults (B = 128 segments,
D = 128 columns, lengths uniform in 0..128) for the jagged selects, and torchrec shapes (26
features or tables x batch 2048, lengths uniform in 0..40, mean 20) for the batched selects and
the ranges.  Our kernels run with the data checks on (the default).
``keyed_jagged_index_select_dim1`` and ``jagged_unique_indices`` have no CPU kernel upstream, so
there is nothing to time them against.
"""

from __future__ import annotations

from typing import Any

import torch

from bench.harness import Case, seeded
from fbgemm_npu.native.fbgemm.index_select import batch as batch_index_select
from fbgemm_npu.native.fbgemm.index_select import group as group_index_select
from fbgemm_npu.native.fbgemm.index_select import index_select, ranges

F = torch.ops.fbgemm
B, D, MAX_L = 128, 128, 128  # upstream's jagged benchmark defaults
T, BATCH, MAX_LEN = 26, 2048, 40  # torchrec-shaped
ROWS = 1000  # rows per table for the batched selects


def _jagged(device: str) -> dict[str, Any]:
    gen = seeded()
    lengths = torch.randint(0, MAX_L + 1, (B,), generator=gen)
    values = torch.rand(int(lengths.sum()), D, generator=gen)
    indices = torch.randint(0, B, (B,), generator=gen)
    d = {
        "values": values,
        "lengths": lengths,
        "indices": indices,
        "input_offsets": lengths.cumsum(0),
        "output_offsets": lengths[indices].cumsum(0),
    }
    return {k: v.to(device) for k, v in d.items()}


def _jagged_add(device: str) -> dict[str, Any]:
    d = _jagged(device)
    d["grad"] = torch.rand(int(d["output_offsets"][-1]), D, generator=seeded(1)).to(device)
    return d


def _tables(device: str, same_width: bool) -> dict[str, Any]:
    gen = seeded()
    cols = [D] * T if same_width else [64 if t % 2 else 128 for t in range(T)]
    flat = torch.rand(ROWS * sum(cols), generator=gen)
    indices = torch.randint(0, ROWS, (T * BATCH,), generator=gen)
    members = [torch.rand(ROWS, c, generator=gen) for c in cols]
    group_idx = [torch.randint(0, ROWS, (BATCH,), generator=gen) for _ in range(T)]
    return {
        "inputs": flat.to(device),
        "indices": indices.to(device),
        "cols": cols,
        "members": [m.to(device) for m in members],
        "group_idx": [i.to(device) for i in group_idx],
    }


def _bis(fn: Any, permute: bool = False) -> Any:
    return lambda d: fn(d["inputs"], d["indices"], [BATCH] * T, [ROWS] * T, d["cols"], permute)


def _lengths(device: str) -> dict[str, Any]:
    gen = seeded()
    lengths = torch.randint(0, MAX_LEN + 1, (T * BATCH,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    d = {
        "lengths": lengths,
        "offsets": offsets[:-1].contiguous(),
        "csr": offsets,
        "values": torch.rand(int(lengths.sum()), generator=gen),
    }
    out: dict[str, Any] = {k: v.to(device) for k, v in d.items()}
    out["total"] = int(lengths.sum())
    return out


JAGGED = f"B={B} D={D} lengths 0..{MAX_L}"
TABLES = f"{T} tables x {ROWS} rows, {BATCH} indices each"
KJT = f"{T}x{BATCH} lengths 0..{MAX_LEN}"

CASES = [
    Case(
        "index_select",
        "jagged_index_select",
        _jagged,
        lambda d: index_select.jagged_index_select_npu(d["values"], d["lengths"], d["indices"]),
        lambda d: F.jagged_index_select(d["values"], d["lengths"], d["indices"]),
        shape=JAGGED,
    ),
    Case(
        "index_select",
        "jagged_index_select_2d_forward_v2",
        _jagged,
        lambda d: index_select.jagged_index_select_2d_forward_v2_npu(
            d["values"], d["indices"], d["input_offsets"], d["output_offsets"]
        ),
        lambda d: F.jagged_index_select_2d_forward_v2(
            d["values"], d["indices"], d["input_offsets"], d["output_offsets"]
        ),
        shape=JAGGED,
    ),
    Case(
        "index_select",
        "jagged_index_add_2d_forward_v2",
        _jagged_add,
        lambda d: index_select.jagged_index_add_2d_forward_v2_npu(
            d["grad"],
            d["indices"],
            d["output_offsets"],
            d["input_offsets"],
            d["values"].size(0),
            d["grad"].size(0),
        ),
        lambda d: F.jagged_index_add_2d_forward_v2(
            d["grad"],
            d["indices"],
            d["output_offsets"],
            d["input_offsets"],
            d["values"].size(0),
            d["grad"].size(0),
        ),
        shape=JAGGED,
    ),
    Case(
        "index_select",
        "batch_index_select_dim0 (one width)",
        lambda dev: _tables(dev, True),
        _bis(batch_index_select.batch_index_select_dim0_npu),
        _bis(F.batch_index_select_dim0),
        shape=f"{TABLES}, D={D}",
    ),
    Case(
        "index_select",
        "batch_index_select_dim0 (D 64/128)",
        lambda dev: _tables(dev, False),
        _bis(batch_index_select.batch_index_select_dim0_npu),
        _bis(F.batch_index_select_dim0),
        shape=f"{TABLES}, D 64/128",
    ),
    Case(
        "index_select",
        "batch_index_select_dim0 permuted",
        lambda dev: _tables(dev, False),
        _bis(batch_index_select.batch_index_select_dim0_npu, True),
        _bis(F.batch_index_select_dim0, True),
        shape=f"{TABLES}, D 64/128",
    ),
    Case(
        "index_select",
        "group_index_select_dim0 (one width)",
        lambda dev: _tables(dev, True),
        lambda d: group_index_select.group_index_select_dim0_npu(d["members"], d["group_idx"]),
        lambda d: F.group_index_select_dim0(d["members"], d["group_idx"]),
        shape=f"{TABLES}, D={D}",
    ),
    Case(
        "index_select",
        "group_index_select_dim0 (D 64/128)",
        lambda dev: _tables(dev, False),
        lambda d: group_index_select.group_index_select_dim0_npu(d["members"], d["group_idx"]),
        lambda d: F.group_index_select_dim0(d["members"], d["group_idx"]),
        shape=f"{TABLES}, D 64/128",
    ),
    Case(
        "ranges",
        "offsets_range",
        _lengths,
        lambda d: ranges.offsets_range_npu(d["offsets"], d["total"]),
        lambda d: F.offsets_range(d["offsets"], d["total"]),
        shape=KJT,
    ),
    Case(
        "ranges",
        "lengths_range",
        _lengths,
        lambda d: ranges.lengths_range_npu(d["lengths"]),
        lambda d: F.lengths_range(d["lengths"]),
        shape=KJT,
    ),
    Case(
        "ranges",
        "lengths_range (shape given)",
        _lengths,
        lambda d: ranges.lengths_range_npu(d["lengths"], [d["total"]]),
        lambda d: F.lengths_range(d["lengths"], [d["total"]]),
        shape=KJT,
    ),
    Case(
        "segment",
        "segment_sum_csr",
        _lengths,
        lambda d: ranges.segment_sum_csr_npu(1, d["csr"], d["values"]),
        lambda d: F.segment_sum_csr(1, d["csr"], d["values"]),
        shape=f"{KJT}, float32",
    ),
]
