"""``None`` or a Python object where an op of the pooled, index-select, cumsum, permute, jagged or
bucketize family takes a tensor: a ``ValueError`` naming the op and the argument, never an
``AttributeError`` from inside a kernel (docs/design.md rule 9).

The arguments come from each op's schema (``torch.ops.fbgemm.<op>.default._schema``): every
``Tensor``, ``Tensor[]``, ``Tensor?`` and ``Tensor[]?`` of every op of the six families (one file
for all six: the guard is one function of ``native/_checks.py`` that each family's ``__init__``
applies).  The other arguments get stand-ins of their type: the guard checks every tensor
argument before the kernel reads any, so they need not be valid.  Through ``torch.ops`` a ``None``
for a ``Tensor`` reaches our kernel (the dispatcher passes it as an undefined tensor) whenever
another tensor argument routes the call to npu; a ``None`` list, or a list holding ``None``, is
refused by torch's own argument parser before any kernel, naming op and argument too.  Every
registered kernel of the op is also called directly, with ``None``, an ``object()`` and a list
holding one.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from fbgemm_npu._registry import REGISTRY

NPU = "npu"
FAMILIES = ("pooled", "index_select", "cumsum", "permute", "jagged", "bucketize")
OPS = sorted(q for q, family in REGISTRY.families.items() if family.split(".")[-1] in FAMILIES)
TENSOR_TYPES = ("Tensor", "List[Tensor]", "Optional[Tensor]", "Optional[List[Tensor]]")
# What the other (required) arguments get, by the schema's type: anything of that type will do.
STAND_INS: dict[str, Any] = {
    "int": 1,
    "bool": False,
    "float": 0.0,
    "List[int]": [1],
    "List[List[int]]": [[1]],
    "List[List[str]]": [["a"]],
}


def _tensor() -> torch.Tensor:
    return torch.zeros(2, dtype=torch.int64, device=NPU)


def _stand_in(kind: str) -> Any:
    if kind == "Tensor":
        return _tensor()
    if kind == "List[Tensor]":
        return [_tensor()]
    if kind == "Device":
        return torch.device(NPU)
    return STAND_INS[kind]


def _arguments(op: str) -> list[tuple[str, str, bool]]:
    """``(name, type, required)`` of every argument of ``op``'s schema, in order."""
    schema = getattr(torch.ops.fbgemm, op.split("::")[1]).default._schema
    return [(a.name, str(a.type), not a.has_default_value()) for a in schema.arguments]


def _cases() -> list[tuple[str, str]]:
    return [(op, name) for op in OPS for name, kind, _ in _arguments(op) if kind in TENSOR_TYPES]


def _call(op: str, target: str, value: Any) -> tuple[list[Any], dict[str, Any]]:
    """Stand-ins for the required arguments, ``value`` for ``target`` (by keyword when it is an
    optional argument)."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for name, kind, required in _arguments(op):
        if name == target:
            (args.append(value) if required else kwargs.update({name: value}))
        elif required:
            args.append(_stand_in(kind))
    return args, kwargs


def _holds_tensors(value: Any) -> bool:
    """A tensor, or a list of tensors: what lets the dispatcher route a call to npu."""
    if isinstance(value, list):
        return any(isinstance(v, torch.Tensor) for v in value)
    return isinstance(value, torch.Tensor)


def _raises_naming(op: str, arg: str, fn: Any, *args: Any, **kwargs: Any) -> None:
    with pytest.raises((ValueError, TypeError)) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert f"{op}: " in message and f"'{arg}" in message, message


def test_every_op_of_the_families_is_covered() -> None:
    assert len(OPS) > 50 and all(_arguments(op) for op in OPS)
    assert {op.split("::")[1] for op, _ in _cases()} == {op.split("::")[1] for op in OPS}


@pytest.mark.parametrize(
    ("op", "arg"), _cases(), ids=[f"{o.split('::')[1]}-{a}" for o, a in _cases()]
)
def test_none_or_an_object_for_a_tensor_argument_names_op_and_argument(op: str, arg: str) -> None:
    kind = dict((n, k) for n, k, _ in _arguments(op))[arg]
    optional = kind.startswith("Optional")
    is_list = "List" in kind
    fn = getattr(torch.ops.fbgemm, op.split("::")[1])
    args, kwargs = _call(op, arg, None)
    others = [a for a in [*args, *kwargs.values()] if _holds_tensors(a)]
    if not optional and others:
        if is_list:  # torch's parser refuses a None list before any kernel
            with pytest.raises(RuntimeError, match=rf"{op}\(\) .*argument '{arg}'"):
                fn(*args, **kwargs)
        else:  # the dispatcher hands None to our npu kernel as an undefined tensor
            _raises_naming(op, arg, fn, *args, **kwargs)
    bad = [object(), [_tensor(), None], [object()]] if is_list else [object(), 3]
    if not optional:
        bad.append(None)
    for key, kernel in REGISTRY.kernels[op].items():
        for value in bad:
            args, kwargs = _call(op, arg, value)
            _raises_naming(op, arg, kernel, *args, **kwargs)
        if optional:  # None is the argument's default: the guard lets it through
            args, kwargs = _call(op, arg, None)
            try:
                kernel(*args, **kwargs)
            except (ValueError, RuntimeError, TypeError, IndexError) as exc:
                assert f"'{arg}' must be" not in str(exc), f"{key}: {exc}"
