"""Proof with hardware: each fused Triton kernel against its tensor program on one device.

``python bench/device_check.py`` on a GPU machine (CUDA) that has only torch and triton (no
fbgemm_gpu: :func:`import_kernels` imports our kernel modules without ``fbgemm_npu/__init__``).
Each probe (bench/triton_probes.py) calls a registered kernel FUNCTION directly
(``jagged_to_padded_dense_forward_npu``, the TBE lookup's autograd function, ``hstu_dense``...)
on the bench configs (TBE: T=32, E=1e5,
D=128, B=512, L=20; jagged: B=128, D=128, max_len=128; KJT ops on the TBE batch; HSTU: B=8, H=4,
D=128, S=1024, causal, bf16) under ``kernel_mode("tensor")`` and ``kernel_mode("triton")``,
checks the Triton result against the tensor program's (data checks on), then times both with
the data checks off and prints a markdown table: ms of each path, the speedup, the achieved
GB/s of the bytes the op must move (TFLOP/s for HSTU: the causal half of the products) and its
fraction of the device's peak (``PEAKS`` by ``torch.cuda.get_device_name``).  A kernel that is
not there yet (its module or function missing) is an ``absent`` row, one that fails an
``error`` row, one whose call took no Triton launch a ``fallback`` row: never a crash.

``--quick``: tiny shapes, one repeat (``TRITON_INTERPRET=1 python bench/device_check.py
--device cpu --quick`` runs the kernels in Triton's interpreter: tests/triton/
test_device_check.py).  ``--out FILE``: also write the table there.  Whole run < 5 minutes.
``--compile cuda:90``: no device at all: each kernel compiled for that target instead
(bench/triton_compile.py).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, not the repository
    sys.path.insert(0, str(ROOT))

from bench.triton_probes import PROBES, Built, Probe  # noqa: E402  (the probes import nothing yet)

__all__ = ["PEAKS", "PROBES", "Probe", "import_kernels", "main", "max_error", "run_probe"]
# (HBM bytes/s, dense bf16 FLOP/s) by a substring of torch.cuda.get_device_name, first match
PEAKS = (
    ("H200", 4.8e12, 989e12),
    ("H100 PCIe", 2.0e12, 756e12),
    ("H100", 3.35e12, 989e12),
    ("H800", 3.35e12, 989e12),
    ("A100", 2.0e12, 312e12),
    ("A800", 2.0e12, 312e12),
    ("L40S", 0.864e12, 362e12),
    ("A10", 0.6e12, 125e12),
    ("4090", 1.0e12, 165e12),
    ("V100", 0.9e12, 125e12),
)


def import_kernels() -> None:
    """Make ``fbgemm_npu``'s leaf modules importable without running any package
    ``__init__`` (``fbgemm_npu/__init__.py`` imports fbgemm_gpu and registers every op): each
    package is pre-seeded as a bare module whose ``__path__`` is its folder.  Nothing is done
    when ``fbgemm_npu`` is imported already (``python -m bench triton``)."""
    if "fbgemm_npu" in sys.modules:
        return
    for init in sorted((ROOT / "fbgemm_npu").rglob("__init__.py")):
        folder = init.parent
        name = ".".join(folder.relative_to(ROOT).parts)
        module = types.ModuleType(name)
        module.__path__ = [str(folder)]
        module.__package__ = name
        module.__file__ = str(init)
        sys.modules[name] = module


def _tensors(x: Any) -> list[Any]:
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in _tensors(item)]
    return []


def max_error(got: Any, want: Any) -> float:
    """The largest difference of two results (nested tensors), relative to ``want``'s scale
    for floats; inf where shapes, dtypes or the structure differ."""
    import torch

    a, b = _tensors(got), _tensors(want)
    if len(a) != len(b):
        return math.inf
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape or x.dtype != y.dtype:
            return math.inf
        if x.numel() == 0:
            continue
        x, y = x.detach().double().cpu(), y.detach().double().cpu()
        scale = max(float(y.abs().max()), 1.0) if y.dtype.is_floating_point else 1.0
        worst = max(worst, float(torch.nan_to_num((x - y).abs(), nan=math.inf).max()) / scale)
    return worst


def _snapshot(x: Any) -> Any:
    return [t.detach().clone() for t in _tensors(x)]


def _sync(dev: Any) -> None:
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _time(fn: Callable[[], Any], dev: Any, repeats: int) -> float:
    """Mean ms of ``fn`` over ``repeats`` calls (after the compare's warm calls)."""
    _sync(dev)
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    _sync(dev)
    return (time.perf_counter() - t0) / repeats * 1e3


def _launches(built: Built, dev: Any) -> tuple[Any, list[str] | None]:
    """``built.run()`` (after a warm call and its reset) under the counters where they work
    on ``dev``."""
    if built.reset:
        built.reset()
    built.run()  # the first call fills caches (and compiles): not counted
    try:
        from fbgemm_npu.testing.counters import count

        if built.reset:
            built.reset()
        with count(dev.type) as c:
            out = built.run()
        return out, c.launch_ops
    except Exception:  # the counters are a convenience here: run it again uncounted
        if built.reset:
            built.reset()
        return built.run(), None


def run_probe(probe: Probe, dev: Any, quick: bool, repeats: int) -> dict[str, Any]:
    """One row: status, times, speedup, rate and fraction of peak, launches of both paths."""
    from fbgemm_npu.native._pending import check
    from fbgemm_npu.native._triton import kernel_mode

    row: dict[str, Any] = {"op": probe.op, "config": probe.quick if quick else probe.config}
    try:
        built = probe.build(dev, quick)
    except (ImportError, AttributeError) as e:  # that family's kernel is not committed yet
        return {**row, "status": f"absent ({type(e).__name__}: {e})"[:90]}
    except Exception as e:
        return {**row, "status": f"error building: {type(e).__name__}: {e}"[:90]}
    results, counts = {}, {}
    try:
        for mode in ("tensor", "triton"):
            with kernel_mode(mode):
                out, counts[mode] = _launches(built, dev)
            results[mode] = _snapshot(out)
            check()  # the data checks of the compared calls: must all pass
        err = max_error(results["triton"], results["tensor"])
        os.environ["FBGEMM_NPU_VALIDATE"] = "0"  # time the kernels alone, both paths alike
        times = {}
        for mode in ("tensor", "triton"):
            with kernel_mode(mode):
                built.run()  # warm (compiled, caches filled) outside the timing
                times[mode] = _time(built.run, dev, repeats)
    except Exception as e:
        return {**row, "status": f"error: {type(e).__name__}: {e}"[:120]}
    finally:
        os.environ.pop("FBGEMM_NPU_VALIDATE", None)
    fused = counts.get("triton")
    n_fused = None if fused is None else sum(n.startswith("triton.") for n in fused)
    status = "ok" if err <= built.tol else f"MISMATCH {err:.2e}"
    if n_fused == 0:
        status = "fallback (no Triton launch)"
    row.update(status=status, err=err, ms_tensor=times["tensor"], ms_triton=times["triton"])
    row["speedup"] = times["tensor"] / max(times["triton"], 1e-9)
    row["launches"] = "/".join("?" if counts.get(m) is None else str(len(counts[m]))
                               for m in ("tensor", "triton"))  # fmt: skip
    secs = times["triton"] / 1e3
    row["rate"] = (built.flops * 2 / secs / 1e12, "TFLOP/s") if built.flops else (
        built.nbytes / secs / 1e9, "GB/s")  # fmt: skip
    row["work"] = built.flops * 2 if built.flops else built.nbytes
    return row


def peaks(dev: Any) -> tuple[str, float | None, float | None]:
    import torch

    if dev.type != "cuda":
        return f"{dev.type} (interpreter)", None, None
    name = torch.cuda.get_device_name(dev)
    for key, bw, flops in PEAKS:
        if key in name:
            return name, bw, flops
    return name, None, None


def table(rows: list[dict[str, Any]], dev: Any) -> str:
    name, bw, flops = peaks(dev)
    lines = [
        f"Device: {name}; peaks: {bw / 1e12 if bw else '?'} TB/s, "
        f"{flops / 1e12 if flops else '?'} TFLOP/s bf16.  Times: mean of the calls, data checks "
        "off; launches: tensor / triton path (the compared call, data checks on).",
        "",
        "| op | config | status | tensor ms | triton ms | speedup | triton rate | % peak | "
        "launches |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "ms_triton" not in r:
            lines.append(f"| {r['op']} | {r['config']} | {r['status']} |  |  |  |  |  |  |")
            continue
        value, unit = r["rate"]
        peak = (
            (flops * 1e-12)
            if unit == "TFLOP/s" and flops
            else (bw * 1e-9 if bw and unit == "GB/s" else None)
        )
        frac = f"{100 * value / peak:.1f}%" if peak else "?"
        lines.append(
            f"| {r['op']} | {r['config']} | {r['status']} | {r['ms_tensor']:.3f} | "
            f"{r['ms_triton']:.3f} | {r['speedup']:.2f}x | {value:.3g} {unit} | {frac} | "
            f"{r['launches']} |"
        )
    return "\n".join(lines) + "\n"


def _compile_only(target: str, only: str, out: Path | None) -> int:
    os.environ.pop("TRITON_INTERPRET", None)  # kernels decorated for the compiler
    import_kernels()
    from bench.triton_compile import compile_rows

    rows = compile_rows([p for p in PROBES if only in p.op], target)
    text = f"Compiled for {target} (no device; quick shapes' signatures).\n\n| op | status |\n"
    text += "|---|---|\n" + "".join(f"| {r['op']} | {r['status']} |\n" for r in rows)
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return 1 if any(r["status"].startswith("COMPILE ERROR") for r in rows) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/device_check.py", description=__doc__)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (interpreter)")
    parser.add_argument("--quick", action="store_true", help="tiny shapes, one repeat")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--only", default="", help="run the probes whose name contains this")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    parser.add_argument(
        "--compile",
        metavar="TARGET",
        default=None,
        help="no device: compile every kernel for TARGET (cuda:90, cuda:80, hip:gfx942) on the "
        "probes' CPU calls instead of running them (bench/triton_compile.py)",
    )
    args = parser.parse_args(argv)
    if args.compile:
        return _compile_only(args.compile, args.only, args.out)
    if args.device == "cpu":  # before any kernel module is imported: Triton reads it then
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import_kernels()
    import torch

    dev = torch.device(args.device)
    repeats = 1 if args.quick else args.repeats
    rows = []
    t0 = time.perf_counter()
    for probe in PROBES:
        if args.only not in probe.op:
            continue
        print(f"[{time.perf_counter() - t0:6.1f}s] {probe.op}", file=sys.stderr, flush=True)
        rows.append(run_probe(probe, dev, args.quick, repeats))
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    text = table(rows, dev)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    bad = [r for r in rows if r["status"].startswith(("MISMATCH", "error"))]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
