"""``fbgemm::permute_sequence_embeddings`` and ``fbgemm::permute102_baddbmm_permute102`` on npu.

``permute_sequence_embeddings(permute, lengths, embeddings)`` is upstream's backward-compatible
wrapper of ``permute_2D_sparse_data`` without weights and without ``permuted_lengths_sum``
(``sparse_ops_cpu.cpp``): with ``lengths`` of shape ``(T_in, B)``::

    permuted_lengths[t, b]          = lengths[permute[t], b]
    permuted_embeddings[o[t,b] + i] = embeddings[s[permute[t], b] + i]   0 <= i < lengths[...]

``s`` / ``o`` the exclusive scans of ``lengths`` / ``permuted_lengths`` (row-major);
``embeddings`` of any rank is read flat, as upstream does (a 2-D ``(N, D)`` tensor is not
permuted by rows: the lengths count elements).  The program, dtypes and checks are the 2-D
permute's (:mod:`.permute`, :mod:`._utils`); the output size is data, read back once.

``permute102_baddbmm_permute102(bias, A, B)``: ``A (m, b, k)``, ``B (b, k, n)``, ``bias (b, n)``::

    out[i, j, :] = bias[j, :] + A[i, j, :] @ B[j]                          out: (m, b, n)

one ``baddbmm`` of ``A`` seen as ``(b, m, k)`` (a view) with ``bias`` broadcast along ``m``; the
output is the ``(1, 0, 2)`` view of its ``(b, m, n)`` result, the strides upstream's CPU kernel
returns.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    check_dtype,
    check_ndim,
    check_same_device,
    check_same_dtype,
    check_tensor,
    dynamic_size,
)
from fbgemm_npu.native.fbgemm.permute import _utils as _pi

__all__ = [
    "KERNELS",
    "permute102_baddbmm_permute102_fake",
    "permute102_baddbmm_permute102_npu",
    "permute_sequence_embeddings_fake",
    "permute_sequence_embeddings_npu",
]

PERMUTE_SEQUENCE_EMBEDDINGS = "fbgemm::permute_sequence_embeddings"
PERMUTE102_BADDBMM = "fbgemm::permute102_baddbmm_permute102"
# What torch_npu's baddbmm runs on the cube units (upstream's CPU kernel also takes float64 and
# integer types, which a 910B has no matmul for).
MATMUL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def permute_sequence_embeddings_npu(
    permute: torch.Tensor, lengths: torch.Tensor, embeddings: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Permute the features (rows) of a ``(T_in, B)`` jagged batch of embeddings; see the module
    docstring.  ``permute`` int32 (int64 too, as the 2-D permute), ``lengths`` int32 / int64,
    ``embeddings`` int32, int64, float32, float16, bfloat16.

    Returns ``(permuted_lengths (T, B), permuted_embeddings (total,))``.  Launches: the 2-D
    permute without weights, its output size read back (the one sync, carrying the data checks).
    Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    op = PERMUTE_SEQUENCE_EMBEDDINGS
    _pi.check_args(op, permute, lengths, embeddings, None, None, values_name="embeddings")
    check_ndim(op, "lengths", lengths, (2,))
    out = _pi.permute_rows(op, permute, lengths, embeddings, None, None, values_name="embeddings")
    return out[0], out[1]


def permute_sequence_embeddings_fake(
    permute: torch.Tensor, lengths: torch.Tensor, embeddings: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fake / Meta kernel (upstream has none): lengths ``(T, B)``, embeddings ``(n,)`` with ``n``
    data-dependent (0 for an empty output, as the kernel returns)."""
    op = PERMUTE_SEQUENCE_EMBEDDINGS
    _pi.check_args(op, permute, lengths, embeddings, None, None, values_name="embeddings")
    check_ndim(op, "lengths", lengths, (2,))
    t_out, b = permute.numel(), lengths.size(1)
    n = 0 if t_out == 0 or b == 0 else dynamic_size(op, "the schema takes no size")
    return lengths.new_empty((t_out, b)), embeddings.new_empty((n,))


def _check_baddbmm(bias: object, a: object, b: object) -> tuple[int, int, int, int]:
    """Metadata checks; returns ``(m, batch, k, n)``."""
    op = PERMUTE102_BADDBMM
    tensors = {"bias": bias, "A": a, "B": b}
    for name, t in tensors.items():
        check_dtype(op, name, check_tensor(op, name, t), MATMUL_DTYPES)
    assert isinstance(bias, torch.Tensor) and isinstance(a, torch.Tensor)
    assert isinstance(b, torch.Tensor)
    check_same_device(op, bias=bias, A=a, B=b)
    check_same_dtype(op, bias=bias, A=a, B=b)
    check_ndim(op, "A", a, (3,))
    check_ndim(op, "B", b, (3,))
    check_ndim(op, "bias", bias, (2,))
    m, batch, k = a.shape
    if tuple(b.shape[:2]) != (batch, k):
        raise RuntimeError(
            f"{op}: argument 'B' must have shape (A.size(1), A.size(2), n) = ({batch}, {k}, n), "
            f"got {tuple(b.shape)}"
        )
    n = b.size(2)
    if tuple(bias.shape) != (batch, n):
        raise RuntimeError(
            f"{op}: argument 'bias' must have shape (B.size(0), B.size(2)) = ({batch}, {n}), got "
            f"{tuple(bias.shape)}"
        )
    return m, batch, k, n


def permute102_baddbmm_permute102_npu(
    bias: torch.Tensor, A: torch.Tensor, B: torch.Tensor
) -> torch.Tensor:
    """``out = (bias[:, None, :] + A.permute(1, 0, 2) @ B).permute(1, 0, 2)``: shape ``(m, b,
    n)``, dtype of the inputs (float32, float16, bfloat16, all three the same), any strides.

    Upstream's CPU kernel checks ``B`` against ``A.size(2)`` and ``bias`` against ``B`` only, and
    leaves ``A.size(1) != B.size(0)`` to ``baddbmm``'s error; ours names the argument.
    Launches: one ``baddbmm`` (the permutes and the broadcast are views).  Launches and syncs:
    ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    _check_baddbmm(bias, A, B)
    return torch.baddbmm(bias.unsqueeze(1), A.permute(1, 0, 2), B).permute(1, 0, 2)


def permute102_baddbmm_permute102_fake(
    bias: torch.Tensor, A: torch.Tensor, B: torch.Tensor
) -> torch.Tensor:
    """Fake / Meta kernel (upstream has none): the kernel's shape and strides (``(m, b, n)``, the
    ``(1, 0, 2)`` view of a contiguous ``(b, m, n)``)."""
    m, batch, _, n = _check_baddbmm(bias, A, B)
    return A.new_empty((batch, m, n)).permute(1, 0, 2)


KERNELS = {
    PERMUTE_SEQUENCE_EMBEDDINGS: {
        "PrivateUse1": permute_sequence_embeddings_npu,
        "Meta": permute_sequence_embeddings_fake,
    },
    PERMUTE102_BADDBMM: {
        "PrivateUse1": permute102_baddbmm_permute102_npu,
        "Meta": permute102_baddbmm_permute102_fake,
    },
}
