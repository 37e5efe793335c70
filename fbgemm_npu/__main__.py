"""``python -m fbgemm_npu [info]``: versions, the device in use, and what is covered on which key;
``python -m fbgemm_npu docs [--check]``: (re)write or check ``docs/ops.md``.

The coverage table is printed from the registrar's own table (``fbgemm_npu._registry.REGISTRY``),
so it shows what this process really registered, not what a document claims (docs/design.md rule
2): per op its dispatch keys, its family package and its budget (the family's ``budgets.py``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import sys
from collections.abc import Sequence

# Columns of the coverage table: the only keys the registrar accepts (docs/design.md rule 1;
# CPU / AutogradCPU only for ops whose schema a family defines, the mxrec:: ones)
COVERAGE_KEYS: tuple[str, ...] = (
    "PrivateUse1", "AutogradPrivateUse1", "CPU", "AutogradCPU", "Meta",
)  # fmt: skip
MARK_OURS = "x"
MARK_UPSTREAM = "upstream"  # we offered a kernel but upstream already had one, so theirs is used


def _dist_version(*dists: str) -> str | None:
    """Installed version of the first distribution found among ``dists``, else ``None``."""
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _torch_npu_version() -> str:
    if importlib.util.find_spec("torch_npu") is None:
        return "not installed"
    return _dist_version("torch_npu", "torch-npu") or "installed (version unknown)"


def _torchrec_version() -> str:
    """torchrec's version, and whether it imports; imported only here, lazily, and guarded.

    torchrec is installed with ``--no-deps`` (it declares the CUDA fbgemm-gpu), so a missing
    requirement shows up only at import time: report that instead of failing.
    """
    if importlib.util.find_spec("torchrec") is None:
        return "not installed"
    version = _dist_version("torchrec") or "unknown version"
    try:
        import torchrec  # noqa: F401  - only to prove it imports
    except Exception as exc:  # any import-time failure is worth reporting, not raising
        return f"{version} (import fails: {type(exc).__name__}: {exc})"
    return version


def _device_line(kind: str) -> str:
    """``"simulated (1 device)"`` and the like; the count only where an npu backend is loaded."""
    if kind not in ("real", "simulated"):
        return f"{kind} (set FBGEMM_NPU_SIMULATE=1 to use the simulated npu device)"
    import torch

    npu = getattr(torch, "npu", None)
    count_fn = getattr(npu, "device_count", None)
    if count_fn is None:
        return f"{kind} (device count unavailable: torch.npu.device_count is missing)"
    try:
        count = int(count_fn())
    except Exception as exc:  # a broken backend should not hide the rest of the report
        return f"{kind} (device count failed: {type(exc).__name__}: {exc})"
    return f"{kind} ({count} device{'s' if count != 1 else ''})"


def versions() -> list[tuple[str, str]]:
    """(component, version) rows for the ``info`` report; imports fbgemm_npu (and so upstream)."""
    import torch

    import fbgemm_npu

    fbgemm_gpu_version = getattr(sys.modules.get("fbgemm_gpu"), "__version__", None)
    return [
        ("python", sys.version.split()[0]),
        ("torch", torch.__version__),
        ("torch_npu", _torch_npu_version()),
        ("fbgemm_gpu", fbgemm_gpu_version or _dist_version("fbgemm-gpu-cpu", "fbgemm-gpu") or "?"),
        ("torchrec", _torchrec_version()),
        ("fbgemm_npu", fbgemm_npu.__version__),
        ("device", _device_line(fbgemm_npu.device_kind())),
        ("triton", _dist_version("triton", "triton-ascend") or "not installed"),
        ("kernels", _kernels_line()),
    ]


def _kernels_line() -> str:
    """The kernel mode (docs/design.md "Fused kernels") and how Triton would run on npu."""
    import torch

    from fbgemm_npu.native import _triton

    try:
        mode = _triton.mode()
    except ValueError as exc:
        return str(exc)
    name = torch._C._get_privateuse1_backend_name()
    backend = {
        "native": "native (auto and triton use it)",
        "interpreter": "interpreter (FBGEMM_NPU_KERNEL=triton only)",
    }.get(_triton.backend_for(torch.device(name)) or "", "none (tensor programs)")
    return f"{_triton.ENV}={mode}; Triton on {name}: {backend}"


def coverage_table() -> list[str]:
    """Lines of the coverage table: one row per op, a column per dispatch key, a total line."""
    from fbgemm_npu._registry import REGISTRY
    from fbgemm_npu.catalogue import budget_cells

    rows = REGISTRY.coverage()
    name_width = max([len("op"), *(len(op) for op, _ in rows)])
    widths = [max(len(k), len(MARK_UPSTREAM)) for k in COVERAGE_KEYS]
    tail = ("family", "launches+checks", "syncs")

    def line(cells: Sequence[str], extra: Sequence[str]) -> str:
        head = cells[0].ljust(name_width)
        rest = "  ".join(c.center(w) for c, w in zip(cells[1:], widths, strict=True))
        return f"{head}  {rest}  {extra[0]:<24} {extra[1]:<16} {extra[2]}".rstrip()

    rule = ["-" * name_width, *("-" * w for w in widths)]
    out = [line(["op", *COVERAGE_KEYS], tail), line(rule, ["-" * 24, "-" * 16, "-" * 5])]
    totals = dict.fromkeys(COVERAGE_KEYS, 0)
    for op, keys in rows:
        cells = []
        for key in COVERAGE_KEYS:
            if key in keys:
                cells.append(MARK_OURS)
                totals[key] += 1
            elif (op, key) in REGISTRY.skipped:
                cells.append(MARK_UPSTREAM)
            else:
                cells.append("")
        family = REGISTRY.families.get(op, "?").removeprefix("fbgemm_npu.native.")
        launches, checks, syncs, *_, per, _paths, _triton, _target, _note = budget_cells(
            REGISTRY.budgets.get(op)
        )
        unit = "" if per in ("call", "") else f"/{per}"
        out.append(line([op, *cells], [family, f"{launches}{unit}+{checks}", syncs]))
    summary = ", ".join(f"{k} {totals[k]}" for k in COVERAGE_KEYS)
    out.append(f"total: {len(rows)} op{'s' if len(rows) != 1 else ''}; {summary}")
    out.append(
        f"legend: {MARK_OURS} = registered by fbgemm_npu; "
        f"{MARK_UPSTREAM} = upstream's kernel kept (docs/design.md rule 1); "
        "budgets per call from each family's budgets.py (docs/ops.md explains them)"
    )
    return out


def info() -> int:
    """Print the ``info`` report; returns the exit status."""
    rows = versions()
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    print()
    print("coverage (ops registered by fbgemm_npu, per dispatch key):")
    for text in coverage_table():
        print(f"  {text}")
    from fbgemm_npu._registry import REGISTRY
    from fbgemm_npu.seed_ops import seed_table

    print()
    print("Rec SDK's operator lists (the seed documents), and what serves each:")
    for text in seed_table(set(REGISTRY.kernels)):
        print(f"  {text}")
    from fbgemm_npu.coverage import coverage_lines

    print()
    print("upstream's CPU build (fbgemm_gpu), op by op: served / internal / out of scope:")
    for text in coverage_lines():
        print(f"  {text}")
    return 0


def docs(check: bool) -> int:
    """Write ``docs/ops.md`` from the registrar, or with ``check`` report whether it is current."""
    import fbgemm_npu  # noqa: F401  - registers every family
    from fbgemm_npu.catalogue import OPS_MD, render

    text = render()
    current = OPS_MD.read_text() if OPS_MD.exists() else None
    if check:
        if current != text:
            print(f"{OPS_MD} is stale: run `python -m fbgemm_npu docs`", file=sys.stderr)
            return 1
        print(f"{OPS_MD} is current")
        return 0
    OPS_MD.parent.mkdir(parents=True, exist_ok=True)
    OPS_MD.write_text(text)
    print(f"wrote {OPS_MD}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m fbgemm_npu``; ``info`` is the default subcommand."""
    parser = argparse.ArgumentParser(
        prog="python -m fbgemm_npu",
        description="fbgemm_npu: FBGEMM operators on Huawei Ascend NPUs.",
    )
    sub = parser.add_subparsers(dest="command", metavar="{info,docs}")
    sub.add_parser("info", help="versions, device in use, op coverage and budgets (the default)")
    docs_parser = sub.add_parser("docs", help="write docs/ops.md from the registrar")
    docs_parser.add_argument("--check", action="store_true", help="fail if docs/ops.md is stale")
    args = parser.parse_args(argv)
    if args.command in (None, "info"):
        return info()
    if args.command == "docs":
        return docs(args.check)
    parser.error(f"unknown command {args.command!r}")  # unreachable: argparse rejects it first
    return 2


if __name__ == "__main__":
    sys.exit(main())
