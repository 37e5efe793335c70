"""Where an ATen op runs on an Ascend 910B: AI Core, AI CPU or the host (docs/hardware.md).

The simulated device runs every op on the CPU and cannot tell the three apart; a real 910B with
torch_npu 2.13 and its CANN release sends some (op, dtype) pairs to the chip's AI CPU (slow, and
the stream waits behind it) and a few ops to the host CPU (a stall).  This module holds those
facts as a table, :data:`ROUTES`, and :func:`route` applies it to one ATen call as the counters
see it (``fbgemm_npu.testing.counters``: ``ai_cpu`` and ``stalls``).  The reasoning behind each
row, with the torch_npu / CANN sources it was read from, is in docs/hardware.md ("AI-CPU
routes", "Host fallbacks and host stalls"); a later CANN release may move a row.

Each row names ATen *packets* (``cumsum`` covers ``cumsum.default``, ``cumsum.out``...), the
route, and a condition on the call's arguments, bound to their schema names so that positional
and keyword arguments read the same:

=========================================  ========  ==============================================
packets                                    route     when
=========================================  ========  ==============================================
searchsorted, bucketize                    ai_cpu    always (no AI-Core kernel on 910B)
cumsum, cumsum_                            ai_cpu    the output is int64 (int32 / float: AI Core)
repeat_interleave                          ai_cpu    repeats is a tensor (an int64 cumsum inside)
sort, argsort                              ai_cpu    integer (or bool) keys; float keys: AI Core
cummax, _cummax_helper                     ai_cpu    always
masked_fill, masked_fill_                  ai_cpu    self is int64
shifts (``>>``, ``<<``, bitwise_*_shift)   ai_cpu    always (only integer dtypes exist)
index_add, index_add_                      ai_cpu    self is int64 or float64
index_put(_), _index_put_impl_             ai_cpu    accumulate=True and (self int64 / uint8, or
                                                     index tensors that must broadcast)
constant_pad_nd                            ai_cpu    self is int64
_unique, _unique2, unique_*                ai_cpu    always
scatter, scatter_                          ai_cpu    self is int64 (*inferred*: int64 is absent
                                                     from the 910B ScatterElements dtype lists)
_assert_async                              host      always (torch_npu's CPU fallback)
=========================================  ========  ==============================================

Everything else is ``"ai_core"``.  A host-to-device copy is a stall unless its source is pinned
and the copy is ``non_blocking`` (torch_npu synchronises the stream before a blocking
``aclrtMemcpy``): :func:`stall_reason`.  Device-to-host reads (``item()``, ``.cpu()``...) are the
counters' *syncs* and are not repeated here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch

__all__ = ["ROUTES", "Route", "Rule", "bind", "copy_devices", "device_of", "route", "stall_reason"]

Route = Literal["ai_core", "ai_cpu", "host"]
Bound = dict[str, Any]  # a call's arguments by schema name


@dataclass(frozen=True)
class Rule:
    """One row of the 910B table: these packets take ``route`` when ``when(bound)`` holds."""

    packets: frozenset[str]
    route: Route
    when: Callable[[Bound], bool]
    why: str  # one line, for reports; the sources are in docs/hardware.md


def _dtype(value: Any) -> torch.dtype | None:
    return value.dtype if isinstance(value, torch.Tensor) else None


def _self_is(*dtypes: torch.dtype) -> Callable[[Bound], bool]:
    return lambda b: _dtype(b.get("self")) in dtypes


def _always(_: Bound) -> bool:
    return True


def _cumsum_out_dtype(b: Bound) -> torch.dtype | None:
    """The dtype a cumsum writes: ``out``'s, else ``dtype=``, else self's (integers -> int64)."""
    out = b.get("out")
    if isinstance(out, torch.Tensor):
        return out.dtype
    if b.get("dtype") is not None:
        return b["dtype"]
    src = _dtype(b.get("self"))
    if src is None:
        return None
    return src if src.is_floating_point or src.is_complex else torch.int64


def _integer_keys(b: Bound) -> bool:
    keys = _dtype(b.get("self"))
    return keys is not None and not (keys.is_floating_point or keys.is_complex)


def _accumulating_put(b: Bound) -> bool:
    if not b.get("accumulate"):
        return False
    shapes = {tuple(i.shape) for i in b.get("indices") or [] if isinstance(i, torch.Tensor)}
    return _dtype(b.get("self")) in (torch.int64, torch.uint8) or len(shapes) > 1


_SHIFTS = frozenset(
    {
        "__rshift__", "__lshift__", "__irshift__", "__ilshift__", "bitwise_right_shift",
        "bitwise_left_shift", "bitwise_right_shift_", "bitwise_left_shift_",
    }
)  # fmt: skip
_UNIQUE = frozenset(
    {"_unique", "_unique2", "unique_dim", "unique_consecutive", "unique_dim_consecutive"}
)

ROUTES: tuple[Rule, ...] = (
    Rule(frozenset({"searchsorted", "bucketize"}), "ai_cpu", _always, "no AI-Core kernel on 910B"),
    Rule(
        frozenset({"cumsum", "cumsum_"}),
        "ai_cpu",
        lambda b: _cumsum_out_dtype(b) == torch.int64,
        "int64 output",
    ),
    Rule(
        frozenset({"repeat_interleave"}),
        "ai_cpu",
        lambda b: isinstance(b.get("repeats"), torch.Tensor),
        "repeats tensor: an int64 cumsum inside",
    ),
    Rule(frozenset({"sort", "argsort"}), "ai_cpu", _integer_keys, "integer keys"),
    Rule(frozenset({"cummax", "_cummax_helper"}), "ai_cpu", _always, "no AI-Core kernel"),
    Rule(frozenset({"masked_fill", "masked_fill_"}), "ai_cpu", _self_is(torch.int64), "int64 self"),
    Rule(_SHIFTS, "ai_cpu", _always, "integer shifts have no AI-Core kernel on 910B"),
    Rule(
        frozenset({"index_add", "index_add_"}),
        "ai_cpu",
        _self_is(torch.int64, torch.float64),
        "int64 / float64 self",
    ),
    Rule(
        frozenset({"index_put", "index_put_", "_index_put_impl_"}),
        "ai_cpu",
        _accumulating_put,
        "accumulate=True with int64 / uint8 self or broadcast indices",
    ),
    Rule(frozenset({"constant_pad_nd"}), "ai_cpu", _self_is(torch.int64), "int64 self"),
    Rule(_UNIQUE, "ai_cpu", _always, "AI Core only on Ascend 950"),
    Rule(
        frozenset({"scatter", "scatter_"}),
        "ai_cpu",
        _self_is(torch.int64),
        "int64 self (inferred from the 910B dtype lists)",
    ),
    Rule(frozenset({"_assert_async"}), "host", _always, "CPU fallback: the flag is read back"),
)

_BY_PACKET: dict[str, tuple[Rule, ...]] = {}
for _rule in ROUTES:
    for _packet in _rule.packets:
        _BY_PACKET[_packet] = (*_BY_PACKET.get(_packet, ()), _rule)


def _packet(func: torch._ops.OpOverload) -> str:
    return func._schema.name.split("::", 1)[1]


def bind(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> Bound:
    """A call's arguments by schema name (defaults filled in), positional or keyword alike."""
    bound: Bound = {}
    positional = iter(args)
    for arg in func._schema.arguments:
        if not arg.kwarg_only:
            value = next(positional, kwargs.get(arg.name, arg.default_value))
        else:
            value = kwargs.get(arg.name, arg.default_value)
        bound[arg.name] = value
    return bound


