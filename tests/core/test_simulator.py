"""The simulated npu device behaves like an accelerator: devices, views, fallback, autograd, I/O.

Expected values come from the same computation on the CPU, never from the simulator itself.
"""

from __future__ import annotations

import io

import pytest
import torch

from tests.conftest import DEVICE_KIND

pytestmark = pytest.mark.skipif(
    DEVICE_KIND != "simulated",
    reason="checks the simulator itself; on a real NPU torch_npu's own tests cover the device",
)


def test_device_module_and_indices() -> None:
    assert torch.npu.is_available()
    assert torch.npu.device_count() == 2
    assert torch.npu.current_device() == 0
    t = torch.ones(2, device="npu:1")
    assert t.device == torch.device("npu", 1) and t.is_npu
    with torch.npu.device(1):
        assert torch.npu.current_device() == 1
        assert torch.empty(1, device="npu").device.index == 1
    assert torch.npu.current_device() == 0
    with pytest.raises(RuntimeError, match="invalid device index"):
        torch.npu.set_device(5)
    assert torch.accelerator.current_accelerator().type == "npu"


def test_mixed_devices_are_refused_like_an_accelerator() -> None:
    a = torch.ones(3, device="npu")
    with pytest.raises(RuntimeError, match="same device"):
        a + torch.ones(3)
    with pytest.raises(RuntimeError, match="same device"):
        a + torch.ones(3, device="npu:1")
    # 0-dim CPU tensors mix with device tensors, as they do on CUDA
    assert torch.equal((a + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))
    # CPU indices are accepted by indexing, as on CUDA
    picked = a.new_tensor([5.0, 6.0, 7.0])[torch.tensor([2, 0])]
    assert torch.equal(picked.cpu(), torch.tensor([7.0, 5.0]))


def test_fallback_matches_cpu_for_common_ops() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 7, generator=g)
    d = x.to("npu")
    cases = {
        "matmul": lambda t: t @ t.T,
        "softmax": lambda t: torch.softmax(t, dim=1),
        "cumsum": lambda t: torch.cumsum(t, 0),
        "index_add": lambda t: torch.zeros(3, 7, device=t.device).index_add_(
            0, torch.tensor([0, 2, 0, 1, 2], device=t.device), t
        ),
        "sort": lambda t: torch.sort(t, dim=1).values,
        "where": lambda t: torch.where(t > 0, t, -t),
        "cat": lambda t: torch.cat([t, t * 2], dim=1),
    }
    for name, fn in cases.items():
        got = fn(d)
        assert got.device.type == "npu", name
        torch.testing.assert_close(got.cpu(), fn(x), msg=name)


def test_views_share_device_memory() -> None:
    base = torch.arange(12.0, device="npu")
    v = base.view(3, 4)
    v[1].fill_(-1)  # native view + fallback in-place
    t = v.t()
    t[0, 2] = 100.0
    u = base.unfold(0, 4, 4)  # a view op that reaches the fallback
    u[2, 3] = 7.0
    s = base.as_strided((2,), (5,), 1)
    s.zero_()
    expected = torch.arange(12.0)
    expected[4:8] = -1
    expected[8] = 100.0
    expected[11] = 7.0
    expected[1] = 0
    expected[6] = 0
    assert torch.equal(base.cpu(), expected)
    assert u.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()


def test_out_variants_resize_and_in_place_keep_identity() -> None:
    out = torch.empty(0, device="npu")
    res = torch.cat([torch.ones(2, device="npu"), torch.zeros(3, device="npu")], out=out)
    assert res is out and out.shape == (5,)
    assert torch.equal(out.cpu(), torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0]))
    small = torch.zeros(2, device="npu")
    small.resize_(1000)
    small[999] = 3.0
    assert small.shape == (1000,) and small[999].item() == 3.0
    a = torch.ones(4, device="npu")
    assert a.add_(1) is a


