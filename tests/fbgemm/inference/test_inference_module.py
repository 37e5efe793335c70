"""Upstream's ``IntNBitTableBatchedEmbeddingBagsCodegen`` on npu: forward equal to the same module
on the CPU (tolerances of test_inference_parity.py), built by upstream's class with
``device=npu`` and by the mirror's subclass (``fbgemm_npu/split_table/modules.py``), whose
default device is the npu; MANAGED / MANAGED_CACHING refused by name; a seeded layout reads
nothing back."""

from __future__ import annotations

import pytest
import torch
from fbgemm_gpu import split_table_batched_embeddings_ops_inference as up
from fbgemm_gpu.split_embedding_configs import SparseType as S
from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation as L
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode

from fbgemm_npu.split_table import modules
from fbgemm_npu.testing.counters import count
from fbgemm_npu.testing.op_samples_inference import cpu_module

NPU = torch.device("npu", 0)
TYS = [S.INT8, S.FP16, S.INT4, S.FP32, S.INT2, S.FP8]
DIMS = [8, 16, 32, 8, 16, 24]


def _batch(T: int, B: int, rows: int, dtype: torch.dtype, seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 5, (T * B,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(dtype)
    indices = torch.randint(0, rows, (int(lengths.sum()),), generator=g).to(dtype)
    return indices, offsets, torch.rand(indices.numel(), generator=g)


def _npu_copy(cls: type, cpu: torch.nn.Module, pooling: PoolingMode, output: S, **kw) -> object:
    specs = [(n, r, d, t, L.DEVICE) for n, r, d, t, _ in cpu.embedding_specs]
    m = cls(specs, pooling_mode=pooling, output_dtype=output, **kw)
    m.initialize_weights()
    m.assign_embedding_weights(
        [
            (w.to(m.current_device), None if s is None else s.to(m.current_device))
            for w, s in cpu.split_embedding_weights()
        ]  # fmt: skip
    )
    return m


@pytest.mark.parametrize("pooling", [PoolingMode.SUM, PoolingMode.MEAN], ids=str)
@pytest.mark.parametrize("output", [S.FP32, S.FP16, S.BF16], ids=str)
def test_upstream_class_on_npu_equals_cpu(pooling: PoolingMode, output: S) -> None:
    cpu = cpu_module(TYS, DIMS, rows=11, pooling=int(pooling), output=output, row_alignment=None)
    npu = _npu_copy(up.IntNBitTableBatchedEmbeddingBagsCodegen, cpu, pooling, output, device=NPU)
    assert npu.row_alignment == 16 and cpu.row_alignment == 1  # the rows' padding differs
    tol = {S.FP32: 1e-5, S.FP16: 1e-3, S.BF16: 1e-2}[output]
    for seed, dtype in enumerate((torch.int32, torch.int64)):
        indices, offsets, w = _batch(len(TYS), 5, 11, dtype, seed)
        for weights in (None, w):
            want = cpu(indices, offsets, weights)
            nw = None if weights is None else weights.to(NPU)
            got = npu(indices.to(NPU), offsets.to(NPU), nw)
            assert got.device == NPU and got.dtype == want.dtype
            torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol)


def test_mirror_class_defaults_to_npu_and_reads_nothing_back() -> None:
    cpu = cpu_module([S.INT8, S.INT4], [16, 16], rows=9, pooling=2, row_alignment=None)
    host_specs = list(cpu.embedding_specs)  # EmbeddingLocation.HOST: a CPU host's script
    m = modules.IntNBitTableBatchedEmbeddingBagsCodegen(
        host_specs, pooling_mode=PoolingMode.NONE, output_dtype=S.FP32
    )
    assert m.current_device.type == "npu" and m.embedding_specs[0][4] == L.DEVICE
    m.initialize_weights()
    weights = cpu.split_embedding_weights()
    m.assign_embedding_weights([(w.to("npu"), s.to("npu")) for w, s in weights])
    indices, offsets, _ = _batch(2, 4, 9, torch.int64, 3)
    want = cpu(indices, offsets)
    args = (indices.to("npu"), offsets.to("npu"))
    with count() as c:
        got = m(*args)
    assert c.syncs == 0 and c.stalls == 0, c.summary()
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    on_cpu = modules.IntNBitTableBatchedEmbeddingBagsCodegen(host_specs, device="cpu")
    assert on_cpu.current_device == torch.device("cpu")


@pytest.mark.parametrize("location", [L.MANAGED, L.MANAGED_CACHING], ids=str)
def test_managed_tables_are_refused_on_npu(location: L) -> None:
    specs = [("t0", 10, 8, S.INT8, L.DEVICE), ("t1", 10, 8, S.INT8, location)]
    match = rf"table 1 has EmbeddingLocation.{location.name}"
    with pytest.raises(NotImplementedError, match=match):
        modules.IntNBitTableBatchedEmbeddingBagsCodegen(specs)
    with pytest.raises(NotImplementedError, match=match):  # upstream's class: device.py patch 5
        up.IntNBitTableBatchedEmbeddingBagsCodegen(specs, device=NPU)


def test_upstream_class_on_npu_reads_nothing_back() -> None:
    """torchrec builds upstream's class directly: patches 5 and 6 of split_table/device.py seed
    the layout, so even the first forward has no sync (nor a blocking upload)."""
    cpu = cpu_module([S.INT8, S.FP16], [8, 16], rows=9, row_alignment=None)
    npu = _npu_copy(up.IntNBitTableBatchedEmbeddingBagsCodegen, cpu, PoolingMode.SUM, S.FP32,
                    device=NPU)  # fmt: skip
    indices, offsets, _ = _batch(2, 4, 9, torch.int32, 7)
    args = (indices.to(NPU), offsets.to(NPU))
    with count() as c:
        got = npu(*args)
    assert c.syncs == 0 and c.stalls == 0, c.summary()
    torch.testing.assert_close(got.cpu(), cpu(indices, offsets), rtol=1e-5, atol=1e-5)
