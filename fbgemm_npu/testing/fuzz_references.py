"""Float64 references for fuzz cases whose upstream CPU result is not the contract.

Upstream's CPU cumsums accumulate half types sequentially in the half type itself, so their
rounding drifts; the contract (as in conformance) is the exact sum rounded once, computed here
from the math in float64.
"""

from __future__ import annotations

import torch


def _scan(t: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(t.reshape(-1).to(torch.float64), 0)


def cumsum_complete(t_in: torch.Tensor) -> torch.Tensor:
    rows = t_in.reshape(1, -1) if t_in.dim() == 1 else t_in
    out = torch.zeros(rows.shape[0], rows.shape[1] + 1, dtype=torch.float64)
    out[:, 1:] = torch.cumsum(rows.to(torch.float64), 1)
    out = out.to(t_in.dtype)
    return out.reshape(-1) if t_in.dim() == 1 else out


def cumsum_inclusive(t_in: torch.Tensor) -> torch.Tensor:
    return _scan(t_in).to(t_in.dtype).reshape(t_in.shape)


def cumsum_exclusive(t_in: torch.Tensor) -> torch.Tensor:
    flat = _scan(t_in)
    out = torch.zeros_like(flat)
    out[1:] = flat[:-1]
    return out.to(t_in.dtype).reshape(t_in.shape)


# Programs that misbehave on purpose: tests/core/test_fuzz_harness.py proves that the harness
# tells each failure apart (a harness that cannot see a crash would report 0 crashes forever).
def selftest_crash(t: torch.Tensor) -> torch.Tensor:
    if t.device.type != "cpu":
        import os

        os.abort()
    return t


def selftest_hang(t: torch.Tensor) -> torch.Tensor:
    if t.device.type != "cpu":
        import time

        time.sleep(3600)
    return t


def selftest_wrong(t: torch.Tensor) -> torch.Tensor:
    return t + 1 if t.device.type != "cpu" else t


def selftest_error(t: torch.Tensor, message: str) -> torch.Tensor:
    raise ValueError(message)


def selftest_in_place(t: torch.Tensor) -> torch.Tensor:
    t.add_(1 if t.device.type == "cpu" else 2)  # the result agrees, the update does not
    return t.sum()


# An op whose schema declares a fresh output but whose kernel returns its input: the harness must
# call that aliasing wrong (the check reads the schema of the target, here given to a program).
_SELFTEST = torch.library.Library("fbgemm_npu_selftest", "FRAGMENT")
_SELFTEST.define("leak(Tensor x) -> Tensor")
_SELFTEST.impl("leak", lambda x: x, "CompositeExplicitAutograd")


def selftest_leak(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.fbgemm_npu_selftest.leak.default(x)


selftest_leak._schema = torch.ops.fbgemm_npu_selftest.leak.default._schema  # type: ignore[attr-defined]
