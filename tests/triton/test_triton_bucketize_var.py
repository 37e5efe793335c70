"""The fused Triton path of the block bucketize ops with variable blocks
(``block_bucketize_pos``; ``bucketize/_triton_block.py``) under the interpreter: outputs equal to
the tensor program and upstream's CPU kernel with exact budgets per label, the cases only the
tensor program judges (ids below the first boundary, where upstream's CPU kernel writes out of
bounds; ``block_sizes`` 0 with ``total_num_blocks``, where its CPU and CUDA kernels differ; ids
over the whole int64 range; one feature: no ``cat``), and unsorted boundaries failing the
kernels' check.  The uniform blocks: ``test_triton_bucketize.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.native._triton import kernel_mode
from fbgemm_npu.testing import bucketize_inputs as bi
from fbgemm_npu.testing.budgets import assert_triton_budget, budget_of
from fbgemm_npu.testing.counters import count

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")

F = torch.ops.fbgemm
I32, I64 = torch.int32, torch.int64
SIZE = (3, 4)  # features x batch: 12 rows
POS_LABELS = [p for p in budget_of(bi.BLOCK).triton if "block_bucketize_pos" in p]
LABELS = [(bi.BLOCK, p) for p in POS_LABELS] + [
    (bi.BLOCK_INFERENCE, "block_bucketize_pos + every option"),
    (bi.BLOCK_2D, "total_num_blocks + block_bucketize_pos"),
]


@pytest.mark.parametrize(("op", "label"), LABELS, ids=[f"{o[8:]}-{p}" for o, p in LABELS])
def test_parity_and_budget(op: str, label: str) -> None:
    """Triton == tensor program == upstream CPU, in exactly the budget's launches."""
    extra = {"return_bucket_mapping": True} if op == bi.BLOCK_INFERENCE else {}
    kw = bi.block_kwargs(op, label, *SIZE, **extra)
    fn = getattr(F, op.split("::")[1])
    got: list[Any] = []
    assert_triton_budget(lambda: got.append(fn(**kw)), op, label)
    with kernel_mode("tensor"):
        bi.assert_same_outputs(got[0], fn(**kw))
    cpu = {k: bi.on_device(v, "cpu") for k, v in kw.items()}
    cpu = {k: v.contiguous() if isinstance(v, torch.Tensor) else v for k, v in cpu.items()}
    up = fn(**cpu)
    bi.assert_same_outputs(got[0][: len(up)], tuple(up))


def _pos(rows: list[list[int]], dtype: torch.dtype = I32) -> list[torch.Tensor]:
    return [torch.tensor(r, dtype=dtype) for r in rows]


VAR = {  # variable blocks, judged by the tensor program (upstream's CPU kernel writes out of
    # bounds below the first boundary and differs from its CUDA one where b == 0)
    "below first": {"block_bucketize_pos": _pos([[2, 4, 9], [0, 15], [5, 20, 30], [0, 1, 60]])},
    "b == 0 total": {
        "block_sizes": torch.tensor([0, 15, 0, 20], dtype=I32),
        "total_num_blocks": torch.tensor([4, 2, 6, 8], dtype=I32),
        "block_bucketize_pos": _pos([[0, 3, 9, 12, 40], [0, 15], [0, 5, 7, 9], [0, 30]]),
    },
    "full range int64": {
        "indices": torch.tensor(
            [2**63 - 1, -(2**63), -1, 0, 9, 10, 29, 30, 39, 40, 79, 80, 2**40, -7, 5], dtype=I64
        ),
        "block_sizes": torch.tensor([5, 0, 10, 2**40], dtype=I64),
        "total_num_blocks": torch.tensor([2, 3, 4, 6], dtype=I64),
        "block_bucketize_pos": _pos([[0, 2**62], [-5, -1], [0, 9, 2**40], [3, 7, 11]], I64),
    },
    "one feature": {
        "lengths": torch.tensor([2, 1, 3, 2, 3, 3, 1], dtype=I32),
        "indices": torch.arange(15, dtype=I32) * 7 - 20,
        "block_sizes": torch.tensor([5], dtype=I32),
        "block_bucketize_pos": _pos([[0, 10, 40, 70]]),
        "my_size": 3,
    },
}


@pytest.mark.parametrize("case", list(VAR), ids=list(VAR))
def test_variable_blocks(case: str) -> None:
    kw = bi.docs_example(**VAR[case])
    with kernel_mode("triton"), count("npu") as c:
        got = F.block_bucketize_sparse_features(**kw)
    fbgemm_npu.check()
    cats = 0 if len(kw["block_bucketize_pos"]) == 1 else 1
    assert len(_fused_of(c)) == 3 and c.launches == 4 + cats, c.summary()
    with kernel_mode("tensor"):
        bi.assert_same_outputs(got, F.block_bucketize_sparse_features(**kw))


def _fused_of(c: Any) -> list[str]:
    return [n for n in c.launch_ops if n.startswith("triton.")]


def test_unsorted_boundaries_fail_the_check() -> None:
    kw = bi.docs_example(block_bucketize_pos=_pos([[0, 9], [0, 15], [8, 5, 30], [0, 1]]))
    with kernel_mode("triton"):
        with pytest.raises(RuntimeError, match="'block_bucketize_pos' must hold each feature's"):
            F.block_bucketize_sparse_features(**kw)
            fbgemm_npu.check()
