"""Switch the npu device on before any spec imports ops: torch_npu where installed, else the
simulated device of ``fbgemm_npu.testing`` (DESIGN.md rule 5)."""

from __future__ import annotations

import fbgemm_npu.testing

try:
    DEVICE_KIND: str | None = fbgemm_npu.testing.simulate()
    DEVICE_ERROR = ""
except Exception as exc:  # noqa: BLE001 - reported as the skip reason of every conformance test
    DEVICE_KIND, DEVICE_ERROR = None, f"{type(exc).__name__}: {exc}"
