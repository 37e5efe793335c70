"""Argument checks shared by every kernel in ``fbgemm_npu/native/``.

docs/design.md, rule 9: bad input gets a ``ValueError`` / ``RuntimeError`` that names the op,
the argument and what was expected.  Each helper takes the qualified op name first
(``"fbgemm::asynchronous_complete_cumsum"``) so the message reads the same everywhere::

    fbgemm::asynchronous_complete_cumsum: argument 't_in' must be 1-D or 2-D, got a 3-D tensor
    of shape (2, 2, 2)

The ``check_*`` helpers read only tensor metadata (dtype, shape, device): they never synchronise
with the device, so they are free to call on every kernel invocation.

Properties only the data knows (offsets non-decreasing, indices in range, a last offset equal to
the values length) go through :func:`check_on_device` or :class:`DataChecks`: a reduction on the
device, then the flag is queued (``_pending.py``) and read at the next ``fbgemm_npu.check()`` or
data read of an fbgemm_npu op -- no ``torch._assert_async`` (a host fallback on torch_npu 2.13)
and no sync per call.  ``FBGEMM_NPU_VALIDATE``: ``deferred`` (default), ``sync`` (read at the
call, for debugging), ``0`` / ``off`` (no data checks, for inputs trusted in production).
Metadata checks always run.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from fbgemm_npu.native._index import tracing
from fbgemm_npu.native._pending import defer, flat_flags, raise_failed, take, validation_mode
from fbgemm_npu.native._upload import upload

__all__ = [
    "INDEX_DTYPES",
    "DataChecks",
    "allocation_of",
    "dynamic_size",
    "check_dtype",
    "assert_on_device",
    "check_on_device",
    "check_ndim",
    "check_same_device",
    "check_same_dtype",
    "check_tensor",
    "dtype_name",
    "guard_tensor_arguments",
    "join_words",
    "non_decreasing",
    "validation_enabled",
]


V = TypeVar("V")

# Offsets, lengths, indices: upstream's index dispatch (FBGEMM_DISPATCH_INTEGRAL_TYPES).
INDEX_DTYPES: tuple[torch.dtype, ...] = (torch.int32, torch.int64)


def validation_enabled() -> bool:
    """Whether data-dependent checks run (``FBGEMM_NPU_VALIDATE`` not ``0`` / ``off``)."""
    return validation_mode() != "off"


def check_on_device(op: str, ok: torch.Tensor, what: str) -> None:
    """Raise ``RuntimeError("<op>: <what>")`` unless the 0-D bool tensor ``ok`` is true.

    ``what`` names the argument(s) and the expectation, e.g. ``"argument 'offsets' must be
    non-decreasing, start at 0 and end at values.size(0)"``.  Costs no launch beyond the
    reduction that made ``ok`` and no sync: the flag is queued (``_pending.defer``) and raised
    at the next read of the queue.  Fold several conditions of one call into one ``ok`` (``&``).
    """
    if validation_enabled():
        assert_on_device(op, ok, what)


def assert_on_device(op: str, ok: torch.Tensor, what: str) -> None:
    """:func:`check_on_device` whatever ``FBGEMM_NPU_VALIDATE`` says: for checks that are the
    op's contract, not our validation (``bounds_check_indices`` in ``BoundsCheckMode.FATAL``)."""
    defer(op, ok, what)


# What allocators say when memory runs out: torch's CPU allocator, CUDA / torch_npu's caching
# allocators (torch.OutOfMemoryError), the simulator; and torch's size arithmetic past 2**63 bytes.
_ALLOCATION_FAILURES = (
    "can't allocate memory",
    "out of memory",
    "out of host memory",
    "Tried to allocate",
    "Storage size calculation overflowed",
    "Stride calculation overflowed",  # an empty shape whose strides pass 2**63 (empty_strided)
)


