"""Opcheck samples of the sll family (``fbgemm_npu/native/fbgemm/sll/``), merged into
:mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device`` by
:func:`fbgemm_npu.testing.sll_inputs.sll_args` -- int64 and int32 offsets, sequences longer than
``max_seq_len`` where the op caps them, float inputs requiring grad first (the autograd kernels),
the last sample of each op without."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fbgemm_npu.testing.sll_inputs import OPS, move, sll_args

Sample = tuple[tuple[Any, ...], dict[str, Any]]

# the positions of the differentiable inputs of the ops upstream gives autograd
_GRAD = {
    "sll_jagged_dense_bmm": (0, 1),
    "sll_jagged_jagged_bmm": (0, 1),
    "sll_jagged_dense_elementwise_add": (0, 2),
    "sll_jagged_dense_elementwise_mul_jagged_out": (0,),
    "sll_array_jagged_bmm_jagged_out": (0, 1),
    "sll_jagged_jagged_bmm_jagged_out": (0, 1),
}
# max_seq_len below the longest sequence where the op caps (upstream's CPU kernel reads it)
_CAPPED = {"sll_jagged_dense_bmm", "sll_jagged_jagged_bmm", "sll_array_jagged_bmm_jagged_out"}


def _with_grad(args: tuple[Any, ...], grad: tuple[int, ...]) -> tuple[Any, ...]:
    return tuple(a.clone().requires_grad_() if i in grad else a for i, a in enumerate(args))


def _builder(op: str) -> Callable[[str], list[Sample]]:
    def build(d: str) -> list[Sample]:
        grad = _GRAD.get(op, ())
        first = move(sll_args(op, 3, 4, 3, seed=1), d)
        second = move(sll_args(op, 4, 3, 2, seed=2, index=torch.int32), d)
        samples = [(_with_grad(first, grad), {}), (_with_grad(second, grad[:1]), {})]
        if op in _CAPPED:
            samples.append((_with_grad(move(sll_args(op, 3, 5, 2, seed=3, cap=2), d), grad), {}))
        samples.append((move(sll_args(op, 2, 3, 2, seed=4), d), {}))
        return samples

    return build


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {f"fbgemm::{op}": _builder(op) for op in OPS}
