"""Which ATen ops torch_npu 2.13 registers as NPU kernels (the counters' *unsupported* flag).

``aten_ops_torch_npu_2_13.txt`` lists them, one ``name.overload`` (or the bare name for the
default overload) a line, derived from torch_npu 2.13's own op tables (docs/hardware.md).  An op
missing from it falls back to the CPU or fails on an Ascend host.  Registered is not fast: the
dtypes a 910B runs on its AI CPU are :mod:`fbgemm_npu.testing.routes_910b`'s business.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

__all__ = ["ATEN_OPS_FILE", "torch_npu_runs_whole", "torch_npu_supports"]

ATEN_OPS_FILE = Path(__file__).with_name("aten_ops_torch_npu_2_13.txt")


@functools.cache
def _torch_npu_ops() -> frozenset[str]:
    lines = ATEN_OPS_FILE.read_text(encoding="utf-8").splitlines()
    return frozenset(s.strip() for s in lines if s.strip() and not s.startswith("#"))


def torch_npu_supports(func: torch._ops.OpOverload | str) -> bool:
    """Whether torch_npu 2.13 runs an ATen op natively (``aten.add.Tensor`` or ``"add.Tensor"``)."""
    if isinstance(func, str):
        name, _, overload = func.removeprefix("aten.").partition(".")
        overload = overload or "default"
    else:
        name, overload = func._schema.name.split("::", 1)[1], func._overloadname
    ops = _torch_npu_ops()
    return f"{name}.{overload}" in ops or (overload == "default" and name in ops)


def torch_npu_runs_whole(func: torch._ops.OpOverload) -> bool:
    """A composite ATen op (``silu_backward``, ``matmul``) that torch_npu runs as its own kernel:
    listed, and returning fresh tensors (``contiguous``, which may return its input or a copy,
    is told apart by its parts)."""
    return torch_npu_supports(func) and all(r.alias_info is None for r in func._schema.returns)
