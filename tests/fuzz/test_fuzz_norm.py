"""Hostile-input fuzz of the norm family (fbgemm_npu/native/mxrec/norm/).

Valid inputs in every layout, dtype and size (empty batches, ``C`` from 4 to 24, every dropout
ratio; rows spread out, see ``_x``) equal the float64 references of
``fbgemm_npu/testing/fuzz_references_norm.py`` (no upstream CPU kernel exists: ours is the CPU
kernel), gradients of every float input included; the dropout cases seed torch's generator
first, the reference drawing the contract's mask from the same seed. Everything else is a clear
error naming the op and the argument: non-tensors, dtypes, ranks, shapes that disagree, a non-
square token block, bad eps / dropout ratios, a missing or malformed mask, inputs on two
devices.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, not_a_tensor, seeded

REF = "fbgemm_npu.testing.fuzz_references_norm:"
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
# conformance/specs/mxrec/norm/norm.py's tolerances (values in [-1, 1), C >= 4)
# bfloat16: the weight gradients sum rows*C products whose float64 sum may cancel to near 0,
# while each bfloat16 product keeps its 2**-8 rounding (0.112 seen against a 0.1 bound in CI)
TOL = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 2.5e-1}
OPS = ("ln_mul", "token_mixing", "norm_multiply_dropout", "norm_multiply_dropout_backward")


def _u(data: Any, gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype):
    return in_layout(data, (torch.rand(shape, generator=gen) * 2 - 1).to(dtype))


def _x(data: Any, gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype):
    """Values in [-1.5, 1.5) with a ramp along the last dim: every row's variance >= ~0.2, so
    ``1 / sqrt(var + eps)`` stays small (a near-constant half row's rounding, times a huge
    ``rstd``, would swamp any tolerance: a property of half layer norms, not of ours)."""
    ramp = torch.linspace(-1, 1, shape[-1])
    return in_layout(data, ((torch.rand(shape, generator=gen) - 0.5) + ramp).to(dtype))


def _args(data: Any, which: str) -> tuple[list[Any], torch.dtype]:
    dtype, gen = data.draw(st.sampled_from(FLOATS)), seeded(data)
    rows, c = data.draw(st.integers(0, 5), label="rows"), data.draw(st.integers(4, 24), label="C")
    if which == "token_mixing":
        c = min(c, 10)
        x = _x(data, gen, (min(rows, 3), c, c), dtype)
        eps = data.draw(st.sampled_from((1e-7, 1e-5)), label="epsilon")
        return [x, _u(data, gen, (c,), dtype), _u(data, gen, (c,), dtype), eps], dtype
    x, u = _x(data, gen, (rows, c), dtype), _u(data, gen, (rows, c), dtype)
    w, b = _u(data, gen, (c,), dtype), _u(data, gen, (c,), dtype)
    if which == "ln_mul":
        return [x, u, w, b], dtype
    eps = data.draw(st.sampled_from((1e-5, 1e-10, 1e-4, 1e-2)), label="eps")
    p = data.draw(st.sampled_from((0.0, 1e-11, 0.3, 0.5, 1.0)), label="dropout_ratio")
    if which == "norm_multiply_dropout":
        return [data.draw(st.integers(0, 2**16), label="seed"), x, u, w, b, eps, p], dtype
    grad = in_layout(data, torch.randn((rows, c), generator=gen).to(dtype))
    mask = in_layout(data, torch.rand((rows, c), generator=gen) >= 0.4)
    return [grad, x, u, w, b, mask, eps, p], dtype


@fuzz_test("norm")
def test_fuzz_norm_valid(data: Any) -> Case:
    """Every op, dtype, layout, size and dropout ratio; the gradients of the forwards."""
    which = data.draw(st.sampled_from(OPS))
    args, dtype = _args(data, which)
    tol = {"rtol": TOL[dtype], "atol": TOL[dtype]}
    name = which.removesuffix("_backward").replace("norm_multiply_dropout", "nmd")
    ref = REF + (name + "_backward" if which.endswith("_backward") else name)
    if which == "norm_multiply_dropout":
        return Case(REF + "nmd_seeded", tuple(args), oracle=ref, grad=(1, 2, 3, 4),
                    op_name="norm_multiply_dropout", label="valid " + which, **tol)  # fmt: skip
    grad = () if which.endswith("_backward") else tuple(range(len(args) - (which != "ln_mul")))
    return Case(f"mxrec::{which}", tuple(args), oracle=ref, grad=grad, label="valid " + which,
                **tol)  # fmt: skip


@fuzz_test("norm")
def test_fuzz_norm_invalid(data: Any) -> Case:
    """A non-tensor, a dtype, a shape, a bad scalar or mask, two devices."""
    which = data.draw(st.sampled_from(OPS))
    how = data.draw(st.sampled_from(("object", "dtype", "shape", "scalar", "device")))
    args, _ = _args(data, which)
    if which == "norm_multiply_dropout":
        args = args[1:]  # called directly: the seed is the program's
    names = {
        "ln_mul": ("x", "u", "gamma", "beta"),
        "token_mixing": ("x", "gamma", "beta", "epsilon"),
        "norm_multiply_dropout": ("x", "u", "weight", "bias", "eps", "dropout_ratio"),
        "norm_multiply_dropout_backward": ("grad", "x", "u", "weight", "bias", "mask", "eps",
                                           "dropout_ratio"),
    }[which]  # fmt: skip
    op = f"mxrec::{which}"
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and names[i] != "mask"]
    i = data.draw(st.sampled_from(tensors), label="argument")
    if how == "object":
        args[i] = not_a_tensor(data)
    elif how == "dtype":
        args[i] = args[i].to(data.draw(st.sampled_from((torch.float64, torch.int32, torch.bool))))
    elif how == "shape":
        args[i] = torch.zeros((*args[i].shape[:-1], args[i].shape[-1] + 1), dtype=args[i].dtype)
    elif how == "scalar":
        if which == "ln_mul":  # no scalar: a non-square x[..., :0] instead
            args[0], i = args[0][:, :0], 0
        elif which == "token_mixing":
            bad = data.draw(st.sampled_from(("eps", "square")), label="bad")
            if bad == "square":
                args[0], i = args[0][:, :-1], 0
            else:
                args[3], i = data.draw(st.sampled_from((0.0, -1e-7, float("nan")))), 3
        else:
            bad = ("eps", "dropout_ratio", "mask") if "mask" in names else ("eps", "dropout_ratio")
            j = names.index(data.draw(st.sampled_from(bad), label="bad"))
            if names[j] == "mask":
                args[-1] = 0.5  # dropout: the mask is needed
                args[j] = data.draw(st.sampled_from((None, args[j][:, :-1], args[j].float())))
            elif names[j] == "eps":
                args[j] = data.draw(st.sampled_from((0.0, -1e-5, float("inf"))))
            else:
                args[j] = data.draw(st.sampled_from((-0.2, 1.3, float("nan"))))
            i = j
    else:
        if i == 0:
            i = 1
        args[i] = On(args[i], data.draw(st.sampled_from(("cpu", "npu:1"))))
    return Case(op, tuple(args), expect="error", names=(names[i],), label=how)
