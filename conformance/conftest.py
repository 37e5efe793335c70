"""Switch the npu device on before any spec imports ops: torch_npu where installed, else the
simulated device of ``fbgemm_npu.testing`` (docs/design.md rule 5)."""

from __future__ import annotations

import fbgemm_npu.testing

# No device is an error, not a skip: a suite that skips when the simulator fails to build would
# pass while proving nothing.
DEVICE_KIND: str = fbgemm_npu.testing.simulate()
