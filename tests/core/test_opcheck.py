"""Every op the registrar registers through ``torch.library.opcheck`` on npu: the groundwork of
the gate "every op passes the checks a PyTorch op must pass".

One case per (op, sample of :mod:`fbgemm_npu.testing.op_samples`, check), the checks being
``test_schema`` (SchemaCheckMode: aliasing and mutation as the schema declares),
``test_faketensor`` (the fake / Meta kernel against the real one), ``test_aot_dispatch_static``
and ``test_aot_dispatch_dynamic`` (AOTAutograd tracing, forward and backward, against eager),
and ``test_autograd_registration``, torch's check adapted to npu
(:func:`autograd_registration_check_npu`).
What fails is in :data:`XFAIL` (``fbgemm_npu/testing/opcheck_xfail.py``), the stated
exceptions, each with its reason, strict: a case that starts passing fails until its entry goes.
Plus: every registered op has samples, and they require grad where we register an autograd
kernel.

Where a sample requires grad, our ``AutogradPrivateUse1`` kernel runs in Python without
redispatching to the op, so ``test_schema`` / ``test_faketensor`` see the ATen ops inside it; the
sample without grad (the last one of such an op) reaches the op and its fake kernel.
The file takes ~15 s on a 2-core host (25 s when loaded): collecting (every sample built once)
~1.6 s, then ``test_schema`` ~1.2 s, ``test_faketensor`` ~0.1 s, ``test_aot_dispatch_static``
~3.5 s, ``test_aot_dispatch_dynamic`` ~7 s in all, so nothing is marked ``slow``.  A failure is
reported in one line (pytest formatting torch's deep tracebacks would cost more than the checks).
"""

from __future__ import annotations

import functools
import re
import traceback

import pytest
import torch
from torch._functorch import config as functorch_config

from fbgemm_npu._registry import REGISTRY
from fbgemm_npu.testing.op_samples import has_autograd, sample_ops, samples
from fbgemm_npu.testing.opcheck_xfail import (  # the table of stated exceptions
    AUTOGRAD,
    UTILS,
    XFAIL,
    F,
)
from fbgemm_npu.testing.tbe_inputs import NPU


@functools.cache
def sample_count(op: str) -> int:
    return len(samples(op, NPU))


def cause(op: str, index: int, util: str) -> str | None:
    """The diagnosed cause of a failing case (None: it passes today)."""
    return XFAIL.get(f"{op}[{index}]", {}).get(util) or XFAIL.get(op, {}).get(util)


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _has_float_input(op: str, index: int) -> bool:
    args, kwargs = samples(op, NPU)[index]
    return any(t.is_floating_point() for t in _tensors([list(args), list(kwargs.values())]))


def _cases() -> list[object]:
    cases = []
    for op in sorted(REGISTRY.kernels):
        for index in range(sample_count(op)):
            for util in UTILS:
                if util == AUTOGRAD and not _has_float_input(op, index):
                    continue  # nothing could require grad: the check has nothing to see
                reason = cause(op, index, util)
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                name = f"{op.removeprefix(F)}[{index}]-{util.removeprefix('test_')}"
                cases.append(pytest.param(op, index, util, marks=marks, id=name))
    return cases