@contextlib.contextmanager
def allocation_of(op: str, what: str) -> Iterator[None]:
    """Re-raise an allocation failure inside the block as ``RuntimeError("<op>: <what> cannot be
    allocated: <the allocator's words>")``.

    A size that passes every check can still exceed the memory (an ``output_size`` of 2**40, an
    expanded input copied out): the allocator's own error names neither the op nor the argument.
    ``what`` names the argument that asked for the size ("the output of 'output_size' = 2**40
    elements").  Other errors pass through unchanged; no launch, no sync.
    """
    try:
        yield
    except RuntimeError as exc:  # torch.OutOfMemoryError is a RuntimeError
        text = str(exc)
        if not isinstance(exc, torch.OutOfMemoryError) and not any(
            k in text for k in _ALLOCATION_FAILURES
        ):
            raise
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        raise RuntimeError(f"{op}: {what} cannot be allocated: {first[:300]}") from exc


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.int32`` -> ``"int32"``: the spelling users type after ``torch.``."""
    return str(dtype).removeprefix("torch.")


def join_words(words: Sequence[str], last: str = "or") -> str:
    """``["a", "b", "c"]`` -> ``"a, b or c"``."""
    if not words:
        return "nothing"
    if len(words) == 1:
        return words[0]
    return f"{', '.join(words[:-1])} {last} {words[-1]}"


def _shape(t: torch.Tensor) -> str:
    # tuple() so a 1-D shape prints as "(3,)" and a 0-D one as "()", like Python would
    return str(tuple(t.shape))


def check_tensor(op: str, arg: str, value: object) -> torch.Tensor:
    """Return ``value`` if it is a ``torch.Tensor``; raise ``ValueError`` naming op and arg if not.

    Calls through ``torch.ops`` are type-checked by the dispatcher already; this guards direct
    calls of a kernel function (tests, the conformance suite, other kernels).
    """
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{op}: argument '{arg}' must be a Tensor, got {type(value).__name__}")
    return value


# The schema types of tensor arguments: (optional, list); "List[Optional[Tensor]]" lists may hold
# None.  A kernel is guarded against anything else in these places (see guard_tensor_arguments).
_TENSOR_KINDS: dict[str, tuple[bool, bool]] = {
    "Tensor": (False, False),
    "Optional[Tensor]": (True, False),
    "List[Tensor]": (False, True),
    "Optional[List[Tensor]]": (True, True),
}
_ABSENT = object()


def _tensor_arguments(qualname: str) -> tuple[tuple[int, str, bool, bool], ...]:
    """``(position, name, optional, list)`` of every tensor argument of ``qualname``'s schema."""
    ns, name = qualname.split("::", 1)
    name, _, overload = name.partition(".")  # "hstu_jagged.equal": the overload's schema
    schema = getattr(getattr(getattr(torch.ops, ns), name), overload or "default")._schema
    return tuple(
        (i, a.name, *_TENSOR_KINDS[str(a.type)])
        for i, a in enumerate(schema.arguments)
        if str(a.type) in _TENSOR_KINDS
    )


def _check_tensor_argument(op: str, arg: str, value: object, optional: bool, is_list: bool) -> None:
    if value is None and optional:
        return
    if not is_list:
        check_tensor(op, arg, value)
        return
    if not isinstance(value, (list, tuple)):
        raise ValueError(
            f"{op}: argument '{arg}' must be a list of Tensors, got {type(value).__name__}"
        )
    for k, item in enumerate(value):
        check_tensor(op, f"{arg}[{k}]", item)


def guard_tensor_arguments(
    kernels: Mapping[str, Mapping[str, Callable[..., Any]]],
) -> dict[str, dict[str, Callable[..., Any]]]:
    """Every kernel of a family's table, wrapped to check its tensor arguments first.

    The dispatcher hands our kernels a ``None`` for a ``Tensor`` argument given as ``None`` (an
    undefined tensor), and direct calls pass anything: without this the kernel fails somewhere
    inside (an ``AttributeError`` on ``None.dtype``).  The wrapper reads the op's schema once (on
    the first call) and raises ``ValueError("<op>: argument '<arg>' must be a Tensor, got
    NoneType")`` (``'<arg>[k]'`` for a list element) before the kernel runs; ``None`` passes where
    the schema makes the argument optional (``Tensor?``, ``Tensor[]?``).  Host work only: a
    type test per tensor argument, no launch.
    """
    return {
        qualname: {key: _guarded(qualname, fn) for key, fn in by_key.items()}
        for qualname, by_key in kernels.items()
    }


