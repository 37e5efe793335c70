"""torchrec on npu: the adaptations of :mod:`.torchrec_symbols`, applied without editing torchrec.

``import fbgemm_npu`` arranges for :func:`apply` to run as soon as ``torchrec`` is imported (or at
once, when it already is; see :mod:`fbgemm_npu.integrations`).  Afterwards torchrec treats an
``npu`` device as the accelerator it is:

* planner: ``Topology(compute_device="npu")`` with HBM from the device's memory info
  (``FBGEMM_NPU_HBM_BYTES`` overrides; 64 GiB, an Ascend 910B, when the device reports none),
  every sharding type offered (data-parallel, table-wise, row-wise, column-wise, table-row-wise,
  table-column-wise, grid), placements ``rank:r/npu:i``, HBM reservations and bandwidths as for
  cuda;
* kernels: the fused TBE on npu as ``ComputeDevice.CUDA`` + ``EmbeddingLocation.DEVICE``
  (``dev_weights`` on npu, every fused optimizer upstream's CUDA path has), the dense TBE on npu;
  DDP with ``device_ids``; the compute kernels offered are ``fused`` and ``dense`` (UVM, caching
  and key-value kernels need unified memory that an npu lacks);
* ``get_device_type()`` answers ``"npu"`` when there is no cuda/mtia/tpu and an npu is present;
* comm ops and train pipelines run on npu, with their streams (memcpy, data-dist, ...): torch_npu's
  real streams, or the simulated device's ``torch.Stream`` objects, which take every stream call
  (``record_stream`` included) and order nothing, its work being synchronous.

Every adaptation is inert where no npu device is involved: given cpu, cuda, mtia or tpu, each
adapted function answers as torchrec does (on a host with an npu and no cuda,
``get_device_type()`` and ``shard(device=None)`` pick the npu, which is the point).
:func:`apply` is idempotent and checks the installed torchrec version (a warning here;
``tests/integrations/test_torchrec_adaptation.py`` fails); :func:`revert` restores torchrec's code.
"""

from __future__ import annotations

import importlib
import inspect
import types
import warnings
from collections.abc import Callable
from typing import Any

from fbgemm_npu.integrations.torchrec_symbols import SYMBOLS, TORCHREC_VERSION, Symbol

__all__ = [
    "TORCHREC_VERSION",
    "apply",
    "extend_literals",
    "installed_version",
    "is_applied",
    "revert",
    "streams_enabled",
]

DEVICE = "npu"
_MARK = "__fbgemm_npu_torchrec__"

# (symbol qualname, index in SYMBOLS) -> what to restore
_original_code: dict[int, tuple[types.FunctionType, types.CodeType]] = {}
_original_attr: dict[int, tuple[Any, str, Any]] = {}


def installed_version() -> str:
    """The installed torchrec's version string (``"?"`` when it has none)."""
    try:
        from torchrec.version import __version__ as version
    except ImportError:  # pragma: no cover - every torchrec release has torchrec.version
        import torchrec

        version = getattr(torchrec, "__version__", "?")
    return str(version)


def streams_enabled() -> bool:
    """Whether npu gets torchrec's stream code paths: yes, on either npu device.

    torch_npu's streams are real; the simulator's (``fbgemm_npu.testing``) are ``torch.Stream``
    objects with their own ids, a current stream per thread, events and ``record_stream``, so
    torchrec's stream paths run there too.  The answer may not depend on which device is active:
    :func:`apply` can run before the device is chosen, and the adaptations are inert without npu.
    """
    return True


def _resolve(symbol: Symbol) -> tuple[Any, str, Any]:
    """(owner, attribute name, value as stored in the owner) for ``symbol``."""
    owner: Any = importlib.import_module(symbol.module)
    *path, name = symbol.name.split(".")
    for part in path:
        owner = getattr(owner, part)
    stored = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    return owner, name, stored


def _function_of(stored: Any) -> types.FunctionType:
    """The innermost plain function behind a (decorated, static or class) method."""
    fn = stored.__func__ if isinstance(stored, (staticmethod, classmethod)) else stored
    fn = inspect.unwrap(fn)
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"fbgemm_npu.integrations.torchrec: {fn!r} is not a Python function")
    return fn


