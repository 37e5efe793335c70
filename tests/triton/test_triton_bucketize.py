"""The fused Triton path of the block bucketize ops (``bucketize/_triton_block.py``) under the
interpreter: outputs equal to the tensor program and to upstream's CPU kernel on the paths of the
family's budget table (npu tensors, and CPU tensors through the registered kernel function),
edge cases (empty rows, no indices, ids near the dtype's ends, runs of rows per program), the
data checks computed in the kernels, the launch budget per label (exact) and the fallbacks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.native._triton import kernel_mode
from fbgemm_npu.native.fbgemm.bucketize import bucketize as ours
from fbgemm_npu.testing import bucketize_inputs as bi
from fbgemm_npu.testing.budgets import assert_triton_budget, budget_of
from fbgemm_npu.testing.counters import count

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")
_tb = pytest.importorskip("fbgemm_npu.native.fbgemm.bucketize._triton_block")

F = torch.ops.fbgemm
I32, I64 = torch.int32, torch.int64
SIZE = (3, 4)  # features x batch: 12 rows, tens of interpreter programs


def _captured(op: str, path: str | None, **kw: Any) -> tuple[Callable[[], Any], dict[str, Any]]:
    """A call of ``op`` on the budget path ``path`` and its keyword arguments."""
    args = bi.block_kwargs(op, path, *SIZE, **kw)
    fn = getattr(F, op.split("::")[1])
    return (lambda: fn(**args)), args


def _upstream(op: str, kw: dict[str, Any]) -> tuple[Any, ...]:
    """Upstream's CPU kernel on contiguous CPU copies (it reads raw memory)."""
    cpu = {k: bi.on_device(v, "cpu") for k, v in kw.items()}
    cpu = {k: v.contiguous() if isinstance(v, torch.Tensor) else v for k, v in cpu.items()}
    return getattr(F, op.split("::")[1])(**cpu)


# (op, budget path of the call, Triton label): "call" holds every uniform path but the ceilings
_UNIFORM = [
    p for p in budget_of(bi.BLOCK).paths if "block_bucketize_pos" not in p and "every" not in p
]
LABELS = [(bi.BLOCK, p, "call") for p in [None, *_UNIFORM]] + [
    (bi.BLOCK, "every option", "every option"),
    (bi.BLOCK, "total_num_blocks + every option", "total_num_blocks + every option"),
    (bi.BLOCK_INFERENCE, "every option", "every option"),
    (bi.BLOCK_INFERENCE, "sequence", "call"),
    (bi.BLOCK_2D, None, "call"),
    (bi.BLOCK_2D, "total_num_blocks + every option", "total_num_blocks + every option"),
]


@pytest.mark.parametrize(
    ("op", "path", "label"), LABELS, ids=[f"{o[8:]}-{p}" for o, p, _ in LABELS]
)
def test_parity_and_budget(op: str, path: str | None, label: str) -> None:
    """Triton == tensor program == upstream CPU, in exactly the budget's launches."""
    extra = {"return_bucket_mapping": True} if op == bi.BLOCK_INFERENCE else {}
    fn, kw = _captured(op, path, **extra)
    got: list[Any] = []
    assert_triton_budget(lambda: got.append(fn()), op, label)
    with kernel_mode("tensor"), count("npu") as c:
        ref = fn()
    assert not [n for n in c.launch_ops if n.startswith("triton.")]
    bi.assert_same_outputs(got[0], ref)
    up = _upstream(op, kw)
    bi.assert_same_outputs(got[0][: len(up)], tuple(up))


@pytest.mark.parametrize("label", ["call", "total_num_blocks + every option"])
def test_budget_without_checks(no_validation: None, label: str) -> None:
    fn, _ = _captured(bi.BLOCK, None if label == "call" else label)
    assert_triton_budget(fn, bi.BLOCK, label)


