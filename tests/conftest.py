"""Every test runs with an npu device: torch_npu's where it is installed, else the simulator."""

from __future__ import annotations

import fbgemm_npu  # noqa: F401  - registers our kernels
from fbgemm_npu.testing import simulate

DEVICE_KIND = simulate()
