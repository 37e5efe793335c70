"""The jagged family's launch and sync budgets, read from its ``budgets.py`` (written once there).

Every op the family registers and every path of its budget is measured here, at two sizes (the
count must not depend on them), with the data checks off (the kernel alone: ``launches`` /
``paths``) and on (the default: plus ``checks``, or the path's ``path_checks``), each call after
a warm-up call (the first one fills the cached ``arange`` and scalars, ``native/_index.py``).
Every count must equal its budget, both ways, and no launch may take a 910B's AI CPU
(``Budget.ai_cpu``): the offsets (stacked: lengths) are int64 and, with the checks on, int32
too; the ops that fill padding also run on int64 values (their ``int64_values`` paths: the fill
is the dtype-dependent step).  :func:`test_each_further_jagged_dim_costs_one_index_level` reads from
the table how the counts grow with the jagged dims.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget, budget_of
from fbgemm_npu.testing.jagged_inputs import dims_path, jagged, nested, nested_lengths, to_npu

F = torch.ops.fbgemm
NPU = "npu"
SIZES = ((4, 3, 2), (128, 64, 128))  # (B, max_len, D): the counts must not depend on them
DIMS = (1, 2, 3)
ELEMENTWISE = (
    "jagged_dense_elementwise_add",
    "jagged_dense_elementwise_mul",
    "jagged_dense_elementwise_mul_forward",
    "jagged_dense_elementwise_add_jagged_output",
    "jagged_dense_elementwise_mul_backward",
    "jagged_dense_dense_elementwise_add_jagged_output",
    "jagged_dense_dense_elementwise_add_jagged_output_forward",
)
MATMUL = (
    "batched_dense_vec_jagged_2d_mul",
    "batched_dense_vec_jagged_2d_mul_forward",
    "batched_dense_vec_jagged_2d_mul_backward",
)

Size = tuple[int, int, int]
Call = Callable[[], Any]


I64, I32 = torch.int64, torch.int32


@dataclass(frozen=True)
class Case:
    """One measured path: ``make(size, index, values)`` builds the inputs on npu (offsets or
    lengths of dtype ``index``, values of dtype ``values`` where the op takes any) and returns
    the call."""

    op: str  # the name in torch.ops.fbgemm
    path: str | None
    make: Callable[[Size, torch.dtype, torch.dtype], Call]
    sized: bool = True
    index: torch.dtype = I64
    values: torch.dtype = torch.float32

    @property
    def qualname(self) -> str:
        return f"fbgemm::{self.op}"

    def call(self, size: Size) -> Call:
        return self.make(size, self.index, self.values)

    def __str__(self) -> str:
        dtypes = [str(t).removeprefix("torch.") for t in (self.index, self.values)]
        return f"{self.op}[{self.path or 'main'}]-{'-'.join(dtypes)}"


def _strided(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values in transposed memory: no view flattens it (built before the count)."""
    return t.transpose(0, 1).contiguous().transpose(0, 1)


def _batch(
    size: Size, k: int, index: torch.dtype = I64, values: torch.dtype = torch.float32
) -> tuple[torch.Tensor, list[torch.Tensor], list[int]]:
    """Values, offsets and dense lengths of ``k`` jagged dims on npu."""
    b, max_len, d = size
    if k == 1:
        v, offsets = jagged(b, max_len, d, index=index)
        return to_npu(v.to(values)), [to_npu(offsets)], [max_len]
    v, offsets = nested(b, dims=k, index=index)
    return to_npu(v.to(values)), to_npu(offsets), nested_lengths(k)


def _dense(values: torch.Tensor, lengths: list[int], b: int, strided: bool = False) -> Any:
    dense = torch.randn(b, *lengths, values.size(-1), device=NPU)
    return _strided(dense) if strided else dense


def _to_dense(op: str, k: int, size: Size, index: torch.dtype, values: torch.dtype) -> Call:
    v, offsets, lengths = _batch(size, k, index, values)
    fn = getattr(F, op)
    if op == "jagged_1d_to_dense":
        v1 = v[:, 0].contiguous()
        return lambda: fn(v1, offsets[0], lengths[0], 0)
    if op == "jagged_2d_to_dense":
        return lambda: fn(v, offsets[0], lengths[0])
    return lambda: fn(v, offsets, lengths, -1.0)


