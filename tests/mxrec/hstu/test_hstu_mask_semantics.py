"""Where the built-in mask (mask_type 0) puts context rows and target groups: our float64
reference (conformance/specs/mxrec/hstu/reference.py) and kernel against an independent
transcription of Rec SDK's test goldens.

Rec SDK defines the mask in its tests, not in a document: ``hstu_v2/utils/mask.py``
``create_causal_mask(seqlen_q, seqlen_k, num_context, num_target, target_group_size)`` (the
golden of its v2 op, which takes q and k of their own lengths) and, for equal lengths, the
point-wise ``GPUSmit`` rules of ``hstu_dense/torch/test_target_mask.py``.  Transcribed below
from their logic (our code): for one sequence of ``L_q`` query rows and ``L_k`` keys,

* causal, bottom-right aligned: row ``i`` sees key ``j`` iff ``j <= i + L_k - L_q``;
* context: the first ``n_c`` *rows of q* (``i < n_c``) see every key ``j < L_k - n_t``;
* targets (``g > 0``, ``n_t > 0``): the block of the last ``n_t`` rows and the last ``n_t``
  keys is replaced by ``tril & same group`` (groups of ``g`` counted from the first target).

The reference and the kernel follow them: a query row sits at key position ``a = i + L_k - L_q``
for the causal rule and the targets (the last ``n_t`` rows sit at the last ``n_t`` key
positions), while the context rows are the first ``n_c`` rows of q, as Rec SDK's code has it
(an earlier reading put them at key positions ``a < n_c``; this file caught the difference).
"""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.hstu.reference import causal_mask, hstu_delta_reference

F64 = torch.float64
# (L_q, L_k, n_c, n_t, g): Rec SDK's goldens need n_c + n_t <= L_q (their generator draws
# L_q >= 1 + n_c + n_t) and n_t <= L_q (the target block is the last n_t rows of q)
EQUAL = [(6, 6, 0, 0, 0), (6, 6, 2, 0, 0), (6, 6, 0, 3, 1), (7, 7, 2, 3, 2), (8, 8, 1, 4, 3),
         (5, 5, 2, 3, 1), (9, 9, 3, 4, 4), (6, 6, 0, 4, 0)]  # fmt: skip
DELTA_NO_CONTEXT = [(3, 6, 0, 0, 0), (4, 7, 0, 2, 1), (5, 9, 0, 4, 2), (2, 8, 0, 2, 3),
                    (1, 5, 0, 1, 1), (4, 4, 0, 3, 2)]  # fmt: skip
DELTA_CONTEXT = [(4, 7, 2, 1, 1), (5, 9, 3, 2, 2), (3, 8, 2, 0, 0), (6, 8, 3, 2, 1),
                 (4, 6, 2, 2, 1)]  # fmt: skip


