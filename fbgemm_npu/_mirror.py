"""fbgemm_gpu's public module tree, mirrored lazily under ``fbgemm_npu``.

``import fbgemm_npu.sparse_ops``, ``from fbgemm_npu.tbe.utils import ...``, ``from
fbgemm_npu.split_embedding_configs import EmbOptimType``: for every public module
``fbgemm_gpu.<path>`` (no ``_``-prefixed part; not under ``bench``, ``tbe.bench``, ``docs`` or a
test folder), ``fbgemm_npu.<path>`` is a *mirror*: a module (a package, with an empty
``__path__``, where upstream's is one) that holds nothing of its own and forwards every attribute
read, live, to upstream's module (PEP 562 ``__getattr__`` / ``__dir__``), so the names are
upstream's objects -- except that

* an upstream class in :data:`REPLACEMENTS` is given as its npu-aware subclass (from
  :mod:`fbgemm_npu.split_table.modules`), in every mirrored module, re-exports included
  (``fbgemm_npu.split_table_batched_embeddings_ops.SplitTableBatchedEmbeddingBagsCodegen``);
* a value that is itself a mirrored upstream module is given as its mirror
  (``fbgemm_npu.tbe.utils`` as an attribute of ``fbgemm_npu.tbe``).

``__all__`` is upstream's where upstream defines one, else upstream's public names, so
``from fbgemm_npu.<path> import *`` binds what ``from fbgemm_gpu.<path> import *`` binds.
``_private`` names are forwarded too (code that reached into upstream keeps working); dunders are
the mirror's own (``__mirror_of__`` names upstream's module). Namespace packages
(``split_embedding_optimizer_codegen``, no ``__init__.py``) are mirrored like the others.

How: :func:`install` (called by ``fbgemm_npu/__init__.py``) *appends* one finder/loader to
``sys.meta_path``, so fbgemm_npu's real files (``fbgemm_npu.testing``, ...) always win; the
subpackage names in :data:`OWN` are never mirrored (fbgemm_gpu 1.8.0 has no public module with
any of these names; ``tests/mirror/test_mirror.py`` checks). Nothing is imported until a mirror is:
the import of ``fbgemm_npu`` costs one list append. The same rule answers attribute reads on
``fbgemm_npu`` itself: ``fbgemm_npu.sparse_ops`` is the mirror wherever ``fbgemm_gpu.sparse_ops``
is an attribute of ``fbgemm_gpu`` (that is, once upstream has imported it).

A mirror of a module that upstream cannot import fails to import with upstream's error. In
fbgemm-gpu-cpu 1.8.0 (without triton, click or scipy), these public names are not importable:
the native libraries ``asmjit``, ``fbgemm``, ``fbgemm_gpu_config``, ``fbgemm_gpu_py``,
``fbgemm_gpu_sparse_async_cumsum``, ``fbgemm_gpu_embedding_inplace_ops`` and the
``fbgemm_gpu_tbe_*`` libraries (``.so`` files that ``torch.ops.load_library`` loads; no
``PyInit_``); ``sll.triton``, ``triton.quantize``, ``triton.jagged.triton_jagged_tensor_ops``
(need triton); ``tbe.monitoring.bench_params_reporter`` (needs click); ``tbe.cache.uvm`` (asks for
``fbgemm_gpu_uvm_enum_query``, an op of the CUDA build only).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence
from typing import Any

__all__ = ["OWN", "REPLACEMENTS", "install", "is_mirrored", "upstream_name"]

UPSTREAM = "fbgemm_gpu"
PACKAGE = "fbgemm_npu"

# fbgemm_npu's own subpackages: never mirrored, whatever upstream ships.
OWN = frozenset({"native", "testing", "split_table", "integrations", "examples", "experimental"})
# Upstream folders that are tooling, not API.
_EXCLUDED_PREFIXES = (("bench",), ("tbe", "bench"), ("docs",))

# "<upstream module>.<class>" -> the fbgemm_npu module holding the npu-aware class of that name.
REPLACEMENTS: dict[str, str] = {
    f"{UPSTREAM}.split_table_batched_embeddings_ops_training.{name}": (
        f"{PACKAGE}.split_table.modules"
    )
    for name in ("SplitTableBatchedEmbeddingBagsCodegen", "DenseTableBatchedEmbeddingBagsCodegen")
} | {
    f"{UPSTREAM}.split_table_batched_embeddings_ops_inference."
    "IntNBitTableBatchedEmbeddingBagsCodegen": f"{PACKAGE}.split_table.modules"
}


def _is_test_part(part: str) -> bool:
    return part in ("test", "tests") or part.startswith("test_") or part.endswith("_test")


def is_mirrored(path: str) -> bool:
    """Whether ``fbgemm_npu.<path>`` mirrors ``fbgemm_gpu.<path>`` (``path`` without prefix)."""
    parts = tuple(path.split("."))
    if not path or any(not p or p.startswith("_") or _is_test_part(p) for p in parts):
        return False
    if parts[0] in OWN:
        return False
    return not any(parts[: len(prefix)] == prefix for prefix in _EXCLUDED_PREFIXES)


def upstream_name(fullname: str) -> str | None:
    """``fbgemm_gpu.<path>`` for a mirrored ``fbgemm_npu.<path>``, else ``None``."""
    head, _, path = fullname.partition(".")
    if head != PACKAGE or not is_mirrored(path):
        return None
    return f"{UPSTREAM}.{path}"


def _mirror_name(module_name: str) -> str | None:
    """``fbgemm_npu.<path>`` for a mirrored upstream ``fbgemm_gpu.<path>``, else ``None``."""
    head, _, path = module_name.partition(".")
    if head != UPSTREAM or not is_mirrored(path):
        return None
    return f"{PACKAGE}.{path}"


def _translate(value: Any) -> Any:
    """Upstream's value as a mirror shows it: npu-aware class, mirror module, or itself."""
    if isinstance(value, type):
        target = REPLACEMENTS.get(f"{value.__module__}.{value.__qualname__}")
        # By identity: the class must be the one upstream's module holds under that name.
        owner = sys.modules.get(value.__module__) if target is not None else None
        if owner is not None and getattr(owner, value.__qualname__, None) is value:
            return getattr(importlib.import_module(target), value.__name__)
    elif isinstance(value, types.ModuleType):
        mirror = _mirror_name(getattr(value, "__name__", ""))
        if mirror is not None:
            return importlib.import_module(mirror)
    return value


