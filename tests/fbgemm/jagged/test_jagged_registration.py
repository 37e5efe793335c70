"""The jagged family outside the npu kernels' own path: registration (the composite ops have
npu kernels of their own), the kernels called directly on CPU tensors (device-generic tensor
programs give upstream's result there too), and torchrec's ``JaggedTensor`` on npu.
"""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native.fbgemm.jagged import jagged as ours
from fbgemm_npu.testing.counters import count
from fbgemm_npu.testing.jagged_inputs import OFFSETS, jagged

F = torch.ops.fbgemm
NPU = "npu"
_O = OFFSETS.to(NPU)


# ---- registration and CPU calls ----------------------------------------------------------------


def test_composite_ops_have_npu_kernels() -> None:
    for op in ("jagged_to_padded_dense", "dense_to_jagged"):
        for key in ("PrivateUse1", "AutogradPrivateUse1"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"fbgemm::{op}", key), (op, key)
    with count() as c:
        F.dense_to_jagged(torch.ones(3, 3, 1, device=NPU), [_O], 5)
    assert not c.missing_kernels


def test_kernels_run_on_cpu_tensors() -> None:
    """The kernels are device-generic: on CPU tensors they give upstream's result."""
    v, o = jagged(16, 8, 4, seed=5, index=torch.int32)
    assert torch.equal(
        ours.jagged_to_padded_dense_npu(v, [o], [8], 0.5),
        F.jagged_to_padded_dense(v, [o], [8], 0.5),
    )
    dense = torch.randn(16, 8, 4)
    assert torch.equal(
        ours.dense_to_jagged_forward_npu(dense, [o], v.size(0)),
        F.dense_to_jagged_forward(dense, [o], v.size(0)),
    )


# ---- torchrec on npu ----------------------------------------------------------------------------


def test_torchrec_jagged_tensor_to_padded_dense() -> None:
    jt_mod = pytest.importorskip("torchrec.sparse.jagged_tensor", reason="torchrec not importable")
    lengths = torch.tensor([2, 0, 3, 1])
    values = torch.arange(1.0, 7.0)
    expected = jt_mod.JaggedTensor(values=values, lengths=lengths).to_padded_dense(2, -1.0)
    jt = jt_mod.JaggedTensor(values=values.to(NPU), lengths=lengths.to(NPU))
    with count() as c:
        got = jt.to_padded_dense(2, -1.0)
    assert got.device.type == NPU and torch.equal(got.cpu(), expected)
    assert not c.missing_kernels