def _to_jagged(
    op: str, k: int, strided: bool, sized: bool, size: Size, index: torch.dtype, _: torch.dtype
) -> Call:
    v, offsets, lengths = _batch(size, k, index)
    dense, fn = _dense(v, lengths, size[0], strided), getattr(F, op)
    total = v.size(0) if sized else None
    return lambda: fn(dense, offsets, total)


def _elementwise(
    op: str,
    k: int,
    strided: bool,
    two_dtypes: bool,
    size: Size,
    index: torch.dtype,
    values: torch.dtype,
) -> Call:
    v, offsets, lengths = _batch(size, k, index, values)
    y, fn = _dense(v, lengths, size[0], strided), getattr(F, op)
    if "dense_dense" in op:
        y_1 = _dense(v, lengths, size[0], strided).half() if two_dtypes else y
        return lambda: fn(v, offsets, y, y_1)
    if op.endswith("_mul_backward"):
        grad = torch.randn_like(v)
        return lambda: fn(grad, offsets, y, v)
    return lambda: fn(v, offsets, y)


def _matmul(op: str, size: Size, index: torch.dtype, _: torch.dtype) -> Call:
    b, max_len, d = size
    v, offsets, _ = _batch(size, 1, index)
    vec = torch.randn(b * 2, max_len, device=NPU)  # H = 2 heads
    a = torch.randn(v.size(0), 2 * d, device=NPU)
    fn = getattr(F, op)
    if op.endswith("_backward"):
        grad = torch.randn(b * 2, d, device=NPU)
        return lambda: fn(grad, vec, a, offsets[0])
    return lambda: fn(vec, a, offsets[0])


def _stacked(op: str, size: Size, index: torch.dtype, dtype: torch.dtype) -> Call:
    b, max_len, d = size
    lengths = torch.randint(0, max_len + 2, (5, b), device=NPU, dtype=index)
    offset_per_key = [0, *torch.cumsum(lengths.sum(1), 0).tolist()]
    values = torch.randn(offset_per_key[-1], d, device=NPU).to(dtype)
    if op == "stacked_jagged_1d_to_dense":
        values = values[:, 0].contiguous()
    fn = getattr(F, op)
    return lambda: fn(values, lengths, offset_per_key, [max_len] * 5, 0)


def _dims_cases(
    op: str,
    make: Callable[..., Call],
    *args: Any,
    more: tuple[str, ...] = (),
    sized: bool = True,
    values: torch.dtype = torch.float32,
) -> list[Case]:
    """One case per number of jagged dims: ``make(op, k, *args, size, index, values)``."""
    return [
        Case(op, dims_path(k, *more), partial(make, op, k, *args), sized, values=values)
        for k in DIMS
    ]


def _cases() -> list[Case]:
    cases = []
    for op in ("jagged_to_padded_dense", "jagged_to_padded_dense_forward"):
        cases += _dims_cases(op, _to_dense)
        cases += _dims_cases(op, _to_dense, more=("int64_values",), values=I64)
    for op in ("jagged_1d_to_dense", "jagged_2d_to_dense"):
        cases.append(Case(op, None, partial(_to_dense, op, 1)))
        cases.append(Case(op, "int64_values", partial(_to_dense, op, 1), values=I64))
    op = "jagged_to_padded_dense_backward"
    cases.append(Case(op, "strided_grad_output", partial(_to_jagged, op, 1, True, True)))
    cases += _dims_cases(op, _to_jagged, False, True)
    for op in ("dense_to_jagged", "dense_to_jagged_forward"):
        for sized, more in ((True, ()), (False, ("no_total_L",))):
            make = partial(_to_jagged, op, 1, True, sized)
            cases.append(Case(op, dims_path(1, "strided_dense", *more), make, sized))
            cases += _dims_cases(op, _to_jagged, False, sized, more=more, sized=sized)
    for op in ELEMENTWISE:
        cases += _dims_cases(op, _elementwise, False, False)
        if "int64_values" in budget_of(f"fbgemm::{op}").paths:  # add: x's padding filled
            cases += _dims_cases(op, _elementwise, False, False, more=("int64_values",), values=I64)
        if "strided_y" in budget_of(f"fbgemm::{op}").paths:
            cases.append(Case(op, "strided_y", partial(_elementwise, op, 1, True, False)))
        if "dense_dense" in op:  # y_0 and y_1 of two dtypes: each scattered on its own
            cases += _dims_cases(op, _elementwise, False, True, more=("two_dtypes",))
            path = "two_dtypes_strided_y"  # both strided: each copied
            cases.append(Case(op, path, partial(_elementwise, op, 1, True, True)))
    for op in MATMUL:
        cases.append(Case(op, None, partial(_matmul, op)))
    for op in ("stacked_jagged_1d_to_dense", "stacked_jagged_2d_to_dense"):
        cases.append(Case(op, None, partial(_stacked, op)))
        cases.append(Case(op, "int32_lengths", partial(_stacked, op), index=I32))
        cases.append(Case(op, "int64_values", partial(_stacked, op), values=I64))
    return cases


