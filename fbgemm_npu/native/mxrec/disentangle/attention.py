"""``mxrec::disentangle_attention``: Rec SDK's DeBERTa disentangled attention (forward).

Schema (Rec SDK, ``DisentangleAttenFusion.cpp``, verbatim)::

    disentangle_attention(Tensor query_layer, Tensor key_layer, Tensor value_layer,
        Tensor pos_key_layer, Tensor pos_query_layer, Tensor relative_pos, Tensor attn_mask,
        str pos_attr_type, float score_scale) -> (Tensor, Tensor, Tensor)

Inputs: ``Q, K, V`` ``(b, n, s, d)``; ``P_k = pos_key_layer``, ``P_q = pos_query_layer``
``(2s, n, d)``; ``relative_pos`` ``(s, s)``, ``(1, s, s)`` or ``(1, 1, s, s)``, int64 (int32
too); ``attn_mask`` ``(b, s, s)`` or ``(b, 1, s, s)``, **additive** (0 or a large negative such
as float16's -65504); ``pos_attr_type`` ``"c2p"``, ``"p2c"`` or ``"c2p|p2c"``; ``score_scale``
``c`` (Rec SDK's test: ``(d * (1 + number of pos types)) ** -0.5``).  Outputs
``(attn_output (b, n, s, d), attn_probs (b, n, s, s), attn_weights (b, n, s, s))``.

Math (Rec SDK's golden, ``cust_op/test/disetangle_attention/torch/gloden.py``), per head h::

    idx[i, j]   = clamp(relative_pos[i, j] + s - 1, 0, 2s - 1)
    c2p[i, j]   = (Q P_k[:, h]^T)[i, idx[i, j]]                    (content -> position)
    p2c[i, j]   = (K P_q[:, h]^T)[j, idx[j, i]]                    (position -> content)
    weights     = c Q K^T + c (c2p [+ p2c]) + attn_mask
    probs       = softmax(weights, -1),   out = probs V

How this differs from HuggingFace DeBERTa-v2 (``DisentangledSelfAttention.
disentangled_attention_bias`` in ``modeling_deberta_v2.py``): (1) HF offsets by ``att_span``
(``pos_ebd_size``: the position buckets or ``max_relative_positions``, not ``s``), c2p's index
``clamp(relative_pos + att_span, 0, 2 att_span - 1)``, Rec SDK by ``s - 1``; (2) HF indexes p2c
with the *negated* position, ``clamp(-relative_pos + att_span, ...)`` at ``(j, i)``, Rec SDK
reuses c2p's index; (3) HF scales by ``1 / sqrt(d * scale_factor)``, ``scale_factor = 1 +
len(pos_att_type)``, computed inside, Rec SDK by the ``score_scale`` the caller passes (equal
when the caller passes ``(d (1 + #types)) ** -0.5``, as Rec SDK's test does); (4) HF's position
tables have ``2 att_span`` rows, Rec SDK's exactly ``2s``.  With ``att_span == s``, HF's c2p
alone is this op on ``relative_pos + 1`` and HF's p2c alone this op on ``1 - relative_pos``
(``tests/mxrec/disentangle/test_disentangle_parity.py`` checks both); for ``"c2p|p2c"`` no
single table gives HF's result unless every relative position is 0.

Beyond Rec SDK (which takes float16 and s == 256, b <= 100, n <= 64, 1 <= d <= 512 only): any
b, n, s, d (zero-size too); float16, bfloat16, float32 (float64 on CPU); int32 positions; a
``pos_attr_type`` outside the three spellings refused naming it (Rec SDK prints and returns
uninitialised outputs).  Computed in the input dtype like Rec SDK's kernel (matmuls accumulate in
float32 on the chip): in float16 a fully masked row (every key -65504) rounds to equal weights,
so its probabilities are uniform rather than float64's ``softmax(c Q K^T + bias)``.

Launches (as counted, contiguous inputs): the index (``clamp``, ``add_``; int32 positions + the
int64 cast), per positional term one ``matmul`` against ``P`` (broadcast over heads) and one
``gather`` of the ``(b, n, s, 2s)`` scores; their ``add_``; one ``baddbmm`` (``c Q K^T + c
bias``); the mask ``add_``; ``softmax``; the ``matmul`` with ``V``: 11 for ``"c2p|p2c"``, 8 for
one term (budgets.py).  No sync, no data check (every position is clamped by contract), nothing
on a 910B's AI CPU.  Autograd: ``backward.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import allocation_of
from fbgemm_npu.native.mxrec.disentangle._checks import Inputs, check_inputs

__all__ = ["DISENTANGLE_ATTENTION", "KERNELS", "SCHEMAS", "disentangle_attention", "positions"]

DISENTANGLE_ATTENTION = "mxrec::disentangle_attention"
SCHEMAS = {
    DISENTANGLE_ATTENTION: "disentangle_attention(Tensor query_layer, Tensor key_layer, "
    "Tensor value_layer, Tensor pos_key_layer, Tensor pos_query_layer, Tensor relative_pos, "
    "Tensor attn_mask, str pos_attr_type, float score_scale) -> (Tensor, Tensor, Tensor)"
}


def positions(rel: torch.Tensor, s: int) -> torch.Tensor:
    """``(s, s)`` int64 ``clamp(relative_pos + s - 1, 0, 2s - 1)`` (2 launches; int32 + 1):
    any position, however far out of range, lands inside the ``2s`` columns."""
    r = rel.reshape(s, s)
    if r.dtype != torch.int64:
        r = r.to(torch.int64)  # gather takes int64 indices only
    # clamped before the shift: rel + s - 1 would wrap for an int64 position near 2**63
    return torch.clamp(r, 1 - s, max(s, 1 - s)).add_(s - 1)


def _term(x: torch.Tensor, pos: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``gather(x P^T, -1, idx)``: ``(b, n, s, s)`` (the head-broadcast matmul, one gather)."""
    b, n, s, _ = x.shape
    scores = torch.matmul(x, pos.permute(1, 2, 0))  # (b, n, s, 2s)
    return scores.gather(-1, idx.expand(b, n, s, s))