def recsdk_causal_mask(l_q: int, l_k: int, n_c: int, n_t: int, g: int) -> torch.Tensor:
    """``[L_q, L_k]`` 0/1: Rec SDK's ``create_causal_mask`` (module docstring), transcribed."""
    i = torch.arange(l_q).view(-1, 1)
    j = torch.arange(l_k).view(1, -1)
    mask = (j <= i + (l_k - l_q)).to(F64)
    if n_c > 0:
        mask[:n_c, : l_k - n_t] = 1.0
    if g > 0 and n_t > 0:
        r = torch.arange(n_t)
        same = (r.view(-1, 1) // g) == (r.view(1, -1) // g)
        mask[l_q - n_t :, l_k - n_t :] = ((r.view(-1, 1) >= r.view(1, -1)) & same).to(F64)
    return mask


def recsdk_gpu_smit_mask(length: int, n_c: int, n_t: int, g: int) -> torch.Tensor:
    """``[L, L]`` 0/1: the point-wise rules of Rec SDK's ``GPUSmit`` (equal lengths only)."""
    history = length - n_t
    mask = torch.ones(length, length, dtype=F64)
    for row in range(length):
        for col in range(length):
            if row < n_c and col < history:
                continue  # a context row sees the whole history
            if col > row:
                mask[row, col] = 0.0
            if row >= history and col >= history and g > 0:
                first = history + (row - history) // g * g
                if col < first:  # a target sees its own group's earlier targets only
                    mask[row, col] = 0.0
    return mask


def _mask_of(fn, l_q: int, l_k: int, n_c: int, n_t: int, g: int, device: str = "cpu"):  # type: ignore[no-untyped-def]
    """The mask a delta implementation applies, read off its output: q = 0 and a constant bias
    make every score ``silu(1) * s``; v = the identity over the keys puts key ``j``'s weight in
    output column ``j``; so ``out[i, 0, j] / (silu(1) s) = mask[i, j]``."""
    q = torch.zeros(l_q, 1, 1, dtype=F64 if device == "cpu" else torch.float32)
    k = torch.zeros(l_k, 1, 1, dtype=q.dtype)
    v = torch.eye(l_k, dtype=q.dtype).view(l_k, 1, l_k)
    bias = torch.ones(1, 1, max(l_q, 1), max(l_k, 1), dtype=q.dtype)
    kw = {
        "attn_bias": bias, "mask_type": 0, "max_seq_len": max(l_q, 1),
        "max_seq_len_k": max(l_k, 1), "silu_scale": 1.0,
        "seq_offset": torch.tensor([0, l_q]), "seq_offset_k": torch.tensor([0, l_k]),
        "num_context": torch.tensor([n_c]), "num_target": torch.tensor([n_t]),
        "target_group_size": g,
    }  # fmt: skip
    placed = [t.to(device) for t in (q, k, v)]
    kw = {n: a.to(device) if isinstance(a, torch.Tensor) else a for n, a in kw.items()}
    out = fn(*placed, **kw).cpu().to(F64)
    return out[:, 0, :] / torch.nn.functional.silu(torch.tensor(1.0, dtype=F64))


def _ours(l_q: int, l_k: int, n_c: int, n_t: int, g: int) -> torch.Tensor:
    return _mask_of(torch.ops.mxrec.hstu_jagged.delta, l_q, l_k, n_c, n_t, g, "npu")


@pytest.mark.parametrize("case", EQUAL, ids=str)
def test_equal_lengths_agree(case: tuple[int, ...]) -> None:
    """L_q = L_k: causal_mask = Rec SDK's create_causal_mask = its GPUSmit rules."""
    length, _, n_c, n_t, g = case
    ours = causal_mask(length, n_c, n_t, g)
    assert torch.equal(ours, recsdk_causal_mask(length, length, n_c, n_t, g))
    assert torch.equal(ours, recsdk_gpu_smit_mask(length, n_c, n_t, g))


@pytest.mark.parametrize("case", DELTA_NO_CONTEXT + EQUAL, ids=str)
def test_delta_without_context_rows_agrees(case: tuple[int, ...]) -> None:
    """Causal bottom-right alignment and the target groups: the reference's and the kernel's
    delta masks equal Rec SDK's (no context; or equal lengths, context included)."""
    want = recsdk_causal_mask(*case)
    assert torch.equal(_mask_of(hstu_delta_reference, *case), want)
    torch.testing.assert_close(_ours(*case), want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("case", DELTA_CONTEXT, ids=str)
def test_delta_context_rows_follow_rec_sdk(case: tuple[int, ...]) -> None:
    """q shorter than k with context: the first ``n_c`` q rows see the whole history, in the
    reference and in the kernel."""
    want = recsdk_causal_mask(*case)
    assert torch.equal(_mask_of(hstu_delta_reference, *case), want)
    torch.testing.assert_close(_ours(*case), want, rtol=0, atol=1e-6)
    l_q, l_k, n_c, n_t, g = case
    assert not torch.equal(want, recsdk_causal_mask(l_q, l_k, 0, n_t, g))  # context matters here