@pytest.mark.parametrize("path", [None, "every option"])
def test_cpu_tensors(path: str | None) -> None:
    """The registered kernel function on CPU tensors (torch.ops on CPU is upstream's)."""
    _, kw = _captured(bi.BLOCK, path)
    cpu = {k: bi.on_device(v, "cpu") for k, v in kw.items()}
    with kernel_mode("triton"):
        got = ours.block_bucketize_sparse_features_npu(**cpu)
    bi.assert_same_outputs(got, tuple(_upstream(bi.BLOCK, kw)))


def _both(kw: dict[str, Any], op: str = bi.BLOCK) -> None:
    """Triton on npu == the tensor program == upstream CPU for the call ``kw``."""
    fn = getattr(F, op.split("::")[1])
    with kernel_mode("triton"), count("npu") as c:
        got = fn(**kw)
    assert [n for n in c.launch_ops if n.startswith("triton.")], c.summary()
    fbgemm_npu.check()
    with kernel_mode("tensor"):
        bi.assert_same_outputs(got, fn(**kw))
    bi.assert_same_outputs(got, tuple(_upstream(op, kw)))


EDGES: dict[str, dict[str, Any]] = {
    "docs": {},
    "my_size 1": {"my_size": 1},
    "my_size 3": {"my_size": 3},
    "my_size 1 total": {"my_size": 1, "total_num_blocks": torch.tensor([2, 3, 1, 4], dtype=I32)},
    "keep_orig_idx": {"keep_orig_idx": True},
    "zero block": {"block_sizes": torch.tensor([0, 15, 0, 20], dtype=I32)},
    "empty rows": {
        "lengths": torch.tensor([0, 0, 0, 7, 0, 8, 0, 0], dtype=I32),
    },
    "no indices": {
        "lengths": torch.zeros(8, dtype=I32),
        "indices": torch.zeros(0, dtype=I32),
    },
    "int32 extremes": {
        "indices": torch.tensor(
            [2**31 - 1, -(2**31), -1, 0, 9, 10, 29, 30, 39, 40, 79, 80, 2**30, -7, 5], dtype=I32
        ),
    },
    "int64 extremes": {
        "indices": torch.tensor(
            [2**63 - 1, -(2**63), -1, 0, 9, 10, 29, 30, 39, 40, 79, 80, 2**40, -7, 5], dtype=I64
        ),
        "block_sizes": torch.tensor([5, 15, 10, 2**40], dtype=I64),
        "lengths": torch.tensor([0, 2, 1, 3, 2, 3, 3, 1], dtype=I64),
    },
    "strided indices": {"indices": torch.arange(30, dtype=I32)[::2].flip(0)},
    "weights f64": {"weights": torch.rand(15, dtype=torch.float64)},
}


@pytest.mark.parametrize("case", list(EDGES), ids=list(EDGES))
def test_edge_cases(case: str) -> None:
    _both(bi.docs_example(**EDGES[case]))


FULL = [(I32, 3, False), (I32, 1, True), (I64, 5, True), (I64, 8, False), (I32, 6, True)]


