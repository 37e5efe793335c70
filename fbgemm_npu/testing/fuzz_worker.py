"""The subprocess side of the fuzz harness (:mod:`fbgemm_npu.testing.fuzz`): run one case.

Every case runs here, in a worker process of its own, so that a crash (a segfault in a kernel,
ours or upstream's) or a hang costs the worker, not the test session: the parent sees the pipe
close or its timeout expire, records a crash or a hang, and starts a fresh worker.

Protocol: the parent writes pickled :class:`~fbgemm_npu.testing.fuzz.Case` objects to stdin, each
prefixed with its length (8 bytes, little endian); the worker answers each with a pickled
``(kind, detail)`` pair framed the same way on the pipe it was given.  ``kind`` is one of
:data:`KINDS`.  The worker moves its own stdout to stderr first, so nothing a kernel prints can
corrupt the answers.
"""

from __future__ import annotations

import importlib
import os
import pickle
import struct
import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from fbgemm_npu.native._pending import check
from fbgemm_npu.testing.budgets import drain_checks

# what a case can come to; the parent counts them per family
EQUAL, CLEAR_ERROR, WRONG, REJECTED, UNCLEAR, CRASH, HANG, BAD_CASE, UNSAFE = KINDS = (
    "equal",  # ours equals the oracle
    "clear_error",  # ours raised an error naming the op and the argument
    "wrong",  # ours returned a result that differs from the oracle, or accepted invalid input
    "rejected",  # ours raised on valid input (a false error)
    "unclear",  # ours raised, but the message does not name the op and the argument
    "crash",  # the worker died
    "hang",  # the worker did not answer in time
    "bad_case",  # the oracle failed on a case labelled valid: the test's strategy is wrong
    # the clear error came only because a launch failed on data a deferred check had flagged
    # (docs/design.md, "Validation without stalls"): on a real device that launch reads outside
    # its buffers, so the kernel must make it safe (clamp) before the check is read
    "unsafe",
)
# the errors a user may see for bad input (docs/design.md rule 9)
USER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    RuntimeError,
    TypeError,
    IndexError,
    NotImplementedError,
)
HEADER = struct.Struct("<Q")
# Out-variant ops whose upstream schema forgets the alias annotation of the output they write
# and return ("Tensor output", not "Tensor(a!) output"): returning it is their contract.
SCHEMA_OMITS_ALIAS = frozenset(
    {
        "fbgemm::lengths_range_out",
        "fbgemm::FloatToFused8BitRowwiseQuantizedOut",
        "fbgemm::Fused8BitRowwiseQuantizedToFloatOut",
    }
)


def _on_type() -> type:
    from fbgemm_npu.testing.fuzz import On

    return On


def _place(t: torch.Tensor, device: str) -> torch.Tensor:
    """``t`` on ``device`` with its exact strides, storage offset and stride-0 dims."""
    if device == "cpu" and t.device.type == "cpu":
        return t.clone() if t.is_contiguous() else _restride(t, t.untyped_storage(), "cpu")
    return _restride(t, t.untyped_storage(), device)


def _restride(t: torch.Tensor, storage: torch.UntypedStorage, device: str) -> torch.Tensor:
    flat = torch.empty(0, dtype=t.dtype)
    count = storage.nbytes() // max(t.element_size(), 1)
    flat.set_(storage, 0, (count,), (1,))
    moved = flat.to(device, copy=True)
    out = moved.as_strided(t.size(), t.stride(), t.storage_offset())
    return out.requires_grad_(t.requires_grad) if t.is_floating_point() else out


def place(value: Any, default: str) -> Any:
    """Every tensor of ``value`` (nested lists, tuples, dicts) placed for our side."""
    on = _on_type()

    def move(v: Any) -> Any:
        if isinstance(v, on):
            return _place(v.tensor, v.device)
        if isinstance(v, torch.Tensor):
            return _place(v, default)
        return v

    return tree_map(move, value, is_leaf=lambda v: isinstance(v, on))


def contiguous_cpu(value: Any) -> Any:
    """The oracle's inputs: contiguous CPU copies of the same logical values."""
    on = _on_type()

    def move(v: Any) -> Any:
        if isinstance(v, on):
            v = v.tensor
        if isinstance(v, torch.Tensor):
            c = v.detach().to("cpu").contiguous().clone()
            return c.requires_grad_(v.requires_grad)
        return v

    return tree_map(move, value, is_leaf=lambda v: isinstance(v, on))


