"""The fuzz tests' session report: the outcome tally per family (fbgemm_npu/testing/fuzz.py)."""

from __future__ import annotations

import os

import pytest

from fbgemm_npu.testing import fuzz


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = fuzz.report()
    if not lines:
        return
    terminalreporter.section("fuzz: crashes / hangs / wrong results per family")
    for line in lines:
        terminalreporter.write_line(line)
    for family, failures in sorted(fuzz.FAILURES.items()):
        for text in failures[:5]:
            terminalreporter.write_line(f"  {family}: {text[:300]}")
    path = os.environ.get("FBGEMM_NPU_FUZZ_REPORT")
    if path:
        fuzz.write_report(path)
