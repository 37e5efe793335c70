"""Integrations of fbgemm_npu with libraries above it: torchrec on npu.

:func:`install` (run by ``import fbgemm_npu``) makes :func:`fbgemm_npu.integrations.torchrec.apply`
run when torchrec is imported: at once if ``torchrec`` is already in ``sys.modules``, else right
after the ``torchrec`` package finishes importing, through a ``sys.meta_path`` finder that wraps
torchrec's loader.  torchrec itself is never imported here: it costs seconds, and a user of
fbgemm_npu without torchrec should not pay for it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__ = ["TorchrecHook", "apply_torchrec", "install", "is_installed"]

_TARGET = "torchrec"
_lock = threading.Lock()


def apply_torchrec() -> None:
    """Apply the torchrec adaptations now (imports torchrec); idempotent.

    :mod:`.torchrec` (training, planner, pipelines) and :mod:`.torchrec_quant` (sharded
    quantized inference, ``shard_quant_model``).
    """
    from fbgemm_npu.integrations import torchrec as _torchrec
    from fbgemm_npu.integrations import torchrec_quant as _torchrec_quant

    _torchrec.apply()
    _torchrec_quant.apply()


def _apply_or_warn() -> None:
    """:func:`apply_torchrec`, turning a failure into a warning: a torchrec this version cannot
    adapt (see ``torchrec_symbols.py``) must still import and work on cpu/cuda."""
    try:
        apply_torchrec()
    except Exception as exc:  # noqa: BLE001 - reported, never raised into someone's import
        warnings.warn(
            f"fbgemm_npu: torchrec is imported but could not be adapted to npu: {exc}",
            RuntimeWarning,
            stacklevel=3,
        )


class _ApplyAfterLoad(importlib.abc.Loader):
    """Runs torchrec's own loader, then applies the adaptations."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        _apply_or_warn()

    def __getattr__(self, name: str) -> object:  # resource readers, get_source, ...
        return getattr(self._inner, name)


class TorchrecHook(importlib.abc.MetaPathFinder):
    """Finds ``torchrec`` like the rest of ``sys.meta_path`` does, with an applying loader."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and not isinstance(spec.loader, _ApplyAfterLoad):
                    spec.loader = _ApplyAfterLoad(spec.loader)
                return spec
        return None


def is_installed() -> bool:
    """Whether the torchrec hook is on ``sys.meta_path``."""
    return any(isinstance(f, TorchrecHook) for f in sys.meta_path)


def install() -> None:
    """Apply the torchrec adaptations now if torchrec is imported, else when it is; idempotent."""
    with _lock:
        if _TARGET in sys.modules:
            _apply_or_warn()
        elif not is_installed():
            sys.meta_path.insert(0, TorchrecHook())


install()
