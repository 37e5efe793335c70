"""Index arithmetic every family builds its gathers from, kept on a 910B's AI Core.

docs/hardware.md lists what a 910B runs on its AI CPU: ``searchsorted``, int64 ``cumsum`` and
``index_add_``, ``repeat_interleave`` with a tensor of repeats.  The pieces below build the same
index vectors from int32 ``index_add`` + ``cumsum`` (AI Core), with cached ``arange`` / constant
buffers so that a warm call launches only the arithmetic.  The caches hold real device tensors:
under a trace (``torch.compile``, opcheck) fresh tensors are made instead (:func:`tracing`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._subclasses.fake_tensor import is_fake

__all__ = [
    "WARM",
    "arange_cached",
    "filled_i32",
    "on_warm",
    "segment_ids",
    "steps_cached",
    "tracing",
    "warm_caches",
]

WARM = 1 << 16  # elements warm_caches grows the caches to

_ARANGE: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}
_FILLED: dict[tuple[torch.device, int], torch.Tensor] = {}
_STEPS: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}
_WARMERS: list[Callable[[torch.device], None]] = []


def on_warm(fn: Callable[[torch.device], None]) -> Callable[[torch.device], None]:
    """Register ``fn(device)`` to fill a family's own device constants when
    :func:`warm_caches` runs (``quantize_nbit/_pack.py``: the packing powers); returns ``fn``."""
    _WARMERS.append(fn)
    return fn


def tracing(*tensors: object) -> bool:
    """Whether this call is traced rather than run: a fake-tensor mode is active (torch.compile,
    AOTAutograd, opcheck) or one of ``tensors`` is fake (a functional wrapper of one included).
    A traced call has no data to read on the host, and a real tensor it picked up from a cache
    would be foreign to the trace.  One C call, plus a few type checks, per call."""
    if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None:
        return True
    return any(isinstance(t, torch.Tensor) and is_fake(t) for t in tensors)


def arange_cached(n: int, device: torch.device, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """``torch.arange(n)`` as a prefix view of a cached, growing buffer: launch-free once warm
    (a fresh ``arange`` when traced: the cache holds real tensors).

    Callers must not write to the result.
    """
    if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None:
        return torch.arange(n, device=device, dtype=dtype)
    key = (device, dtype)
    buf = _ARANGE.get(key)
    if buf is None or buf.numel() < n:
        size = max(n, 1024, 0 if buf is None else 2 * buf.numel())
        buf = torch.arange(size, device=device, dtype=dtype)
        _ARANGE[key] = buf
    return buf[:n]


def filled_i32(n: int, value: int, device: torch.device) -> torch.Tensor:
    """``n`` int32 ``value``s as a prefix view of a cached, growing buffer (as
    :func:`arange_cached`; callers must not write to it)."""
    if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None:
        return torch.full((n,), value, device=device, dtype=torch.int32)
    key = (device, value)
    buf = _FILLED.get(key)
    if buf is None or buf.numel() < n:
        size = max(n, 1024, 0 if buf is None else 2 * buf.numel())
        buf = torch.full((size,), value, device=device, dtype=torch.int32)
        _FILLED[key] = buf
    return buf[:n]


def steps_cached(n: int, device: torch.device, dtype: torch.dtype = torch.int32) -> torch.Tensor:
    """``[0, 1, 1, ..., 1]`` (``n`` values): the increments whose cumsum is ``arange(n)``, the base
    of a segment arange built by ``index_add`` + ``cumsum`` (``permute/_gather.py``).  A prefix
    view of a cached, growing buffer (as :func:`arange_cached`; callers must not write to it)."""
    if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None:
        return (torch.arange(n, device=device) > 0).to(dtype)
    key = (device, dtype)
    buf = _STEPS.get(key)
    if buf is None or buf.numel() < n:
        size = max(n, 1024, 0 if buf is None else 2 * buf.numel())
        buf = torch.ones(size, device=device, dtype=dtype)
        buf[:1] = 0
        _STEPS[key] = buf
    return buf[:n]


def segment_ids(bounds: torch.Tensor, n: int) -> torch.Tensor:
    """``ids[i] = #{j >= 1 : bounds[j] <= i}`` for ``i < n``, int32: the segment of each of ``n``
    items when segment ``s`` is ``bounds[s] : bounds[s + 1]`` (``S = len(bounds) - 1`` for the
    items past ``bounds[-1]``) -- ``searchsorted(bounds[1:], arange(n), right=True)`` for
    nondecreasing ``bounds``, built without it: a 910B runs ``searchsorted`` on its AI CPU
    (docs/hardware.md).  Instead: a one at each segment end, ``marks = index_add(zeros(n + 1),
    clamp(bounds[1:], 0, n), 1)`` and ``ids = cumsum(marks[:n])``, all int32 (AI Core; int64
    ``index_add_`` and ``cumsum`` are AI CPU).  The clamp keeps a bound outside ``[0, n]`` in
    the buffer with the same count (below 0 counts for every item, above ``n`` for none).
    Launches: clamp, an out-of-place index_add (of cached zeros and ones), cumsum."""
    dev = bounds.device
    ends = bounds[1:].clamp(0, n)
    marks = torch.index_add(filled_i32(n + 1, 0, dev), 0, ends, filled_i32(ends.numel(), 1, dev))
    return torch.cumsum(marks[:n], 0, dtype=torch.int32)


def warm_caches(device: str | torch.device, n: int = WARM) -> None:
    """Grow every cache above on ``device`` to ``n`` elements, for measurements: their one-time
    fill in a fresh process, or growth at a larger size, is not a launch of the call being
    counted (the conformance harness and ``python -m bench`` call this before counting; the
    budget tests measure after a warm-up call)."""
    dev = torch.device(device)
    if dev.type == "cpu":
        return
    if dev.index is None:  # the caches are keyed by a tensor's device, which has an index: npu:0
        dev = torch.empty(0, device=dev).device
    for dtype in (torch.int64, torch.int32, torch.float32):
        arange_cached(n, dev, dtype)
    for value in (0, 1, -1):  # -1: the jagged scatters' padding marker (jagged/_utils.py)
        filled_i32(n, value, dev)
    for dtype in (torch.int32, torch.int64):
        steps_cached(n, dev, dtype)
    for fn in _WARMERS:
        fn(dev)