def forward(a: Inputs, score_scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The tensor program on checked inputs: ``(out, probs, weights)``."""
    b, n, s, d = a.q.shape
    idx = positions(a.rel, s)
    bias = _term(a.q, a.pos_key, idx) if a.c2p else None
    if a.p2c:
        p2c = _term(a.k, a.pos_query, idx).transpose(-1, -2)
        bias = p2c if bias is None else bias.add_(p2c)
    assert bias is not None  # one of the two, by check_pos_attr_type
    q3, k3 = a.q.reshape(b * n, s, d), a.k.reshape(b * n, s, d)
    # c Q K^T + c bias in one launch (Rec SDK: (c Q) K^T + c bias, the same sum)
    weights = torch.baddbmm(
        bias.reshape(b * n, s, s), q3, k3.transpose(1, 2), beta=score_scale, alpha=score_scale
    ).view(b, n, s, s)
    mask = a.mask if a.mask is None or a.mask.dim() == 4 else a.mask.unsqueeze(1)
    weights.add_(mask)
    probs = torch.softmax(weights, -1)
    return torch.matmul(probs, a.v), probs, weights


def _grid(q: torch.Tensor) -> str:
    b, n, s, d = q.shape
    return (
        f"the (b, n, s, 2s) = {(b, n, s, 2 * s)} positional scores and (b, n, s, s) outputs of "
        f"'query_layer' of shape {(b, n, s, d)}"
    )


def disentangle_attention(
    query_layer: torch.Tensor,
    key_layer: torch.Tensor,
    value_layer: torch.Tensor,
    pos_key_layer: torch.Tensor,
    pos_query_layer: torch.Tensor,
    relative_pos: torch.Tensor,
    attn_mask: torch.Tensor,
    pos_attr_type: str,
    score_scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PrivateUse1 / CPU: ``(attn_output, attn_probs, attn_weights)`` (11 launches, module
    docstring)."""
    op = DISENTANGLE_ATTENTION
    a = check_inputs(
        op, query_layer, key_layer, value_layer, pos_key_layer, pos_query_layer,
        relative_pos, attn_mask, pos_attr_type, score_scale,
    )  # fmt: skip
    with allocation_of(op, _grid(a.q)):
        return forward(a, float(score_scale))


def _meta(
    query_layer: torch.Tensor,
    key_layer: torch.Tensor,
    value_layer: torch.Tensor,
    pos_key_layer: torch.Tensor,
    pos_query_layer: torch.Tensor,
    relative_pos: torch.Tensor,
    attn_mask: torch.Tensor,
    pos_attr_type: str,
    score_scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Meta: the shapes, after the same host checks."""
    a = check_inputs(
        DISENTANGLE_ATTENTION, query_layer, key_layer, value_layer, pos_key_layer,
        pos_query_layer, relative_pos, attn_mask, pos_attr_type, score_scale,
    )  # fmt: skip
    b, n, s, _ = a.q.shape
    return a.q.new_empty(a.q.shape), a.q.new_empty((b, n, s, s)), a.q.new_empty((b, n, s, s))


KERNELS = {
    DISENTANGLE_ATTENTION: {
        "PrivateUse1": disentangle_attention,
        "CPU": disentangle_attention,
        "Meta": _meta,
    }
}
