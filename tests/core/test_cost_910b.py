"""The 910B cost model (``fbgemm_npu.testing.cost_910b``) and the bytes the counters record for it.

The model's arithmetic is checked against sums written out by hand (floats, term by term); the
constants against the table of docs/hardware.md ("Cost model"), so code and documentation cannot
drift apart; the counters' ``OpEvent.nbytes`` against ``numel * element_size`` computed here from
the tensors themselves; ``Cost.of`` against events built by hand.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing import cost_910b
from fbgemm_npu.testing.cost_910b import Cost, cells, projected_us, tensor_bytes
from fbgemm_npu.testing.counters import OpEvent, count

HARDWARE_MD = Path(__file__).resolve().parents[2] / "docs" / "hardware.md"

pytestmark = pytest.mark.skipif(
    fbgemm_npu.device_kind() == "none", reason="no npu device (tests/conftest.py switches it on)"
)


def test_constants_are_the_documented_ones() -> None:
    section = HARDWARE_MD.read_text().split("## Cost model", 1)[1].split("\n## ", 1)[0]
    documented = {
        name: value
        for name, value in re.findall(
            r"\| `\w+` \(`(\w+)`\) \| ([\d.]+ (?:us|GB/s|TB/s)) \|", section
        )
    }
    unit = {"us": 1.0, "GB/s": 1e9, "TB/s": 1e12}
    as_numbers = {k: float(v.split()[0]) * unit[v.split()[1]] for k, v in documented.items()}
    assert as_numbers == {
        "LAUNCH_US": cost_910b.LAUNCH_US,
        "AI_CPU_US": cost_910b.AI_CPU_US,
        "AI_CPU_BYTES_PER_S": cost_910b.AI_CPU_BYTES_PER_S,
        "SYNC_US": cost_910b.SYNC_US,
        "HBM_BYTES_PER_S": cost_910b.HBM_BYTES_PER_S,
    }
    # the values issue 10 fixes: 12 us a launch, HBM at 1.6 TB/s
    assert cost_910b.LAUNCH_US == 12.0 and cost_910b.HBM_BYTES_PER_S == 1.6e12


def test_projected_time_is_the_documented_sum() -> None:
    c = Cost(launches=7, ai_cpu=2, syncs=1, stalls=3, nbytes=3_200_000, ai_cpu_nbytes=50_000)
    launch, aicpu, sync = cost_910b.LAUNCH_US, cost_910b.AI_CPU_US, cost_910b.SYNC_US
    by_hand = (
        7 * launch
        + 2 * aicpu
        + (1 + 3) * sync
        + 3_200_000 / cost_910b.HBM_BYTES_PER_S * 1e6
        + 50_000 / cost_910b.AI_CPU_BYTES_PER_S * 1e6
    )
    assert c.us == pytest.approx(by_hand, rel=1e-12)
    # and with today's constants, written out: 84 + 100 + 200 + 2 + 5 microseconds
    if (launch, aicpu, sync) == (12.0, 50.0, 50.0) and cost_910b.AI_CPU_BYTES_PER_S == 10e9:
        assert c.us == pytest.approx(391.0, rel=1e-12)
    assert projected_us(0, 0, 0, 0, 0) == 0.0
    assert projected_us(1, 0, 0, 0, 0) == launch
    assert c.host_waits == 4 and c.megabytes == pytest.approx(3.25)
    assert cells(c) == ("7", "2", "1 + 3", "3.25")


def test_costs_add_field_by_field_and_round_trip() -> None:
    a, b = Cost(1, 1, 0, 2, 10, 5), Cost(3, 0, 1, 0, 7, 0)
    assert a + b == Cost(4, 1, 1, 2, 17, 5)
    assert Cost(**a.as_dict()) == a and Cost() + a == a


def test_cost_of_events() -> None:
    events = [
        OpEvent("aten.add.Tensor", True, None, False, None, nbytes=100),
        OpEvent("aten.cumsum.default", True, None, False, 0, ai_cpu=True, nbytes=40),
        OpEvent("aten._to_copy.default", False, "device-to-host copy", False, None, nbytes=999),
        OpEvent("aten._assert_async.msg", True, None, False, 0, stall="host fallback", nbytes=1),
    ]
    assert Cost.of(events) == Cost(
        launches=3, ai_cpu=1, syncs=1, stalls=1, nbytes=101, ai_cpu_nbytes=40
    )  # a sync is no launch: its bytes are not moved by a kernel
    inside_calls = Cost.of(events, lambda e: e.call is not None)
    assert inside_calls == Cost(launches=2, ai_cpu=1, stalls=1, nbytes=1, ai_cpu_nbytes=40)


def test_tensor_bytes_counts_device_tensors_as_they_show() -> None:
    x = torch.zeros(10, 4, device="npu")  # 160 bytes
    i = torch.zeros(6, dtype=torch.int64, device="npu")  # 48 bytes
    cpu = torch.zeros(1000)
    tree = ((x, [i, cpu]), {"a": x[:, 0], "b": 3, "c": None})  # the column view: 10 floats
    assert tensor_bytes("npu", tree) == 160 + 48 + 40
    assert tensor_bytes("cpu", tree) == 4000
    assert tensor_bytes("npu", ()) == 0


def test_counters_record_the_bytes_of_each_launch() -> None:
    x = torch.ones(1000, device="npu")
    lengths = torch.tensor([3, 1, 2, 0], device="npu")  # int64
    with count() as c:
        y = x + x  # reads 2 x 4000, writes 4000
        x.mul_(2)  # self read and written
        torch.cumsum(lengths, 0)  # int64 out: AI CPU, 32 bytes in, 32 out
        y.sum().item()  # a sync: no launch bytes
    by_name = {e.name.rsplit(".", 1)[0]: e for e in c.events}  # "aten.mul_": .Tensor or .Scalar
    assert by_name["aten.add"].nbytes == 3 * 4000
    assert by_name["aten.mul_"].nbytes == 2 * 4000  # the scalar 2: a host value, no device bytes
    assert by_name["aten.cumsum"].ai_cpu and by_name["aten.cumsum"].nbytes == 64
    assert by_name["aten.sum"].nbytes == 4000 + 4
    assert by_name["aten._local_scalar_dense"].nbytes == 0
    cost = Cost.of(c.events)
    assert cost.nbytes == 12000 + 8000 + 4004 and cost.ai_cpu_nbytes == 64
    assert (cost.launches, cost.ai_cpu, cost.syncs) == (c.launches, c.ai_cpu, c.syncs)


def test_counter_owner_is_asked_at_each_recorded_op() -> None:
    x = torch.ones(4, device="npu")
    answers = iter(["first", None, "third"])
    with count() as c:
        c.owner = lambda: next(answers)
        x + 1
        x * 2
        x - 3
    assert [e.owner for e in c.events] == ["first", None, "third"]
    with count() as plain:
        x + 1
    assert [e.owner for e in plain.events] == [None]