def _public_names(upstream: types.ModuleType) -> list[str]:
    names = getattr(upstream, "__all__", None)
    if names is not None:
        return list(names)
    return [n for n in vars(upstream) if not n.startswith("_")]


def _fill(module: types.ModuleType, upstream: types.ModuleType) -> None:
    """Give ``module`` its forwarding ``__getattr__`` / ``__dir__`` onto ``upstream``."""
    name, up = module.__name__, upstream.__name__

    def __getattr__(attr: str) -> Any:
        if attr == "__all__":
            return _public_names(upstream)
        if not (attr.startswith("__") and attr.endswith("__")):
            try:
                return _translate(getattr(upstream, attr))
            except AttributeError:
                pass
        raise AttributeError(
            f"module {name!r} (mirror of {up!r}) has no attribute {attr!r}", name=attr, obj=module
        )

    def __dir__() -> list[str]:
        public = (n for n in vars(upstream) if not n.startswith("_"))
        return sorted({*vars(module), *public, "__all__"})

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    module.__dir__ = __dir__  # type: ignore[method-assign]
    module.__mirror_of__ = up  # type: ignore[attr-defined]
    module.__doc__ = f"Mirror of {up!r} (fbgemm_npu/_mirror.py).\n\n{upstream.__doc__ or ''}"


class _MirrorFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``fbgemm_npu.<path>`` where upstream has ``fbgemm_gpu.<path>``; loads mirrors."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        up = upstream_name(fullname)
        if up is None:
            return None
        try:
            up_spec = importlib.util.find_spec(up)
        except (ImportError, ValueError):  # a parent is no package, or failed to import
            return None
        if up_spec is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname,
            self,
            origin=f"mirror of {up!r}",
            is_package=up_spec.submodule_search_locations is not None,
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a plain module

    def exec_module(self, module: types.ModuleType) -> None:
        up = upstream_name(module.__name__)
        assert up is not None
        _fill(module, importlib.import_module(up))  # upstream's ImportError, if any, propagates


_FINDER = _MirrorFinder()


def _package_getattr(attr: str) -> Any:
    """``fbgemm_npu.<attr>``: the mirror where ``fbgemm_gpu.<attr>`` is a mirrored submodule."""
    value = getattr(sys.modules.get(UPSTREAM), attr, None) if is_mirrored(attr) else None
    if isinstance(value, types.ModuleType) and value.__name__ == f"{UPSTREAM}.{attr}":
        return importlib.import_module(f"{PACKAGE}.{attr}")
    raise AttributeError(f"module {PACKAGE!r} has no attribute {attr!r}", name=attr)


def install() -> None:
    """Append the mirror finder to ``sys.meta_path`` and hook ``fbgemm_npu``'s attribute reads.

    Idempotent; imports nothing.
    """
    if not any(type(f).__qualname__ == _MirrorFinder.__qualname__ for f in sys.meta_path):
        sys.meta_path.append(_FINDER)
    package = sys.modules.get(PACKAGE)
    if package is not None:
        vars(package).setdefault("__getattr__", _package_getattr)