def _guarded(qualname: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    arguments: list[tuple[tuple[int, str, bool, bool], ...]] = []

    @functools.wraps(fn)
    def kernel(*args: Any, **kwargs: Any) -> Any:
        if not arguments:
            arguments.append(_tensor_arguments(qualname))
        for position, name, optional, is_list in arguments[0]:
            value = args[position] if position < len(args) else kwargs.get(name, _ABSENT)
            if value is not _ABSENT:
                _check_tensor_argument(qualname, name, value, optional, is_list)
        return fn(*args, **kwargs)

    return kernel


def check_dtype(op: str, arg: str, t: torch.Tensor, allowed: Iterable[torch.dtype]) -> torch.Tensor:
    """Require ``t.dtype`` to be one of ``allowed``; return ``t``.

    Raises ``ValueError``: ``"<op>: argument '<arg>' must have dtype int32 or int64, got float64"``.
    """
    allowed = tuple(allowed)
    if t.dtype not in allowed:
        names = join_words([dtype_name(d) for d in allowed])
        raise ValueError(
            f"{op}: argument '{arg}' must have dtype {names}, got {dtype_name(t.dtype)}"
        )
    return t


def check_ndim(op: str, arg: str, t: torch.Tensor, allowed: Iterable[int]) -> torch.Tensor:
    """Require ``t.dim()`` to be one of ``allowed``; return ``t``.

    Raises ``ValueError``:
    ``"<op>: argument '<arg>' must be 1-D or 2-D, got a 3-D tensor of shape (2, 2, 2)"``.
    """
    allowed = tuple(allowed)
    if t.dim() not in allowed:
        ranks = join_words([f"{n}-D" for n in allowed])
        raise ValueError(
            f"{op}: argument '{arg}' must be {ranks}, got a {t.dim()}-D tensor of shape {_shape(t)}"
        )
    return t


def _first_mismatch(
    op: str, tensors: dict[str, torch.Tensor | None], read: Callable[[torch.Tensor], V]
) -> tuple[tuple[str, V] | None, tuple[str, V] | None]:
    """``(first, other)``: the first given tensor's ``(arg, read(t))`` and the first later one
    whose value differs (``None`` when all agree); ``None`` values are skipped."""
    first: tuple[str, V] | None = None
    for arg, t in tensors.items():
        if t is None:
            continue
        check_tensor(op, arg, t)
        if first is None:
            first = (arg, read(t))
        elif read(t) != first[1]:
            return first, (arg, read(t))
    return first, None


def check_same_device(op: str, **tensors: torch.Tensor | None) -> torch.device | None:
    """Require every tensor given by keyword to live on one device; ``None`` values are skipped.

    Returns the common device (``None`` when no tensor was given).  Raises ``RuntimeError``, as
    torch itself does for device mismatches, naming the first two arguments that disagree.
    """
    first, other = _first_mismatch(op, tensors, lambda t: t.device)
    if first is not None and other is not None:
        raise RuntimeError(
            f"{op}: arguments '{first[0]}' ({first[1]}) and '{other[0]}' ({other[1]}) "
            "must be on the same device"
        )
    return None if first is None else first[1]


def check_same_dtype(op: str, **tensors: torch.Tensor | None) -> torch.dtype | None:
    """Require every tensor given by keyword to share one dtype; ``None`` values are skipped.

    Returns the common dtype (``None`` when no tensor was given); raises ``ValueError``.
    """
    first, other = _first_mismatch(op, tensors, lambda t: t.dtype)
    if first is not None and other is not None:
        raise ValueError(
            f"{op}: arguments '{first[0]}' ({dtype_name(first[1])}) and '{other[0]}' "
            f"({dtype_name(other[1])}) must have the same dtype"
        )
    return None if first is None else first[1]


def non_decreasing(t: torch.Tensor) -> torch.Tensor:
    """0-d bool device tensor: the 1-D ``t`` never decreases, compared element by element.

    Launches ``ge`` and ``all``, as the usual ``(t[1:] - t[:-1]).amin() >= 0`` does, but a
    comparison cannot wrap: the difference of int32 offsets on either side of 2**31 (``[0,
    2**31 - 1, -2**31 + 5]``) overflows to a positive step, passing the ``amin`` test, and the
    kernel then reads or allocates by it.  Pass the result to :meth:`DataChecks.require`.
    """
    return torch.ge(t[1:], t[:-1]).all()


@dataclass
class _Cond:
    value: torch.Tensor  # 0-d, on the device
    lo: int | None
    hi: int | None
    what: str
    boolean: bool = False  # a 0-d bool condition (require): true (1) passes


@dataclass
class DataChecks:
    """Data-dependent conditions ``lo <= value <= hi`` of one op call, verified together."""

    op: str
    items: list[_Cond] = field(default_factory=list)

    def add(self, value: torch.Tensor, lo: int | None, hi: int | None, what: str) -> None:
        """Require the 0-d device tensor ``value`` to lie in ``[lo, hi]`` (None: unbounded).

        ``what`` names the argument and the expectation ("argument 'indices' must hold values in
        [0, 5)"); the error message is ``"<op>: <what>; got <value>"``.
        """
        self.items.append(_Cond(value.reshape(()), lo, hi, what))

    def require(self, ok: torch.Tensor, what: str) -> None:
        """Require the 0-d bool device tensor ``ok`` to be true (:func:`non_decreasing`, say);
        the error message is ``"<op>: <what>"``."""
        self.items.append(_Cond(ok.reshape(()), 1, 1, what, boolean=True))

    def read_with(self, extra: Sequence[torch.Tensor]) -> list[int]:
        """Read ``extra`` (0-d device tensors) to the host in one copy, checking the conditions.

        The copy also carries every data check queued on this device by earlier calls
        (``_pending.py``): a read the op needs anyway reads the queue for free.  Launches: a
        ``cat`` (none when one scalar is read and nothing else is), then one device-to-host read.
        Raises ``RuntimeError`` for a failed queued check (it came first), then ``ValueError``
        naming the op and the first failed condition of this call.
        """
        device = extra[0].device if extra else self.items[0].value.device
        traced = tracing(*extra, *(c.value for c in self.items))
        queued = take(device) if device.type != "cpu" and not traced else []
        if not self.items and not queued and len(extra) == 1:
            return [int(extra[0].item())]
        values = [*(v.reshape(1) for v in extra), *(c.value.reshape(1) for c in self.items)]
        # cat promotes mixed int32 / int64 / bool pieces to one dtype in its own launch
        got = torch.cat([*values, *flat_flags(queued)]).tolist()
        mine = len(extra) + len(self.items)
        raise_failed(queued, got[mine:])
        for cond, value in zip(self.items, got[len(extra) : mine], strict=True):
            if (cond.lo is not None and value < cond.lo) or (
                cond.hi is not None and value > cond.hi
            ):
                got_text = "" if cond.boolean else f"; got {value}"
                raise ValueError(f"{self.op}: {cond.what}{got_text}")
        return [int(v) for v in got[: len(extra)]]

    def assert_on_device(self) -> None:
        """Every condition as one queued check (``_pending.defer``): ``stack``, a pinned
        non-blocking upload of the bounds, ``clamp``, ``eq``, ``all`` (nothing when empty); no
        sync, no stall."""
        if not self.items:
            return
        # stack promotes mixed int32 / int64 statistics to int64 in its own launch
        values = torch.stack([c.value for c in self.items])
        what = "; ".join(c.what for c in self.items)
        if values.dtype == torch.bool:  # require() conditions only: no bounds to compare with
            check_on_device(self.op, values.all(), f"expected all of: {what}")
            return
        info = torch.iinfo(values.dtype)
        # a bound outside the dtype's range is no bound, except that an unreachable one must
        # still fail: clamp it to the range and widen the other side (lo > hi never passes)
        lo = [info.min if c.lo is None else min(max(info.min, c.lo), info.max) for c in self.items]
        hi = [info.max if c.hi is None else max(min(info.max, c.hi), info.min) for c in self.items]
        for i, c in enumerate(self.items):
            if c.lo is not None and c.lo > info.max or c.hi is not None and c.hi < info.min:
                lo[i], hi[i] = info.max, info.min  # nothing satisfies it
        bounds = upload([lo, hi], values.dtype, values.device)
        ok = (values.clamp(bounds[0], bounds[1]) == values).all()
        check_on_device(self.op, ok, f"expected all of: {what}")


def dynamic_size(op: str, why: str, most: int | torch.SymInt | None = None) -> torch.SymInt:
    """A fake kernel's data-dependent output size, at most ``most``:
    ``torch.library.get_ctx().new_dynamic_size()`` (an unbacked SymInt under FakeTensorMode with
    a ShapeEnv).  Called on meta tensors directly, with no fake context, the size cannot be
    known: a ``RuntimeError`` saying ``why`` ("'shape' omitted", say)."""
    ctx = torch.library.get_ctx()
    if ctx is None:
        raise RuntimeError(
            f"{op}: the output size is data-dependent ({why}): it cannot be computed on meta "
            "tensors; trace with FakeTensors"
        )
    # a bound that is itself symbolic (dynamic shapes) cannot constrain the new size
    return ctx.new_dynamic_size(max=most if isinstance(most, int) else None)