def route(
    func: torch._ops.OpOverload, args: tuple, kwargs: dict | None = None, out: Any = None
) -> Route:
    """Where ``func(*args, **kwargs)`` runs on a 910B: ``"ai_core"``, ``"ai_cpu"`` or ``"host"``.

    ``out`` (the call's result, when the caller has it) is read by the cumsum row in place of
    the dtype the arguments imply.  Ops of other namespaces (``fbgemm::``...) are ``"ai_core"``:
    their ATen parts are classified one by one.
    """
    if func.namespace != "aten":
        return "ai_core"
    rules = _BY_PACKET.get(_packet(func))
    if not rules:
        return "ai_core"
    bound = bind(func, args, kwargs or {})
    if isinstance(out, torch.Tensor) and "out" not in bound:
        bound["out"] = out
    for rule in rules:
        if rule.when(bound):
            return rule.route
    return "ai_core"


def device_of(value: Any) -> str | None:
    """The device type a ``device=`` argument names (a ``torch.device`` or a string), or None."""
    if isinstance(value, torch.device):
        return value.type
    if isinstance(value, str):
        return torch.device(value).type
    return None


def _arg(args: tuple, i: int) -> Any:
    return args[i] if len(args) > i else None


def copy_devices(packet: str, args: tuple, kwargs: dict) -> tuple[str | None, str | None]:
    """(source device, destination device) of a copy op: ``_to_copy``, ``copy_``, ``_copy_from``."""
    if packet == "_to_copy":
        src = args[0]
        dst = device_of(kwargs.get("device")) or src.device.type
        return src.device.type, dst
    if packet == "copy_":  # copy_(self=dst, src)
        dst, src = args[0], kwargs.get("src", _arg(args, 1))
    else:  # _copy_from(self=src, dst)
        src, dst = args[0], kwargs.get("dst", _arg(args, 1))
    if not isinstance(src, torch.Tensor) or not isinstance(dst, torch.Tensor):
        return None, None
    return src.device.type, dst.device.type


_COPIES = frozenset({"_to_copy", "copy_", "_copy_from", "_copy_from_and_resize"})


def stall_reason(
    func: torch._ops.OpOverload, args: tuple, kwargs: dict, dev: str, where: Route | None = None
) -> str | None:
    """Why the host waits for the device ``dev`` on a 910B in this call, or None.

    A host-route op (``_assert_async``) reads its flag back through the CPU fallback; a copy from
    the host to ``dev`` synchronises the stream unless the source is pinned and the copy is
    ``non_blocking``.  ``where`` is :func:`route`'s answer when the caller already has it.
    """
    if (where or route(func, args, kwargs)) == "host":
        return "host fallback"
    packet = _packet(func)
    if func.namespace != "aten" or packet not in _COPIES:
        return None
    src_dev, dst_dev = copy_devices(packet, args, kwargs)
    if src_dev != "cpu" or dst_dev != dev or dev == "cpu":
        return None
    bound = bind(func, args, kwargs)
    src = bound.get("src") if packet == "copy_" else bound.get("self")
    pinned = isinstance(src, torch.Tensor) and src.is_pinned()
    if pinned and bound.get("non_blocking"):
        return None
    return "blocking host-to-device copy"
