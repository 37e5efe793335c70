"""A small fbgemm_gpu program, written as an fbgemm_gpu user on a CPU host writes one.

``tests/mirror/test_migration.py`` runs it as written (CPU), then with ``fbgemm_gpu`` replaced by
``fbgemm_npu`` in the text and ``npu`` as the device of the inputs; the TBE is given no device.

Usage: ``python fbgemm_gpu_script.py DEVICE OUT`` runs on DEVICE and ``torch.save``s the results
(on the CPU) to OUT.
"""

from __future__ import annotations

import sys

import fbgemm_gpu
import fbgemm_gpu.sparse_ops  # noqa: F401  - the Python ops (and their abstract impls)
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ComputeDevice,
    SplitTableBatchedEmbeddingBagsCodegen,
)

TABLES = [(20, 8), (30, 4)]  # (rows, dim)
BATCH, STEPS = 3, 3


def tbe_training(device: torch.device) -> tuple[dict[str, torch.Tensor], str]:
    """Rowwise AdaGrad TBE, a few forward/backward steps: (outputs and tables after, TBE device)."""
    gen = torch.Generator().manual_seed(0)
    tbe = SplitTableBatchedEmbeddingBagsCodegen(
        [(rows, dim, EmbeddingLocation.HOST, ComputeDevice.CPU) for rows, dim in TABLES],
        optimizer=EmbOptimType.EXACT_ROWWISE_ADAGRAD,
        learning_rate=0.1,
        eps=1e-8,
        weights_precision=SparseType.FP32,
        output_dtype=SparseType.FP32,
        pooling_mode=PoolingMode.SUM,
    )
    with torch.no_grad():
        for weights, (rows, dim) in zip(tbe.split_embedding_weights(), TABLES, strict=True):
            weights.copy_(torch.rand(rows, dim, generator=gen).to(weights.device) - 0.5)
    out: dict[str, torch.Tensor] = {}
    for step in range(STEPS):
        lengths = torch.randint(0, 4, (len(TABLES) * BATCH,), generator=gen)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
        indices = torch.cat(
            [
                torch.randint(0, TABLES[i // BATCH][0], (int(n),), generator=gen)
                for i, n in enumerate(lengths)
            ]
        )
        pooled = tbe(indices.to(device), offsets.to(device))
        grad = torch.randn(pooled.shape, generator=gen).to(device)
        pooled.backward(grad)
        out[f"pooled_{step}"] = pooled.detach()
    for t, weights in enumerate(tbe.split_embedding_weights()):
        out[f"weights_{t}"] = weights.detach()
    for t, states in enumerate(tbe.split_optimizer_states()):
        out[f"momentum_{t}"] = states[0].detach()
    return out, str(tbe.current_device)


def sparse_ops(device: torch.device) -> dict[str, torch.Tensor]:
    """Jagged <-> padded dense and a 2D sparse permute."""
    gen = torch.Generator().manual_seed(1)
    offsets = torch.tensor([0, 2, 2, 5, 6], device=device)
    values = torch.randn(6, 3, generator=gen).to(device)
    dense = torch.ops.fbgemm.jagged_to_padded_dense(values, [offsets], [4], -1.0)
    jagged, _ = torch.ops.fbgemm.dense_to_jagged(dense * 2, [offsets])
    lengths = torch.tensor([[1, 2, 0], [3, 1, 2]], dtype=torch.int32, device=device)
    indices = torch.arange(9, dtype=torch.int64, device=device)
    weights = torch.rand(9, generator=gen).to(device)
    permute = torch.tensor([1, 0], dtype=torch.int32, device=device)
    p_lengths, p_indices, p_weights = torch.ops.fbgemm.permute_2D_sparse_data(
        permute, lengths, indices, weights, None
    )
    return {
        "padded_dense": dense,
        "dense_to_jagged": jagged,
        "permuted_lengths": p_lengths,
        "permuted_indices": p_indices,
        "permuted_weights": p_weights,
    }


def main(device_name: str, path: str) -> None:
    torch.manual_seed(0)
    device = torch.device(device_name)
    tensors, tbe_device = tbe_training(device)
    tensors.update(sparse_ops(device))
    info = {
        "package": fbgemm_gpu.__name__,
        "tbe_device": tbe_device,
        "devices": sorted({str(v.device) for v in tensors.values()}),
        "optim": EmbOptimType.EXACT_ROWWISE_ADAGRAD.value,
        "sparse_type": str(SparseType.FP32.as_dtype()),
    }
    torch.save({"info": info, "tensors": {k: v.cpu() for k, v in tensors.items()}}, path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