def resolve(target: str) -> Callable[..., Any]:
    """``"fbgemm::op"`` / ``"fbgemm::op.overload"`` or ``"package.module:function"``."""
    if "::" in target:
        ns, _, name = target.partition("::")
        op_name, _, overload = name.partition(".")
        packet = getattr(getattr(torch.ops, ns), op_name)
        return getattr(packet, overload or "default")
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


def _grad_leaves(args: tuple, kwargs: dict, grad: tuple) -> list[torch.Tensor]:
    leaves = []
    for key in grad:
        value = kwargs[key] if isinstance(key, str) else args[key]
        leaves.extend(t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor))
    return leaves


def _require_grad(args: tuple, kwargs: dict, grad: tuple) -> list[torch.Tensor]:
    leaves = _grad_leaves(args, kwargs, grad)
    for t in leaves:
        t.requires_grad_(True)
    return leaves


def _backward(outputs: Any, leaves: list[torch.Tensor]) -> list[torch.Tensor | None]:
    """Gradients of sum(out * w) over the float outputs, ``w`` fixed by a seeded generator."""
    floats = [o for o in tree_flatten(outputs)[0] if isinstance(o, torch.Tensor)]
    floats = [o for o in floats if o.is_floating_point() and o.requires_grad]
    if not floats:
        return [None] * len(leaves)
    gen = torch.Generator().manual_seed(0)
    total = sum(
        (o * torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype).to(o.device))
        .sum()
        .to(torch.float64)
        for o in floats
    )
    grads = torch.autograd.grad(total, leaves, allow_unused=True)
    return list(grads)


# torch's dispatcher refuses a call whose tensor arguments are all None or not tensors before
# any kernel runs, naming the op's schema: where no argument is a tensor, that names them all
NO_TENSOR_ARGUMENTS = "There were no tensor arguments to this function"


def _short(op: str) -> str:
    return op.partition("::")[2].partition(".")[0] if "::" in op else op.rpartition(":")[2]


def _names_op_and_arg(message: str, op: str | tuple[str, ...], names: tuple[str, ...]) -> bool:
    ops = (op,) if isinstance(op, str) else op
    if not any(_short(o) in message for o in ops):
        return False
    return not names or NO_TENSOR_ARGUMENTS in message or any(n in message for n in names)


def _tol(dtype: torch.dtype, rtol: float | None, atol: float | None) -> tuple[float, float]:
    if rtol is not None and atol is not None:
        return rtol, atol
    default = {
        torch.float16: (1e-3, 1e-3),
        torch.bfloat16: (1.6e-2, 1e-2),
        torch.float32: (1.3e-6, 1e-5),
        torch.float64: (1e-7, 1e-7),
    }.get(dtype, (0.0, 0.0))
    return (rtol if rtol is not None else default[0]), (atol if atol is not None else default[1])


def compare(ours: Any, expected: Any, rtol: float | None, atol: float | None) -> str | None:
    """None when ``ours`` equals ``expected``; else what differs (shapes, dtypes, values)."""
    a_leaves, a_spec = tree_flatten(ours)
    e_leaves, e_spec = tree_flatten(expected)
    if a_spec != e_spec:
        return f"output structure {a_spec}, expected {e_spec}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves, strict=True)):
        if not isinstance(e, torch.Tensor):
            if a != e:
                return f"leaf {i}: {a!r}, expected {e!r}"
            continue
        if not isinstance(a, torch.Tensor):
            return f"leaf {i}: a {type(a).__name__}, expected a tensor"
        a = a.detach().to("cpu")
        e = e.detach()
        if a.shape != e.shape or a.dtype != e.dtype:
            return f"leaf {i}: {a.dtype}{tuple(a.shape)}, expected {e.dtype}{tuple(e.shape)}"
        if a.is_floating_point():
            r, t = _tol(a.dtype, rtol, atol)
            if not torch.allclose(a.double(), e.double(), rtol=r, atol=t, equal_nan=True):
                diff = (a.double() - e.double()).abs().nan_to_num(float("inf"))
                return f"leaf {i}: max |diff| {diff.max().item():.3g} (rtol {r:g}, atol {t:g})"
        elif not torch.equal(a, e):
            bad = (a != e).nonzero()[0].tolist()
            return f"leaf {i} at {bad}: {a[tuple(bad)].item()}, expected {e[tuple(bad)].item()}"
    return None