def _where(error: BaseException) -> str:
    """The innermost frame of fbgemm_npu or fbgemm_gpu that the error passed through."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "fbgemm" in f.filename]
    if not ours:
        return ""
    f = ours[-1]
    path = re.search(r"fbgemm_(?:npu|gpu)/.*", f.filename)
    return f" (at {path.group(0) if path else f.filename}:{f.lineno} in {f.name})"


def _overload(qualname: str) -> torch._ops.OpOverload:
    """``"fbgemm::op"`` -> ``torch.ops.fbgemm.op.default``; ``"mxrec::op.overload"`` -> that
    overload (the mxrec ops keep Rec SDK's overload names)."""
    ns, name = qualname.split("::", 1)
    packet, _, overload = name.partition(".")
    return getattr(getattr(getattr(torch.ops, ns), packet), overload or "default")


@pytest.mark.parametrize(("op", "index", "util"), _cases())
def test_opcheck(op: str, index: int, util: str) -> None:
    args, kwargs = samples(op, NPU)[index]
    overload = _overload(op)
    if util == AUTOGRAD:
        autograd_registration_check_npu(overload, args, kwargs)
        return
    # torch makes an output aliasing an input an AOT error only where CI is set (a warning
    # elsewhere): the error, always, so that a run here fails where CI fails.
    with functorch_config.patch(error_on_custom_op_aliasing=True):
        result = torch.library.opcheck(
            overload, args, kwargs, test_utils=(util,), raise_exception=False
        )[util]
    if result != "SUCCESS":
        # one line, with the innermost fbgemm frame: see the module docstring
        message = f"{type(result).__name__}: {result}".splitlines()[0]
        pytest.fail(f"{op} sample {index}, {util}: {message}{_where(result)}", pytrace=False)


def autograd_registration_check_npu(op: torch._ops.OpOverload, args: tuple, kwargs: dict) -> None:
    """torch's ``autograd_registration_check`` (torch/testing/_internal/optests), for npu.

    torch's own refuses devices other than CPU / CUDA / XPU; the contract is the same on npu with
    ``AutogradPrivateUse1`` for ``AutogradCUDA``: with the sample's floating-point inputs
    requiring grad, either an autograd kernel is registered for the call (``AutogradPrivateUse1``,
    ``Autograd`` or ``CompositeImplicitAutograd``) and then, ours, it records a graph (a float
    output carries a ``grad_fn``), or none is and no output that is not an input requires grad
    with autograd's fallback doing nothing (a kernel below autograd that records one would give
    silently wrong gradients)."""
    args, kwargs = _with_grad_inputs(args), _with_grad_inputs(kwargs)
    name = op.name()
    keys = ("AutogradPrivateUse1", "Autograd", "CompositeImplicitAutograd")
    registered = [k for k in keys if torch._C._dispatch_has_kernel_for_dispatch_key(name, k)]
    inputs = {id(t) for t in _tensors([list(args), list(kwargs.values())])}
    if registered:
        outs = [t for t in _tensors(_as_list(op(*args, **kwargs))) if t.is_floating_point()]
        if "AutogradPrivateUse1" in registered and outs:
            assert any(t.grad_fn is not None for t in outs), f"{name}: no output has a grad_fn"
        return
    prev = torch._C._get_autograd_fallback_mode()
    torch._C._set_autograd_fallback_mode("nothing")
    try:
        outs = _tensors(_as_list(op(*args, **kwargs)))
    finally:
        torch._C._set_autograd_fallback_mode(prev)
    leaked = [t for t in outs if t.requires_grad and id(t) not in inputs]
    assert not leaked, f"{name}: an output requires grad, but no autograd kernel is registered"


def _as_list(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _with_grad_inputs(value: object) -> object:
    """Fresh leaves: every floating-point tensor requiring grad."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            return value.detach().clone().requires_grad_(True)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_with_grad_inputs(v) for v in value)
    if isinstance(value, dict):
        return {k: _with_grad_inputs(v) for k, v in value.items()}
    return value


def test_every_registered_op_has_samples() -> None:
    registered = set(REGISTRY.kernels)
    assert registered <= set(sample_ops()), sorted(registered - set(sample_ops()))
    assert set(sample_ops()) <= registered, sorted(set(sample_ops()) - registered)
    assert not [op for op in registered if sample_count(op) == 0]


def test_samples_require_grad_where_we_register_autograd() -> None:
    """Every op with our autograd kernel has a sample with an input that requires grad."""
    for op in sorted(REGISTRY.kernels):
        if not has_autograd(op):
            continue
        found = [
            any(t.requires_grad for t in _tensors([list(args), list(kw.values())]))
            for args, kw in samples(op, NPU)
        ]
        assert any(found), f"{op}: no sample requires grad"


def test_xfail_table_names_real_cases() -> None:
    """Each entry names a registered op, a sample it has and one of the four checks."""
    for key, by_util in XFAIL.items():
        op, _, index = key.partition("[")
        assert op in REGISTRY.kernels, key
        if index:
            assert int(index.rstrip("]")) < sample_count(op), key
        assert by_util and set(by_util) <= set(UTILS), key
