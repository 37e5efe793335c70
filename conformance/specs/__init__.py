"""The spec registry: every module in this package exports ``SPECS``, a list of OpSpec.

Adding an op family means adding a module here; nothing else needs to know about it.
"""

from __future__ import annotations

import importlib
import pkgutil

from conformance.harness import OpSpec


def _collect() -> list[OpSpec]:
    specs: dict[str, OpSpec] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for spec in getattr(module, "SPECS", []):
            if spec.name in specs:
                raise ValueError(f"conformance: two specs named {spec.name!r} ({info.name})")
            specs[spec.name] = spec
    return [specs[name] for name in sorted(specs)]


SPECS: list[OpSpec] = _collect()

__all__ = ["SPECS"]
