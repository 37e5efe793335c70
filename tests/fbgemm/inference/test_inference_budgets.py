"""The inference family held to its BUDGETS table (``native/fbgemm/inference/budgets.py``).

The lookup is measured at two sizes (B = 4 and 256 bags per feature, rows of 7 and 500), with
the data checks off and on: the count must be the table's exactly whatever the size, 0 AI-CPU
and 0 syncs (the layout's host values are seeded, as the npu module seeds them; a layout never
seen costs one read on its first call: test_inference_layout_read_once).  Paths: the main one
is two INT8 tables of one D, SUM, float32 output; the others change one thing each, but
``worst`` / ``nobag_worst``: every weight type and every extra at once, the ceilings the
conformance spec holds its drawn calls to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import SparseType as S

from fbgemm_npu.split_table import register_host_values
from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget
from fbgemm_npu.testing.op_samples_inference import lookup_case, to_device

F = torch.ops.fbgemm
OP = "fbgemm::int_nbit_split_embedding_codegen_lookup_function"
SIZES = ((4, 7), (256, 500))
MIXED = [S.FP32, S.FP16, S.INT8, S.INT4, S.INT2]
CASES: dict[str | None, dict[str, Any]] = {
    None: dict(tys=[S.INT8, S.INT8], dims=[8, 8]),
    "fp32": dict(tys=[S.FP32, S.FP32], dims=[8, 8]),
    "fp16": dict(tys=[S.FP16, S.FP16], dims=[8, 8]),
    "int4": dict(tys=[S.INT4, S.INT4], dims=[8, 8]),
    "fp8": dict(tys=[S.FP8, S.FP8], dims=[8, 8]),
    "wide": dict(tys=[S.INT8, S.INT8], dims=[8, 16]),
    "weighted": dict(tys=[S.INT8, S.INT8], dims=[8, 8], weighted=True),
    "mean": dict(tys=[S.INT8, S.INT8], dims=[8, 8], pooling=1),
    "fp16_out": dict(tys=[S.INT8, S.INT8], dims=[8, 8], output=S.FP16),
    "bf16_out": dict(tys=[S.INT8, S.INT8], dims=[8, 8], output=S.BF16),
    "nobag": dict(tys=[S.INT8, S.INT8], dims=[8, 8], pooling=2),
    "nobag_mixed": dict(tys=MIXED, dims=[8] * 5, pooling=2),
    "mixed": dict(tys=MIXED, dims=[8, 16, 32, 8, 16]),
    "uvm": dict(tys=[S.INT8, S.INT8], dims=[8, 8], uvm=True),
    "no_index": dict(tys=[S.INT8, S.INT8], dims=[8, 8], max_len=0),  # bags, every one empty
    # the ceilings the conformance matrix holds any call to: every type, each extra
    "worst": dict(
        tys=[*MIXED, S.FP8],
        dims=[8, 16, 32, 8, 16, 24],
        weighted=True,
        pooling=1,
        output=S.BF16,
        minus_one=False,
    ),
    "nobag_worst": dict(
        tys=[*MIXED, S.FP8], dims=[8] * 6, pooling=2, output=S.BF16, minus_one=False
    ),
}


def _call(path: str | None, B: int, rows: int) -> Callable[[], Any]:
    case = dict(CASES[path])
    uvm = case.pop("uvm", False)
    args, kwargs = lookup_case(B=B, rows=rows, **case)
    if uvm:  # feature 1 reads uvm_weights (placement MANAGED): the two buffers are joined
        start = int(kwargs["weights_offsets"][1])
        kwargs["uvm_weights"] = kwargs["dev_weights"][start:].clone()
        kwargs["weights_offsets"] = torch.tensor([0, 0])
        kwargs["weights_placements"] = torch.tensor([3, 1], dtype=torch.int32)
    args, kwargs = to_device((args, kwargs), "npu")
    for name in ("D_offsets", "weights_offsets", "weights_tys", "weights_placements"):
        t = kwargs[name]
        register_host_values(t, t.cpu().tolist())
    return lambda: F.int_nbit_split_embedding_codegen_lookup_function(*args, **kwargs)


def _measure(path: str | None) -> None:
    for B, rows in SIZES:
        call = _call(path, B, rows)
        call()  # warm the caches (native/_index.py, the plan) at this size
        c = assert_op_budget(call, OP, path=path, exact=True)
        assert c.ai_cpu == 0


@pytest.mark.parametrize("path", list(CASES), ids=str)
def test_budget_with_the_checks_off(path: str | None, no_validation: None) -> None:
    _measure(path)


@pytest.mark.parametrize("path", list(CASES), ids=str)
def test_budget_with_the_checks_on(path: str | None) -> None:
    _measure(path)


def test_every_path_is_measured() -> None:
    assert_every_path_measured("inference", [(OP, p) for p in CASES])
