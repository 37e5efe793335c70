"""``python -m bench ops [--family F] [--repeats N] [--out FILE.md]``; ``python -m bench tbe``;
``python -m bench hstu [--max-seq-len N]``; ``python -m bench inference [--quick]``;
``python -m bench triton``.

The benchmarks follow the kernels' family tree: ``bench/<namespace>/<family>.py`` benchmarks
``fbgemm_npu/native/<namespace>/<family>/`` (``bench/fbgemm/jagged.py``, ...) and exports
``CASES: list[Case]`` (:mod:`bench.harness`).  ``ops`` runs every family's cases (or those whose
family matches ``--family``), prints the table and writes it to ``--out``.  ``tbe`` runs the TBE
lookup benchmark of ``bench/fbgemm/tbe.py``, which is a measurement of its own, not a table of
cases; ``hstu`` the HSTU attention benchmark of ``bench/mxrec/hstu.py`` (ours against a naive
full-materialisation reference), another; ``inference`` the IntNBit TBE lookup of
``bench/fbgemm/inference.py`` (INT8 / INT4 / FP16 rows, ours on npu vs upstream on CPU), another;
``triton`` the launch counts of both paths of each fused Triton kernel (``bench/fused.py``; its
timings on a GPU: ``python bench/device_check.py``).
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import sys
from pathlib import Path

from bench.harness import Case, machine, run_case, table

BENCH = Path(__file__).resolve().parent
RESULTS = Path("bench/results")
# The module of ``python -m bench tbe``; it exports ``main``, not ``CASES``.
TBE_MODULE = "bench.fbgemm.tbe"
# The module of ``python -m bench hstu``; it exports ``add_arguments`` and ``main``.
HSTU_MODULE = "bench.mxrec.hstu"
# The module of ``python -m bench inference``; it exports ``main``, not ``CASES``.
INFERENCE_MODULE = "bench.fbgemm.inference"


def family_modules() -> list[str]:
    """Every family benchmark module, ``bench.<namespace>.<family>``: each public ``.py`` file of
    each package folder under bench/ (adding a family's benchmark is adding a file)."""
    return sorted(
        f"bench.{ns.name}.{module.stem}"
        for ns in BENCH.iterdir()
        if (ns / "__init__.py").is_file() and not ns.name.startswith("_")
        for module in ns.glob("*.py")
        if not module.name.startswith("_")
    )


def _cases() -> list[Case]:
    out: list[Case] = []
    for modname in family_modules():
        if modname in (TBE_MODULE, HSTU_MODULE, INFERENCE_MODULE):
            continue
        cases = getattr(importlib.import_module(modname), "CASES", None)
        if cases is None:
            raise SystemExit(f"bench: {modname} exports no CASES")
        out.extend(cases)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    ops = sub.add_parser("ops", help="the op families: ours vs upstream on CPU")
    ops.add_argument("--family", default="*", help="fnmatch pattern on the family name")
    ops.add_argument("--repeats", type=int, default=15)
    ops.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the report file (default bench/results/ops.md, for a run of every family only: a "
        "--family run prints its rows and leaves the full table alone unless --out is given)",
    )
    tbe = sub.add_parser("tbe", help="TBE lookup (rowwise AdaGrad): ours vs upstream on CPU")
    tbe.add_argument("--repeats", type=int, default=10)
    tbe.add_argument("--out", type=Path, default=Path("bench/results/tbe.md"))
    hstu = sub.add_parser("hstu", help="HSTU attention: ours vs a naive reference on the npu")
    importlib.import_module(HSTU_MODULE).add_arguments(hstu)
    inference = sub.add_parser(
        "inference", help="IntNBit TBE lookup: ours on npu vs upstream on CPU"
    )
    inference.add_argument("--repeats", type=int, default=10)
    inference.add_argument("--out", type=Path, default=Path("bench/results/inference.md"))
    inference.add_argument("--quick", action="store_true", help="a small size, printed only")
    triton = sub.add_parser("triton", help="fused Triton kernels: launches of both paths per op")
    triton.add_argument("--out", type=Path, default=Path("bench/results/triton.md"))
    for p in (ops, tbe, hstu, inference, triton):
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
        tbe_bench = importlib.import_module(TBE_MODULE)
        return tbe_bench.main(args.repeats, args.out, threads=args.threads)
    if args.what == "inference":
        inference_bench = importlib.import_module(INFERENCE_MODULE)
        return inference_bench.main(args.repeats, args.out, quick=args.quick)
    if args.what == "triton":
        return importlib.import_module("bench.fused").main(args.out)
    if args.what == "hstu":
        return importlib.import_module(HSTU_MODULE).main(args)

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
        f"{args.threads} thread(s), median of {args.repeats}, on {machine()} at the end of the "
        "run.  Device cost: one call on npu, counted (launches; AI-CPU: those a 910B runs on its "
        "AI CPU; syncs + stalls: host waits, a stall one only a 910B has; MB moved) and priced: "
        '910B us, the projected time of the call (docs/hardware.md, "Cost model").\n\n'
        + table(rows)
    )
    print(text)
    out = args.out or (RESULTS / "ops.md" if args.family == "*" else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
