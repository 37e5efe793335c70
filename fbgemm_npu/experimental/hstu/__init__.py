"""FBGEMM's HSTU attention on npu: ``from fbgemm_gpu.experimental.hstu import
hstu_attn_varlen_func`` becomes ``from fbgemm_npu.experimental.hstu import hstu_attn_varlen_func``
with the same arguments (pytorch/FBGEMM, fbgemm_gpu/experimental/hstu).  Importing it registers
nothing new: the ops (``torch.ops.fbgemm.hstu_varlen_fwd_80`` / ``_bwd_80``) are registered with
the rest of fbgemm_npu."""

from __future__ import annotations

import fbgemm_npu  # noqa: F401  (registers the ops)
from fbgemm_npu.experimental.hstu.hstu_attention import (
    cuda_hstu_attn_varlen,
    hstu_attn_qkvpacked_func,
    hstu_attn_varlen_func,
)

__all__ = ["cuda_hstu_attn_varlen", "hstu_attn_qkvpacked_func", "hstu_attn_varlen_func"]
