"""Data checks that never make the host wait: conditions queued on the device (docs/design.md,
"Validation without stalls").

A data check (offsets non-decreasing, indices in range) is a 0-d bool tensor computed on the
device.  Raising on it means reading it back: a host sync per validated call.
``torch._assert_async`` does not help on Ascend: torch_npu 2.13 has no NPU kernel for it, and its
CPU fallback reads the flag back too.  So, with ``FBGEMM_NPU_VALIDATE`` at its default
(``deferred``), a check is queued here and costs no launch and no sync; the queue is read, and the
first failed check raised as ``RuntimeError("<op>: <what>")``, at

* :func:`fbgemm_npu.check` -- call it where the training loop synchronises anyway (after reading
  the loss): its read rides along in the same device-to-host copy (``check(loss)``);
* the next fbgemm_npu op that reads data back for its own reasons (an output size only the data
  knows): its read carries the queue (``DataChecks.read_with``), no extra sync;
* an error inside a later fbgemm_npu kernel: the queued failure is raised in its place, since it
  is the cause (the registrar's wrapper, ``_registry.py``).

Kernels are written so that a call with bad data stays memory-safe until the check is read
(indices clamped before gathers): the result of a call whose check failed is unspecified, never
read outside its buffers.  ``FBGEMM_NPU_VALIDATE=sync`` reads each call's checks at once (the
error at the call, a sync per validated call: for debugging); ``0`` / ``off`` skips data checks.

Under a trace (torch.compile, AOTAutograd, opcheck) there is no data to queue: the check is traced
as ``torch._assert_async``, the graph's own assert.  On the CPU there is nothing to wait for: a
check is read at once.  Memory stays bounded whatever the caller does: every ``CHUNK`` queued
checks are stacked into one tensor, and past ``CHUNKS`` chunks the queue folds into one flag that
remembers which checks it holds (the error then lists them).
"""

from __future__ import annotations

import linecache
import os
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from fbgemm_npu.native._index import tracing

__all__ = [
    "CHUNK",
    "CHUNKS",
    "Mode",
    "check",
    "defer",
    "pending",
    "raise_failed",
    "raise_queued_cause",
    "take",
    "validation_mode",
]

Mode = Literal["deferred", "sync", "assert", "off"]
# The default: no host stall per call.  ``assert`` (each check traced as ``torch._assert_async``:
# immediate on the simulator, a host-fallback stall on torch_npu 2.13) stays selectable.
DEFAULT: Mode = "deferred"
CHUNK = 256  # queued 0-d checks stacked into one tensor (one launch per CHUNK checks)
CHUNKS = 64  # chunks before the queue folds into one flag (two launches per CHUNK * CHUNKS)

_OFF = frozenset({"0", "false", "off", "no"})
_SYNC = frozenset({"sync", "synchronous", "eager"})
_DEFAULT = frozenset({"", "1", "true", "on", "yes"})


def validation_mode() -> Mode:
    """``FBGEMM_NPU_VALIDATE``: ``deferred`` (default; also ``1`` / ``on``), ``sync``, ``off``
    (also ``0``).  Any other value is an error naming the variable."""
    raw = os.environ.get("FBGEMM_NPU_VALIDATE", "").strip().lower()
    if raw in _DEFAULT:
        return DEFAULT
    if raw in ("deferred", "assert"):
        return raw  # type: ignore[return-value]
    if raw in _SYNC:
        return "sync"
    if raw in _OFF:
        return "off"
    raise ValueError(
        f"fbgemm_npu: FBGEMM_NPU_VALIDATE={raw!r} is not one of deferred, sync, assert, off "
        f"(or 0), or 1 (the default, {DEFAULT})"
    )


@dataclass
class _Item:
    """Queued checks of one device: ``ok`` is a 0-d bool (one check), a 1-D bool (a chunk, one
    message each) or a folded 0-d flag with ``folded`` messages (any of which may have failed)."""

    ok: torch.Tensor
    messages: tuple[str, ...]
    folded: bool = False


_LOCK = threading.Lock()
_QUEUE: dict[torch.device, list[_Item]] = {}


def _message(op: str, what: str) -> str:
    return f"{op}: {what}"


def _read_now(ok: torch.Tensor, message: str) -> None:
    if not bool(ok.item()):
        raise RuntimeError(message)


def defer(op: str, ok: torch.Tensor, what: str) -> None:
    """Queue the 0-d bool device tensor ``ok``: ``RuntimeError("<op>: <what>")`` is raised when
    the queue is read and ``ok`` is false.  No launch, no sync (one ``stack`` per ``CHUNK``
    checks); read at once under ``FBGEMM_NPU_VALIDATE=sync`` and for CPU tensors; traced as
    ``torch._assert_async``."""
    message = _message(op, what)
    mode = validation_mode()
    if tracing(ok) or mode == "assert":
        torch._assert_async(ok, message)
        return
    if ok.device.type == "cpu" or mode == "sync":
        _read_now(ok, message)
        return
    with _LOCK:
        items = _QUEUE.setdefault(ok.device, [])
        items.append(_Item(ok.reshape(()), (message,)))
        _compact(items)


