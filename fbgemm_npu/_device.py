"""Which ``npu`` device this process uses: torch_npu (real), the simulator, or none."""

from __future__ import annotations

import importlib.util
import os

_kind: str | None = None


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def activate() -> str:
    """Pick the device once; idempotent.  Returns ``"real"``, ``"simulated"`` or ``"none"``."""
    global _kind
    if _kind is not None and _kind != "none":
        return _kind
    if importlib.util.find_spec("torch_npu") is not None:
        import torch_npu  # noqa: F401  - registers the real npu device

        _kind = "real"
    elif _truthy(os.environ.get("FBGEMM_NPU_SIMULATE")):
        from fbgemm_npu.testing import simulator

        simulator.load()
        _kind = "simulated"
    else:
        _kind = "none"
    return _kind


def set_simulated() -> None:
    """Record that the simulator was switched on by :func:`fbgemm_npu.testing.simulate`."""
    global _kind
    _kind = "simulated"


def device_kind() -> str:
    """``"real"`` (torch_npu), ``"simulated"`` (fbgemm_npu.testing) or ``"none"``."""
    return _kind or activate()
