"""Specs for the sll family's ops (``fbgemm_npu/native/fbgemm/sll/``) against upstream's CPU
kernels (``fbgemm_gpu/sll/cpu/cpu_sll.py``), values and gradients.

Inputs: ``fbgemm_npu.testing.sll_inputs.sll_args`` -- B = 0..5 sequences of 0..6 rows, inner
dims 1..4, float32 / float16 / bfloat16, int32 / int64 offsets, ``max_seq_len`` from 0 to past
the longest sequence (the capping ops truncate), the first input contiguous or transposed.  The
gradient specs of the jagged-output bmms draw ``max_seq_len >=`` every length: past it
upstream's backward is not the gradient of its forward (``tests/fbgemm/sll/test_sll_errors.py``
holds ours to the math there).  Oracle: upstream; integer outputs (offsets) exact, floats within
one rounding of the output dtype (the bmms sum in another order: ``rtol`` 1e-5 float32,
``2**-8`` float16, ``2**-5`` bfloat16, ``atol`` for sums that cancel).  Budgets: the ops'
entries, ``int32`` where the budget names that path.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, TensorView, Tol
from fbgemm_npu.testing.sll_inputs import OPS, sll_args

F = torch.ops.fbgemm
ROUNDING = Compare(
    {
        torch.float32: Tol(rtol=1e-5, atol=1e-5),
        torch.float16: Tol(rtol=2**-8, atol=2e-2),
        torch.bfloat16: Tol(rtol=2**-5, atol=1e-1),
    }
)
GRAD = {
    "sll_jagged_dense_bmm": (0, 1),
    "sll_jagged_jagged_bmm": (0, 1),
    "sll_jagged_dense_elementwise_add": (0, 2),
    "sll_jagged_dense_elementwise_mul_jagged_out": (0,),
    "sll_array_jagged_bmm_jagged_out": (0, 1),
    "sll_jagged_jagged_bmm_jagged_out": (0, 1),
}
_UNCAPPED_GRADS = ("sll_array_jagged_bmm_jagged_out", "sll_jagged_jagged_bmm_jagged_out")
_INT32_PATH = (
    "sll_jagged_dense_elementwise_mul_jagged_out",
    "sll_jagged_self_substraction_jagged_out",
    "sll_array_jagged_bmm_jagged_out",
    "sll_jagged_jagged_bmm_jagged_out",
)


def _inputs(op: str, backward: bool) -> st.SearchStrategy[tuple[Any, ...]]:
    @st.composite
    def draw_args(draw: st.DrawFn) -> tuple[Any, ...]:
        b, max_len, d = draw(st.integers(0, 5)), draw(st.integers(0, 6)), draw(st.integers(1, 4))
        low = max_len if backward and op in _UNCAPPED_GRADS else 0
        cap = draw(st.integers(low, max_len + 1))
        dtype = draw(st.sampled_from([torch.float32, torch.float16, torch.bfloat16]))
        index = draw(st.sampled_from([torch.int64, torch.int32]))
        seed = draw(st.integers(0, 2**16))
        args = list(sll_args(op, b, max_len, d, seed=seed, dtype=dtype, index=index, cap=cap))
        if draw(st.booleans()) and args[0].dim() == 2:  # a transposed first input
            base = args[0].t().contiguous()
            args[0] = TensorView(base, lambda t: t.t(), "transposed")
        return tuple(args)

    return draw_args()


def _rows(a: Any) -> int:
    return (a.view(a.base) if isinstance(a, TensorView) else a).size(0)


def _budget(op: str) -> Any:
    def use(*args: Any) -> BudgetUse:
        int32 = any(isinstance(a, torch.Tensor) and a.dtype == torch.int32 for a in args)
        if op in ("sll_jagged_dense_bmm", "sll_jagged_jagged_bmm"):
            rows = _rows(args[0]) if op == "sll_jagged_dense_bmm" else min(map(_rows, args[:2]))
            if 0 < rows < args[3]:  # N past the rows: the sequences' ends are checked too
                return BudgetUse(path="n_past_rows")
        return BudgetUse(path="int32" if int32 and op in _INT32_PATH else None)

    return use


def _examples(op: str) -> tuple[tuple[Any, ...], ...]:
    return (
        sll_args(op, 0, 3, 2),  # no sequence (upstream's cat raises: ours too)
        sll_args(op, 3, 0, 2),  # every sequence empty
        sll_args(op, 4, 5, 2, seed=1, cap=2),  # sequences past max_seq_len
        sll_args(op, 3, 4, 3, seed=2, index=torch.int32),
    )


def _spec(op: str, backward: bool) -> OpSpec:
    return OpSpec(
        name=op + (".grad" if backward else ""),
        op=getattr(F, op),
        inputs=_inputs(op, backward),
        compare=ROUNDING,
        budget=_budget(op),
        backward=backward,
        grad_inputs=GRAD[op] if backward else (),
        examples=() if backward else _examples(op),
        notes="upstream's products summed in another order: one output rounding",
    )


SPECS = [_spec(op, False) for op in OPS] + [_spec(op, True) for op in GRAD]
