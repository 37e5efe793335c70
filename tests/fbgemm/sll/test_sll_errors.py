"""Hostile input to the sll family: every bad argument raises a ValueError / RuntimeError that
names the op and the argument (rule 9), bad data included (the queued data checks, read here
with ``fbgemm_npu.check()``; the ops that read their output size raise at the call), and a call
whose check fails stays memory-safe until it is read.  Plus the gradients of the jagged-output
bmms where upstream's backward is not the gradient of its forward (lengths past
``max_seq_len``): ours against float64 autograd through a loop reference of the forward."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing.sll_inputs import move, sll_args

F = torch.ops.fbgemm
NPU = "npu"


def _edit(op: str, edit: Callable[[list[Any]], None], **kw: Any) -> tuple[Any, ...]:
    args = list(sll_args(op, 4, 3, 2, seed=11, **kw))
    edit(args)
    return move(tuple(args), NPU)


def _set(i: int, value: Any) -> Callable[[list[Any]], None]:
    def edit(args: list[Any]) -> None:
        args[i] = value(args[i]) if callable(value) else value

    return edit


def _bump_last(i: int, by: int) -> Callable[[list[Any]], None]:
    def edit(args: list[Any]) -> None:
        t = args[i].clone()
        t[-1] += by
        args[i] = t

    return edit


def _bump_first(i: int, by: int) -> Callable[[list[Any]], None]:
    def edit(args: list[Any]) -> None:
        t = args[i].clone()
        t[0] += by
        args[i] = t

    return edit


# (op, label, edit of sll_args(op, 4, 3, 2), the argument the message names, exception class)
CASES = [
    ("sll_jagged_dense_bmm", "x 1-D", _set(0, lambda t: t[:, 0]), "x", ValueError),
    ("sll_jagged_dense_bmm", "x float64", _set(0, lambda t: t.double()), "x", ValueError),
    ("sll_jagged_dense_bmm", "y batch", _set(1, lambda t: t[:-1]), "y", ValueError),
    ("sll_jagged_dense_bmm", "y dtype", _set(1, lambda t: t.half()), "y", ValueError),
    ("sll_jagged_dense_bmm", "offsets float", _set(2, lambda t: t.float()), "x_offsets",
     ValueError),
    ("sll_jagged_dense_bmm", "offsets past", _set(2, lambda t: t + 50), "x_offsets",
     RuntimeError),
    ("sll_jagged_dense_bmm", "x None", _set(0, None), "x", ValueError),
    ("sll_jagged_dense_bmm", "N past int32", _set(3, 2**31), "N", ValueError),
    ("sll_jagged_jagged_bmm", "y 3-D", _set(1, lambda t: t[None]), "y", ValueError),
    ("sll_jagged_jagged_bmm", "offsets 2-D", _set(2, lambda t: t[None]), "x_offsets", ValueError),
    ("sll_jagged_jagged_bmm", "offsets negative", _bump_first(2, -3), "x_offsets", RuntimeError),
    ("sll_jagged_dense_elementwise_add", "x bool", _set(0, lambda t: t > 0), "x", ValueError),
    ("sll_jagged_dense_elementwise_add", "y batch", _set(2, lambda t: t[:-1]), "y", ValueError),
    ("sll_jagged_dense_elementwise_add", "offsets past", _set(1, lambda t: t + 50), "x_offsets",
     RuntimeError),
    ("sll_jagged_dense_elementwise_add", "offsets end short", _bump_last(1, -1), "x_offsets",
     RuntimeError),
    ("sll_jagged_dense_elementwise_mul_jagged_out", "x 2-D", _set(0, lambda t: t[:, None]), "x",
     ValueError),
    ("sll_jagged_dense_elementwise_mul_jagged_out", "y 1-D", _set(1, lambda t: t[0]), "y",
     ValueError),
    ("sll_jagged_dense_elementwise_mul_jagged_out", "lengths float", _set(2, lambda t: t.float()),
     "x_seq_lengths", ValueError),
    ("sll_jagged_dense_elementwise_mul_jagged_out", "offsets short", _set(3, lambda t: t[:-1]),
     "x_offsets", ValueError),
    ("sll_jagged_dense_elementwise_mul_jagged_out", "block size", _bump_last(2, 1),
     "x_seq_lengths", RuntimeError),
    ("sll_jagged_dense_elementwise_mul_jagged_out", "y too small", _set(1, lambda t: t[:2, :2]),
     "y", RuntimeError),
    # values upstream leaves uninitialised (torch.empty): refused, not filled with our zeros
    ("sll_jagged_dense_elementwise_mul_jagged_out", "x past the blocks",
     _set(0, lambda t: torch.cat([t, t[:1]])), "x_offsets", RuntimeError),
    ("sll_jagged_self_substraction_jagged_out", "offsets_b[-1] past the blocks",
     _set(2, lambda t: torch.cat([t, t[-1:] + 4])), "offsets_b", ValueError),
    ("sll_jagged_jagged_bmm_jagged_out", "z_lengths past the blocks", _set(6, lambda t: t + 1),
     "z_offsets", ValueError),
    ("sll_dense_jagged_cat_jagged_out", "a 2-D", _set(0, lambda t: t[:, None]), "a", ValueError),
    ("sll_dense_jagged_cat_jagged_out", "a short", _set(0, lambda t: t[:-1]), "a", ValueError),
    ("sll_dense_jagged_cat_jagged_out", "dtypes", _set(1, lambda t: t.half()), "b", ValueError),
    ("sll_dense_jagged_cat_jagged_out", "offsets end", _bump_last(2, -1), "a_offsets",
     RuntimeError),
    ("sll_jagged_self_substraction_jagged_out", "a 2-D", _set(0, lambda t: t[:, None]), "a",
     ValueError),
    ("sll_jagged_self_substraction_jagged_out", "block size", _bump_last(2, 1), "offsets_b",
     ValueError),
    ("sll_jagged_self_substraction_jagged_out", "negative size", _set(2, lambda t: t * 0 - 1),
     "offsets_b", (ValueError, RuntimeError)),
    ("sll_jagged_self_substraction_jagged_out", "offsets_a past", _bump_last(1, 9), "offsets_a",
     ValueError),
    ("sll_array_jagged_bmm_jagged_out", "x 2-D", _set(0, lambda t: t[:, None]), "x", ValueError),
    ("sll_array_jagged_bmm_jagged_out", "y dtype", _set(1, lambda t: t.half()), "y", ValueError),
    ("sll_array_jagged_bmm_jagged_out", "max_seq_len < 0", _set(8, -1), "max_seq_len",
     ValueError),
    ("sll_array_jagged_bmm_jagged_out", "x block", _bump_last(4, 1), "y_lengths", ValueError),
    ("sll_array_jagged_bmm_jagged_out", "z short", _set(6, lambda t: t // 2), "z_offsets",
     ValueError),
    ("sll_array_jagged_bmm_jagged_out", "y_offsets short", _set(5, lambda t: t[:2]),
     "y_offsets", ValueError),
    ("sll_jagged_jagged_bmm_jagged_out", "inner dims", _set(1, lambda t: t[:, :1]), "y",
     RuntimeError),
    ("sll_jagged_jagged_bmm_jagged_out", "z block", _bump_last(7, 1), "z_offsets", ValueError),
    ("sll_jagged_jagged_bmm_jagged_out", "x_offsets past", _bump_last(3, 3), "x_offsets",
     ValueError),
    ("sll_jagged_jagged_bmm_jagged_out", "lengths float", _set(6, lambda t: t.float()),
     "z_lengths", ValueError),
]  # fmt: skip


@pytest.mark.parametrize(
    ("op", "label", "edit", "arg", "exc"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES]
)
def test_bad_input_names_op_and_argument(
    op: str, label: str, edit: Any, arg: str, exc: Any
) -> None:
    args = _edit(op, edit)
    with pytest.raises(exc) as info:
        getattr(F, op)(*args)
        fbgemm_npu.check()  # a queued data check surfaces here
    assert op in str(info.value) and arg in str(info.value), str(info.value)


def test_mixed_devices_are_refused_by_name() -> None:
    args = list(move(sll_args("sll_jagged_dense_bmm", 3, 3, 2), NPU))
    args[2] = args[2].cpu()
    with pytest.raises(RuntimeError, match="sll_jagged_dense_bmm.*x_offsets"):
        F.sll_jagged_dense_bmm(*args)


def test_a_failed_check_is_memory_safe_until_read() -> None:
    """Offsets far outside the values: the call returns (clamped gathers / scatters), the error
    comes at the next check point."""
    for op in ("sll_jagged_dense_bmm", "sll_jagged_jagged_bmm", "sll_dense_jagged_cat_jagged_out"):
        args = _edit(op, _set(2, lambda t: t + 10**6))
        getattr(F, op)(*args)
        with pytest.raises(RuntimeError, match=op):
            fbgemm_npu.check()


def test_a_huge_n_pads_no_more_than_the_rows() -> None:
    """``N`` far past every sequence: the padding is bounded by the rows (no allocation of
    ``B * N``), the result upstream's."""
    for op in ("sll_jagged_dense_bmm", "sll_jagged_jagged_bmm"):
        args = list(sll_args(op, 3, 3, 2))
        args[3] = 2**31 - 1 if op == "sll_jagged_dense_bmm" else 2**50
        want = getattr(F, op)(*args)
        torch.testing.assert_close(getattr(F, op)(*move(tuple(args), NPU)).cpu(), want)


