"""The sequence family's launch, AI-CPU and sync budgets, read from its ``budgets.py``.

multislice_concat with 1 and 4 outputs (1 launch per output + the upload), reverse_sequence at
two sizes, in every dtype, with the data checks off and on: 0 AI-CPU launches, 0 syncs.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

NPU = "npu"
M = torch.ops.mxrec
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)


def _multislice(outputs: int, dtype: torch.dtype) -> Callable[[], object]:
    x = (torch.randn(64, 40, device=NPU) * 9).to(dtype)
    sizes = [3] * outputs
    begins = [(7 * j) % 39 for j in range(3 * outputs)]
    return lambda: M.multislice_concat(x, outputs, sizes, begins, [1] * (3 * outputs))


def _reverse(b: int, s: int, dtype: torch.dtype, ldt: torch.dtype) -> Callable[[], object]:
    x = (torch.randn(b, s, 8, device=NPU) * 9).to(dtype)
    lens = torch.randint(0, s + 1, (b,), device=NPU, dtype=ldt)
    return lambda: M.reverse_sequence(x, lens)


@pytest.mark.parametrize("validate", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_multislice_budget(dtype: torch.dtype, validate: bool, monkeypatch) -> None:
    if not validate:
        monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
    for outputs in (1, 4):
        fn = _multislice(outputs, dtype)
        fn()
        c = assert_op_budget(fn, "mxrec::multislice_concat", units=outputs, exact=True)
        assert c.ai_cpu == 0 and c.syncs == 0 and c.stalls == 0, (c.launch_ops, c.sync_ops)


@pytest.mark.parametrize("validate", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ldt", [torch.int32, torch.int64])
def test_reverse_budget(dtype: torch.dtype, ldt: torch.dtype, validate: bool, monkeypatch) -> None:
    if not validate:
        monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
    for b, s in ((1, 1), (64, 300)):
        fn = _reverse(b, s, dtype, ldt)
        fn()
        c = assert_op_budget(fn, "mxrec::reverse_sequence", exact=True)
        assert c.ai_cpu == 0 and c.syncs == 0, (c.launch_ops, c.sync_ops)


def test_every_op_of_the_family_is_measured() -> None:
    pairs = [("mxrec::multislice_concat", None), ("mxrec::reverse_sequence", None)]
    assert_every_path_measured("sequence", pairs)