def extend_literals(
    code: types.CodeType, literals: tuple[frozenset[str], ...], device: str = DEVICE
) -> tuple[types.CodeType, int]:
    """``code`` with every constant that equals one of ``literals`` extended by ``device``.

    A constant matches when it is a frozenset or tuple of str whose elements, as a set, are one
    of ``literals``; a frozenset stays a frozenset, a tuple gets ``device`` appended.  Nested
    code objects (comprehensions, inner functions) are rewritten too.  Returns the new code and
    the number of constants replaced.
    """
    consts = []
    count = 0
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            c, n = extend_literals(c, literals, device)
            count += n
        elif (
            isinstance(c, (frozenset, tuple))
            and c
            and all(isinstance(x, str) for x in c)
            and frozenset(c) in literals
        ):
            c = c | {device} if isinstance(c, frozenset) else (*c, device)
            count += 1
        consts.append(c)
    return code.replace(co_consts=tuple(consts)), count


def _load_wrapper(spec: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(f"fbgemm_npu.integrations.{module}"), name)


def _applies(symbol: Symbol) -> bool:
    return symbol.when == "always" or (symbol.when == "streams" and streams_enabled())


def _apply_devices(i: int, symbol: Symbol) -> None:
    if i in _original_code:
        return
    _, _, stored = _resolve(symbol)
    fn = _function_of(stored)
    new, count = extend_literals(fn.__code__, symbol.literals)
    if count != symbol.count:
        raise RuntimeError(
            f"fbgemm_npu.integrations.torchrec: {symbol.qualname} should hold {symbol.count} "
            f"literal device set(s) {[sorted(s) for s in symbol.literals]}, found {count}; "
            f"torchrec {installed_version()} differs from {TORCHREC_VERSION}, which this "
            "adaptation was written for (see fbgemm_npu/integrations/torchrec_symbols.py)"
        )
    _original_code[i] = (fn, fn.__code__)
    fn.__code__ = new


def _apply_wrap(i: int, symbol: Symbol) -> None:
    owner, name, stored = _resolve(symbol)
    if hasattr(stored, _MARK) or i in _original_attr:
        return
    kind = type(stored) if isinstance(stored, (staticmethod, classmethod)) else None
    inner = stored.__func__ if kind is not None else stored
    wrapped = _load_wrapper(symbol.wrapper)(inner)
    setattr(wrapped, _MARK, inner)
    _original_attr[i] = (owner, name, stored)
    setattr(owner, name, kind(wrapped) if kind is not None else wrapped)


def apply() -> None:
    """Apply every adaptation of :data:`SYMBOLS` (idempotent).

    Warns when the installed torchrec is not :data:`TORCHREC_VERSION`; raises when a ``devices``
    entry no longer matches torchrec's code.
    """
    version = installed_version()
    if version != TORCHREC_VERSION:
        warnings.warn(
            f"fbgemm_npu.integrations.torchrec: written for torchrec {TORCHREC_VERSION}, "
            f"installed is {version}; re-check fbgemm_npu/integrations/torchrec_symbols.py",
            RuntimeWarning,
            stacklevel=2,
        )
    for i, symbol in enumerate(SYMBOLS):
        if not _applies(symbol):
            continue
        if symbol.how == "devices":
            _apply_devices(i, symbol)
        elif symbol.how == "wrap":
            _apply_wrap(i, symbol)
        else:  # pragma: no cover - the table is ours
            raise ValueError(f"unknown adaptation {symbol.how!r} for {symbol.qualname}")


def is_applied() -> bool:
    """Whether every adaptation that applies in this process is in place."""
    for i, symbol in enumerate(SYMBOLS):
        if not _applies(symbol):
            continue
        if symbol.how == "devices" and i not in _original_code:
            return False
        if symbol.how == "wrap" and not hasattr(_resolve(symbol)[2], _MARK):
            return False
    return True


def revert() -> None:
    """Restore torchrec's own code (idempotent); wrappers first, in reverse order."""
    for i in sorted(_original_attr, reverse=True):
        owner, name, stored = _original_attr.pop(i)
        setattr(owner, name, stored)
    for i in sorted(_original_code, reverse=True):
        fn, code = _original_code.pop(i)
        fn.__code__ = code
