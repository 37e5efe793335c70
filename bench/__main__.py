"""``python -m bench ops [--family F] [--repeats N] [--out FILE.md]``; ``python -m bench tbe``.

The benchmarks follow the kernels' family tree: ``bench/<namespace>/<family>.py`` benchmarks
``fbgemm_npu/native/<namespace>/<family>/`` (``bench/fbgemm/jagged.py``, ...) and exports
``CASES: list[Case]`` (:mod:`bench.harness`).  ``ops`` runs every family's cases (or those whose
family matches ``--family``), prints the table and writes it to ``--out``.  ``tbe`` runs the TBE
lookup benchmark of ``bench/fbgemm/tbe.py``, which is a measurement of its own, not a table of
cases.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import sys
from pathlib import Path
from types import ModuleType

from bench.harness import Case, run_case, table

BENCH = Path(__file__).resolve().parent
# The module of ``python -m bench tbe``; it exports ``main``, not ``CASES``.
TBE_MODULE = "bench.fbgemm.tbe"
# Until every family has moved to bench/<namespace>/<family>.py, the old flat names still count.
LEGACY_TBE_MODULE = "bench.tbe"
LEGACY_PREFIX = "ops_"


def _public_modules(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_"))


def family_modules() -> list[str]:
    """Every family benchmark module: ``bench.<namespace>.<family>`` for each package folder
    under bench/, then any ``bench.ops_<family>`` not moved yet."""
    found: list[str] = []
    moved: set[str] = set()
    for ns in sorted(p for p in BENCH.iterdir() if (p / "__init__.py").is_file()):
        if ns.name.startswith("_"):
            continue
        for name in _public_modules(ns):
            found.append(f"bench.{ns.name}.{name}")
            moved.add(name)
    for name in _public_modules(BENCH):
        family = name.removeprefix(LEGACY_PREFIX)
        if name.startswith(LEGACY_PREFIX) and family not in moved:
            found.append(f"bench.{name}")
    return found


def _cases() -> list[Case]:
    out: list[Case] = []
    for modname in family_modules():
        if modname == TBE_MODULE:
            continue
        cases = getattr(importlib.import_module(modname), "CASES", None)
        if cases is None:
            raise SystemExit(f"bench: {modname} exports no CASES")
        out.extend(cases)
    return out


def _tbe_module() -> ModuleType:
    if (BENCH / "fbgemm" / "tbe.py").is_file():
        return importlib.import_module(TBE_MODULE)
    return importlib.import_module(LEGACY_TBE_MODULE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    ops = sub.add_parser("ops", help="the op families: ours vs upstream on CPU")
    ops.add_argument("--family", default="*", help="fnmatch pattern on the family name")
    ops.add_argument("--repeats", type=int, default=15)
    ops.add_argument("--out", type=Path, default=Path("bench/results/ops.md"))
    tbe = sub.add_parser("tbe", help="TBE lookup (rowwise AdaGrad): ours vs upstream on CPU")
    tbe.add_argument("--repeats", type=int, default=10)
    tbe.add_argument("--out", type=Path, default=Path("bench/results/tbe.md"))
    for p in (ops, tbe):
        p.add_argument(
            "--threads",
            type=int,
            default=1,
            help="intra-op CPU threads for both sides (default 1: on a shared 2-core machine more "
            "threads add noise, not speed, and both sides get the same)",
        )
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    if args.what == "tbe":
        return _tbe_module().main(args.repeats, args.out, threads=args.threads)

    from fbgemm_npu.testing import simulate

    kind = simulate()
    cases = [c for c in _cases() if fnmatch.fnmatch(c.family, args.family)]
    if not cases:
        print("bench: no case matches", file=sys.stderr)
        return 2
    rows = []
    for i, case in enumerate(cases, 1):
        print(f"[{i}/{len(cases)}] {case.family}/{case.name}", file=sys.stderr, flush=True)
        rows.append(run_case(case, repeats=args.repeats))
    text = (
        f"npu device: {kind}; times are CPU wall times of both kernels on the same CPU tensors, "
        f"{args.threads} thread(s), median of {args.repeats}; launches/syncs are one call on "
        "npu.\n\n" + table(rows)
    )
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
