"""The sll_attention family held to its BUDGETS table (``native/fbgemm/sll_attention/
budgets.py``).

Each op is measured at two sizes, with the data checks off and on: the count must be the
table's exactly whatever the size, the AI-CPU count too (0).  Paths: ``pad_bias`` (dense flash
attention with fewer bias rows than ``max_seq_len``: one ``F.pad``), ``cast`` (its ``k`` / ``v``
/ ``attn_bias`` in another dtype than ``q``: one cast each), ``use_mask`` (the basic
attention's causal mask), ``int64_values`` (jagged2_to_padded_dense's padding by
``where``), ``int32_offsets`` (jagged2_softmax's square check in int64).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

F = torch.ops.fbgemm
NPU = "npu"
SIZES = (3, 40)  # batch rows: the counts must not depend on them
SOFTMAX = "fbgemm::sll_jagged_softmax"
SOFTMAX2 = "fbgemm::sll_jagged2_softmax"
PADDED = "fbgemm::sll_jagged2_to_padded_dense"
DENSE = "fbgemm::sll_jagged_dense_flash_attention"
BASIC = "fbgemm::sll_jagged_flash_attention_basic"
MULTI = "fbgemm::sll_multi_head_jagged_flash_attention"
M = 6
CASES = [
    (SOFTMAX, None, torch.float32),
    (SOFTMAX, None, torch.bfloat16),
    (SOFTMAX2, None, torch.float32),
    (SOFTMAX2, None, torch.float16),
    (SOFTMAX2, "int32_offsets", torch.float32),
    (PADDED, None, torch.float32),
    (PADDED, "int64_values", torch.int64),
    (DENSE, None, torch.float32),
    (DENSE, "pad_bias", torch.float16),
    (DENSE, "cast", torch.float32),
    (BASIC, None, torch.float32),
    (BASIC, "use_mask", torch.bfloat16),
    (MULTI, None, torch.float32),
    (MULTI, None, torch.float16),
]


def _call(qualname: str, path: str | None, b: int, dtype: torch.dtype) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(b)
    lengths = torch.randint(0, M + 1, (b,), generator=g)
    lengths[0] = M  # the padded length is max_seq_len (it is capped by the rows otherwise)
    offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])
    n = int(offsets[-1])
    o = offsets.to(NPU)

    def rand(*shape: int, dt: torch.dtype = dtype) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dt).to(NPU)

    if qualname == SOFTMAX:
        x = rand(n, 4)
        return lambda: F.sll_jagged_softmax(x, o, M)
    squares = torch.cat([lengths.new_zeros(1), (lengths * lengths).cumsum(0)])
    ot, e = squares.to(NPU), int(squares[-1])
    if qualname == SOFTMAX2:
        x = rand(e)
        if path == "int32_offsets":
            o, ot = o.int(), ot.int()
        return lambda: F.sll_jagged2_softmax(x, o, ot, M, False)
    if qualname == PADDED:
        vals = torch.randint(-5, 5, (e,), generator=g).to(dtype).to(NPU)
        return lambda: F.sll_jagged2_to_padded_dense(vals, ot, M, -1.0)
    if qualname == DENSE:
        other = torch.float16 if path == "cast" else dtype
        q, v = rand(n, 4), rand(n, 3, dt=other)
        k, bias = rand(b, 4, 5, dt=other), rand(b, M - 2 if path == "pad_bias" else M, 5, dt=other)
        return lambda: F.sll_jagged_dense_flash_attention(q, k, v, bias, o, M)
    if qualname == BASIC:
        q, k, v = rand(n, 4), rand(n, 4), rand(n, 3)
        return lambda: F.sll_jagged_flash_attention_basic(q, k, v, o, M, path == "use_mask")
    q, k, v = rand(2, n, 4), rand(2, n, 4), rand(2, n, 4)
    return lambda: F.sll_multi_head_jagged_flash_attention(q, k, v, o, M)


def _measure(qualname: str, path: str | None, dtype: torch.dtype) -> None:
    for b in SIZES:
        call = _call(qualname, path, b, dtype)
        call()  # warm the cached aranges (native/_index.py) at this size
        c = assert_op_budget(call, qualname, path=path, exact=True)
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("sll_attention", [(q, p) for q, p, _ in CASES])


# The backwards (no op of their own upstream, so no BUDGETS entry): launches of one
# ``out.backward(grad)`` at both sizes, checks off; never a sync or an AI-CPU launch.
BACKWARD = {
    (SOFTMAX, None): 14,
    (SOFTMAX2, None): 18,
    (PADDED, None): 15,
    (DENSE, None): 18,
    (DENSE, "pad_bias"): 19,
    (DENSE, "cast"): 21,
    (BASIC, None): 17,
    (BASIC, "use_mask"): 20,
    (MULTI, None): 26,
}


@pytest.mark.parametrize("case", [c for c in CASES if (c[0], c[1]) in BACKWARD], ids=str)
def test_backward_launches(case: tuple, no_validation: None) -> None:
    from fbgemm_npu.testing.counters import count

    qualname, path, dtype = case
    for b in SIZES:
        call = _call(qualname, path, b, dtype)
        inputs = [
            c.cell_contents
            for c in call.__closure__ or ()
            if isinstance(c.cell_contents, torch.Tensor) and c.cell_contents.is_floating_point()
        ]
        for t in inputs:
            t.requires_grad_()
        call().backward(torch.ones(call().shape, dtype=dtype, device=NPU))  # warm
        for t in inputs:
            t.grad = None  # an accumulation would add a launch
        out = call()
        grad = torch.ones_like(out)
        with count() as c:
            out.backward(grad)
        assert (c.launches, c.syncs, c.ai_cpu) == (BACKWARD[qualname, path], 0, 0), c.summary()
        assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in inputs)
