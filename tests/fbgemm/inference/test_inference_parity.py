"""The inference TBE lookup on npu against upstream's CPU kernel (the oracle), op level.

Each case is built by upstream's own module on the CPU (``fbgemm_npu/testing/
op_samples_inference.py``: rows padded to 16 bytes, random scales / biases), then the op runs on
both devices.  Tolerances: float32 output rtol 1e-5 / atol 1e-5 (upstream fuses ``scale * q +
bias`` and the weight into FMAs and adds in its own order; ours rounds each product and pools
by ``index_add_``: a few ulps of the sums); FP16 / BF16 outputs within one unit of their last
place of the float32 result (rtol 1e-2 / 4e-2 bf16) -- both convert the same float32 sums, so
most entries are equal.  FP8 cases draw no -1 index: upstream's FP8 kernel stops at a -1 and
leaves that feature's remaining bags zero (test_inference_fp8_minus_one states ours).
"""

from __future__ import annotations

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import SparseType as S

from fbgemm_npu.testing.op_samples_inference import lookup_case, to_device

F = torch.ops.fbgemm
TOL = {S.FP32: (1e-5, 1e-5), S.FP16: (1e-3, 1e-3), S.BF16: (1e-2, 1e-2)}


def _check(sample, output: S = S.FP32) -> None:
    args, kwargs = sample
    want = F.int_nbit_split_embedding_codegen_lookup_function(*args, **kwargs)
    nargs, nkwargs = to_device(sample, "npu")
    got = F.int_nbit_split_embedding_codegen_lookup_function(*nargs, **nkwargs)
    assert got.device.type == "npu" and got.dtype == want.dtype and got.shape == want.shape
    rtol, atol = TOL.get(output, (0, 0))
    torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol)


TYPES = [S.FP32, S.FP16, S.INT8, S.INT4, S.INT2]


@pytest.mark.parametrize("ty", TYPES, ids=str)
@pytest.mark.parametrize("pooling", [0, 1, 2], ids=["sum", "mean", "none"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_one_type(ty: S, pooling: int, weighted: bool) -> None:
    for idt in (torch.int32, torch.int64):
        _check(lookup_case([ty, ty], [8, 8], pooling=pooling, weighted=weighted, index_dtype=idt))


@pytest.mark.parametrize("output", [S.FP32, S.FP16, S.BF16], ids=str)
@pytest.mark.parametrize("pooling", [0, 1, 2], ids=["sum", "mean", "none"])
def test_mixed_types_and_dims(output: S, pooling: int) -> None:
    tys = [S.INT8, S.FP16, S.INT4, S.FP32, S.INT2]
    dims = [8] * 5 if pooling == 2 else [8, 16, 4 * 8, 4, 16]
    for seed in range(3):
        case = lookup_case(tys, dims, pooling=pooling, output=output, weighted=seed == 1,
                           B=4, seed=seed)  # fmt: skip
        _check(case, output)


@pytest.mark.parametrize("pooling", [0, 1, 2], ids=["sum", "mean", "none"])
def test_fp8(pooling: int) -> None:
    for seed in range(2):
        _check(lookup_case([S.FP8, S.INT8], [8, 8], pooling=pooling, minus_one=False, seed=seed))


def test_int8_output_nobag() -> None:
    _check(lookup_case([S.INT8, S.INT8], [8, 8], pooling=2, output=S.INT8,
                       minus_one=False))  # fmt: skip


def test_wide_rows_and_large_batch() -> None:
    _check(lookup_case([S.INT4, S.INT8], [128, 64], B=64, rows=300, max_len=20, seed=5))


def test_empty_bags_and_batches() -> None:
    _check(lookup_case([S.INT8], [8], max_len=0))  # every bag empty: no index at all
    args, kwargs = lookup_case([S.INT8, S.FP16], [8, 8], B=0)
    _check((args, kwargs))
    _check(lookup_case([S.INT8], [8], pooling=2, max_len=0))


def test_managed_placement_reads_uvm_weights() -> None:
    """Placement MANAGED (1) reads ``uvm_weights``, HOST (3) ``dev_weights``, as upstream's CPU
    kernel: feature 1's table is moved to a buffer of its own, at offset 0."""
    args, kwargs = lookup_case([S.INT8, S.INT4, S.FP16], [8, 16, 8], seed=3)
    offs = kwargs["weights_offsets"].tolist()
    dev = kwargs["dev_weights"]
    uvm = dev[offs[1] : offs[2]].clone()
    dev = dev.clone()
    dev[offs[1] : offs[2]] = 0  # the uvm buffer is the only copy
    kwargs.update(
        dev_weights=dev,
        uvm_weights=uvm,
        weights_offsets=torch.tensor([offs[0], 0, offs[2]]),
        weights_placements=torch.tensor([3, 1, 3], dtype=torch.int32),
    )
    _check((args, kwargs))