@pytest.mark.parametrize("op", ["sll_jagged_dense_bmm", "sll_jagged_jagged_bmm"])
def test_offsets_past_an_empty_input_are_refused(op: str) -> None:
    """The fuzz found it: ``x`` of no rows with offsets ``[0, 1]`` returned zeros unchecked,
    where upstream reads past the empty tensor (its CPU kernel crashed the oracle)."""
    x = torch.zeros(0, 2, device=NPU)
    y = torch.zeros(1, 2, 3, device=NPU) if op == "sll_jagged_dense_bmm" else x
    o = torch.tensor([0, 1], device=NPU)
    getattr(F, op)(x, y, o, 1, True)
    with pytest.raises(RuntimeError, match=f"{op}.*x_offsets"):
        fbgemm_npu.check()


def test_a_negative_total_of_no_sequences_is_refused() -> None:
    """The fuzz found it: ``x_offsets = [-5]`` (B = 0) returned a result where upstream's
    ``total_L >= 0`` check refuses it."""
    x, y = torch.zeros(0, 2, device=NPU), torch.zeros(0, 3, 2, device=NPU)
    F.sll_jagged_dense_elementwise_add(x, torch.tensor([-5], device=NPU), y, 3)
    with pytest.raises(RuntimeError, match="sll_jagged_dense_elementwise_add.*x_offsets"):
        fbgemm_npu.check()