def _run(fn: Callable[..., Any], args: tuple, kwargs: dict, grad: tuple) -> tuple[Any, Any]:
    """(outputs + the tensor arguments after the call, gradients)."""
    leaves = _require_grad(args, kwargs, grad)
    out = fn(*args, **kwargs)
    grads = _backward(out, leaves) if leaves else []
    after = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    return (out, [t.detach() for t in after]), grads


def _aliased_output(fn: Callable[..., Any], args: tuple, kwargs: dict, out: Any) -> str | None:
    """Where an op's output shares memory with an input its schema does not say it aliases."""
    schema = getattr(fn, "_schema", None)
    if schema is None or any(r.alias_info is not None for r in schema.returns):
        return None
    if schema.name in SCHEMA_OMITS_ALIAS:
        return None
    # the dispatcher knows an overload by its full name ("mxrec::hstu_jagged.equal")
    full = f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name
    if torch._C._dispatch_has_kernel_for_dispatch_key(full, "CompositeImplicitAutograd"):
        return None  # upstream's composite: it decomposes (AOT sees its parts); its aliasing
    inputs = {
        t.untyped_storage().data_ptr()
        for t in tree_flatten((args, kwargs))[0]
        if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes() > 0
    }
    for i, o in enumerate(tree_flatten(out)[0]):
        if isinstance(o, torch.Tensor) and o.untyped_storage().nbytes() > 0:
            if o.untyped_storage().data_ptr() in inputs:
                return f"output leaf {i} shares memory with an input (the schema declares no alias)"
    return None


def run_case(case: Any) -> tuple[str, str]:
    """Run one case on our side and, where it needs one, the oracle's; classify the outcome."""
    default = os.environ.get("FBGEMM_NPU_FUZZ_DEVICE", "npu:0")
    fn = resolve(case.target)
    args, kwargs = place(case.args, default), place(case.kwargs, default)
    drain_checks()  # a previous case's leftovers are not this case's
    try:
        ours = _run(fn, args, kwargs, case.grad)
        # where a caller would read the result: the deferred data checks are read here
        check()
        ours_error: BaseException | None = None
    except USER_ERRORS as error:
        ours, ours_error = None, error
    except Exception as error:  # noqa: BLE001  - an unexpected type is an unclear error
        return UNCLEAR, f"{type(error).__name__}: {error}"[:600]
    if ours_error is not None:
        message = f"{type(ours_error).__name__}: {ours_error}"
        if case.expect == "equal":
            return REJECTED, message[:600]
        inner = getattr(ours_error, "fbgemm_npu_kernel_error", None)
        if inner is not None:
            return UNSAFE, f"{message[:300]} -- after a launch failed: {inner!s:.200}"
        if _names_op_and_arg(str(ours_error), case.op, case.names):
            return CLEAR_ERROR, message[:300]
        return UNCLEAR, f"{message[:500]} (wanted the op and one of {case.names})"
    if case.expect == "error":
        return WRONG, "accepted invalid input: returned a result instead of an error"
    aliased = _aliased_output(fn, args, kwargs, ours[0][0])
    if aliased:
        return WRONG, aliased
    oracle = resolve(case.oracle) if case.oracle else fn
    try:
        expected = _run(oracle, contiguous_cpu(case.args), contiguous_cpu(case.kwargs), case.grad)
    except Exception as error:  # noqa: BLE001
        if case.expect == "equal_or_error":
            return WRONG, f"the oracle refuses this input ({error!s:.200}); ours returned a result"
        return BAD_CASE, f"the oracle failed on a valid case: {type(error).__name__}: {error}"[:600]
    problem = compare(ours, expected, case.rtol, case.atol)
    return (WRONG, problem) if problem else (EQUAL, "")


def _serve(inp: Any, out: Any) -> None:
    while True:
        header = inp.read(HEADER.size)
        if len(header) < HEADER.size:
            return
        case = pickle.loads(inp.read(HEADER.unpack(header)[0]))
        try:
            answer = run_case(case)
        except BaseException:  # noqa: BLE001  - a harness error: say it, keep serving
            answer = (BAD_CASE, "harness: " + traceback.format_exc()[-800:])
        payload = pickle.dumps(answer)
        out.write(HEADER.pack(len(payload)) + payload)
        out.flush()


def main() -> None:
    # answers go to a private copy of stdout; fd 1 then points at stderr for kernels' prints
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import fbgemm_npu  # noqa: F401  - registers our kernels
    from fbgemm_npu.testing import simulate

    simulate()
    _serve(sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
