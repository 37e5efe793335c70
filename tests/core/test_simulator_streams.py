"""Streams and events of the simulated npu: ``torch.Stream`` / ``torch.Event`` objects, as torch
2.x accelerators (and torch_npu) give, so stream-aware code takes its accelerator path.

Work runs synchronously on the host, so nothing here can observe an ordering; what is checked is
the bookkeeping that code written for accelerators relies on: distinct streams, a current stream
per thread and device, stream contexts that restore what they changed, events, and
``Tensor.record_stream``.  torchrec's own stream calls are checked at the end; its pipeline with
streams is in ``tests/integrations/test_dlrm.py``.
"""

from __future__ import annotations

import importlib.util
import threading
import time

import pytest
import torch

from tests.conftest import DEVICE_KIND

pytestmark = pytest.mark.skipif(
    DEVICE_KIND != "simulated",
    reason="checks the simulator itself; on a real NPU torch_npu's own tests cover its streams",
)
needs_torchrec = pytest.mark.skipif(
    importlib.util.find_spec("torchrec") is None, reason="torchrec not installed"
)


def test_streams_are_torch_streams_of_the_npu_device() -> None:
    a, b = torch.npu.Stream(), torch.npu.Stream(priority=-1)
    for s in (a, b, torch.npu.current_stream(), torch.npu.default_stream()):
        assert isinstance(s, torch.Stream) and isinstance(s, torch.npu.Stream)
        assert s.device == torch.device("npu", 0)
    assert a != b and a.stream_id != 0 and b.stream_id != 0
    assert torch.npu.default_stream().stream_id == 0
    assert (a.priority, b.priority, torch.npu.default_stream().priority) == (0, -1, 0)
    on_one = torch.npu.Stream(1)
    assert on_one.device == torch.device("npu", 1) and torch.npu.Stream(device="npu:1") != on_one
    # a torch.Stream built by torch itself is the same stream (ids, hash) as ours
    plain = torch.Stream(stream_id=a.stream_id, device_index=0, device_type=a.device_type)
    assert plain == a and hash(plain) == hash(a)
    assert torch.Stream(device="npu") != a  # torch's own constructor goes to the same pool
    with pytest.raises(RuntimeError, match="invalid device index"):
        torch.npu.Stream(5)


def test_stream_context_sets_and_restores_the_current_stream() -> None:
    s = torch.npu.Stream()
    default = torch.npu.current_stream()
    assert default == torch.npu.default_stream()
    with torch.npu.stream(s):
        assert torch.npu.current_stream() == s
        assert torch.accelerator.current_stream() == s
        y = torch.ones(3, device="npu") * 2  # work issued inside runs as usual
    assert torch.npu.current_stream() == default
    assert torch.equal(y.cpu(), torch.full((3,), 2.0))
    with torch.npu.stream(None):  # a no-op, as on torch_npu
        assert torch.npu.current_stream() == default
    with s:  # torch.Stream's own context manager
        assert torch.npu.current_stream() == s
    assert torch.npu.current_stream() == default


def test_a_stream_of_another_device_switches_the_device_and_restores_both() -> None:
    s1 = torch.npu.Stream(1)
    assert torch.npu.current_device() == 0
    with torch.npu.stream(s1):
        assert torch.npu.current_device() == 1
        assert torch.npu.current_stream() == s1
        assert torch.npu.current_stream(0) == torch.npu.default_stream(0)
        assert torch.empty(1, device="npu").device == torch.device("npu", 1)
    assert torch.npu.current_device() == 0
    assert torch.npu.current_stream(1) == torch.npu.default_stream(1)
    torch.npu.set_stream(s1)  # like torch.cuda.set_stream: the stream's device becomes current
    try:
        assert torch.npu.current_device() == 1 and torch.npu.current_stream() == s1
    finally:
        torch.npu.set_stream(torch.npu.default_stream(1))
        torch.npu.set_device(0)


def test_the_current_stream_is_per_thread() -> None:
    s = torch.npu.Stream()
    seen: list[torch.Stream] = []
    with torch.npu.stream(s):
        worker = threading.Thread(target=lambda: seen.append(torch.npu.current_stream()))
        worker.start()
        worker.join()
        assert torch.npu.current_stream() == s
    assert seen == [torch.npu.default_stream()]


def test_waits_synchronize_and_query_return_at_once() -> None:
    a, b = torch.npu.Stream(), torch.npu.Stream(1)
    a.wait_stream(torch.npu.current_stream())
    torch.npu.current_stream().wait_stream(a)
    a.wait_stream(b)  # across devices too
    event = a.record_event()
    assert isinstance(event, torch.Event) and isinstance(event, torch.npu.Event)
    b.wait_event(event)
    assert a.query() and b.query() and event.query()
    a.synchronize()
    event.synchronize()
    torch.npu.synchronize()
    torch.npu.synchronize(1)


