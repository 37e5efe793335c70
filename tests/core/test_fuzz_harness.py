"""The fuzz harness (fbgemm_npu/testing/fuzz.py) tells every outcome apart.

Without this, "0 crashes, 0 hangs, 0 wrong" from tests/fuzz could come from a harness that cannot
see them: each failure kind is provoked on purpose (fbgemm_npu/testing/fuzz_references.py) and
must be classified as itself, and the worker must serve the next case after a crash or a hang.
"""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.testing import fuzz
from fbgemm_npu.testing.fuzz import Case, On, Worker

REF = "fbgemm_npu.testing.fuzz_references:"


@pytest.fixture(scope="module")
def worker() -> Worker:
    w = Worker()
    yield w
    w.stop()


def _kind(worker: Worker, case: Case) -> str:
    return worker.run(case)[0]


def test_equal_and_layouts_on_npu(worker: Worker) -> None:
    t = torch.arange(12, dtype=torch.int64).view(3, 4).t()  # transposed storage
    assert _kind(worker, Case("fbgemm::asynchronous_inclusive_cumsum", (t,))) == "equal"
    e = torch.arange(4, dtype=torch.int64)[:1].expand(5)  # stride 0
    assert _kind(worker, Case("fbgemm::asynchronous_complete_cumsum", (e,))) == "equal"


def test_wrong_results_and_wrong_updates_are_wrong(worker: Worker) -> None:
    t = torch.ones(3)
    assert _kind(worker, Case(REF + "selftest_wrong", (t,))) == "wrong"
    assert _kind(worker, Case(REF + "selftest_in_place", (t,))) == "wrong"


def test_an_output_aliasing_an_input_is_wrong(worker: Worker) -> None:
    """Unless the schema declares the alias (docs/design.md: no output aliases an input)."""
    assert _kind(worker, Case(REF + "selftest_leak", (torch.ones(3),))) == "wrong"
    assert _kind(worker, Case(REF + "selftest_leak", (torch.ones(0),))) == "equal"  # no memory


def test_errors_must_name_op_and_argument(worker: Worker) -> None:
    t = torch.ones(3)
    clear = Case(REF + "selftest_error", (t, "selftest_error: t must be 1-D"), expect="error")
    assert _kind(worker, dataclass_replace(clear, names=("t",))) == "clear_error"
    assert _kind(worker, dataclass_replace(clear, names=("offsets",))) == "unclear"
    either = dataclass_replace(clear, names=("t",), op_name=("other_op", "selftest_error"))
    assert _kind(worker, either) == "clear_error"
    neither = dataclass_replace(clear, names=("t",), op_name=("other_op", "third_op"))
    assert _kind(worker, neither) == "unclear"
    vague = Case(REF + "selftest_error", (t, "bad input"), expect="error", names=("t",))
    assert _kind(worker, vague) == "unclear"
    assert _kind(worker, dataclass_replace(clear, expect="equal")) == "rejected"


def test_accepting_invalid_input_is_wrong(worker: Worker) -> None:
    t = torch.arange(3, dtype=torch.int64)
    case = Case("fbgemm::asynchronous_complete_cumsum", (t,), expect="error", names=("t_in",))
    assert _kind(worker, case) == "wrong"


def test_crash_and_hang_then_the_next_case_runs(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = torch.ones(2)
    assert _kind(worker, Case(REF + "selftest_crash", (t,))) == "crash"
    assert _kind(worker, Case(REF + "selftest_wrong", (On(t, "cpu"),))) == "equal"
    monkeypatch.setattr(fuzz, "TIMEOUT_S", 2.0)
    assert _kind(worker, Case(REF + "selftest_hang", (t,))) == "hang"
    assert _kind(worker, Case("fbgemm::asynchronous_inclusive_cumsum", (t,))) == "equal"


def dataclass_replace(case: Case, **changes: object) -> Case:
    import dataclasses

    return dataclasses.replace(case, **changes)