@pytest.mark.parametrize(("dtype", "p", "total"), FULL, ids=[f"full{i}" for i in range(5)])
def test_full_range_ids(dtype: torch.dtype, p: int, total: bool) -> None:
    """Ids over the whole dtype (half of them negative: huge unsigned values) against
    upstream's unsigned arithmetic, emulated in signed ops here (no unsigned types on a 910B)."""
    gen = torch.Generator().manual_seed(p)
    info = torch.iinfo(dtype)
    lengths = torch.randint(0, 9, (8,), generator=gen, dtype=I32)
    n = int(lengths.sum())
    x = torch.randint(info.min, info.max, (n,), generator=gen, dtype=torch.int64).to(dtype)
    x[:4] = torch.tensor([info.min, info.max, -1, 0], dtype=dtype)
    top = info.max // (4 * p)
    blocks = torch.tensor([top, 7, top // 3 + 1, 1], dtype=dtype)
    kw = {"lengths": lengths, "indices": x, "bucketize_pos": True, "sequence": True}
    kw |= {"block_sizes": blocks, "my_size": p}
    if total:
        kw["total_num_blocks"] = torch.tensor([p, 2 * p, 3 * p, 4 * p], dtype=dtype)
    _both({k: bi.on_device(v, "npu") for k, v in kw.items()})


def test_runs_of_rows_per_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """A grid capped below the rows (as on a large batch): each program walks a run of rows,
    its first start a blocked sum, here across more than one block of lengths."""
    monkeypatch.setattr(_tb, "MAX_PROGRAMS", 3)
    monkeypatch.setattr(_tb, "BLOCK", 16)
    gen = torch.Generator().manual_seed(3)
    lengths = torch.randint(0, 4, (24,), generator=gen, dtype=I32)
    x = torch.randint(-20, 400, (int(lengths.sum()),), generator=gen)
    kw = {"lengths": lengths, "indices": x, "bucketize_pos": True, "sequence": True}
    kw |= {"block_sizes": torch.tensor([50, 30, 70, 20]), "my_size": 5}
    kw |= {"weights": torch.rand(x.numel(), generator=gen)}
    kw |= {"batch_size_per_feature": torch.tensor([7, 5, 0, 12], dtype=I32), "max_B": 12}
    _both({k: bi.on_device(v, "npu") for k, v in kw.items()})
    rows = [[0, 40], [0, 25, 60], [7], [0, 10, 20, 30, 90]]  # variable blocks too
    kw["block_bucketize_pos"] = [torch.tensor(r) for r in rows]
    _both({k: bi.on_device(v, "npu") for k, v in kw.items()})


BAD = [
    ({"lengths": torch.tensor([0, 2, -1, 3, 2, 3, 3, 3], dtype=I32)}, "'lengths' must be non-neg"),
    ({"indices": torch.arange(16, dtype=I32)}, "'lengths' must be non-negative and sum to"),
    ({"indices": torch.arange(14, dtype=I32)}, r"sum to indices.numel\(\) = 14"),
    ({"lengths": torch.tensor([0, 2, 1, 3, 2, 3, 3, 2**31 - 1], dtype=I32)}, "'lengths'"),
    ({"batch_size_per_feature": torch.tensor([1, 3, 2, 1], dtype=I32)}, "'batch_size_per_fe"),
    ({"total_num_blocks": torch.tensor([3, 4, 6, 2], dtype=I32)}, "positive multiples of my_s"),
    ({"block_sizes": torch.tensor([5, -15, 10, 20], dtype=I32)}, "'block_sizes' must be in"),
    ({"block_sizes": torch.tensor([5, 15, 2**30, 20], dtype=I32)}, "'block_sizes' must be in"),
]


@pytest.mark.parametrize(("over", "match"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_data_checks_in_the_kernels(over: dict[str, Any], match: str) -> None:
    """Bad data: the kernels' flag fails the queued check by name, memory stays in bounds."""
    with kernel_mode("triton"), count("npu") as c:
        with pytest.raises(RuntimeError, match=f"block_bucketize_sparse_features: .*{match}"):
            F.block_bucketize_sparse_features(**bi.docs_example(**over))
            fbgemm_npu.check()
    assert len([n for n in c.launch_ops if n.startswith("triton.")]) == 3, c.summary()


def _launches(fn: Callable[[], Any], mode: str) -> list[str]:
    with kernel_mode(mode), count("npu") as c:
        fn()
    return c.launch_ops


def test_auto_and_unsupported_fall_back() -> None:
    main = bi.block_call(bi.BLOCK, None, *SIZE)
    assert not [n for n in _launches(main, "auto") if n.startswith("triton.")]
    big = bi.docs_example(my_size=_tb.MAX_BUCKETS + 1)
    fn = lambda: F.block_bucketize_sparse_features(**big)  # noqa: E731
    assert not [n for n in _launches(fn, "triton") if n.startswith("triton.")]
    empty = bi.docs_example(lengths=torch.zeros(0, dtype=I32), indices=torch.zeros(0, dtype=I32))
    fn = lambda: F.block_bucketize_sparse_features(**empty)  # noqa: E731
    assert not [n for n in _launches(fn, "triton") if n.startswith("triton.")]
