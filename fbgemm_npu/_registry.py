"""The one registrar: every kernel of fbgemm_npu reaches the dispatcher through this table.

Each op family, a package ``fbgemm_npu/native/<namespace>/<family>/``, exports ``KERNELS``: a
dict mapping a qualified op name (``"fbgemm::asynchronous_complete_cumsum"``) to ``{dispatch key:
kernel}``; ``SCHEMAS``: qualified name -> schema string, for the ops it defines itself (the
``mxrec::`` ops of the seeds); and ``BUDGETS``: qualified name -> launch / AI-CPU / sync budget.
:func:`register_all` walks the tree, collects the tables and registers them with
``torch.library``; it is idempotent.

Rules enforced here (docs/design.md, rules 1, 2 and 7):

* only ``PrivateUse1``, ``AutogradPrivateUse1`` and ``Meta`` keys are accepted, plus ``CPU`` and
  ``AutogradCPU`` for the ops whose schema we define ourselves (``mxrec::``: no upstream CPU
  kernel exists, so ours changes no CPU result; ``fbgemm::`` ops never get one);
* ``Meta`` only where upstream has no Meta kernel (we never override upstream);
* a schema is defined only where nobody defines the op already.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import torch

from fbgemm_npu.native._pending import raise_queued_cause
from fbgemm_npu.native.family import Budget

ALLOWED_KEYS: frozenset[str] = frozenset({"PrivateUse1", "AutogradPrivateUse1", "Meta"})
# Only for ops a family defines itself (its SCHEMAS): the ops have no upstream CPU kernel.
OWN_OP_KEYS: frozenset[str] = frozenset({"CPU", "AutogradCPU"})

# The root of the family tree: native/<namespace>/<family>/, public (no "_") packages only.
NATIVE_ROOT = "fbgemm_npu.native"

Kernel = Callable[..., object]


@dataclass
class Registry:
    """Op name -> {dispatch key: kernel}, plus the schemas we define ourselves."""

    kernels: dict[str, dict[str, Kernel]] = field(default_factory=dict)
    schemas: dict[str, str] = field(default_factory=dict)
    libraries: dict[tuple[str, str], torch.library.Library] = field(default_factory=dict)
    registered: dict[str, list[str]] = field(default_factory=dict)
    defined: set[str] = field(default_factory=set)
    skipped: set[tuple[str, str]] = field(default_factory=set)
    budgets: dict[str, Budget] = field(default_factory=dict)
    families: dict[str, str] = field(default_factory=dict)

    def add(
        self,
        kernels: Mapping[str, Mapping[str, Kernel]],
        schemas: Mapping[str, str] | None = None,
        budgets: Mapping[str, Budget] | None = None,
        family: str = "",
    ) -> None:
        """Add one family's tables; refuses keys outside :data:`ALLOWED_KEYS` and duplicates."""
        for qualname, schema in (schemas or {}).items():
            _split(qualname)
            if qualname in self.schemas and self.schemas[qualname] != schema:
                raise ValueError(f"fbgemm_npu registry: schema of {qualname} given twice")
            self.schemas[qualname] = schema
        for qualname, by_key in kernels.items():
            _split(qualname)
            own = qualname in self.schemas
            bad = set(by_key) - ALLOWED_KEYS - (OWN_OP_KEYS if own else frozenset())
            if bad:
                raise ValueError(
                    f"fbgemm_npu registry: {qualname} asks for dispatch key(s) {sorted(bad)}; "
                    f"only {sorted(ALLOWED_KEYS)} may be registered (docs/design.md rule 1), "
                    f"and {sorted(OWN_OP_KEYS)} for an op whose schema the family defines"
                )
            slot = self.kernels.setdefault(qualname, {})
            for key, fn in by_key.items():
                if key in slot and slot[key] is not fn:
                    raise ValueError(f"fbgemm_npu registry: {qualname} has two {key} kernels")
                slot[key] = fn
            if family:
                if self.families.setdefault(qualname, family) != family:
                    raise ValueError(f"fbgemm_npu registry: {qualname} is in two families")
        for qualname, budget in (budgets or {}).items():
            if qualname not in self.kernels:
                raise ValueError(f"fbgemm_npu registry: budget for {qualname}, which has no kernel")
            if self.budgets.setdefault(qualname, budget) != budget:
                raise ValueError(f"fbgemm_npu registry: two budgets for {qualname}")

    def _library(self, ns: str, kind: str) -> torch.library.Library:
        lib = self.libraries.get((ns, kind))
        if lib is None:
            lib = torch.library.Library(ns, kind)  # noqa: TOR901 - kept alive in this table
            self.libraries[(ns, kind)] = lib
        return lib

    def register(self) -> None:
        """Register every schema and kernel not registered yet (idempotent)."""
        for qualname, schema in self.schemas.items():
            if qualname in self.defined:
                continue
            ns, name = _split(qualname)
            if not _op_exists(qualname):
                self._library(ns, "FRAGMENT").define(schema)
            self.defined.add(qualname)
        for qualname, by_key in self.kernels.items():
            ns, name = _split(qualname)
            if not _op_exists(qualname):
                raise RuntimeError(
                    f"fbgemm_npu registry: {qualname} has no schema; is fbgemm_gpu imported?"
                )
            done = self.registered.setdefault(qualname, [])
            for key, fn in by_key.items():
                if key in done or (qualname, key) in self.skipped:
                    continue
                if key == "Meta" and torch._C._dispatch_has_kernel_for_dispatch_key(
                    qualname, "Meta"
                ):
                    self.skipped.add((qualname, key))  # upstream's Meta kernel wins (rule 1)
                    continue
                if key == "Meta":
                    # As torch.library.register_fake does (its pystub-module check aside): the
                    # op's fake impl, installed at Meta too, so that under FakeTensorMode the
                    # kernel has torch.library.get_ctx() for data-dependent sizes.
                    holder = torch._library.simple_registry.singleton.find(qualname).fake_impl
                    holder.register(fn, f"fbgemm_npu ({fn.__module__})", self._library(ns, "IMPL"))
                    done.append(key)
                    continue
                kernel = _below_autograd(fn) if key in ("PrivateUse1", "CPU") else fn
                self._library(ns, "IMPL").impl(name, kernel, key)
                done.append(key)

    def coverage(self) -> list[tuple[str, list[str]]]:
        """Rows of (op, dispatch keys this package registered for it), sorted by op name."""
        return [(q, list(self.registered.get(q, []))) for q in sorted(self.kernels)]


