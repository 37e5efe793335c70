"""Inputs of the inference TBE lookup (``int_nbit_split_embedding_codegen_lookup_function``):
opcheck samples (:data:`BUILDERS`, merged into :mod:`fbgemm_npu.testing.op_samples`) and the
builder the tests and the conformance spec share (:func:`lookup_case`).

A case is built as upstream's users build it: an ``IntNBitTableBatchedEmbeddingBagsCodegen`` on
the CPU (``EmbeddingLocation.HOST``) with random rows -- N-bit rows get random half scales in
``[0.01, 0.11)`` and biases in ``[-0.5, 0.5)``, float rows finite normal values -- and the
module's buffers are the op's arguments, exactly what its ``forward`` passes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]
OP = "fbgemm::int_nbit_split_embedding_codegen_lookup_function"


def fill_rows(module: torch.nn.Module, g: torch.Generator) -> None:
    """Random rows for every table of an upstream inference TBE (weights placed first)."""
    from fbgemm_gpu.split_embedding_configs import SparseType

    for (_, _, _, ty, _), (q, scale, bias) in zip(
        module.embedding_specs, module.split_embedding_weights_with_scale_bias(2), strict=True
    ):
        if ty in (SparseType.FP32, SparseType.FP16):
            dt = torch.float32 if ty == SparseType.FP32 else torch.float16
            v = q.view(dt)
            v.copy_(torch.randn(v.shape, generator=g).to(dt))
            continue
        q.copy_(torch.randint(0, 256, q.shape, generator=g, dtype=torch.uint8))
        if scale is not None:
            scale.copy_(torch.rand(scale.shape, generator=g).mul(0.1).add(0.01).half())
            bias.copy_(torch.rand(bias.shape, generator=g).sub(0.5).half())


def cpu_module(
    tys: Sequence[Any],
    dims: Sequence[int],
    rows: int | Sequence[int] = 7,
    pooling: int = 0,
    output: Any = None,
    row_alignment: int | None = 16,
    seed: int = 0,
) -> torch.nn.Module:
    """An upstream inference TBE on the CPU with random rows (module docstring)."""
    from fbgemm_gpu.split_embedding_configs import SparseType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
        EmbeddingLocation,
        PoolingMode,
    )
    from fbgemm_gpu.split_table_batched_embeddings_ops_inference import (
        IntNBitTableBatchedEmbeddingBagsCodegen,
    )

    rows = [rows] * len(tys) if isinstance(rows, int) else list(rows)
    specs = [(f"t{k}", r, d, ty, EmbeddingLocation.HOST)
             for k, (ty, d, r) in enumerate(zip(tys, dims, rows, strict=True))]  # fmt: skip
    m = IntNBitTableBatchedEmbeddingBagsCodegen(
        specs,
        pooling_mode=PoolingMode(pooling),
        device="cpu",
        output_dtype=output or SparseType.FP32,
        row_alignment=row_alignment,
    )
    m.initialize_weights()
    fill_rows(m, torch.Generator().manual_seed(seed))
    return m


def lookup_case(
    tys: Sequence[Any],
    dims: Sequence[int],
    *,
    B: int = 3,
    rows: int = 7,
    pooling: int = 0,
    output: Any = None,
    weighted: bool = False,
    index_dtype: torch.dtype = torch.int64,
    minus_one: bool = True,
    max_len: int = 4,
    seed: int = 0,
) -> Sample:
    """CPU ``(args, kwargs)`` of one lookup: the module's buffers and random bags."""
    m = cpu_module(tys, dims, rows, pooling, output, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    T = len(tys)
    lengths = torch.randint(0, max_len + 1, (T * B,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(index_dtype)
    lo = -1 if minus_one else 0
    indices = torch.randint(lo, rows, (int(lengths.sum()),), generator=g).to(index_dtype)
    w = torch.rand(indices.numel(), generator=g) if weighted else None
    kwargs = lookup_kwargs(m, indices, offsets, w)
    return (), kwargs


def lookup_kwargs(m: torch.nn.Module, indices: Any, offsets: Any, w: Any) -> dict[str, Any]:
    """The lookup op's keyword arguments as the module ``m``'s ``forward`` passes them."""
    return dict(
        dev_weights=m.weights_host,
        uvm_weights=m.weights_uvm,
        weights_placements=m.weights_placements,
        weights_offsets=m.weights_offsets,
        weights_tys=m.weights_tys,
        D_offsets=m.D_offsets,
        total_D=m.total_D,
        max_int2_D=m.max_int2_D,
        max_int4_D=m.max_int4_D,
        max_int8_D=m.max_int8_D,
        max_float16_D=m.max_float16_D,
        max_float32_D=m.max_float32_D,
        indices=indices,
        offsets=offsets,
        pooling_mode=int(m.pooling_mode),
        indice_weights=w,
        output_dtype=m.output_dtype,
        row_alignment=m.row_alignment,
        max_float8_D=m.max_float8_D,
        fp8_exponent_bits=m.fp8_exponent_bits,
        fp8_exponent_bias=m.fp8_exponent_bias,
    )


def to_device(sample: Sample, device: str | torch.device) -> Sample:
    """``sample`` with every tensor copied to ``device``."""
    args, kwargs = sample
    move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
    return tuple(move(a) for a in args), {k: move(v) for k, v in kwargs.items()}


def _samples(d: str) -> list[Sample]:
    from fbgemm_gpu.split_embedding_configs import SparseType as S

    cases = [
        lookup_case([S.INT8], [8]),
        lookup_case([S.FP16, S.INT4], [8, 16], pooling=1, weighted=True, index_dtype=torch.int32),
        lookup_case([S.INT2, S.FP32], [8, 8], pooling=2, output=S.FP16),
    ]
    return [to_device(c, d) for c in cases]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {OP: _samples}
