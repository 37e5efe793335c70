"""Hostile-input fuzz of the optim family (fbgemm_npu/native/mxrec/optim/).

Valid updates (duplicates, negative and past-the-table indices, int32 / int64, ``[n]`` /
``[n, 1]`` indices, every layout of var and the gradient, float32 / float16, empty) equal the
float64 references written into the buffers (``fuzz_references_optim.py``); everything else is a
clear error naming the op and the argument: non-tensors, dtypes, shapes, an lr of two values,
inputs on two devices.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, not_a_tensor, seeded

REF = "fbgemm_npu.testing.fuzz_references_optim:"
TOL = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, torch.float16: {"rtol": 5e-3, "atol": 5e-3}}


def _args(data: Any, adam: bool) -> list:
    rows, d, n = (
        data.draw(st.integers(0, 12)),
        data.draw(st.integers(1, 6)),
        data.draw(st.integers(0, 12)),
    )
    dtype = data.draw(st.sampled_from((torch.float32, torch.float16)))
    gen = seeded(data)
    idx = torch.randint(-3, rows + 3, (n,), generator=gen)
    idx = idx.to(data.draw(st.sampled_from((torch.int32, torch.int64))))
    if data.draw(st.booleans(), label="[n, 1]"):
        idx = idx.view(-1, 1)
    var = in_layout(data, torch.randn(rows, d, generator=gen).to(dtype))
    grad = in_layout(data, torch.randn(n, d, generator=gen).to(dtype))
    lr = torch.tensor(data.draw(st.sampled_from((0.1, 1.0))))
    if not adam:
        return [var, grad, idx, lr]
    m = (torch.randn(rows, d, generator=gen) * 0.1).to(dtype)
    v = torch.rand(rows, d, generator=gen).to(dtype)
    return [var, m, v, grad, idx, lr]


@fuzz_test("optim")
def test_fuzz_optim_valid(data: Any) -> Case:
    adam = data.draw(st.booleans(), label="adam")
    args = _args(data, adam)
    name = "fused_lazy_adam" if adam else "fused_sgd"
    kwargs = {} if adam else {"weight_decay": data.draw(st.sampled_from((0.0, 0.1)))}
    return Case(f"mxrec::{name}", tuple(args), kwargs, oracle=REF + name, label=f"valid {name}",
                **TOL[args[0].dtype])  # fmt: skip


@fuzz_test("optim")
def test_fuzz_optim_invalid(data: Any) -> Case:
    adam = data.draw(st.booleans(), label="adam")
    args = _args(data, adam)
    op = "mxrec::fused_lazy_adam" if adam else "mxrec::fused_sgd"
    names = (
        ("var", "m", "v", "gradient", "indices", "lr")
        if adam
        else ("var", "gradient", "indices", "lr")
    )
    how = data.draw(st.sampled_from(("object", "dtype", "shape", "lr", "device")))
    i = data.draw(st.integers(0, len(args) - 1), label="argument")
    if how == "object":
        args[i] = not_a_tensor(data)
    elif how == "dtype":
        args[i] = args[i].to(torch.float64 if args[i].is_floating_point() else torch.float32)
    elif how == "shape":  # lr of any shape holding one value is valid: not reshaped
        i = min(i, len(args) - 2)
        args[i] = args[i].reshape(1, 1, -1)
    elif how == "lr":
        i = len(args) - 1
        args[i] = torch.tensor([0.1, 0.2])
    else:
        args[i] = On(args[i], data.draw(st.sampled_from(("cpu", "npu:1"))))
        return Case(op, tuple(args), expect="error", names=names, label=how)
    return Case(op, tuple(args), expect="error", names=(names[i],), label=how)
