"""``mxrec::relative_attn_bias_pos``: Rec SDK's positional relative attention bias, on any device.

Schema (Rec SDK, ``relative_attn_bias_pos.cpp``)::

    relative_attn_bias_pos(Tensor rel_pos_bias, Tensor identity, int[] past_valid_lens) -> Tensor

Math (Rec SDK's golden ``rab_pos_golden``): ``rel_pos_bias`` and ``identity`` are ``(2s, 2s)``
(``s`` items of two tokens each), ``past_valid_lens`` holds ``b`` host ints ``p_i >= 0``;
the output is ``(b, 2s, 2s)``::

    g[i, r, c]   = rel_pos_bias[min(r, p_i), c]       # rows past p_i repeat row p_i
    out[i, r, c] = g[i, r, c] * (1 - identity[r, c]) + identity[r, c] * rel_pos_bias[0, 0]

(``rel_pos_bias[0, 0]`` is the golden's ``g[0, 0, 0]``: row 0 is never replaced).  A
``p_i >= 2s`` replaces no row (the golden would index past the table; we read it as "every row
valid").  The blend is one ``lerp(g, rel_pos_bias[0, 0], identity)`` = ``g + identity * (c -
g)``, equal to the golden's form in exact arithmetic and exactly equal where identity is 0 / 1.

dtypes: float16, float32 (Rec SDK), bfloat16 too; ``identity`` of the same dtype and shape.
No autograd (Rec SDK registers none).  Launches: the upload of ``past_valid_lens`` (pinned, no
stall), a ``clamp`` of the cached ``arange`` (the row index), an ``index_select`` of the rows,
the ``lerp``: 4; no data checks (``past_valid_lens`` is checked on the host), no sync.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._checks import (
    allocation_of,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
)
from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native._upload import upload

__all__ = ["KERNELS", "RELATIVE_ATTN_BIAS_POS", "SCHEMAS", "relative_attn_bias_pos"]

RELATIVE_ATTN_BIAS_POS = "mxrec::relative_attn_bias_pos"
SCHEMAS = {
    RELATIVE_ATTN_BIAS_POS: "relative_attn_bias_pos(Tensor rel_pos_bias, Tensor identity, "
    "int[] past_valid_lens) -> Tensor",
}
POS_DTYPES = (torch.float16, torch.float32, torch.bfloat16)


def _check(
    rel_pos_bias: object, identity: object, past_valid_lens: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Host checks (no launch): tensors, dtypes, a square even ``(2s, 2s)`` table, an identity
    of its shape and dtype on its device, ``b >= 1`` lengths ``>= 0``."""
    op = RELATIVE_ATTN_BIAS_POS
    bias = check_tensor(op, "rel_pos_bias", rel_pos_bias)
    ident = check_tensor(op, "identity", identity)
    check_dtype(op, "rel_pos_bias", check_ndim(op, "rel_pos_bias", bias, (2,)), POS_DTYPES)
    check_dtype(op, "identity", check_ndim(op, "identity", ident, (2,)), (bias.dtype,))
    n = bias.size(0)
    if bias.size(1) != n or n == 0 or n % 2:
        raise ValueError(
            f"{op}: argument 'rel_pos_bias' must be a square (2s, 2s) table with s >= 1, got "
            f"shape {tuple(bias.shape)}"
        )
    if ident.shape != bias.shape:
        raise ValueError(
            f"{op}: argument 'identity' must have rel_pos_bias's shape {tuple(bias.shape)}, got "
            f"{tuple(ident.shape)}"
        )
    check_same_device(op, rel_pos_bias=bias, identity=ident)
    lens = [int(p) for p in past_valid_lens]
    if not lens:
        raise ValueError(f"{op}: argument 'past_valid_lens' must hold at least one length")
    if min(lens) < 0:
        raise ValueError(
            f"{op}: argument 'past_valid_lens' must hold lengths >= 0, got {min(lens)}"
        )
    return bias, ident, lens


def relative_attn_bias_pos(
    rel_pos_bias: torch.Tensor, identity: torch.Tensor, past_valid_lens: Sequence[int]
) -> torch.Tensor:
    """PrivateUse1 / CPU: ``(b, 2s, 2s)``, see the module docstring (4 launches, no sync)."""
    bias, ident, lens = _check(rel_pos_bias, identity, past_valid_lens)
    n, b = bias.size(0), len(lens)
    # p_i >= 2s replaces no row: clamped on the host so the device index stays in the table
    p = upload([[min(v, n - 1)] for v in lens], torch.int64, bias.device)
    rows = torch.clamp(arange_cached(n, bias.device), max=p)  # (b, 2s): min(r, p_i)
    what = f"the (b, 2s, 2s) = {(b, n, n)} output of 'past_valid_lens'"
    with allocation_of(RELATIVE_ATTN_BIAS_POS, what):
        g = bias.index_select(0, rows.view(-1)).view(b, n, n)
        return torch.lerp(g, bias[0, 0], ident)


def relative_attn_bias_pos_meta(
    rel_pos_bias: torch.Tensor, identity: torch.Tensor, past_valid_lens: Sequence[int]
) -> torch.Tensor:
    """Meta: the output's shape and dtype, after the host checks."""
    bias, _, lens = _check(rel_pos_bias, identity, past_valid_lens)
    n = bias.size(0)
    return bias.new_empty((len(lens), n, n))


KERNELS = {
    RELATIVE_ATTN_BIAS_POS: {
        "PrivateUse1": relative_attn_bias_pos,
        "CPU": relative_attn_bias_pos,
        "Meta": relative_attn_bias_pos_meta,
    },
}
