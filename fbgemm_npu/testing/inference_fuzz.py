"""Draws and programs of the inference family's fuzz tests (``tests/fuzz/test_fuzz_inference.py``).

A case's tables are built as upstream's users build them: an
``IntNBitTableBatchedEmbeddingBagsCodegen`` on the CPU with random rows
(:func:`fbgemm_npu.testing.op_samples_inference.cpu_module`, rows padded to 16 bytes), every
table of its own drawn type (FP32, FP16, FP8, INT8, INT4, INT2), ``D`` and row count.  The op
cases pass the module's buffers to ``fbgemm::int_nbit_split_embedding_codegen_lookup_function``
(what its ``forward`` passes); the program :func:`module_forward` runs the whole module -- built
on the device of its rows, with ``index_remapping`` (row pruning: upstream's array or hash-map
form) when given -- so the harness compares upstream's class on npu with the same class on the
CPU (upstream's own kernels: ``pruned_array_lookup``, ``PrunedMapCPU``, the lookup).

Upstream's FP8 CPU kernel stops at a ``-1`` index (tests/fbgemm/inference/
test_inference_errors.py): FP8 tables draw no ``-1``.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz_strategies import seeded

__all__ = [
    "TYPES",
    "Tables",
    "draw_batch",
    "draw_tables",
    "module_forward",
    "op_kwargs",
    "remapping",
]

# SparseType codes: FP32, FP16, FP8, INT8, INT4, INT2
FP32, FP16, INT8, INT4, INT2, FP8 = 0, 1, 2, 3, 4, 6
TYPES = (FP32, FP16, FP8, INT8, INT4, INT2)
OUTPUTS = (0, 1, 5)  # FP32, FP16, BF16 (INT8, 2, for pooling NONE over INT8 tables)

Tables = dict[str, Any]  # tys, dims, rows, pooling, output, seed


def draw_tables(data: Any, pooling: int | None = None, max_T: int = 4) -> Tables:
    """A layout: 1 to ``max_T`` tables of drawn types, ``D`` (one ``D`` for NONE: upstream's
    module requires it) and rows; the pooling mode and an output dtype it allows."""
    T = data.draw(st.integers(1, max_T), label="tables")
    tys = [data.draw(st.sampled_from(TYPES), label="type") for _ in range(T)]
    if pooling is None:
        pooling = data.draw(st.sampled_from((0, 1, 2)), label="pooling")
    dim = st.sampled_from((4, 8, 16, 24, 32))
    dims = [data.draw(dim, label="D")] * T if pooling == 2 else [data.draw(dim) for _ in range(T)]
    rows = [data.draw(st.integers(1, 12), label="rows") for _ in range(T)]
    outputs = OUTPUTS + ((INT8,) if pooling == 2 and set(tys) == {INT8} else ())
    output = data.draw(st.sampled_from(outputs), label="output")
    seed = data.draw(st.integers(0, 2**16), label="rows seed")
    return {"tys": tys, "dims": dims, "rows": rows, "pooling": pooling, "output": output,
            "seed": seed}  # fmt: skip


def _module(tables: Tables, row_alignment: int | None = 16) -> torch.nn.Module:
    from fbgemm_gpu.split_embedding_configs import SparseType

    from fbgemm_npu.testing.op_samples_inference import cpu_module

    return cpu_module(
        [SparseType.from_int(t) for t in tables["tys"]],
        tables["dims"],
        tables["rows"],
        tables["pooling"],
        SparseType.from_int(tables["output"]),
        row_alignment=row_alignment,
        seed=tables["seed"],
    )


def draw_batch(
    data: Any,
    tables: Tables,
    rows: list[int] | None = None,
    minus_one: bool = True,
    min_B: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Valid int64 ``(indices, lengths, B)``: B (``min_B`` to 4) bags per table of 0 to 4
    indices (empty bags, empty batches), each in ``[-1, rows_t)`` (``-1``: a pruned row; none in
    FP8 tables)."""
    gen = seeded(data)
    rows = rows or tables["rows"]
    B = data.draw(st.integers(min_B, 4), label="B")
    T = len(rows)
    lengths = torch.randint(0, 5, (T * B,), generator=gen)
    idx = []
    for t in range(T):
        n = int(lengths[t * B : (t + 1) * B].sum())
        lo = -1 if minus_one and tables["tys"][t] != FP8 else 0
        idx.append(torch.randint(lo, rows[t], (n,), generator=gen))
    indices = torch.cat(idx) if idx else torch.zeros(0, dtype=torch.int64)
    return indices, lengths, B


