"""The 910B route table (``fbgemm_npu.testing.routes_910b``) and the counters' ai_cpu / stalls.

The facts are docs/hardware.md's ("AI-CPU routes", "Host fallbacks and host stalls"); these tests
check that the counters apply them to what really reaches the device: an int64 ``cumsum`` is an
AI-CPU launch and an int32 one is not, a blocking upload is a stall and a pinned
``non_blocking`` one is not, and an fbgemm op's call record carries its kernel's AI-CPU launches.
None of this changes ``launches`` or ``syncs`` (the budgets stay as they are).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing.counters import Counter, count
from fbgemm_npu.testing.routes_910b import ROUTES, route, stall_reason

aten = torch.ops.aten

pytestmark = pytest.mark.skipif(
    fbgemm_npu.device_kind() == "none", reason="no npu device (tests/conftest.py switches it on)"
)


def _counted(fn: Callable[[], object]) -> Counter:
    with count() as c:
        fn()
    return c


def _i64() -> torch.Tensor:
    return torch.tensor([3, 1, 2, 0, 5], device="npu")


def test_every_row_names_real_aten_ops() -> None:
    # A misspelt packet would silently never match: each must exist in torch's ATen namespace.
    for rule in ROUTES:
        for packet in rule.packets:
            assert hasattr(aten, packet), (packet, rule.why)


@pytest.mark.parametrize(
    ("dtype", "out_dtype", "expected"),
    [
        (torch.int64, None, "ai_cpu"),
        (torch.int32, None, "ai_cpu"),  # an integer input with no dtype= is promoted to int64
        (torch.bool, None, "ai_cpu"),
        (torch.int32, torch.int32, "ai_core"),
        (torch.int32, torch.int64, "ai_cpu"),
        (torch.float32, None, "ai_core"),
        (torch.float16, None, "ai_core"),
    ],
)
def test_cumsum_routes_by_output_dtype(
    dtype: torch.dtype, out_dtype: torch.dtype | None, expected: str
) -> None:
    x = torch.ones(4, dtype=dtype)  # route() reads dtypes only: a CPU tensor will do
    kwargs = {} if out_dtype is None else {"dtype": out_dtype}
    assert route(aten.cumsum.default, (x, 0), kwargs) == expected
    # the out= overload (what cumsum_ becomes) goes by the out tensor's dtype
    out = torch.empty(4, dtype=out_dtype or torch.int32)
    assert route(aten.cumsum.out, (x, 0), {"out": out}) == (
        "ai_cpu" if out.dtype == torch.int64 else "ai_core"
    )


def test_rows_that_read_arguments() -> None:
    i64, i32, f32 = (
        torch.ones(3, dtype=torch.int64),
        torch.ones(3, dtype=torch.int32),
        torch.ones(3),
    )
    idx = torch.zeros(3, dtype=torch.int64)
    assert route(aten.repeat_interleave.Tensor, (i64,), {"output_size": 3}) == "ai_cpu"
    assert route(aten.repeat_interleave.self_int, (f32, 2), {}) == "ai_core"
    assert route(aten.index_add.default, (i64, 0, idx, i64), {}) == "ai_cpu"
    assert route(aten.index_add.default, (f32.double(), 0, idx, f32.double()), {}) == "ai_cpu"
    assert route(aten.index_add.default, (i32, 0, idx, i32), {}) == "ai_core"
    assert route(aten.index_put_.default, (i64, [idx], i64, True), {}) == "ai_cpu"
    assert route(aten.index_put_.default, (i64, [idx], i64), {}) == "ai_core"  # no accumulate
    assert route(aten.index_put_.default, (f32, [idx], f32), {"accumulate": True}) == "ai_core"
    m = torch.ones(2, 3)
    broadcast = [torch.zeros(2, 1, dtype=torch.int64), torch.zeros(1, 3, dtype=torch.int64)]
    assert route(aten.index_put_.default, (m, broadcast, torch.ones(2, 3), True), {}) == "ai_cpu"
    assert route(aten.constant_pad_nd.default, (i64, [1, 0]), {}) == "ai_cpu"
    assert route(aten.constant_pad_nd.default, (i32, [1, 0]), {}) == "ai_core"
    assert route(aten.scatter_.src, (i64, 0, idx, i64), {}) == "ai_cpu"
    assert route(aten.scatter_.src, (f32, 0, idx, f32), {}) == "ai_core"
    assert route(aten._assert_async.msg, (torch.tensor(True), "m"), {}) == "host"
    assert route(aten.add.Tensor, (i64, i64), {}) == "ai_core"
    assert route(torch.ops.fbgemm.asynchronous_complete_cumsum.default, (i64,), {}) == "ai_core"


def test_int64_cumsum_counts_ai_cpu_and_int32_does_not() -> None:
    x = _i64()
    c64 = _counted(lambda: torch.cumsum(x, 0))
    c32 = _counted(lambda: torch.cumsum(x.int(), 0, dtype=torch.int32))
    assert (c64.ai_cpu, c64.launches) == (1, 1), c64.events
    # 2 launches (the cast, the scan), neither on the AI CPU
    assert (c32.ai_cpu, c32.launches) == (0, 2), c32.events
    c_inplace = _counted(lambda: x.clone().cumsum_(0))  # runs as cumsum.out into an int64 self
    assert c_inplace.ai_cpu == 1, c_inplace.events


def test_searchsorted_bucketize_cummax_unique_and_shifts_count_ai_cpu() -> None:
    x = _i64()
    s = x.sort().values
    for fn in (
        lambda: torch.searchsorted(s, x),
        lambda: torch.bucketize(x, s),
        lambda: x.cummax(0),
        lambda: x >> 1,
        lambda: x << 1,
        # not bitwise_left_shift(x, 1): its Tensor_Scalar overload fails under count() (open bug)
        lambda: torch.bitwise_right_shift(x, x),
        lambda: torch.unique(x),
    ):
        c = _counted(fn)
        assert c.ai_cpu == 1, c.events


@pytest.mark.parametrize("op", ["sort", "argsort"])
def test_integer_sort_counts_ai_cpu_and_float_sort_does_not(op: str) -> None:
    x = _i64()
    ci = _counted(lambda: getattr(x, op)())
    xf = x.float()
    cf = _counted(lambda: getattr(xf, op)())
    assert ci.ai_cpu == 1 and ci.launches == 1, ci.events
    assert cf.ai_cpu == 0 and cf.launches == 1, cf.events


def test_int64_masked_fill_counts_ai_cpu_and_int32_does_not() -> None:
    x = _i64()
    mask = x > 1
    x32 = x.int()
    c64 = _counted(lambda: x.masked_fill_(mask, 0))
    c32 = _counted(lambda: x32.masked_fill_(mask, 0))
    assert (c64.ai_cpu, c64.launches) == (1, 1), c64.events
    assert (c32.ai_cpu, c32.launches) == (0, 1), c32.events


def test_assert_async_is_a_stall_not_a_sync() -> None:
    flag = _i64()[0] == 3
    c = _counted(lambda: torch._assert_async(flag))
    assert c.stalls == 1 and c.syncs == 0, c.events
    assert [e.stall for e in c.events] == ["host fallback"]
    assert c.ai_cpu == 0


def test_blocking_uploads_are_stalls() -> None:
    host = torch.arange(4)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("torch.tensor", lambda: torch.tensor([1, 2, 3], device="npu")),
        ("to", lambda: host.to("npu")),
        ("to non_blocking, pageable", lambda: host.to("npu", non_blocking=True)),
        ("to pinned, blocking", lambda: host.pin_memory().to("npu")),
        ("copy_", lambda: torch.empty(4, dtype=torch.int64, device="npu").copy_(host)),
        # inside a kernel (below autograd) .to(npu, dtype) arrives as to.device with the device
        # positional and the tensor on the CPU: still an upload, seen and counted
        ("to.device", lambda: torch.ops.aten.to.device(host, torch.device("npu"), torch.int32)),
    ]
    for label, fn in cases:
        c = _counted(fn)
        # the existing counts are what they were: one launch, no sync
        assert (c.stalls, c.launches, c.syncs) == (1, 1, 0), (label, c.events)


def test_pinned_non_blocking_uploads_are_not_stalls() -> None:
    pinned = torch.arange(4).pin_memory()
    assert pinned.is_pinned()
    dst = torch.empty(4, dtype=torch.int64, device="npu")
    for fn in (
        lambda: pinned.to("npu", non_blocking=True),
        lambda: dst.copy_(pinned, non_blocking=True),
    ):
        c = _counted(fn)
        assert (c.stalls, c.launches, c.syncs) == (0, 1, 0), c.events


def test_device_to_host_reads_stay_syncs_not_stalls() -> None:
    x = _i64()
    c = _counted(lambda: (x.cpu(), x.sum().item()))
    assert c.stalls == 0 and c.syncs == 2, c.events
    assert stall_reason(aten._to_copy.default, (x,), {"device": torch.device("cpu")}, "npu") is None


# A custom op of a test namespace whose npu kernel runs one AI-CPU op (an int64 cumsum) and one
# AI-Core op: our own kernels no longer have such routes, so the attribution tests bring theirs.
_PROBE = torch.library.Library("fbgemm_npu_route_probe", "DEF")
_PROBE.define("probe(Tensor x) -> Tensor")
_PROBE.impl("probe", lambda x: torch.cumsum(x, 0) + 1, "PrivateUse1")


def _probe(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.fbgemm_npu_route_probe.probe(x)


def test_a_custom_op_call_record_carries_its_ai_cpu_launches() -> None:
    lengths = torch.tensor([2, 0, 3], device="npu")  # int64: its cumsum goes to the AI CPU
    with count() as c:
        out = _probe(lengths)
    assert out.tolist() == [3, 3, 6]
    rec = next(r for r in c.calls if r.op.startswith("fbgemm_npu_route_probe.probe"))
    assert rec.ai_cpu == ["aten.cumsum.default"], rec
    assert len(rec.launches) == 2 and c.ai_cpu == 1  # nothing outside the call


def test_nested_calls_are_inclusive_for_ai_cpu_and_stalls() -> None:
    # ai_cpu and stalls follow the same attribution as launches: every open call gets the op.
    x = _i64()
    with count() as c:
        _probe(x)
        torch.cumsum(x, 0)  # outside any call
    calls_ai_cpu = sum(len(r.ai_cpu) for r in c.calls if r.depth == 0)
    assert c.ai_cpu == calls_ai_cpu + 1
    outside = [e for e in c.events if e.call is None and e.ai_cpu]
    assert [e.name for e in outside] == ["aten.cumsum.default"]


def test_a_traced_step_tallies_ai_cpu_launches_and_stalls_by_op() -> None:
    """testing/trace.py (what the main job prints per traced step) reads the same routes."""
    from fbgemm_npu.testing.trace import trace

    lengths = torch.tensor([2, 0, 3], device="npu")  # int64: its cumsum goes to the AI CPU

    def step() -> object:
        return _probe(lengths), torch.arange(3).to("npu")

    rec = trace(step, "npu")
    assert sum(rec.ai_cpu.values()) >= 1 and any("cumsum" in op for op in rec.ai_cpu)
    assert sum(rec.stalls.values()) >= 1  # the blocking upload
    assert "on a 910B: AI-CPU launches" in rec.summary()
