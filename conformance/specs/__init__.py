"""The spec registry: every module under this package (``specs/<namespace>/<family>/*.py``, the
family tree of ``fbgemm_npu/native``) may export ``SPECS``, a list of OpSpec.

Adding an op family means adding its folder here; nothing else needs to know about it.
"""

from __future__ import annotations

import importlib
import pkgutil

from conformance.harness import OpSpec


def _collect() -> list[OpSpec]:
    specs: dict[str, OpSpec] = {}
    found = pkgutil.walk_packages(__path__, prefix=f"{__name__}.")
    for info in sorted(found, key=lambda m: m.name):
        module = importlib.import_module(info.name)
        for spec in getattr(module, "SPECS", []):
            if spec.name in specs:
                raise ValueError(f"conformance: two specs named {spec.name!r} ({info.name})")
            specs[spec.name] = spec
    return [specs[name] for name in sorted(specs)]


SPECS: list[OpSpec] = _collect()

__all__ = ["SPECS"]
