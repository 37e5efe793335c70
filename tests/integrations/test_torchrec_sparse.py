"""torchrec's sparse containers on npu against the same calls on CPU (upstream fbgemm).

Each call is traced to our npu kernels (no ``fbgemm::`` op falls back to the CPU):
``KeyedJaggedTensor.permute``, ``JaggedTensor.to_padded_dense``, ``KeyedTensor.regroup`` and
``KTRegroupAsDict`` (forward and backward).
"""

from __future__ import annotations

import torch
from torchrec.modules.regroup import KTRegroupAsDict
from torchrec.sparse.jagged_tensor import JaggedTensor, KeyedJaggedTensor, KeyedTensor

from fbgemm_npu.testing.trace import trace

NPU = torch.device("npu", 0)


def _assert_traced_to_our_kernels(fn: object) -> object:
    rec = trace(fn)  # type: ignore[arg-type]
    assert rec.ok, rec.summary()
    return rec.result


def _kjt() -> KeyedJaggedTensor:
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(0, 4, (3 * 5,), generator=g)
    n = int(lengths.sum())
    return KeyedJaggedTensor(
        keys=["a", "b", "c"],
        values=torch.randint(0, 100, (n,), generator=g),
        lengths=lengths,
        weights=torch.rand(n, generator=g),
    )


def test_kjt_permute_on_npu_equals_cpu() -> None:
    cpu = _kjt()
    npu = cpu.to(NPU)
    order = [2, 0, 1, 2]
    want = cpu.permute(order)
    got = _assert_traced_to_our_kernels(lambda: npu.permute(order))
    assert got.keys() == want.keys() and got.values().device == NPU
    for name in ("values", "lengths", "weights", "offsets"):
        assert torch.equal(getattr(got, name)().cpu(), getattr(want, name)()), name


def test_jagged_tensor_to_padded_dense_on_npu_equals_cpu() -> None:
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([2, 0, 3, 1, 5])
    values = torch.rand(int(lengths.sum()), generator=g)
    cpu = JaggedTensor(values=values, lengths=lengths)
    npu = JaggedTensor(values=values.to(NPU), lengths=lengths.to(NPU))
    for desired in (1, 3, 6):
        want = cpu.to_padded_dense(desired_length=desired, padding_value=-1.5)
        got = _assert_traced_to_our_kernels(
            lambda d=desired: npu.to_padded_dense(desired_length=d, padding_value=-1.5)
        )
        assert got.device == NPU and torch.equal(got.cpu(), want), desired


def _kts(device: torch.device) -> list[KeyedTensor]:
    g = torch.Generator().manual_seed(2)
    specs = [(["a", "b"], [3, 4]), (["c", "d", "e"], [2, 4, 1])]
    out = []
    for keys, lengths in specs:
        values = torch.rand(5, sum(lengths), generator=g).to(device).requires_grad_()
        out.append(KeyedTensor(keys=keys, length_per_key=lengths, values=values))
    return out


GROUPS = [["e", "a"], ["c", "b", "d"]]
GROUP_WIDTHS = [1 + 3, 2 + 4 + 4]  # the key lengths of _kts, group by group


def _regroup_and_grads(device: torch.device, fn: object) -> list[torch.Tensor]:
    """Outputs of ``fn`` on the KeyedTensors, then the gradients of their values (on device)."""
    kts = _kts(device)
    g = torch.Generator().manual_seed(3)
    weights = [torch.rand(5, width, generator=g).to(device) for width in GROUP_WIDTHS]

    def run() -> list[torch.Tensor]:
        outs = list(fn(kts))  # type: ignore[operator]
        sum((o * w).sum() for o, w in zip(outs, weights, strict=True)).backward()
        return [o.detach() for o in outs] + [kt.values().grad for kt in kts]

    return _assert_traced_to_our_kernels(run) if device.type == "npu" else run()


def test_keyed_tensor_regroup_on_npu_equals_cpu_forward_and_backward() -> None:
    def regroup(kts: list[KeyedTensor]) -> list[torch.Tensor]:
        return KeyedTensor.regroup(kts, GROUPS)

    want = _regroup_and_grads(torch.device("cpu"), regroup)
    got = _regroup_and_grads(NPU, regroup)
    for a, b in zip(got, want, strict=True):
        assert a.device == NPU and torch.equal(a.cpu(), b)


def test_kt_regroup_as_dict_on_npu_equals_cpu_forward_and_backward() -> None:
    keys = ["first", "second"]

    def run(device: torch.device) -> list[torch.Tensor]:
        module = KTRegroupAsDict(groups=GROUPS, keys=keys)
        return _regroup_and_grads(device, lambda kts: [module(kts)[k] for k in keys])

    want = run(torch.device("cpu"))
    got = run(NPU)
    for a, b in zip(got, want, strict=True):
        assert a.device == NPU and torch.equal(a.cpu(), b)
