"""Data checks without host stalls (fbgemm_npu/native/_pending.py, docs/design.md "Validation
without stalls"): what is queued, when it is raised, what it costs on the counters."""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.native import _pending
from fbgemm_npu.native._checks import DataChecks, check_on_device
from fbgemm_npu.testing.budgets import drain_checks
from fbgemm_npu.testing.counters import count

OP = "fbgemm::jagged_to_padded_dense"


@pytest.fixture
def mode(monkeypatch: pytest.MonkeyPatch):
    """Set FBGEMM_NPU_VALIDATE for one test; the queue starts and ends empty."""

    def set_mode(value: str) -> None:
        monkeypatch.setenv("FBGEMM_NPU_VALIDATE", value)

    drain_checks()
    yield set_mode
    drain_checks()


def _inputs(offsets: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(5.0, device="npu").reshape(5, 1), torch.tensor(offsets, device="npu")


def _to_dense(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    return torch.ops.fbgemm.jagged_to_padded_dense(values, [offsets], [4])


def test_deferred_bad_offsets_raise_at_check_naming_op_and_argument(mode) -> None:
    mode("deferred")
    inputs = _inputs([0, 3, 9])  # offsets past the values
    with pytest.raises(RuntimeError, match=r"jagged_to_padded_dense_forward: argument 'offsets'"):
        _to_dense(*inputs)
        fbgemm_npu.check()
    assert _pending.pending() == 0


def test_deferred_valid_call_queues_one_check_and_never_syncs(mode) -> None:
    mode("deferred")
    inputs = _inputs([0, 3, 5])
    with count() as c:
        _to_dense(*inputs)
    assert (c.syncs, c.stalls) == (0, 0)
    assert _pending.pending() == 1
    assert fbgemm_npu.check() == []
    assert _pending.pending() == 0


def test_deferred_costs_one_launch_less_than_assert(mode) -> None:
    launches = {}
    inputs = _inputs([0, 3, 5])
    for m in ("assert", "deferred"):
        mode(m)
        _to_dense(*inputs)  # warm the index caches
        with count() as c:
            _to_dense(*inputs)
        launches[m] = (c.launches, c.stalls)
    assert launches["assert"][0] == launches["deferred"][0] + 1
    assert launches["assert"][1] == 1 and launches["deferred"][1] == 0


def test_sync_mode_raises_at_the_call_with_one_read(mode) -> None:
    mode("sync")
    dev = torch.device("npu")
    with count() as c:
        check_on_device("fbgemm::op", torch.tensor(True, device=dev), "argument 'x' fine")
    assert c.syncs == 1
    with pytest.raises(RuntimeError, match=r"^fbgemm::op: argument 'x' must be 1$"):
        check_on_device("fbgemm::op", torch.tensor(False, device=dev), "argument 'x' must be 1")
    assert _pending.pending() == 0


def test_check_reads_scalars_in_the_same_copy_and_raises_the_first_failure(mode) -> None:
    mode("deferred")
    dev = torch.device("npu")
    check_on_device("fbgemm::a", torch.tensor(True, device=dev), "argument 'a' ok")
    check_on_device("fbgemm::b", torch.tensor(False, device=dev), "argument 'b' bad")
    check_on_device("fbgemm::c", torch.tensor(False, device=dev), "argument 'c' bad")
    loss = torch.tensor(0.25, device=dev)
    with count() as c, pytest.raises(RuntimeError, match=r"^fbgemm::b: argument 'b' bad$"):
        fbgemm_npu.check(loss)
    assert c.syncs == 1
    assert _pending.pending() == 0
    big = torch.tensor(2**60 + 1, device=dev)
    flag = torch.tensor(True, device=dev)
    assert fbgemm_npu.check(loss, big, flag) == [0.25, 2**60 + 1, True]


def test_an_op_that_reads_back_carries_the_queue(mode) -> None:
    mode("deferred")
    dev = torch.device("npu")
    check_on_device("fbgemm::earlier", torch.tensor(False, device=dev), "argument 'x' bad")
    checks = DataChecks("fbgemm::later")
    n = torch.tensor(7, device=dev)
    with count() as c, pytest.raises(RuntimeError, match=r"^fbgemm::earlier: argument 'x' bad$"):
        checks.read_with([n])
    assert c.syncs == 1  # the read the op needed anyway, nothing more
    check_on_device("fbgemm::earlier", torch.tensor(True, device=dev), "argument 'x' ok")
    with count() as c:
        assert checks.read_with([n]) == [7]
    assert (c.syncs, _pending.pending()) == (1, 0)


def test_data_checks_upload_their_bounds_without_a_stall(mode) -> None:
    mode("deferred")
    dev = torch.device("npu")
    checks = DataChecks("fbgemm::op")
    checks.add(torch.tensor(3, device=dev), 0, 5, "argument 'i' must be in [0, 5]")
    checks.add(torch.tensor(9, device=dev), 0, 5, "argument 'j' must be in [0, 5]")
    with count() as c:
        checks.assert_on_device()
    # stack, the pinned non-blocking upload, clamp, eq, all; no _assert_async, no stall
    assert (c.launches, c.syncs, c.stalls) == (5, 0, 0)
    with pytest.raises(RuntimeError, match=r"fbgemm::op: expected all of: .*argument 'j'"):
        fbgemm_npu.check()


def test_chunks_and_the_folded_flag_keep_the_messages(mode, monkeypatch) -> None:
    mode("deferred")
    monkeypatch.setattr(_pending, "CHUNK", 4)
    monkeypatch.setattr(_pending, "CHUNKS", 2)
    dev = torch.device("npu")
    for k in range(6):
        check_on_device("fbgemm::op", torch.tensor(k != 5, device=dev), f"argument 'x{k}' bad")
    assert _pending.pending() == 6  # a chunk of 4, then two singles
    with pytest.raises(RuntimeError, match=r"^fbgemm::op: argument 'x5' bad$"):
        fbgemm_npu.check()
    for k in range(16):
        check_on_device("fbgemm::op", torch.tensor(k != 2, device=dev), f"argument 'y{k % 3}'")
    with pytest.raises(RuntimeError, match=r"one of the 3 kinds of check.*argument 'y2'"):
        fbgemm_npu.check()


def test_cpu_and_traced_checks_do_not_queue(mode) -> None:
    mode("deferred")
    with pytest.raises(RuntimeError, match="fbgemm::op: argument 'x' bad"):
        check_on_device("fbgemm::op", torch.tensor(False), "argument 'x' bad")
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        check_on_device("fbgemm::op", torch.empty((), dtype=torch.bool), "argument 'x' bad")
    assert _pending.pending() == 0


def test_an_unknown_mode_is_an_error_naming_the_variable(mode) -> None:
    mode("lazy")
    with pytest.raises(ValueError, match="FBGEMM_NPU_VALIDATE='lazy'"):
        check_on_device("fbgemm::op", torch.tensor(True, device="npu"), "argument 'x'")


def test_an_argument_error_of_ours_is_not_replaced_by_a_queued_failure(mode) -> None:
    mode("deferred")
    F = torch.ops.fbgemm
    F.invert_permute(torch.tensor([0, 0, 1], device="npu"))  # bad data: its check is queued
    with pytest.raises(ValueError, match=r"invert_permute: argument 'permute' must have dtype"):
        F.invert_permute(torch.tensor([1.0, 0.0], device="npu"))
    with pytest.raises(RuntimeError, match=r"invert_permute: argument 'permute' must be a perm"):
        fbgemm_npu.check()


def test_an_aten_failure_inside_a_kernel_raises_the_queued_cause(mode) -> None:
    mode("deferred")
    check_on_device("fbgemm::earlier", torch.tensor(False, device="npu"), "argument 'x' bad")
    # a kernel whose gather fails on the bad data the queued check saw (a probe kernel)
    lib = torch.library.Library("fbgemm_npu_pending_probe", "DEF")
    lib.define("gather(Tensor x, Tensor i) -> Tensor")
    from fbgemm_npu._registry import _below_autograd

    lib.impl("gather", _below_autograd(lambda x, i: x.index_select(0, i)), "PrivateUse1")
    x, i = torch.ones(3, device="npu"), torch.tensor([7], device="npu")
    with pytest.raises(RuntimeError, match=r"^fbgemm::earlier: argument 'x' bad$") as info:
        torch.ops.fbgemm_npu_pending_probe.gather(x, i)
    assert isinstance(info.value.fbgemm_npu_kernel_error, IndexError)