def _below_autograd(fn: Kernel) -> Kernel:
    """``fn`` run with autograd off, as a backend kernel is.

    Our kernels are Python programs of ATen ops, which record a graph wherever autograd is on.
    Below an op's autograd kernel it is off; but for an op without one, torch's autograd
    fallback decides, and in its "nothing" mode (``torch._C._set_autograd_fallback_mode``) a
    kernel would record a graph no one registered, and refuse ``out=`` calls on inputs that
    require grad.  torch's ``autograd_registration_check`` tests exactly this
    (tests/core/test_opcheck.py); the guard costs well under a microsecond per call."""

    def kernel(*args: object, **kwargs: object) -> object:
        try:
            with torch._C._AutoDispatchBelowAutograd():
                return fn(*args, **kwargs)
        except Exception as exc:
            # a data check queued by an earlier call that failed is the likelier cause of an
            # error here (bad data reaching a gather): raise it in its place (_pending.py)
            raise_queued_cause(exc)
            raise

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    kernel.__qualname__ = getattr(fn, "__qualname__", kernel.__name__)
    kernel.__module__ = getattr(fn, "__module__", __name__)
    kernel.__doc__ = fn.__doc__
    kernel.__wrapped__ = fn  # type: ignore[attr-defined]
    return kernel


def _split(qualname: str) -> tuple[str, str]:
    if "::" not in qualname:
        raise ValueError(f"fbgemm_npu registry: op name {qualname!r} must be 'namespace::name'")
    ns, name = qualname.split("::", 1)
    return ns, name


def _op_exists(qualname: str) -> bool:
    name, _, overload = qualname.partition(".")  # "mxrec::hstu_jagged.equal": an overload
    try:
        torch._C._dispatch_find_schema_or_throw(name, overload)
    except RuntimeError:
        return False
    return True


REGISTRY = Registry()


def _subpackages(name: str) -> list[str]:
    pkg = importlib.import_module(name)
    return [
        f"{name}.{info.name}"
        for info in pkgutil.iter_modules(pkg.__path__)
        if info.ispkg and not info.name.startswith("_")
    ]


def family_modules(root: str = NATIVE_ROOT) -> list[str]:
    """Every op-family package, ``<root>.<namespace>.<family>``: adding a family is adding a
    package, nothing else."""
    return sorted(fam for ns in _subpackages(root) for fam in _subpackages(ns))


def register_all(modules: Iterable[str] | None = None) -> Registry:
    """Import every family package, add its tables and register them; idempotent."""
    for modname in family_modules() if modules is None else modules:
        mod = importlib.import_module(modname)
        REGISTRY.add(
            getattr(mod, "KERNELS", {}),
            getattr(mod, "SCHEMAS", None),
            getattr(mod, "BUDGETS", None),
            family=modname,
        )
    REGISTRY.register()
    return REGISTRY
