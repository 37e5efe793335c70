"""Every test runs with an npu device: torch_npu's where it is installed, else the simulator."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch

if not torch.cuda.is_available() and "TRITON_INTERPRET" not in os.environ:
    # The Triton kernels' tests run them in Triton's interpreter here (no GPU, no triton-ascend
    # device): set before any kernel module is imported, since Triton reads it per kernel.
    # FBGEMM_NPU_KERNEL=auto never picks the interpreter, so every other test is unchanged.
    os.environ["TRITON_INTERPRET"] = "1"

import fbgemm_npu  # noqa: F401  - registers our kernels
from fbgemm_npu.testing import simulate
from fbgemm_npu.testing.budgets import drain_checks

DEVICE_KIND = simulate()


@pytest.fixture
def no_validation(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The data checks off (``FBGEMM_NPU_VALIDATE=0``): counts the kernel alone."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
    yield


@pytest.fixture(autouse=True)
def _empty_check_queue() -> Iterator[None]:
    """Each test starts with no deferred data checks queued (fbgemm_npu/native/_pending.py): a
    failed check a test left behind would otherwise be raised inside the next test's calls."""
    drain_checks()
    yield
