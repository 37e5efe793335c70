"""Upstream's TBE index-distribution tools (``tbe.bench``'s "EEG") on npu tensors: the ops
``fbgemm::tbe_estimate_indices_distribution``, ``fbgemm::tbe_generate_indices_from_distribution``.

What they compute (upstream's host code, ``fbgemm_gpu/src/tbe/eeg``): the estimator counts each
index's frequency, sorts the frequencies, keeps the most frequent as "heavy hitters" (a float64
tensor of their probabilities, until their sum passes a threshold) and fits the rest by a
Zipf(q, s) law with a maximum-likelihood sweep over (q, s); it returns ``(heavy_hitters, q, s,
max_index, num_indices)``.  The generator draws ``num_indices`` int64 indices in ``[0,
max_index]`` from that law with torch's generator (so a fixed ``torch.manual_seed`` gives the
same draw).  Upstream registers the two as composite kernels that read the tensor's memory from
the host (``data_ptr``): on an accelerator's tensor that reads device memory from the CPU (on
CUDA too: upstream's tools are used with CPU tensors).

Ours: the tensor argument is copied to the host once (one sync: a hash map, a sort and a sweep
of scalar math are host work, and a statistic of a trace is computed once, off the training
path), then upstream's CPU kernel runs, so results, messages and errors are upstream's, and the
tensor result goes back to the argument's device (torch's convention) by one non-blocking
upload.  Dtypes: int64 indices; float32 / float64 heavy hitters (upstream's checks).  Launches:
the upload; syncs: 1 (``BUDGETS``).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import check_tensor
from fbgemm_npu.native._upload import upload

__all__ = ["KERNELS"]

ESTIMATE = "fbgemm::tbe_estimate_indices_distribution"
GENERATE = "fbgemm::tbe_generate_indices_from_distribution"


def tbe_estimate_indices_distribution_npu(
    indices: torch.Tensor,
) -> tuple[torch.Tensor, float, float, int, int]:
    """``(heavy_hitters, zipf_q, zipf_s, max_index, num_indices)`` of ``indices`` (upstream's
    estimator on a host copy; heavy_hitters float64 on ``indices``' device)."""
    host = check_tensor(ESTIMATE, "indices", indices).cpu()
    hitters, *params = torch.ops.fbgemm.tbe_estimate_indices_distribution(host)
    q, s, max_index, num_indices = params
    return upload(hitters, hitters.dtype, indices.device), q, s, max_index, num_indices


def tbe_generate_indices_from_distribution_npu(
    heavy_hitters: torch.Tensor, zipf_q: float, zipf_s: float, max_index: int, num_indices: int
) -> torch.Tensor:
    """``num_indices`` int64 indices drawn from the distribution (upstream's generator on a
    host copy of ``heavy_hitters``; the result on its device)."""
    host = check_tensor(GENERATE, "heavy_hitters", heavy_hitters).cpu()
    out = torch.ops.fbgemm.tbe_generate_indices_from_distribution(
        host, zipf_q, zipf_s, max_index, num_indices
    )
    return upload(out, out.dtype, heavy_hitters.device)


KERNELS = {
    ESTIMATE: {"PrivateUse1": tbe_estimate_indices_distribution_npu},
    GENERATE: {"PrivateUse1": tbe_generate_indices_from_distribution_npu},
}