def op_kwargs(tables: Tables, indices: Any, offsets: Any, indice_weights: Any) -> dict[str, Any]:
    """The lookup op's arguments as the module's ``forward`` passes them."""
    from fbgemm_npu.testing.op_samples_inference import lookup_kwargs

    return lookup_kwargs(_module(tables), indices, offsets, indice_weights)


def table_rows(tables: Tables) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """Every table's rows and scale / bias bytes, as ``split_embedding_weights`` gives them."""
    return [(w.clone(), None if s is None else s.clone())
            for w, s in _module(tables).split_embedding_weights()]  # fmt: skip


def remapping(data: Any, tables: Tables) -> tuple[list[torch.Tensor | None], list[int]]:
    """An ``index_remapping``: per table ``None`` (not pruned) or an int32 map of its original
    rows (its row count or more) to a distinct row of the pruned table or ``-1``; returns it and
    the original row counts."""
    gen = seeded(data)
    maps: list[torch.Tensor | None] = []
    original = []
    for rows, ty in zip(tables["rows"], tables["tys"], strict=True):
        # a pruned row is a -1 index: upstream's FP8 CPU kernel stops at one (module docstring)
        if ty == FP8 or not data.draw(st.booleans(), label="pruned"):
            maps.append(None)
            original.append(rows)
            continue
        n = rows + data.draw(st.integers(0, 8), label="pruned rows")
        m = torch.full((n,), -1, dtype=torch.int32)
        kept = torch.randperm(n, generator=gen)[:rows]
        m[kept] = torch.randperm(rows, generator=gen).to(torch.int32)
        maps.append(m)
        original.append(n)
    return maps, original


def module_forward(
    weights: list[tuple[torch.Tensor, torch.Tensor | None]],
    indices: Any,
    offsets: Any,
    per_sample_weights: Any = None,
    remap: list[torch.Tensor | None] | None = None,
    *,
    tables: Tables,
    use_array: bool = True,
    bounds: str = "WARNING",
) -> tuple[Any, Any]:
    """Upstream's ``IntNBitTableBatchedEmbeddingBagsCodegen`` built on ``weights[0][0].device``
    (``index_remapping=remap``, the array form or the hash map), rows from ``weights``; returns
    the forward's output and the bounds-check warning counter."""
    from fbgemm_gpu.split_embedding_configs import SparseType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
        BoundsCheckMode,
        EmbeddingLocation,
        PoolingMode,
    )
    from fbgemm_gpu.split_table_batched_embeddings_ops_inference import (
        IntNBitTableBatchedEmbeddingBagsCodegen,
    )

    device = weights[0][0].device
    location = EmbeddingLocation.HOST if device.type == "cpu" else EmbeddingLocation.DEVICE
    specs = [(f"t{k}", r, d, SparseType.from_int(ty), location)
             for k, (ty, d, r) in enumerate(zip(tables["tys"], tables["dims"], tables["rows"],
                                                strict=True))]  # fmt: skip
    m = IntNBitTableBatchedEmbeddingBagsCodegen(
        specs,
        index_remapping=None if remap is None else [None if r is None else r.cpu() for r in remap],
        pooling_mode=PoolingMode(tables["pooling"]),
        device=device,
        bounds_check_mode=BoundsCheckMode[bounds],
        use_array_for_index_remapping=use_array,
        output_dtype=SparseType.from_int(tables["output"]),
        row_alignment=16,
        indices_dtype=indices.dtype,  # upstream: the remapping tables' dtype, the indices'
    )
    m.initialize_weights()
    m.assign_embedding_weights(weights)
    out = m(indices, offsets, per_sample_weights)
    return out, m.bounds_check_warning.clone()
