"""``mxrec::reverse_sequence``: Rec SDK's reversal of each sequence's valid prefix (TF
``reverse_sequence`` with ``seq_axis=1``, ``batch_axis=0``).

Schema (Rec SDK, ``reverse_sequence.cpp``)::

    reverse_sequence(Tensor input, Tensor seq_lengths) -> (Tensor)

Math: ``input`` ``[B, S, D]``, ``seq_lengths`` ``[B]`` with ``0 <= L_b <= S``::

    out[b, s] = input[b, L_b - 1 - s]    for s < L_b
    out[b, s] = input[b, s]              otherwise

one gather of the rows of ``input`` viewed ``[B * S, D]`` by the flat source row
``b * S + s + (L_b - 1 - 2 s) * (s < L_b)``, built in int64 from a cached ``arange`` (no
``flip`` per sequence, no loop).  Self-inverse: the autograd backward (PrivateUse1 and CPU) is
``reverse_sequence`` of the gradient; ``seq_lengths`` gets none.

dtypes: ``input`` float16 / float32 / bfloat16 (autograd) and int64 (Rec SDK; forward only: an
integer tensor has no gradient), int32 too; ``seq_lengths`` int32 / int64 (int8 and the rest
refused).  Sizes: any ``B, S, D`` (Rec SDK's caps ``B <= 10240``, ``S <= 102400``, ``D`` in
``[1, 1024]`` are its kernel's tiling limits; its test's "D a multiple of 16" is not in its
code, nor in ours: any ``D``, 0 included).  A length outside ``[0, S]`` is clamped (memory
safety) and refused by a queued data check.

Launches: 7 (the length ``clamp``, ``lt``, ``L - 1``, ``(L - 1) - 2 s``, the ``mul`` by the
mask, the ``add`` of the flat row, ``index_select``), checks 2 (``eq``, ``all``); an input no
view flattens (transposed, expanded) costs its copy.  No sync, no AI-CPU launch on a 910B
(int64 ``sub`` / ``mul`` / ``add`` / comparisons and ``index_select`` run on the AI Core).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    allocation_of,
    check_dtype,
    check_ndim,
    check_on_device,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached

__all__ = ["KERNELS", "REVERSE_SEQUENCE", "SCHEMAS"]

REVERSE_SEQUENCE = "mxrec::reverse_sequence"
SCHEMAS = {REVERSE_SEQUENCE: "reverse_sequence(Tensor input, Tensor seq_lengths) -> (Tensor)"}
DTYPES = (torch.float16, torch.float32, torch.bfloat16, torch.int64, torch.int32)


def _check(input: object, seq_lengths: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Host checks (no launch): a 3-D ``input``, ``[B]`` integer lengths on its device."""
    op = REVERSE_SEQUENCE
    x = check_dtype(
        op, "input", check_ndim(op, "input", check_tensor(op, "input", input), (3,)), DTYPES
    )
    lens = check_ndim(op, "seq_lengths", check_tensor(op, "seq_lengths", seq_lengths), (1,))
    check_dtype(op, "seq_lengths", lens, INDEX_DTYPES)
    if lens.size(0) != x.size(0):
        raise ValueError(
            f"{op}: argument 'seq_lengths' must hold one length per batch (input.size(0) = "
            f"{x.size(0)}), got {lens.size(0)}"
        )
    check_same_device(op, input=x, seq_lengths=lens)
    return x, lens


def reverse_sequence(input: torch.Tensor, seq_lengths: torch.Tensor) -> torch.Tensor:
    """PrivateUse1 / CPU: ``[B, S, D]`` (7 launches, checks 2, no sync)."""
    x, lens = _check(input, seq_lengths)
    b, s, d = x.shape
    safe = lens.clamp(0, s).view(b, 1)  # memory-safe under deferred checks
    if validation_enabled():
        ok = torch.eq(safe.view(-1), lens).all()
        check_on_device(
            REVERSE_SEQUENCE,
            ok,
            f"argument 'seq_lengths' must hold lengths in [0, {s}] (input.size(1))",
        )
    pos = arange_cached(s, x.device)
    # the flat source row, b * S + s shifted by L_b - 1 - 2 s inside the valid prefix
    # (a mul by the bool mask: a where with a scalar 0 would launch a fill of its own)
    shift = torch.sub(safe - 1, pos, alpha=2) * (pos < safe)
    rows = arange_cached(b * s, x.device).view(b, s) + shift
    with allocation_of(REVERSE_SEQUENCE, f"the output of 'input' {(b, s, d)}"):
        return x.reshape(b * s, d).index_select(0, rows.view(-1)).view(b, s, d)


def _reverse_meta(input: torch.Tensor, seq_lengths: torch.Tensor) -> torch.Tensor:
    x, _ = _check(input, seq_lengths)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


class _Reverse(torch.autograd.Function):
    """Self-inverse: the backward reverses the gradient by the same lengths."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, input: torch.Tensor, seq_lengths: torch.Tensor
    ) -> torch.Tensor:
        ctx.save_for_backward(seq_lengths)
        return below_autograd(torch.ops.mxrec.reverse_sequence, input, seq_lengths)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, None]:
        (seq_lengths,) = ctx.saved_tensors
        if grad is None or not ctx.needs_input_grad[0]:
            return None, None
        return torch.ops.mxrec.reverse_sequence(grad, seq_lengths), None


def _reverse_autograd(input: torch.Tensor, seq_lengths: torch.Tensor) -> torch.Tensor:
    """AutogradPrivateUse1 / AutogradCPU: recorded only when ``input`` needs a gradient."""
    if not needs_grad(input):
        return below_autograd(torch.ops.mxrec.reverse_sequence, input, seq_lengths)
    return _Reverse.apply(input, seq_lengths)


KERNELS = {
    REVERSE_SEQUENCE: {
        "PrivateUse1": reverse_sequence,
        "CPU": reverse_sequence,
        "AutogradPrivateUse1": _reverse_autograd,
        "AutogradCPU": _reverse_autograd,
        "Meta": _reverse_meta,
    },
}