def test_empty_batch_cat_raises_upstreams_class() -> None:
    a, b, o = torch.zeros(0), torch.zeros(0), torch.zeros(1, dtype=torch.int64)
    with pytest.raises(ValueError):
        F.sll_dense_jagged_cat_jagged_out(a, b, o, 3)  # upstream: torch.cat of no pieces
    with pytest.raises(ValueError, match="sll_dense_jagged_cat_jagged_out.*a_offsets"):
        F.sll_dense_jagged_cat_jagged_out(a.to(NPU), b.to(NPU), o.to(NPU), 3)


# ------------------------------------------------- gradients where upstream's are not the math


def _array_reference(x, y, n, xo, yo, zo, z_rows: int, cap: int) -> torch.Tensor:
    out = y.new_zeros((z_rows, y.size(1)))
    for i in range(n.numel()):
        k, c = int(n[i]), min(int(n[i]), cap)
        a = x[int(xo[i]) : int(xo[i + 1])].view(k, k)[:c, :c]
        out = out.index_add(0, torch.arange(int(zo[i]), int(zo[i]) + c), a @ y[int(yo[i]) :][:c])
    return out


def _jagged_reference(x, y, xo, yo, zo, z_rows: int) -> torch.Tensor:
    out = x.new_zeros(z_rows)
    for i in range(xo.numel() - 1):
        p = x[int(xo[i]) : int(xo[i + 1])] @ y[int(yo[i]) : int(yo[i + 1])].T
        out = out.index_add(0, torch.arange(int(zo[i]), int(zo[i]) + p.numel()), p.flatten())
    return out


def _grads(fn: Callable[..., torch.Tensor], x: torch.Tensor, y: torch.Tensor, w: torch.Tensor):
    x, y = x.detach().requires_grad_(), y.detach().requires_grad_()
    (fn(x, y) * w.to(x.device, x.dtype)).sum().backward()
    return x.grad.cpu().double(), y.grad.cpu().double()


@pytest.mark.parametrize("cap", [0, 2, 9])
def test_jagged_output_bmm_gradients_are_the_math(cap: int) -> None:
    b, max_len, d = 6, 5, 3
    arr = sll_args("sll_array_jagged_bmm_jagged_out", b, max_len, d, seed=21, cap=cap)
    x, y, xl, xo, yl, yo, zl, zo = arr[:8]
    rows = int(zl.sum())
    w = torch.randn(rows, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ours = _grads(lambda a, c: F.sll_array_jagged_bmm_jagged_out(a, c, *move(arr[2:8], NPU), cap,
                  True), x.to(NPU), y.to(NPU), w)  # fmt: skip
    ref = _grads(lambda a, c: _array_reference(a, c, yl, xo, yo, zo, rows, cap), x.double(),
                 y.double(), w)  # fmt: skip
    for a, e in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    jj = sll_args("sll_jagged_jagged_bmm_jagged_out", b, max_len, d, seed=22, cap=cap)
    x, y, xl, xo, yl, yo, zl, zo = jj[:8]
    rows = int(zl.sum())
    w = torch.randn(rows, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    ours = _grads(lambda a, c: F.sll_jagged_jagged_bmm_jagged_out(a, c, *move(jj[2:8], NPU), cap,
                  True), x.to(NPU), y.to(NPU), w)  # fmt: skip
    ref = _grads(lambda a, c: _jagged_reference(a, c, xo, yo, zo, rows), x.double(), y.double(), w)
    for a, e in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["sll_jagged_dense_bmm", "sll_jagged_jagged_bmm"])
def test_a_sequence_past_the_rows_within_n_is_refused(op: str) -> None:
    """Found by the sll fuzz (past_end offsets): with N above the rows, upstream reads
    min(len, N) rows of a sequence that runs past the input (its CPU kernel corrupted the heap);
    ours names x_offsets instead of returning the rows it could read."""
    args = list(sll_args(op, 1, 2, 2, seed=0, index=torch.int32, cap=3))
    args[2] = torch.tensor([0, int(args[2][-1]) + 1], dtype=torch.int32)
    with pytest.raises(RuntimeError, match=rf"{op}.*x_offsets"):
        getattr(F, op)(*move(args, NPU))
        fbgemm_npu.check()
