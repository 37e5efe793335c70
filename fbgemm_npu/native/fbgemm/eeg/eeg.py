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
path), made contiguous there (upstream walks ``numel`` elements from ``data_ptr``: a strided or
stride-0 tensor would be misread, or read past its storage), then upstream's CPU kernel runs, so
results are upstream's, and the tensor result goes back to the argument's device (torch's
convention) by one non-blocking upload.  Dtypes: int64 indices; float32 / float64 heavy hitters.

Refused by name before upstream's code runs (its contract is ``assert`` s compiled out of the
release build; past them it hangs, crashes or reads out of bounds -- found by
tests/fuzz/test_fuzz_eeg.py): negative indices (its log table is sized by the largest index and
read by the count of distinct ones); heavy hitters not 1-D float32 / float64 probabilities
(finite, non-negative, summing to at most 1); ``zipf_q`` with ``zipf_q + len(heavy_hitters) <=
0`` or not finite (its Zipf sampler asserts ``q > 0``; NaN loops for ever), ``zipf_s`` below 0 or
not finite (inf loops for ever), ``max_index - len(heavy_hitters) < 1`` (the sampler asserts ``n
>= 1``; 0 loops for ever, more hitters than ``max_index + 1`` write out of bounds),
``num_indices < 0``.  Upstream's own errors (dtypes, an empty trace, a trace it cannot fit, a
table it cannot allocate) are re-raised with the op and the argument named.  Launches: the
upload; syncs: 1 (``BUDGETS``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from fbgemm_npu.native._checks import check_tensor
from fbgemm_npu.native._upload import upload

__all__ = ["KERNELS"]

ESTIMATE = "fbgemm::tbe_estimate_indices_distribution"
GENERATE = "fbgemm::tbe_generate_indices_from_distribution"


def _upstream(op: str, arg: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` (upstream's CPU kernel), its errors re-raised naming ``op`` and ``arg``:
    upstream's messages name neither ("indices dtype is int(!= I64)", "std::bad_alloc")."""
    try:
        return fn(*args)
    except (RuntimeError, ValueError, MemoryError, IndexError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RuntimeError(f"{op}: argument {arg}: upstream's kernel refused it: {first}") from exc


def _require(ok: bool, op: str, what: str) -> None:
    if not ok:
        raise ValueError(f"{op}: {what}")


def tbe_estimate_indices_distribution_npu(
    indices: torch.Tensor,
) -> tuple[torch.Tensor, float, float, int, int]:
    """``(heavy_hitters, zipf_q, zipf_s, max_index, num_indices)`` of ``indices`` (upstream's
    estimator on a contiguous host copy; heavy_hitters float64 on ``indices``' device)."""
    op = ESTIMATE
    host = check_tensor(op, "indices", indices).detach().cpu().contiguous()
    if host.dtype == torch.int64 and host.numel():
        _require(bool(host.min() >= 0), op, "argument 'indices' must be non-negative")
    est = torch.ops.fbgemm.tbe_estimate_indices_distribution
    hitters, *params = _upstream(op, "'indices'", est, host)
    q, s, max_index, num_indices = params
    return upload(hitters, hitters.dtype, indices.device), q, s, max_index, num_indices


def _check_generate(
    hitters: torch.Tensor, zipf_q: float, zipf_s: float, max_index: int, num_indices: int
) -> None:
    """The sampler's contract (module docstring), on the host copy of ``hitters``."""
    op = GENERATE
    _require(
        hitters.dim() == 1 and hitters.dtype in (torch.float32, torch.float64),
        op,
        "argument 'heavy_hitters' must have dim 1 and dtype float32 or float64, got dim "
        f"{hitters.dim()}, dtype {str(hitters.dtype).removeprefix('torch.')}",
    )
    p = hitters.double()
    _require(
        bool(torch.isfinite(p).all() and (p >= 0).all() and p.sum() <= 1.0 + 1e-5),
        op,
        "argument 'heavy_hitters' must hold probabilities: finite, non-negative, sum <= 1 "
        "(within float32 rounding)",
    )
    n = hitters.numel()
    _require(
        math.isfinite(zipf_q) and zipf_q + n > 0,
        op,
        f"argument 'zipf_q' must be finite with zipf_q + len(heavy_hitters) > 0, got {zipf_q}",
    )
    _require(
        math.isfinite(zipf_s) and zipf_s >= 0,
        op,
        f"argument 'zipf_s' must be finite and >= 0, got {zipf_s}",
    )
    _require(
        max_index - n >= 1,
        op,
        f"argument 'max_index' must exceed len(heavy_hitters) = {n} (a Zipf tail of at least "
        f"one index), got {max_index}",
    )
    _require(num_indices >= 0, op, f"argument 'num_indices' must be >= 0, got {num_indices}")


def tbe_generate_indices_from_distribution_npu(
    heavy_hitters: torch.Tensor, zipf_q: float, zipf_s: float, max_index: int, num_indices: int
) -> torch.Tensor:
    """``num_indices`` int64 indices drawn from the distribution (upstream's generator on a
    host copy of ``heavy_hitters``; the result on its device)."""
    op = GENERATE
    host = check_tensor(op, "heavy_hitters", heavy_hitters).detach().cpu().contiguous()
    _check_generate(host, zipf_q, zipf_s, max_index, num_indices)
    gen = torch.ops.fbgemm.tbe_generate_indices_from_distribution
    args = (host, zipf_q, zipf_s, max_index, num_indices)
    out = _upstream(op, "'max_index' / 'num_indices'", gen, *args)
    return upload(out, out.dtype, heavy_hitters.device)


KERNELS = {
    ESTIMATE: {"PrivateUse1": tbe_estimate_indices_distribution_npu},
    GENERATE: {"PrivateUse1": tbe_generate_indices_from_distribution_npu},
}
