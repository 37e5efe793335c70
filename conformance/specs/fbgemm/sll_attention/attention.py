"""Specs for ``sll_jagged_dense_flash_attention`` (``dense.py``),
``sll_jagged_flash_attention_basic`` and ``sll_multi_head_jagged_flash_attention``
(``basic.py``).

Oracles: upstream's CPU kernels, values and gradients, where they are defined; a float64
reference (``reference.py``) where they are not: the dense attention with a row past
``max_seq_len`` (upstream's backward leaves such rows uninitialised), and the multi-head
attention always (upstream has only a Triton kernel; ``op`` below answers on CPU with the
reference rounded to the input dtype, for the output structure).  The basic attention is drawn
with every ``n_b <= max_seq_len`` and ``offsets[-1] == N`` (ours refuses the rest:
tests/fbgemm/sll_attention/), causal mask or not, float64 too.

Tolerances: a matmul of ``D`` products, a softmax and a matmul of up to 6 terms, all of
N(0, 1)-sized values: ``rtol`` 1e-4 / ``atol`` 1e-5 float32 (summation orders differ; measured
< 1e-6), 1e-2 / 1e-2 float16, 5e-2 / 5e-2 bfloat16 (upstream's CPU kernels round each stage
to the half type as ours do, in other orders), 1e-7 / 1e-9 float64.

Inputs: B = 0..3 (empty batch included), lengths 0..5, D 0..4, T 1..4, Dv 1..3, attention bias
rows 0..6 against ``max_seq_len`` 0..5 (``pad_bias`` where fewer), heads 1..3.  Budgets: the
ops' entries and paths.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.fbgemm.sll_attention.reference import (
    dense_flash_attention_reference,
    multi_head_reference,
)

F = torch.ops.fbgemm
HALF = (torch.float32, torch.float16, torch.bfloat16)
MATMULS = Compare(
    {
        torch.float32: Tol(rtol=1e-4, atol=1e-5),
        torch.float16: Tol(rtol=1e-2, atol=1e-2),
        torch.bfloat16: Tol(rtol=5e-2, atol=5e-2),
        torch.float64: Tol(rtol=1e-7, atol=1e-9),
    }
)


def _rand(g: torch.Generator, dtype: torch.dtype, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g).to(dtype)


def _offsets(lengths: list[int], dtype: torch.dtype) -> torch.Tensor:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=dtype)


@st.composite
def _dense_inputs(draw: st.DrawFn) -> dict[str, Any]:
    b = draw(st.integers(0, 3))
    lengths = [draw(st.integers(0, 5)) for _ in range(b)]
    d, t, dv = draw(st.integers(0, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(HALF))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    n = sum(lengths)
    return {
        "q_weights": _rand(g, dtype, n, d),
        "k_weights": _rand(g, dtype, b, d, t),
        "v_weights": _rand(g, dtype, n, dv),  # longer: upstream's backward raises
        "attn_bias": _rand(g, dtype, b, draw(st.integers(0, 6)), t),
        "offsets": _offsets(lengths, draw(st.sampled_from([torch.int32, torch.int64]))),
        "max_seq_len": draw(st.integers(0, 5)),
    }


def _dense_truncates(offsets: torch.Tensor, max_seq_len: int, **_: Any) -> bool:
    return bool((offsets.diff() > max_seq_len).any())


def _dense_budget(attn_bias: torch.Tensor, max_seq_len: int, **_: Any) -> BudgetUse:
    return BudgetUse(path="pad_bias" if attn_bias.size(1) < max_seq_len else None)


@st.composite
def _basic_inputs(draw: st.DrawFn) -> dict[str, Any]:
    m = draw(st.integers(1, 5))
    b = draw(st.integers(0, 3))
    lengths = [draw(st.integers(0, m)) for _ in range(b)]
    d, dv = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([*HALF, torch.float64]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    n = sum(lengths)
    return {
        "q_weights": _rand(g, dtype, n, d),
        "k_weights": _rand(g, dtype, n, d),
        "v_weights": _rand(g, dtype, n, dv),
        "offsets": _offsets(lengths, draw(st.sampled_from([torch.int32, torch.int64]))),
        "max_seq_len": m,
        "use_mask": draw(st.booleans()),
    }


def _basic_budget(use_mask: bool, **_: Any) -> BudgetUse:
    return BudgetUse(path="use_mask" if use_mask else None)


@st.composite
def _multi_inputs(draw: st.DrawFn) -> dict[str, Any]:
    h, b = draw(st.integers(1, 3)), draw(st.integers(0, 3))
    lengths = [draw(st.integers(0, 5)) for _ in range(b)]
    d = draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(HALF))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    n = sum(lengths) + draw(st.sampled_from([0, 0, 2]))
    return {
        "q_weights": _rand(g, dtype, h, n, d),
        "k_weights": _rand(g, dtype, h, n, d),
        "v_weights": _rand(g, dtype, h, n, d),
        "offsets": _offsets(lengths, draw(st.sampled_from([torch.int32, torch.int64]))),
        "max_seq_len": draw(st.integers(0, 5)),
    }


def _multi_op(**kw: Any) -> torch.Tensor:
    """Ours on npu; on CPU (upstream has no kernel there) the reference in the input dtype."""
    if kw["q_weights"].device.type == "cpu":
        return multi_head_reference(**kw).to(kw["q_weights"].dtype)
    return F.sll_multi_head_jagged_flash_attention(**kw)


_O = torch.tensor([0, 2, 2, 5])
_G = torch.Generator().manual_seed(7)
DENSE_EXAMPLES = (
    {
        "q_weights": torch.randn(5, 3, generator=_G),
        "k_weights": torch.randn(3, 3, 4, generator=_G),
        "v_weights": torch.randn(5, 2, generator=_G),
        "attn_bias": torch.randn(3, 2, 4, generator=_G),
        "offsets": _O,
        "max_seq_len": 3,
    },
)
BASIC_EXAMPLES = tuple(
    {
        "q_weights": torch.randn(5, 3, generator=_G),
        "k_weights": torch.randn(5, 3, generator=_G),
        "v_weights": torch.randn(5, 3, generator=_G),
        "offsets": _O,
        "max_seq_len": 3,
        "use_mask": mask,
    }
    for mask in (False, True)
)

SPECS = [
    OpSpec(
        "sll_jagged_dense_flash_attention",
        F.sll_jagged_dense_flash_attention,
        _dense_inputs(),
        MATMULS,
        _dense_budget,
        reference=dense_flash_attention_reference,
        use_reference=_dense_truncates,
        backward=True,
        grad_inputs=("q_weights", "k_weights", "v_weights", "attn_bias"),
        examples=DENSE_EXAMPLES,
    ),
    OpSpec(
        "sll_jagged_flash_attention_basic",
        F.sll_jagged_flash_attention_basic,
        _basic_inputs(),
        MATMULS,
        _basic_budget,
        backward=True,
        grad_inputs=("q_weights", "k_weights", "v_weights"),
        examples=BASIC_EXAMPLES,
    ),
    OpSpec(
        "sll_multi_head_jagged_flash_attention",
        _multi_op,
        _multi_inputs(),
        MATMULS,
        BudgetUse(op="fbgemm::sll_multi_head_jagged_flash_attention"),
        reference=multi_head_reference,
        backward=True,
        grad_inputs=("q_weights", "k_weights", "v_weights"),
        notes="upstream has no CPU kernel: a float64 reference of its Triton kernel's math",
    ),
]