CASES = _cases()
# The int32 twins of every int64 case (stacked: its int32_lengths path), measured with the
# checks on (the kernel included): the same counts.
TWINS = [replace(c, index=I32) for c in CASES if c.index == I64 and not c.op.startswith("stacked")]


def _measure(case: Case, sizes: tuple[Size, ...] = SIZES) -> list[int]:
    counts = []
    for i, size in enumerate(sizes):
        call = case.call(size)
        if i == 0:
            call()  # warm-up: the first call fills the caches (sized for the larger call too)
        c = assert_op_budget(call, case.qualname, path=case.path, sized=case.sized, exact=True)
        # no host stall but the data check's own (``_assert_async`` until checks are deferred)
        stalls = [s for r in c.calls for s in r.stalls]
        assert c.ai_cpu == 0 and all("_assert_async" in s for s in stalls), (stalls, c.summary())
        counts.append(c.launches)
    assert len(set(counts)) == 1, f"{case}: the count depends on the size: {counts}"
    return counts


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: Case, no_validation: None) -> None:
    _measure(case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: Case) -> None:
    _measure(case)


@pytest.mark.parametrize("case", TWINS, ids=str)
def test_budget_of_other_dtypes(case: Case) -> None:
    """The same counts, none on the AI CPU, for int32 offsets (one size: the int64 cases show
    the count does not depend on it)."""
    _measure(case, SIZES[:1])


# ops whose budgets other files measure (each asserts it measures every path of its ops)
EXTRA_MEASURED = {
    "test_jagged_softmax_bmm_budgets.py": (
        "jagged_softmax",
        "jagged_softmax_forward",
        "jagged_softmax_backward",
        "jagged_jagged_bmm",
        "jagged_jagged_bmm_forward",
        "jagged_dense_bmm",
        "jagged_dense_bmm_forward",
    ),
    # slicing.py, select.py, accumulate.py, pack.py: every path (that file asserts it)
    "test_jagged_more_budgets.py": (
        "jagged_slice",
        "jagged_slice_forward",
        "masked_select_jagged_1d",
        "jagged_1d_to_truncated_values",
        "jagged_acc_weights_and_counts",
        "jagged_hash_size_cumsum",
        "pack_segments",
        "pack_segments_v2",
        "pack_segments_backward",
    ),
}


def test_every_op_and_path_of_the_family_is_measured() -> None:
    extra = [
        (f"fbgemm::{op}", path)
        for ops in EXTRA_MEASURED.values()
        for op in ops
        for path in (None, *budget_of(f"fbgemm::{op}").paths)
    ]
    assert_every_path_measured("jagged", [(c.qualname, c.path) for c in CASES] + extra)


# upstream's composites (CompositeImplicitAutograd; our autograd kernel only) and their forward
COMPOSITES = {"jagged_to_padded_dense": _to_dense, "dense_to_jagged": _to_jagged}


