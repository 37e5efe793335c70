"""The launch/sync counters (``fbgemm_npu.testing.counters``) count what the docstring says.

Every test runs twice: on CPU with ``device_type="cpu"`` (needs no device) and on the npu device
(the simulator here, torch_npu on an Ascend host), where the op budgets (each family's
``budgets.py``, catalogued in docs/ops.md) are enforced.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing import counters, torch_npu_ops
from fbgemm_npu.testing.counters import assert_budget, count, torch_npu_supports

_NS = "fbgemm_npu_test_counters"  # a scratch namespace; nothing of upstream's is touched
_LIB = torch.library.Library(_NS, "FRAGMENT")  # noqa: TOR901 - lives as long as this module
_LIB.define("inner(Tensor x) -> Tensor")
_LIB.define("outer(Tensor x) -> Tensor")
_LIB.define("cpu_only(Tensor x) -> Tensor")
_LIB.define("flat_cumsum(Tensor x) -> Tensor")


def _inner(x: torch.Tensor) -> torch.Tensor:
    return (x + 1) * 2  # 2 launches


def _outer(x: torch.Tensor) -> torch.Tensor:
    ops = getattr(torch.ops, _NS)
    # 2 + 1 (sum) + 2 + 0 (view, select) + 1 (add) = 6 launches, two nested calls
    return ops.inner(x).sum(0) + ops.inner(x).view(-1)[0]


def _flat_cumsum(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x.reshape(-1), 0)  # reshape copies (1 clone) when x is not flattenable


for _key in ("CPU", "PrivateUse1"):
    _LIB.impl("inner", _inner, _key)
    _LIB.impl("outer", _outer, _key)
    _LIB.impl("flat_cumsum", _flat_cumsum, _key)
_LIB.impl("cpu_only", lambda x: x + 1, "CPU")


def _npu_available() -> bool:
    # tests/conftest.py switched the device on (or failed the run): never skip for want of one
    return fbgemm_npu.device_kind() != "none"


@pytest.fixture(params=["cpu", "npu"])
def dev(request: pytest.FixtureRequest) -> str:
    """The device under test; the counted device_type follows it."""
    if request.param == "npu" and not _npu_available():
        pytest.skip("no npu device: torch_npu absent and the simulator could not be built")
    return request.param


def _device_type(dev: str) -> str:
    return "cpu" if dev == "cpu" else "privateuseone"


def _run(dev: str, fn: Callable[[], object]) -> counters.Counter:
    with count(_device_type(dev)) as c:
        fn()
    return c


def test_known_sequence_gives_exact_launch_count(dev: str) -> None:
    x = torch.arange(12.0, device=dev).reshape(3, 4)

    def seq() -> None:
        a = x + 1
        b = a * 2
        b.sum()
        torch.cat([a, b])
        torch.cumsum(x, 0)

    c = _run(dev, seq)
    assert c.launch_ops == [
        "aten.add.Tensor",
        "aten.mul.Tensor",
        "aten.sum.default",
        "aten.cat.default",
        "aten.cumsum.default",
    ]
    assert (c.launches, c.syncs, c.unsupported, c.calls) == (5, 0, [], [])


def test_views_and_allocations_are_not_launches(dev: str) -> None:
    x = torch.arange(12.0, device=dev).reshape(3, 4)

    def views() -> None:
        x.view(4, 3)
        x.t()
        x[1]
        x[:, 1:3]
        x.unsqueeze(0).expand(2, 3, 4)
        x.detach()
        torch.empty(5, device=dev)
        torch.empty_like(x)
        x.new_empty(7)

    c = _run(dev, views)
    assert (c.launches, c.syncs, c.events) == (0, 0, [])


def test_composite_ops_count_as_their_parts(dev: str) -> None:
    x = torch.ones(3, 4, device=dev)
    # zeros_like is not in torch_npu's list but decomposes (empty_like + zero_): one launch, no flag
    c = _run(dev, lambda: torch.zeros_like(x))
    assert (c.launch_ops, c.unsupported) == (["aten.zero_.default"], [])


def test_ops_off_the_counted_device_are_ignored() -> None:
    x = torch.ones(4)
    with count("privateuseone") as c:
        (x + 1).sum().item()
    assert (c.launches, c.syncs, c.events) == (0, 0, [])


@pytest.mark.parametrize(
    "name, fn, launches",
    [
        ("item", lambda x, r: x[0].item(), 0),
        ("nonzero", lambda x, r: x.nonzero(), 1),
        ("bool mask", lambda x, r: x[x > 2], 2),  # gt, then index with a bool mask
        ("unique", lambda x, r: torch.unique(x), 1),
        ("equal", lambda x, r: torch.equal(x, x), 1),
        ("repeat_interleave", lambda x, r: torch.repeat_interleave(x, r), 2),
    ],
)
def test_syncs(dev: str, name: str, fn: Callable, launches: int) -> None:
    x = torch.arange(4.0, device=dev)
    r = torch.tensor([1, 0, 2, 1], device=dev)
    c = _run(dev, lambda: fn(x, r))
    assert c.syncs == 1, c.summary()
    assert c.launches == launches, c.summary()


def test_repeat_interleave_with_output_size_does_not_sync(dev: str) -> None:
    x = torch.arange(4.0, device=dev)
    r = torch.tensor([1, 0, 2, 1], device=dev)
    c = _run(dev, lambda: torch.repeat_interleave(x, r, output_size=4))
    assert c.syncs == 0, c.summary()
    assert c.launch_ops == ["aten.repeat_interleave.Tensor", "aten.index_select.default"]


def test_device_to_host_copy_is_a_sync_and_host_to_device_a_launch(dev: str) -> None:
    if dev == "cpu":
        pytest.skip("a copy between host and device needs a device")
    x = torch.arange(4.0, device=dev)
    c = _run(dev, lambda: (x.cpu(), x.tolist()))
    assert (c.syncs, c.launches) == (2, 0), c.summary()
    assert c.sync_ops == ["aten._to_copy.default (device-to-host copy)"] * 2
    c = _run(dev, lambda: torch.ones(3).to(dev))
    assert (c.syncs, c.launch_ops) == (0, ["aten._to_copy.default"])


def test_op_missing_from_torch_npu_is_flagged(dev: str) -> None:
    listed = torch_npu_ops.ATEN_OPS_FILE.read_text().splitlines()
    assert not any(s.startswith(("logcumsumexp", "_logcumsumexp")) for s in listed)
    assert "cumsum" in listed and "add.Tensor" in listed
    x = torch.arange(4.0, device=dev)
    c = _run(dev, lambda: (torch.logcumsumexp(x, 0), x + 1))
    assert c.unsupported == ["aten._logcumsumexp.default"]
    assert c.launches == 2


def test_torch_npu_supports() -> None:
    aten = torch.ops.aten
    assert torch_npu_supports(aten.add.Tensor) and torch_npu_supports("add.Tensor")
    assert torch_npu_supports(aten.cumsum.default) and torch_npu_supports("aten.cumsum")
    assert not torch_npu_supports(aten._logcumsumexp.default)
    assert not torch_npu_supports("add.Scalar_out")  # not listed: overloads are not mixed up


def test_nested_custom_ops_are_attributed(dev: str) -> None:
    x = torch.ones(2, 3, device=dev)
    c = _run(dev, lambda: getattr(torch.ops, _NS).outer(x))
    outer, inner1, inner2 = c.calls
    assert outer.op == f"{_NS}.outer.default" and outer.depth == 0 and outer.parent is None
    inner_launches = ["aten.add.Tensor", "aten.mul.Tensor"]
    assert outer.launches == [
        *inner_launches,  # the first inner call
        "aten.sum.dim_IntList",
        *inner_launches,  # the second (its view and select launch nothing)
        "aten.add.Tensor",
    ]
    for inner in (inner1, inner2):
        assert inner.op == f"{_NS}.inner.default" and (inner.depth, inner.parent) == (1, 0)
        assert inner.launches == inner_launches
    assert c.launches == 6  # totals count each op once
    assert [e.call for e in c.events] == [1, 1, 0, 2, 2, 0]


def test_composite_implicit_ops_inside_kernels_count_their_parts(dev: str) -> None:
    # Below autograd (inside our kernels) the mode sees reshape itself, a "view" op that copies
    # when the strides do not allow a view: the counter must see the clone.
    x = torch.ones(3, 4, device=dev)
    op = getattr(torch.ops, _NS).flat_cumsum
    assert _run(dev, lambda: op(x)).launch_ops == ["aten.cumsum.default"]
    c = _run(dev, lambda: op(x.t()))
    assert c.launch_ops == ["aten.clone.default", "aten.cumsum.default"]
    assert c.calls[0].launches == c.launch_ops


def test_custom_op_without_device_kernel_is_flagged(dev: str) -> None:
    if dev == "cpu":
        pytest.skip("the scratch op has a CPU kernel")
    x = torch.ones(3, device=dev)
    with count() as c:
        try:
            getattr(torch.ops, _NS).cpu_only(x)
        except (RuntimeError, NotImplementedError):
            pass  # whether the backend fallback runs it is the device's business, not ours
    assert c.unsupported == [f"{_NS}.cpu_only.default (no PrivateUse1 kernel)"]


def test_fbgemm_cumsum_within_budget() -> None:
    if not _npu_available():
        pytest.skip("no npu device: torch_npu absent and the simulator could not be built")
    t = torch.arange(1, 7, device="npu", dtype=torch.int32)
    for op in ("complete", "exclusive", "inclusive"):
        fn = getattr(torch.ops.fbgemm, f"asynchronous_{op}_cumsum")
        c = assert_budget(lambda fn=fn: fn(t), launches=3, syncs=0, unsupported=0)
        assert [r.op for r in c.calls] == [f"fbgemm.asynchronous_{op}_cumsum.default"]


def test_assert_budget_lists_the_ops_when_over(dev: str) -> None:
    x = torch.ones(3, device=dev)
    dt = _device_type(dev)
    c = assert_budget(lambda: (x + 1) * 2, launches=2, syncs=0, device_type=dt)
    assert c.launches == 2 and torch.equal(c.result.cpu(), torch.full((3,), 4.0))
    with pytest.raises(AssertionError) as err:
        assert_budget(lambda: ((x + 1) * 2).sum().item(), launches=2, syncs=0, device_type=dt)
    msg = str(err.value)
    assert "3 launches (budget 2)" in msg and "1 syncs + 0 stalls (budget 0)" in msg
    assert "aten.add.Tensor, aten.mul.Tensor, aten.sum.default" in msg
    assert "aten._local_scalar_dense.default (scalar read to host)" in msg


def test_summary_is_a_table(dev: str) -> None:
    x = torch.ones(2, 3, device=dev)
    c = _run(dev, lambda: (getattr(torch.ops, _NS).outer(x), x.sum()))
    lines = c.summary().splitlines()
    assert lines[0].split() == ["op", "launches", "syncs", "unsupported"]
    assert lines[1].split() == [f"{_NS}.outer.default", "6", "0", "-"]
    assert lines[-2].split() == ["(outside", "calls)", "1", "0", "-"]
    assert lines[-1].split() == ["total", "7", "0", "-"]


def test_tensor_literal_on_device_counts_its_host_to_device_copy() -> None:
    with count() as c:
        torch.tensor([1, 2, 3], device="npu")
    assert c.launches == 1 and c.syncs == 0, c.summary()


def test_a_composite_torch_npu_runs_whole_is_one_launch_and_contiguous_is_counted() -> None:
    """Inside a kernel (below autograd, as the registrar runs ours): ``silu_backward`` (composite
    in ATen, torch_npu's own kernel) counts once; ``contiguous`` (composite, returning an alias)
    counts as the copy it makes, and nothing when it makes none."""
    x = torch.randn(4, 6, device="npu")
    with count("npu") as c, torch._C._AutoDispatchBelowAutograd():
        torch.ops.aten.silu_backward(x, x)
    assert c.launches == 1, [e.name for e in c.events]
    with count("npu") as c, torch._C._AutoDispatchBelowAutograd():
        x.t().contiguous()
    assert c.launches == 1, [e.name for e in c.events]
    with count("npu") as c, torch._C._AutoDispatchBelowAutograd():
        x.contiguous()
    assert c.launches == 0, [e.name for e in c.events]
