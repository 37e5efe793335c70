"""Programs of the hstu_varlen family's fuzz tests (``tests/fuzz/test_fuzz_hstu_varlen.py``).

fbgemm-gpu-cpu ships no HSTU, so the oracle of a valid case is the float64 reference written
from upstream's test math (``conformance/specs/fbgemm/hstu_varlen/reference.py``), rounded to
the inputs' dtype here so that the harness compares like with like (its tolerance then covers
ours against the exact value, as the conformance spec's does).  The paged-KV forward has no
backward (upstream's backward op takes no cache): its programs run under ``no_grad``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["forward", "paged_forward", "paged_reference", "reference"]


def forward(**kw: Any) -> torch.Tensor:
    """``fbgemm_npu.experimental.hstu.hstu_attn_varlen_func(**kw)`` (the autograd Function over
    ``fbgemm::hstu_varlen_fwd_80`` / ``_bwd_80``)."""
    from fbgemm_npu.experimental.hstu import hstu_attn_varlen_func

    return hstu_attn_varlen_func(**kw)


def reference(**kw: Any) -> torch.Tensor:
    """The float64 reference of the same call, in ``q``'s dtype (differentiable)."""
    from conformance.specs.fbgemm.hstu_varlen.reference import hstu_varlen_reference

    return hstu_varlen_reference(**kw).to(kw["q"].dtype)


def paged_forward(**kw: Any) -> torch.Tensor:
    with torch.no_grad():
        return forward(**kw)


def paged_reference(**kw: Any) -> torch.Tensor:
    with torch.no_grad():
        return reference(**kw)
