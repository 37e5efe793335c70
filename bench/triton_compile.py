"""``python bench/device_check.py --compile cuda:90``: every fused Triton kernel compiled for a
GPU target here, without the GPU (no driver: ``triton.compile`` with an explicit target).

Each probe of :mod:`bench.triton_probes` runs at its ``--quick`` size on CPU tensors in kernel
mode ``triton`` with :func:`fbgemm_npu.native._triton.launch` replaced by :func:`compile_launch`:
the signature of each launch is read off its arguments (tensors' dtypes, ints' widths, floats,
``None`` as a constexpr) and the kernel is compiled for the target (PTX for ``cuda:<cc>``, AMDGCN
for ``hip:<arch>``) instead of run.  Nothing runs, so outputs hold garbage: later launches of
the same call still compile, but a data check or a host read of an output may fail; the probe is
run with the data checks on (their kernels' CHECK variants) and off (the rest of the call).
What it proves: the kernels are valid Triton for that target, which the interpreter does not
check (loop-carried types, shapes, scalar / block mix-ups).  It needs TRITON_INTERPRET unset.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["KernelCompileError", "compile_launch", "compile_rows", "target_of"]

_COMPILED: dict[tuple[Any, ...], str] = {}
_SEEN: set[str] = set()  # the kernels the current probe launched (compiled now or before)
_TARGET: list[Any] = []


class KernelCompileError(Exception):
    """A kernel Triton refused to compile for the target (the finding this mode looks for)."""


def target_of(spec: str) -> Any:
    """``cuda:90`` -> GPUTarget("cuda", 90, 32); ``hip:gfx942`` -> GPUTarget("hip", ..., 64)."""
    from triton.backends.compiler import GPUTarget

    backend, _, arch = spec.partition(":")
    if backend == "cuda":
        return GPUTarget("cuda", int(arch or 90), 32)
    if backend == "hip":
        return GPUTarget("hip", arch or "gfx942", 64)
    raise SystemExit(f"--compile: a target is cuda:<cc> or hip:<arch>, got {spec!r}")


def _type(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return "*" + {
            torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
            torch.float64: "fp64", torch.int64: "i64", torch.int32: "i32", torch.int16: "i16",
            torch.int8: "i8", torch.uint8: "u8", torch.bool: "i1",
        }[value.dtype]  # fmt: skip
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"no Triton type for {type(value).__name__}")


def compile_launch(name: str, kernel: Any, grid: tuple[int, ...], *args: Any, **meta: Any) -> None:
    """What :func:`fbgemm_npu.native._triton.launch` does, compiling instead of running."""
    import triton
    from triton.compiler import ASTSource

    signature, constexprs = {}, {}
    for i, param in enumerate(kernel.params):
        value = args[i] if i < len(args) else meta.get(param.name, param.default)
        if param.is_constexpr or value is None:
            signature[param.name] = "constexpr"
            constexprs[param.name] = value
        else:
            signature[param.name] = _type(value)
    key = (name, *signature.items(), *((k, repr(v)) for k, v in constexprs.items()))
    _SEEN.add(name)
    if key not in _COMPILED:
        src = ASTSource(fn=kernel, signature=signature, constexprs=constexprs)
        try:
            triton.compile(src, target=_TARGET[0])
        except Exception as e:
            raise KernelCompileError(f"{name}: {type(e).__name__}: {e}") from e
        _COMPILED[key] = name


def compile_rows(probes: list[Any], spec: str) -> list[dict[str, Any]]:
    """One row per probe: ``compiled: <kernel names>`` or why not."""
    import torch

    from fbgemm_npu.native import _triton

    if _triton.interpreting():
        raise SystemExit("--compile needs TRITON_INTERPRET unset (kernels decorated to compile)")
    _TARGET[:] = [target_of(spec)]
    _triton.launch = compile_launch  # before any kernel module imports it by name
    _triton.backend_for = lambda device: "native"  # as if a GPU ran them
    rows = []
    for probe in probes:
        row: dict[str, Any] = {"op": probe.op, "config": probe.quick}
        _SEEN.clear()
        errors, failed = [], []
        for checks in ("1", "0"):
            os.environ["FBGEMM_NPU_VALIDATE"] = checks
            try:
                built = probe.build(torch.device("cpu"), True)
                with _triton.kernel_mode("triton"):
                    built.run()
            except KernelCompileError as e:
                failed.append(" ".join(str(e).split())[:200])
            except (ImportError, AttributeError) as e:
                errors.append(f"absent ({type(e).__name__})")
                break
            except Exception as e:  # garbage outputs may trip a check or a read: not a finding
                errors.append(
                    f"{type(e).__name__}: {str(e).splitlines()[0][:60] if str(e) else ''}"
                )
            finally:
                os.environ.pop("FBGEMM_NPU_VALIDATE", None)
        names = sorted(_SEEN)
        if failed:
            row["status"] = "COMPILE ERROR " + "; ".join(failed)
        elif names:
            row["status"] = f"compiled: {', '.join(names)}"
        else:
            row["status"] = "; ".join(errors) or "no Triton launch"
        rows.append(row)
    return rows
