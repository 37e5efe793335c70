"""The sll family against upstream's CPU kernels (``fbgemm_gpu/sll/cpu/cpu_sll.py``): values
and, where upstream has autograd, the gradients of ``sum(out * w)``, on npu.

Inputs: ``fbgemm_npu.testing.sll_inputs.sll_args`` (upstream's flash-attention layout): empty
batches, empty sequences, sequences longer than ``max_seq_len`` (the capping ops), int32 and
int64 offsets, float32 / float16 / bfloat16, and non-contiguous inputs.  Gradients are compared
where upstream's backward is the gradient of its forward: for the jagged-output bmms, every
length within ``max_seq_len`` (upstream uncaps the array op's ``grad_x`` and caps the jagged
op's, unlike their forwards: ``test_sll_errors.py`` holds ours to the math there).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from fbgemm_npu.testing.sll_inputs import OPS, move, sll_args

F = torch.ops.fbgemm
GRAD = {
    "sll_jagged_dense_bmm": (0, 1),
    "sll_jagged_jagged_bmm": (0, 1),
    "sll_jagged_dense_elementwise_add": (0, 2),
    "sll_jagged_dense_elementwise_mul_jagged_out": (0,),
    "sll_array_jagged_bmm_jagged_out": (0, 1),
    "sll_jagged_jagged_bmm_jagged_out": (0, 1),
}
TOL = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.float16: {"rtol": 2**-8, "atol": 2e-2},
    torch.bfloat16: {"rtol": 2**-5, "atol": 1e-1},
}
# (B, max_len, D, index dtype, values dtype, cap = max_seq_len or None for max_len)
CONFIGS = [
    (0, 3, 2, torch.int64, torch.float32, None),
    (1, 0, 2, torch.int64, torch.float32, None),
    (5, 4, 3, torch.int64, torch.float32, None),
    (6, 5, 2, torch.int32, torch.float32, None),
    (7, 6, 4, torch.int64, torch.float32, 3),
    (4, 3, 2, torch.int32, torch.float16, None),
    (4, 3, 2, torch.int64, torch.bfloat16, None),
    (9, 8, 1, torch.int64, torch.float32, 0),
]


def _run(op: str, args: tuple[Any, ...], grad: tuple[int, ...], device: str):
    leaves = [a.detach().clone().to(device) if isinstance(a, torch.Tensor) else a for a in args]
    for i in grad:
        leaves[i].requires_grad_()
    out = getattr(F, op)(*leaves)
    first = out[0] if isinstance(out, tuple) else out
    grads = []
    if grad:
        w = torch.randn(first.shape, generator=torch.Generator().manual_seed(7))
        (first * w.to(device=device, dtype=first.dtype)).sum().backward()
        grads = [leaves[i].grad for i in grad]
    return out, grads


def _close(a: torch.Tensor, e: torch.Tensor, what: str) -> None:
    assert a.device.type == "npu", what
    a = a.cpu()
    assert a.dtype == e.dtype and a.shape == e.shape, (what, a.dtype, e.dtype, a.shape, e.shape)
    if e.is_floating_point():
        torch.testing.assert_close(a, e, **TOL.get(e.dtype, {}), msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(a, e), what


def _grad_comparable(op: str, cfg: tuple) -> bool:
    _, max_len, _, _, dtype, cap = cfg
    if op in ("sll_array_jagged_bmm_jagged_out", "sll_jagged_jagged_bmm_jagged_out"):
        return cap is None or cap >= max_len
    return True


@pytest.mark.parametrize("cfg", CONFIGS, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_values_and_gradients_equal_upstream(op: str, cfg: tuple) -> None:
    b, max_len, d, index, dtype, cap = cfg
    args = sll_args(op, b, max_len, d, seed=b + max_len, dtype=dtype, index=index, cap=cap)
    grad = GRAD.get(op, ()) if _grad_comparable(op, cfg) else ()
    try:
        expected, e_grads = _run(op, args, grad, "cpu")
    except (ValueError, RuntimeError) as exc:  # upstream refuses it: ours too, same class
        with pytest.raises(type(exc), match=op):
            _run(op, args, grad, "npu")
        return
    ours, o_grads = _run(op, args, grad, "npu")
    flat_e = expected if isinstance(expected, tuple) else (expected,)
    flat_o = ours if isinstance(ours, tuple) else (ours,)
    for k, (a, e) in enumerate(zip(flat_o, flat_e, strict=True)):
        _close(a.detach(), e.detach(), f"{op} output {k}")
    for i, a, e in zip(grad, o_grads, e_grads, strict=True):
        _close(a, e, f"{op} grad of input {i}")


@pytest.mark.parametrize("op", ["sll_jagged_dense_bmm", "sll_jagged_jagged_bmm",
                                "sll_jagged_jagged_bmm_jagged_out"])  # fmt: skip
def test_transposed_inputs(op: str) -> None:
    """A transposed (non-contiguous) x gives upstream's result: nothing assumes row strides."""
    args = list(sll_args(op, 5, 4, 3, seed=3))
    args[0] = args[0].t().contiguous().t()
    assert not args[0].is_contiguous() or args[0].size(1) == 1
    cpu = getattr(F, op)(*args)
    ours = getattr(F, op)(*[a.to("npu") if isinstance(a, torch.Tensor) else a for a in args])
    _close(ours, cpu, op)


def test_no_grad_calls_go_below_autograd() -> None:
    """An inference call (nothing requires grad) gives the same values as a recorded one."""
    for op in GRAD:
        args = move(sll_args(op, 4, 3, 2, seed=5), "npu")
        with torch.no_grad():
            plain = getattr(F, op)(*args)
        recorded, _ = _run(op, sll_args(op, 4, 3, 2, seed=5), GRAD[op], "npu")
        torch.testing.assert_close(plain.cpu(), recorded.detach().cpu())
