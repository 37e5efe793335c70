"""Every test runs with an npu device: torch_npu's where it is installed, else the simulator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import fbgemm_npu  # noqa: F401  - registers our kernels
from fbgemm_npu.testing import simulate

DEVICE_KIND = simulate()


@pytest.fixture
def no_validation(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The data checks off (``FBGEMM_NPU_VALIDATE=0``): counts the kernel alone."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
    yield
