"""The jagged family outside the npu kernels' own path: registration (the composite ops are
upstream's, and ``torch.export`` decomposes them on npu as on CPU), the kernels called directly
on CPU tensors (device-generic tensor programs give upstream's result there too), and torchrec's
``JaggedTensor`` on npu.
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


COMPOSITES = ("jagged_to_padded_dense", "dense_to_jagged")


def test_composite_ops_are_upstreams() -> None:
    """Upstream's CompositeImplicitAutograd kernels, with no PrivateUse1 kernel of ours (only
    the autograd one that guards the arguments): on npu they run our forward ops (no missing
    kernel), with autograd, without, and in inference mode (below autograd)."""
    for op in COMPOSITES:
        name = f"fbgemm::{op}"
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd")
        assert not torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1"), op
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "AutogradPrivateUse1"), op
    for grad, inference in ((False, False), (True, False), (False, True)):
        dense = torch.ones(3, 3, 1, device=NPU, requires_grad=grad)
        with torch.inference_mode(inference), count() as c:  # inference: below autograd
            out, offsets = F.dense_to_jagged(dense, [_O], 5)
            F.jagged_to_padded_dense(out, offsets, [3], 0.0)
        assert not c.missing_kernels and offsets[0] is _O  # upstream's composite returns them
        assert out.requires_grad == grad
        assert [r.op for r in c.calls if r.depth == 0][-1].startswith("fbgemm.jagged_to_padded")


class _ToDenseAndBack(torch.nn.Module):
    def forward(self, values: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, ...]:
        dense = F.jagged_to_padded_dense(values, [offsets], [4], -1.0)
        return dense, F.dense_to_jagged(dense, [offsets], values.size(0))[0]


def _exported(device: str) -> tuple[list[str], list[str], tuple[torch.Tensor, ...]]:
    """The fbgemm ops of the export and of its decomposition, and the decomposed module's
    outputs (on the host)."""
    v, o = jagged(4, 3, 2, seed=3)
    args = (v.to(device), o.to(device))
    ep = torch.export.export(_ToDenseAndBack(), args)
    done = ep.run_decompositions()

    def ops(graph: torch.fx.Graph) -> list[str]:
        return [str(n.target) for n in graph.nodes if "fbgemm" in str(n.target)]

    outs = tuple(t.cpu() for t in done.module()(*args))
    return ops(ep.graph), ops(done.graph), outs


def test_export_decomposes_the_composites_as_on_cpu() -> None:
    """``torch.export(...).run_decompositions()`` turns the composites into their forward ops on
    npu as on CPU (a PrivateUse1 kernel on them would keep them whole), and the decomposed
    program gives upstream's result."""
    cpu, npu = _exported("cpu"), _exported(NPU)
    assert npu[0] == cpu[0] == [f"fbgemm.{op}.default" for op in COMPOSITES]
    assert npu[1] == cpu[1] == [f"fbgemm.{op}_forward.default" for op in COMPOSITES]
    for got, expected in zip(npu[2], cpu[2], strict=True):
        assert torch.equal(got, expected)


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
