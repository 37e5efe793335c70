"""``python -m conformance``: run the conformance suite with a per-op table and a Markdown report.

    python -m conformance [--ops PATTERN] [--examples N] [--seed S] [--report FILE.md]

PATTERN selects specs whose name contains it or matches it as a glob (``cumsum``,
``*_cumsum``).  Each spec runs its explicit edge-case examples, then N examples drawn by
hypothesis from a fixed seed, so the same command line runs the same inputs.  Exits 1 on any
mismatch or budget breach, 2 when no spec matches.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from tqdm import tqdm

from conformance.harness import CaseResult, OpSpec, run_example


@dataclass
class OpRow:
    """One spec's summary over its examples."""

    name: str
    cases: int = 0
    by_oracle: dict[str, int] = field(default_factory=dict)
    max_abs: float = 0.0
    max_rel: float = 0.0
    launches: int = 0
    syncs: int = 0
    ai_cpu: int = 0
    stalls: int = 0
    unsupported: list[str] = field(default_factory=list)
    failures: int = 0
    first_failure: CaseResult | None = None

    def add(self, r: CaseResult) -> None:
        self.cases += 1
        self.by_oracle[r.oracle] = self.by_oracle.get(r.oracle, 0) + 1
        self.max_abs, self.max_rel = max(self.max_abs, r.max_abs), max(self.max_rel, r.max_rel)
        if r.oracle != "raises":  # an error path launches what it likes before raising
            self.launches, self.syncs = max(self.launches, r.launches), max(self.syncs, r.syncs)
            self.ai_cpu, self.stalls = max(self.ai_cpu, r.ai_cpu), max(self.stalls, r.stalls)
        self.unsupported = list(dict.fromkeys(self.unsupported + r.unsupported))
        if not r.ok or r.over_budget:
            self.failures += 1
            self.first_failure = self.first_failure or r

    @property
    def status(self) -> str:
        if self.first_failure is None:
            return "PASS"
        r = self.first_failure
        return f"FAIL ({self.failures}): {r.spec}({r.inputs}) vs {r.oracle}: {r.message}"


def select(specs: list[OpSpec], pattern: str | None) -> list[OpSpec]:
    if not pattern:
        return list(specs)
    return [s for s in specs if pattern in s.name or fnmatch.fnmatchcase(s.name, pattern)]


def draw_examples(strategy: st.SearchStrategy, n: int, seed_value: int) -> list[object]:
    """``n`` examples of ``strategy``, the same ones for the same seed (generation phase only)."""
    drawn: list[object] = []

    @seed(seed_value)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: object) -> None:
        drawn.append(example)

    collect()
    return drawn


def _fmt(x: float) -> str:
    return "0" if x == 0 else f"{x:.3g}"


def table(rows: list[OpRow], markdown: bool) -> str:
    head = [
        "op",
        "cases",
        "oracle",
        "max abs err",
        "max rel err",
        "launches (max)",
        "syncs (max)",
        "AI-CPU launches (max)",
        "910B stalls (max)",
        "unsupported ATen ops",
        "status",
    ]
    body = [
        [
            r.name,
            str(r.cases),
            ", ".join(f"{k} {v}" for k, v in sorted(r.by_oracle.items())),
            _fmt(r.max_abs),
            _fmt(r.max_rel),
            str(r.launches),
            str(r.syncs),
            str(r.ai_cpu),
            str(r.stalls),
            ", ".join(r.unsupported) or "-",
            r.status,
        ]
        for r in rows
    ]
    if markdown:
        esc = [[c.replace("|", "\\|") for c in line] for line in body]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(line) + " |" for line in esc])
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head) - 1)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    return "\n".join(fmt.format(*line) for line in [head, *body])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance",
        description="Run the conformance suite: fbgemm_npu on npu against upstream fbgemm on CPU.",
    )
    parser.add_argument("--ops", help="substring or glob selecting spec names")
    parser.add_argument("--examples", type=int, default=25, help="examples per spec (25)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (0)")
    parser.add_argument("--report", type=Path, help="also write the table as Markdown here")
    parser.add_argument("--device", default="npu:0", help="device of ours (npu:0)")
    args = parser.parse_args(argv)

    import fbgemm_npu.testing  # before the specs: they look ops up at import

    kind = fbgemm_npu.testing.simulate() if args.device.startswith("npu") else "cpu"
    from conformance.specs import SPECS

    specs = select(SPECS, args.ops)
    if not specs:
        print(f"no spec matches {args.ops!r}; specs: {', '.join(s.name for s in SPECS)}")
        return 2
    rows = []
    total = sum(len(s.examples) for s in specs) + len(specs) * args.examples
    with tqdm(total=total, unit="case", file=sys.stderr) as bar:
        for spec in specs:
            bar.set_description(spec.name)
            row = OpRow(spec.name)
            drawn = draw_examples(spec.inputs, args.examples, args.seed)
            for inputs in [*spec.examples, *drawn]:
                row.add(run_example(spec, inputs, device=args.device))
                bar.update()
            rows.append(row)
    print(table(rows, markdown=False))
    if args.report:
        import fbgemm_gpu
        import torch

        args.report.write_text(
            f"# Conformance report\n\nfbgemm_npu on `{args.device}` ({kind} device) against "
            f"upstream fbgemm-gpu {getattr(fbgemm_gpu, '__version__', '?')} on CPU; torch "
            f"{torch.__version__}; {args.examples} examples per op, seed {args.seed}.\n\n"
            f"{table(rows, markdown=True)}\n",
            encoding="utf-8",
        )
    return 1 if any(r.failures for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
