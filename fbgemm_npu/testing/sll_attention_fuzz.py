"""Inputs and oracles for the sll_attention family's fuzz tests (tests/fuzz/).

The oracles are the float64 references of ``conformance/specs/fbgemm/sll_attention/reference.py``
rounded to the input's dtype, where upstream's CPU kernel has no contract: ``sll_jagged_softmax``
(rows past ``max_seq_len`` left uninitialised upstream), ``sll_jagged_dense_flash_attention``
with a sequence past ``max_seq_len`` (its backward leaves rows uninitialised), the multi-head
attention (no CPU kernel upstream).  :func:`args` builds each op's valid arguments.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["OPS", "args", "dense_oracle", "multi_head_oracle", "softmax_oracle"]

HALF = (torch.float32, torch.float16, torch.bfloat16)
OPS = (
    "sll_jagged_softmax",
    "sll_jagged2_softmax",
    "sll_jagged2_to_padded_dense",
    "sll_jagged_dense_flash_attention",
    "sll_jagged_flash_attention_basic",
    "sll_multi_head_jagged_flash_attention",
)


def _ref() -> Any:
    from conformance.specs.fbgemm.sll_attention import reference

    return reference


def softmax_oracle(x: torch.Tensor, x_offsets: torch.Tensor, max_seq_len: int,
                   use_fbgemm_kernel: bool = True) -> torch.Tensor:  # fmt: skip
    """``sll_jagged_softmax``'s reference in ``x``'s dtype."""
    return _ref().jagged_softmax_reference(x, x_offsets, max_seq_len).to(x.dtype)


def dense_oracle(q_weights: torch.Tensor, k_weights: torch.Tensor, v_weights: torch.Tensor,
                 attn_bias: torch.Tensor, offsets: torch.Tensor, max_seq_len: int,
                 allow_tf32: bool = True) -> torch.Tensor:  # fmt: skip
    """``sll_jagged_dense_flash_attention``'s reference in the inputs' dtype."""
    out = _ref().dense_flash_attention_reference(
        q_weights, k_weights, v_weights, attn_bias, offsets, max_seq_len
    )
    return out.to(q_weights.dtype)


def multi_head_oracle(q_weights: torch.Tensor, k_weights: torch.Tensor, v_weights: torch.Tensor,
                      offsets: torch.Tensor, max_seq_len: int,
                      allow_tf32: bool = True) -> torch.Tensor:  # fmt: skip
    """``sll_multi_head_jagged_flash_attention``'s reference in the inputs' dtype."""
    out = _ref().multi_head_reference(q_weights, k_weights, v_weights, offsets, max_seq_len)
    return out.to(q_weights.dtype)


def _offsets(lengths: list[int], dtype: torch.dtype, squares: bool = False) -> torch.Tensor:
    out = [0]
    for n in lengths:
        out.append(out[-1] + (n * n if squares else n))
    return torch.tensor(out, dtype=dtype)


def args(op: str, lengths: list[int], seed: int, dtype: torch.dtype, index: torch.dtype,
         extra: int, cap: int, dims: tuple[int, int, int], flag: bool) -> list[Any]:  # fmt: skip
    """Valid arguments of ``op``: sequences of ``lengths`` (``extra`` rows after the last one
    where the op allows them), ``max_seq_len`` ``cap`` (the ops that refuse longer sequences get
    at least the longest), ``dims = (D, T or heads, Dv)``, ``flag`` the op's bool."""
    g = torch.Generator().manual_seed(seed)
    d, t, dv = dims
    n = sum(lengths)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype)

    o = _offsets(lengths, index)
    b = len(lengths)
    longest = max(lengths, default=0)
    if op == "sll_jagged_softmax":
        return [rand(n + extra, d), o, cap, flag]
    if op in ("sll_jagged2_softmax", "sll_jagged2_to_padded_dense"):
        ot = _offsets(lengths, index, squares=True)
        m = max(cap, longest)
        e = int(ot[-1]) + extra
        if op == "sll_jagged2_softmax":
            return [rand(e), o, ot, m, flag]
        if not dtype.is_floating_point:
            return [torch.randint(-50, 50, (e,), generator=g).to(dtype), ot, m, 2.5]
        return [rand(e), ot, m, -1.0 if flag else 1e4]
    if op == "sll_jagged_dense_flash_attention":
        return [rand(n, d), rand(b, d, t), rand(n, dv), rand(b, extra + cap % 3, t), o, cap]
    if op == "sll_jagged_flash_attention_basic":
        return [rand(n, d), rand(n, d), rand(n, dv), o, max(cap, longest, 1), flag]
    heads = t
    return [rand(heads, n + extra, d), rand(heads, n + extra, d), rand(heads, n + extra, d), o, cap]
