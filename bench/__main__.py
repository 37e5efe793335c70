"""``python -m bench ops [--family F] [--repeats N] [--out FILE.md]``; ``python -m bench tbe``.

Each module ``bench/ops_<family>.py`` exports ``CASES: list[Case]``; this runs them all (or those
whose family matches ``--family``), prints the table and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import pkgutil
import sys
from pathlib import Path

from bench.harness import Case, run_case, table


def _cases(prefix: str) -> list[Case]:
    import bench

    out: list[Case] = []
    for info in sorted(pkgutil.iter_modules(bench.__path__), key=lambda m: m.name):
        if info.name.startswith(prefix):
            out.extend(importlib.import_module(f"bench.{info.name}").CASES)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    ops = sub.add_parser("ops", help="section-1 op families: ours vs upstream on CPU")
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
        from bench import tbe as tbe_bench

        return tbe_bench.main(args.repeats, args.out, threads=args.threads)

    from fbgemm_npu.testing import simulate

    kind = simulate()
    cases = [c for c in _cases("ops_") if fnmatch.fnmatch(c.family, args.family)]
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