@pytest.mark.parametrize("composite", sorted(COMPOSITES))
@pytest.mark.parametrize("k", DIMS)
def test_composite_ops_cost_their_forward_op(composite: str, k: int) -> None:
    """On npu the composite is its forward op: the same launches, nothing more, and the
    counters see the forward op's call only."""
    make = COMPOSITES[composite]
    args = (k,) if make is _to_dense else (k, False, True)
    qualname = f"fbgemm::{composite}_forward"
    for size in SIZES:
        call = make(composite, *args, size, I64, torch.float32)
        call()  # warm-up
        c = assert_op_budget(call, qualname, path=dims_path(k), exact=True)
        assert not c.missing_kernels, c.missing_kernels
        assert [r.op for r in c.calls] == [f"fbgemm.{composite}_forward.default"], c.summary()


def _by_dims(qualname: str) -> dict[str, tuple[list[int], list[int]]]:
    """Per group of ``qualname``'s paths with 1, 2 and 3 jagged dims (named by what follows the
    dims: ``""``, ``"no_total_L"``, ``"two_dtypes"``), read from the table: the launches with the
    checks off and the checks' launches, for 1, 2 and 3 jagged dims."""
    entry, three = budget_of(qualname), str(dims_path(3))
    out = {}
    for path in entry.paths:
        if path.startswith(three):
            more = path.removeprefix(three).removeprefix("_")
            paths = [dims_path(k, *([more] if more else [])) for k in DIMS]
            kernel = [entry.launch_limit(False, path=p) for p in paths]
            on = [entry.launch_limit(True, path=p) for p in paths]
            out[more] = (kernel, [n - k for n, k in zip(on, kernel, strict=True)])
    return out


def test_each_further_jagged_dim_costs_one_index_level() -> None:
    """Read from the table (held exact both ways by the tests above): with the checks off each
    further jagged dim adds one step, the same on every path of every op (a further level of the
    dense index they share) and twice that on the ``two_dtypes`` paths, which build the index
    once per dense input; the data check grows by the same step with each dim in every op, and
    starts one launch higher for a gather than for a scatter (whose padding rows are marked
    already): two bases, both present.  The ops that return the offsets copy each further
    offsets tensor too: one launch more per dim, not in the checks."""
    steps, checks = {}, {}
    for qualname in sorted({c.qualname for c in CASES}):
        for more, (kernel, check) in _by_dims(qualname).items():
            key, times = (qualname, more), 2 if more.startswith("two_dtypes") else 1
            kernel = [n - k * _returns_offsets(qualname) for n, k in zip(kernel, DIMS, strict=True)]
            step = kernel[1] - kernel[0]
            assert kernel[2] - kernel[1] == step > 0, (key, kernel)
            assert check[0] < check[1] < check[2], (key, check)
            assert step % times == 0 and all(c % times == 0 for c in check), (key, kernel, check)
            steps[key], checks[key] = step // times, tuple(c // times for c in check)
    assert len({op for op, _ in steps}) > 1 and "two_dtypes" in {m for _, m in steps}, steps
    assert len(set(steps.values())) == 1, steps
    growth = {(c[1] - c[0], c[2] - c[1]) for c in checks.values()}
    assert len(growth) == 1 and len(next(iter(growth))) == 2, checks
    bases = sorted({c[0] for c in checks.values()})
    assert len(bases) == 2 and bases[1] - bases[0] == 1, checks


def _returns_offsets(qualname: str) -> bool:
    """Whether the op returns copies of its offsets (``-> (Tensor, Tensor[])``): one clone per
    jagged dim; upstream's composite dense_to_jagged returns the input offsets themselves."""
    if qualname == "fbgemm::dense_to_jagged":
        return False
    schema = getattr(F, qualname.split("::")[1]).default._schema
    return len(schema.returns) == 2 and str(schema.returns[1].type) == "List[Tensor]"


def test_dense_to_jagged_without_total_l_reads_the_length_back(no_validation: None) -> None:
    """The one sync is the read of ``offsets[-1].max()``, the output length, as upstream's."""
    case = next(c for c in CASES if c.op == "dense_to_jagged_forward" and c.path == "no_total_L")
    call = case.call(SIZES[0])
    call()  # warm-up
    c = assert_op_budget(call, case.qualname, path=case.path, sized=False, exact=True)
    assert "aten.amax.default" in c.launch_ops or "aten.max.default" in c.launch_ops, c.launch_ops
    assert len(c.sync_ops) == c.syncs and all("_local_scalar_dense" in s for s in c.sync_ops)