def test_copy_of_conjugate_and_negative_views() -> None:
    z = torch.tensor([1 + 2j, 3 - 4j])
    d = z.to("npu")
    assert torch.equal(d.conj().cpu(), z.conj())
    assert torch.equal(d.conj().resolve_conj().cpu(), z.conj())
    assert torch.equal((-d).conj().cpu(), (-z).conj())


def test_autograd_and_optimizer_step_match_cpu() -> None:
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    npu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    npu.load_state_dict(cpu.state_dict())
    npu = npu.npu()
    opt_c = torch.optim.Adagrad(cpu.parameters(), lr=0.1)
    opt_n = torch.optim.Adagrad(npu.parameters(), lr=0.1)
    x = torch.randn(16, 6)
    y = torch.randn(16, 1)
    for _ in range(3):
        for model, opt, xx, yy in ((cpu, opt_c, x, y), (npu, opt_n, x.npu(), y.npu())):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(xx), yy).backward()
            opt.step()
    for (name, pc), pn in zip(cpu.named_parameters(), npu.parameters(), strict=True):
        assert pn.device.type == "npu"
        torch.testing.assert_close(pn.detach().cpu(), pc.detach(), msg=name)


def test_convolution_forward_and_backward() -> None:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(2, 3, 3, padding=1)
    img = torch.randn(1, 2, 5, 5, requires_grad=True)
    conv_n = torch.nn.Conv2d(2, 3, 3, padding=1).npu()
    conv_n.load_state_dict(conv.state_dict())
    img_n = img.detach().npu().requires_grad_()
    out, out_n = conv(img), conv_n(img_n)
    torch.testing.assert_close(out_n.detach().cpu(), out.detach())
    out.sum().backward()
    out_n.sum().backward()
    torch.testing.assert_close(img_n.grad.cpu(), img.grad)
    torch.testing.assert_close(conv_n.weight.grad.cpu(), conv.weight.grad)


def test_save_load_round_trip() -> None:
    state = {"a": torch.arange(5, device="npu"), "b": torch.randn(2, 3).npu()}
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    back = torch.load(buf)
    assert back["a"].device.type == "npu"
    assert torch.equal(back["a"].cpu(), state["a"].cpu())
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    assert on_cpu["b"].device.type == "cpu"
    assert torch.equal(on_cpu["b"], state["b"].cpu())


def test_pinned_memory_and_memory_statistics() -> None:
    pinned = torch.ones(16).pin_memory()
    assert pinned.is_pinned() and not torch.ones(16).is_pinned()
    dev = 1  # untouched by other tests, so counts are exact
    before = torch.npu.memory_allocated(dev)
    torch.npu.reset_peak_memory_stats(dev)
    t = torch.empty(1024, dtype=torch.float32, device=f"npu:{dev}")
    assert torch.npu.memory_allocated(dev) == before + 4096
    del t
    assert torch.npu.memory_allocated(dev) == before
    assert torch.npu.max_memory_allocated(dev) == before + 4096
    free, total = torch.npu.mem_get_info(dev)
    assert 0 < free <= total


def test_random_numbers_follow_the_cpu_seed() -> None:
    torch.manual_seed(123)
    a = torch.randn(4, device="npu")
    torch.manual_seed(123)
    b = torch.randn(4)
    assert torch.equal(a.cpu(), b)


def test_scalar_reads_and_data_dependent_ops() -> None:
    t = torch.tensor([0, 3, 0, 5], device="npu")
    assert t.sum().item() == 8
    assert t.tolist() == [0, 3, 0, 5]
    assert torch.equal(torch.nonzero(t).cpu(), torch.tensor([[1], [3]]))
    assert torch.equal(torch.unique(t).cpu(), torch.tensor([0, 3, 5]))


def test_streams_are_distinct_objects_with_a_default() -> None:
    a, b = torch.npu.Stream(), torch.npu.Stream()
    assert a != b and a == a
    assert torch.npu.current_stream() == torch.npu.default_stream()
    assert torch.npu.current_stream() != a
    with torch.npu.stream(a):
        torch.ones(1, device="npu").add_(1)
    a.synchronize()