def _compact(items: list[_Item]) -> None:
    """Stack the trailing run of single checks once it reaches ``CHUNK``; fold everything once
    there are ``CHUNKS`` chunks (the folded flag keeps the distinct messages)."""
    singles = 0
    for item in reversed(items):
        if item.ok.dim() != 0 or item.folded:
            break
        singles += 1
    if singles >= CHUNK:
        run = items[-singles:]
        del items[-singles:]
        chunk = torch.stack([i.ok for i in run])
        items.append(_Item(chunk, tuple(m for i in run for m in i.messages)))
    if len(items) > CHUNKS:
        flat = torch.cat([i.ok.reshape(-1) for i in items]).all()
        messages = tuple(dict.fromkeys(m for i in items for m in i.messages))
        items[:] = [_Item(flat, messages, folded=True)]


def take(device: torch.device) -> list[_Item]:
    """Remove and return ``device``'s queued checks (to be read by the caller, in order)."""
    with _LOCK:
        return _QUEUE.pop(device, [])


def pending(device: torch.device | None = None) -> int:
    """How many checks are queued (on ``device``, or on every device); a folded flag counts
    its distinct messages."""
    with _LOCK:
        queues = _QUEUE.values() if device is None else [_QUEUE.get(device, [])]
        return sum(len(i.messages) if i.ok.dim() or i.folded else 1 for q in queues for i in q)


def flat_flags(items: Sequence[_Item]) -> list[torch.Tensor]:
    """The 1-D bool pieces of ``items``, to be read in one copy with other values."""
    return [i.ok.reshape(-1) for i in items]


def raise_failed(items: Sequence[_Item], values: Sequence[object]) -> None:
    """Raise the first failed check of ``items`` given their flags read back as ``values``
    (``flat_flags`` order, each element truthy when the check passed)."""
    pos = 0
    for item in items:
        n = 1 if item.ok.dim() == 0 else item.ok.numel()
        flags = values[pos : pos + n]
        pos += n
        for k, passed in enumerate(flags):
            if passed:
                continue
            if item.folded:
                listed = "; ".join(item.messages[:8]) + ("; ..." if len(item.messages) > 8 else "")
                raise RuntimeError(
                    f"{item.messages[0].split(':', 1)[0]}: a data check failed in one of the "
                    f"{len(item.messages)} kinds of check queued since the last "
                    f"fbgemm_npu.check(): {listed}"
                )
            raise RuntimeError(item.messages[k])


def check(*scalars: torch.Tensor) -> list[float | int | bool]:
    """Read every queued data check (one device-to-host copy per device that has some) and raise
    the first that failed as ``RuntimeError("<op>: <what>")``; the queue is empty afterwards.

    ``scalars`` (one-element device tensors, a loss say) are read in the same copy and returned
    as Python numbers, in order: a loop that reads its loss anyway pays no extra sync.
    """
    by_device: dict[torch.device, list[int]] = {}
    for k, s in enumerate(scalars):
        by_device.setdefault(s.device, []).append(k)
    with _LOCK:
        devices = list(dict.fromkeys([*_QUEUE, *by_device]))
        queued = {d: _QUEUE.pop(d, []) for d in devices}
    out: list[float | int | bool] = [0] * len(scalars)
    failure: RuntimeError | None = None
    for device in devices:
        items, mine = queued[device], by_device.get(device, [])
        if not items and not mine:
            continue
        # one int64 copy: integers exact, floats as the bits of their float64 value (a view),
        # each returned as the Python type of its own dtype
        pieces = [_as_int64(scalars[k].reshape(1)) for k in mine]
        values = torch.cat([*pieces, *flat_flags(items)]).tolist()
        for k, v in zip(mine, values, strict=False):
            out[k] = _python(scalars[k], v)
        try:
            raise_failed(items, values[len(mine) :])
        except RuntimeError as exc:
            failure = failure or exc
    if failure is not None:
        raise failure
    return out


def raise_queued_cause(exc: BaseException) -> None:
    """``exc`` escaped an fbgemm_npu kernel: if a queued check has failed, raise it instead
    (``from exc``), since bad data an earlier check saw is the likely cause.  An error raised by
    fbgemm_npu's own code (an argument check, before any launch) is the call's own answer and
    passes unchanged.  A sync, on the error path only; the queue is read then."""
    with _LOCK:
        if not _QUEUE:
            return
    if _raised_by_us(exc):
        return
    try:
        check()
    except RuntimeError as queued:
        # marks the error for the hostile-input suite: bad data reached a launch before its
        # check was read, which on a real device reads outside a buffer (a kernel to fix)
        queued.fbgemm_npu_kernel_error = exc  # type: ignore[attr-defined]
        raise queued from exc


def _as_int64(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point():
        return t.to(torch.float64).view(torch.int64)
    return t.to(torch.int64)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OUR_PREFIXES = ("fbgemm::", "mxrec::", "fbgemm_npu")


def _raised_by_us(exc: BaseException) -> bool:
    """Whether ``exc`` is fbgemm_npu's own answer rather than an ATen op failing: its message
    starts with an op's qualified name (docs/design.md rule 9: ``"fbgemm::<op>: ..."``), or the
    innermost frame of its traceback is a ``raise`` in fbgemm_npu's code.  (An ATen op called
    from a kernel also has a kernel line as its innermost Python frame, but not a ``raise``.)"""
    if str(exc).startswith(_OUR_PREFIXES):
        return True
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    path = os.path.abspath(tb.tb_frame.f_code.co_filename)
    line = linecache.getline(path, tb.tb_lineno).strip()
    return path.startswith(_PACKAGE + os.sep) and line.startswith("raise")


def _python(t: torch.Tensor, v: int) -> float | int | bool:
    if t.is_floating_point():
        return struct.unpack("<d", struct.pack("<q", v))[0]
    return bool(v) if t.dtype == torch.bool else int(v)
