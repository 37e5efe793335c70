"""Test support: the simulated ``npu`` device and the launch/sync counters.

``simulate()`` switches the simulated device on in this process (as ``FBGEMM_NPU_SIMULATE=1``
before ``import fbgemm_npu`` does).  With torch_npu installed it does nothing: the real device is
used.
"""

from __future__ import annotations

import importlib.util


def simulate() -> str:
    """Make ``npu`` usable in this process; returns ``"real"`` or ``"simulated"``."""
    if importlib.util.find_spec("torch_npu") is not None:
        import torch_npu  # noqa: F401

        return "real"
    from fbgemm_npu import _device
    from fbgemm_npu.testing import simulator

    simulator.load()
    _device.set_simulated()
    return "simulated"


__all__ = ["simulate"]
