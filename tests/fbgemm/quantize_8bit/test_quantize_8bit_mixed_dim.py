"""``Fused8BitRowwiseQuantizedToFloatMixedDim`` on npu: upstream has only a CUDA kernel
(``quantize_fused_8bit_rowwise.cu``), so the oracle is its math run through upstream's CPU
kernels: each table's block dequantized by ``Fused8BitRowwiseQuantizedToFloat`` (the same
float32 FMA per byte), side by side; plus its hostile input (a ``RuntimeError`` naming the op
and the argument; bad offsets a queued data check, clamped so nothing reads past the rows)."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native._pending import check as read_checks

F = torch.ops.fbgemm
NPU = "npu"
OP = "Fused8BitRowwiseQuantizedToFloatMixedDim"


def tables(widths: list[int], rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused rows of tables of ``widths`` side by side, and their int32 ``D_offsets``."""
    g = torch.Generator().manual_seed(seed)
    blocks = [
        F.FloatToFused8BitRowwiseQuantized(torch.randn(rows, w, generator=g) * 10 ** (i % 4))
        for i, w in enumerate(widths)
    ]
    q = torch.cat(blocks, 1) if blocks else torch.zeros(rows, 0, dtype=torch.uint8)
    sizes = torch.tensor([w + 8 for w in widths], dtype=torch.int64)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)]).to(torch.int32)
    return q, offsets


def reference(q: torch.Tensor, offsets: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Each table's block through upstream's CPU dequantize (float32 FMA), concatenated."""
    bounds = offsets.tolist()
    parts = [
        F.Fused8BitRowwiseQuantizedToFloat(q[:, a:b].contiguous())
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    out = torch.cat(parts, 1) if parts else torch.zeros(q.shape[0], q.shape[1])
    return out.to(dtype)


@pytest.mark.parametrize("widths", [[3], [4, 0, 7], [0], [16, 1, 1, 33], [], [2] * 9], ids=str)
@pytest.mark.parametrize("output_dtype", [0, 1])
def test_mixed_dim_matches_per_table_dequantize(widths: list[int], output_dtype: int) -> None:
    dtype = (torch.float32, torch.float16)[output_dtype]
    for rows in (0, 1, 6):
        q, offsets = tables(widths, rows, len(widths) + rows)
        got = F.Fused8BitRowwiseQuantizedToFloatMixedDim(q.to(NPU), offsets.to(NPU), output_dtype)
        assert got.dtype == dtype and got.shape == (rows, sum(widths))
        assert torch.equal(got.cpu(), reference(q, offsets, dtype))


def test_columns_outside_the_tables_are_zero() -> None:
    """``D_offsets`` need not start at 0 nor end at the last column: upstream writes only the
    tables' columns into its zeros."""
    q, offsets = tables([3, 5], 4, 1)
    pad = torch.randint(0, 256, (4, 6), dtype=torch.uint8)
    wide = torch.cat([pad[:, :2], q, pad[:, 2:]], 1)  # 2 columns before, 4 after
    got = F.Fused8BitRowwiseQuantizedToFloatMixedDim(wide.to(NPU), (offsets + 2).to(NPU), 0)
    want = torch.zeros(4, wide.shape[1] - 16)
    want[:, 2:10] = reference(q, offsets, torch.float32)
    assert torch.equal(got.cpu(), want)


def _raises(call, arg: str) -> None:
    with pytest.raises(RuntimeError) as info:
        call()
    assert OP in str(info.value) and arg in str(info.value), str(info.value)


def test_mixed_dim_refuses_bad_arguments() -> None:
    q, offsets = tables([4, 4], 3, 2)
    q, offsets = q.to(NPU), offsets.to(NPU)
    op = F.Fused8BitRowwiseQuantizedToFloatMixedDim
    _raises(lambda: op(q, offsets, 5), "output_dtype")  # BF16: not in upstream's kernel
    _raises(lambda: op(q.float(), offsets, 0), "'input'")
    _raises(lambda: op(q[None], offsets, 0), "'input'")
    _raises(lambda: op(q, offsets.long(), 0), "'D_offsets'")
    _raises(lambda: op(q, offsets[None], 0), "'D_offsets'")
    _raises(lambda: op(q, offsets[:0], 0), "'D_offsets'")
    _raises(lambda: op(q[:, :10], offsets, 0), "'input'")  # fewer columns than 2 tables' qparams
    _raises(lambda: op(q, offsets.cpu(), 0), "D_offsets")


@pytest.mark.parametrize(
    "bad", [[0, 12, 6], [0, 30, 24], [-4, 12, 24], [0, 5, 24], [0, 12, 2**31 - 1]], ids=str
)
def test_bad_offsets_fail_the_queued_check(bad: list[int]) -> None:
    q, _ = tables([4, 4], 3, 3)
    offsets = torch.tensor(bad, dtype=torch.int32, device=NPU)
    out = F.Fused8BitRowwiseQuantizedToFloatMixedDim(q.to(NPU), offsets, 0)  # memory-safe
    assert out.shape == (3, 8)
    with pytest.raises(RuntimeError, match="D_offsets"):
        read_checks()