def test_events_are_torch_events_and_time_host_work() -> None:
    start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    assert type(start) is torch.Event and isinstance(start, torch.npu.Event)
    assert not isinstance(torch.Event(device="cpu"), torch.npu.Event)
    start.record()
    x = torch.randn(64, 64, device="npu")
    for _ in range(20):
        x = x @ x.T / 64
    time.sleep(0.01)
    end.record(torch.npu.current_stream())
    end.synchronize()
    elapsed = start.elapsed_time(end)
    assert 10.0 <= elapsed < 10_000.0, elapsed
    side = torch.npu.Stream()
    marker = torch.npu.Event()
    marker.record(side)
    marker.wait()  # the current stream waits
    assert marker.query()
    with pytest.raises(ValueError, match="enable_timing"):
        torch.npu.Event().elapsed_time(end)
    never = torch.npu.Event(enable_timing=True)
    with pytest.raises(ValueError, match="recorded"):
        start.elapsed_time(never)


def test_record_stream_accepts_npu_streams_and_frees_memory_as_usual() -> None:
    dev = 1
    side = torch.npu.Stream(dev)
    before = torch.npu.memory_allocated(dev)
    t = torch.empty(256, device=f"npu:{dev}")
    t.record_stream(side)
    t[10:20].record_stream(torch.npu.current_stream(dev))  # a view, the current stream
    t.record_stream(torch.npu.Stream(0))  # another device's stream, as CUDA allows
    del t  # nothing is pending on a synchronous device: freed at once
    assert torch.npu.memory_allocated(dev) == before
    with pytest.raises(RuntimeError, match="expects an npu stream"):
        torch.ones(2, device="npu").record_stream(torch.Stream(device="cpu"))


def test_autograd_under_a_side_stream_matches_cpu() -> None:
    """The engine runs each backward node under its forward's stream (stream guards on the
    device workers): results are the CPU's."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(6, 3)
    x = torch.randn(5, 6)
    layer_n = torch.nn.Linear(6, 3).npu()
    layer_n.load_state_dict(layer.state_dict())
    x_n = x.npu().requires_grad_()
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        out_n = layer_n(x_n).relu().sum()
    torch.npu.current_stream().wait_stream(side)
    out_n.backward()
    x.requires_grad_()
    layer(x).relu().sum().backward()
    torch.testing.assert_close(x_n.grad.cpu(), x.grad)
    torch.testing.assert_close(layer_n.weight.grad.cpu(), layer.weight.grad)


@needs_torchrec
def test_torchrec_jagged_tensors_record_stream_and_move_on_a_memcpy_stream() -> None:
    from torchrec.distributed.train_pipeline.utils import _to_device, _wait_for_batch
    from torchrec.sparse.jagged_tensor import JaggedTensor, KeyedJaggedTensor

    kjt = KeyedJaggedTensor.from_lengths_sync(
        keys=["f0", "f1"],
        values=torch.tensor([1, 2, 3, 4, 5]),
        lengths=torch.tensor([2, 0, 1, 2]),
        weights=torch.tensor([0.5, 1.0, 1.5, 2.0, 2.5]),
    )
    memcpy = torch.npu.Stream(priority=-1)
    with torch.npu.stream(memcpy):  # as TrainPipelineSparseDist copies a batch
        on_npu = _to_device(kjt, torch.device("npu", 0), non_blocking=True)
    assert on_npu.values().device.type == "npu" and on_npu.lengths().device.type == "npu"
    _wait_for_batch(on_npu, memcpy)  # current stream waits, batch recorded on it
    on_npu.record_stream(memcpy)
    jt = JaggedTensor(values=torch.arange(4.0, device="npu"), lengths=torch.tensor([1, 3]).npu())
    jt.record_stream(torch.npu.current_stream())
    assert on_npu.to_dict()["f1"].values().cpu().tolist() == [3, 4, 5]
    assert torch.equal(jt.values().cpu(), torch.arange(4.0))


@needs_torchrec
def test_torchrec_pipelines_take_their_stream_path_on_npu() -> None:
    from torchrec.distributed.train_pipeline.train_pipelines import TrainPipelineSparseDist

    from fbgemm_npu.integrations import torchrec as adapt
    from fbgemm_npu.integrations.torchrec_symbols import SYMBOLS

    assert adapt.streams_enabled() and adapt.is_applied()
    assert all(adapt._applies(s) for s in SYMBOLS if s.when == "streams")
    init = adapt._function_of(TrainPipelineSparseDist.__dict__["__init__"])
    npu_in_init = (frozenset({"cuda", "mtia", "npu"}),)
    assert adapt.extend_literals(init.__code__, npu_in_init)[1] == 1
