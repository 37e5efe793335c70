"""Spec for ``fbgemm::int_nbit_split_embedding_codegen_lookup_function``: the inference TBE.

Inputs: 1 to 4 tables built by upstream's ``IntNBitTableBatchedEmbeddingBagsCodegen`` on the CPU
(rows padded to 16 bytes, random rows, scales and biases: ``fbgemm_npu/testing/
op_samples_inference.py``), each of type FP32, FP16, FP8, INT8, INT4 or INT2 (mixed freely), D
from 8 to 32 in steps of 8 (one D for pooling NONE), 1 to 20 rows; 0 to 5 bags per table of 0 to
5 indices with -1 (pruned) drawn in every table but the FP8 ones (upstream's FP8 kernel stops at
a -1: tests/fbgemm/inference/test_inference_errors.py) and none with INT8 output (upstream leaves
those rows unwritten); SUM / MEAN / NONE, weighted or not (NONE reads no weights), int32 / int64
indices, output FP32 / FP16 / BF16 (INT8 for NONE over INT8 tables).  BF16 weight tables are
not in the matrix: upstream's module cannot build one (``unpadded_row_size_in_bytes`` has no
``bf16`` entry: a KeyError) and ours refuses SparseType 5 by name.  The layout's
host values are registered as the npu module registers them (no read-back).  Oracle: upstream's
CPU kernel.  Tolerances: float32 rtol 1e-5 / atol 1e-5 (upstream's FMAs and summation order
against ours), float16 1e-3, bfloat16 1e-2 (one unit in the last place of the same float32
sums); uint8 (INT8 rows copied) exact.  Budget: ``nobag_worst`` / ``worst``, the paths with
every type and extra at once (each named path is measured in test_inference_budgets.py).
"""

from __future__ import annotations

from typing import Any

import torch
from fbgemm_gpu.split_embedding_configs import SparseType as S
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from fbgemm_npu.split_table import register_host_values
from fbgemm_npu.testing.op_samples_inference import lookup_case

F = torch.ops.fbgemm
OP = "fbgemm::int_nbit_split_embedding_codegen_lookup_function"
LAYOUT = ("D_offsets", "weights_offsets", "weights_tys", "weights_placements")
TYPES = (S.FP32, S.FP16, S.FP8, S.INT8, S.INT4, S.INT2)


def _op(**kw: Any) -> torch.Tensor:
    host = kw.pop("host")
    if kw["dev_weights"].device.type != "cpu":
        for name in LAYOUT:  # what the npu module registers from its host lists
            register_host_values(kw[name], host[name])
    return F.int_nbit_split_embedding_codegen_lookup_function(**kw)


def _case(tys: list, dims: list, **kw: Any) -> dict[str, Any]:
    _, kwargs = lookup_case(tys, dims, **kw)
    T, off = len(tys), kwargs["offsets"]
    B = (off.numel() - 1) // T
    for t, ty in enumerate(tys):  # -1 (a pruned row) in every table but the FP8 ones
        if ty == S.FP8 and B > 0:
            part = kwargs["indices"][int(off[t * B]) : int(off[(t + 1) * B])]
            part.clamp_(min=0)
    kwargs["host"] = {name: kwargs[name].tolist() for name in LAYOUT}
    return kwargs


@st.composite
def _inputs(draw: st.DrawFn) -> dict[str, Any]:
    T = draw(st.integers(1, 4))
    tys = [draw(st.sampled_from(TYPES)) for _ in range(T)]
    pooling = draw(st.sampled_from((0, 1, 2)))
    if pooling == 2:
        dims = [draw(st.sampled_from((8, 16, 24, 32)))] * T
    else:
        dims = [draw(st.sampled_from((8, 16, 24, 32))) for _ in range(T)]
    outputs = [S.FP32, S.FP16, S.BF16] + ([S.INT8] if pooling == 2 and set(tys) == {S.INT8} else [])
    output = draw(st.sampled_from(outputs))
    return _case(
        tys,
        dims,
        B=draw(st.integers(0, 5)),
        rows=draw(st.integers(1, 20)),
        pooling=pooling,
        output=output,
        weighted=draw(st.booleans()),  # NONE reads no weights (upstream's and ours)
        index_dtype=draw(st.sampled_from((torch.int32, torch.int64))),
        minus_one=output != S.INT8,
        max_len=draw(st.integers(0, 5)),
        seed=draw(st.integers(0, 2**16)),
    )


def _budget(**kw: Any) -> BudgetUse:
    return BudgetUse(op=OP, path="nobag_worst" if kw["pooling_mode"] == 2 else "worst")


EXAMPLES = (
    _case([S.INT8, S.INT8], [8, 8]),
    # every weight type, one table each, pruned rows (-1) in all but FP8's, weighted MEAN
    _case(list(TYPES), [8, 16, 24, 32, 8, 16], pooling=1, weighted=True, B=4, seed=3),
    _case(list(TYPES), [16] * 6, pooling=2, output=S.FP16, index_dtype=torch.int32, seed=4),
    _case([S.INT4, S.INT2, S.FP16], [8, 16, 32], pooling=1, weighted=True, output=S.FP16),
    _case([S.FP32, S.INT8], [8, 8], pooling=2, output=S.BF16, index_dtype=torch.int32),
    _case([S.INT8], [16], pooling=2, output=S.INT8, minus_one=False),
    _case([S.FP8, S.INT4], [8, 24], minus_one=False, weighted=True),
    _case([S.INT8, S.FP16], [8, 8], B=0),  # no bags
    _case([S.INT8], [8], max_len=0),  # bags, no indices
)

SPECS = [
    OpSpec(
        # "[inference]": `pytest conformance -k inference` selects the family's spec
        name="int_nbit_split_embedding_codegen_lookup_function[inference]",
        op=_op,
        inputs=_inputs(),
        compare=Compare(
            {
                torch.float32: Tol(1e-5, 1e-5),
                torch.float16: Tol(1e-3, 1e-3),
                torch.bfloat16: Tol(1e-2, 1e-2),
            }
        ),
        budget=_budget,
        examples=EXAMPLES,
    )
]
