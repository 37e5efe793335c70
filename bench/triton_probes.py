"""The calls bench/device_check.py (timings on a GPU) and bench/fused.py (``python -m bench
triton``: launch counts) make: one probe per fused Triton kernel, each a registered kernel
FUNCTION of its family called directly on the bench config (or a tiny ``quick`` one).

Imports of fbgemm_npu happen inside the builders, after :func:`bench.device_check.import_kernels`
(a GPU machine has no fbgemm_gpu), and a kernel not there yet raises ImportError /
AttributeError, which the callers turn into an ``absent`` row.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["PROBES", "Built", "Probe"]


def _mod(name: str) -> Any:
    return importlib.import_module(f"fbgemm_npu.native.{name}")


@dataclass
class Built:
    """A probe's call on its inputs: ``run()`` returns what is compared; ``reset()`` restores
    inputs a call updates (the optimizers' weights); ``nbytes`` / ``flops``: one call's work."""

    run: Callable[[], Any]
    nbytes: float
    flops: float = 0.0
    tol: float = 0.0
    reset: Callable[[], None] | None = None


@dataclass
class Probe:
    op: str
    config: str
    quick: str
    build: Callable[[Any, bool], Built]  # (torch.device, quick) -> Built


def _offsets(torch: Any, lengths: Any) -> Any:
    return torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])


def _jagged(dev: Any, quick: bool, to_dense: bool) -> Built:
    import torch

    b, d, max_len = (4, 8, 8) if quick else (128, 128, 128)
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(0, max_len + max_len // 4, (b,), generator=gen)  # some cut
    offsets = _offsets(torch, lengths).to(dev)
    n, kept = int(lengths.sum()), int(lengths.clamp(max=max_len).sum())
    if to_dense:
        values = torch.randn(n, d, generator=gen).to(dev)
        fn = _mod("fbgemm.jagged.to_dense").jagged_to_padded_dense_forward_npu
        nbytes = (kept + b * max_len) * d * 4 + offsets.numel() * 8
        return Built(lambda: fn(values, [offsets], [max_len], -1.0), nbytes)
    dense = torch.randn(b, max_len, d, generator=gen).to(dev)
    fn = _mod("fbgemm.jagged.to_jagged").dense_to_jagged_forward_npu
    nbytes = (kept + n) * d * 4 + offsets.numel() * 8
    return Built(lambda: fn(dense, [offsets], n), nbytes)


def _kjt(torch: Any, quick: bool) -> tuple[int, int, int, Any, Any]:
    t, b, pooling = (3, 4, 3) if quick else (32, 512, 20)
    gen = torch.Generator().manual_seed(1)
    lengths = torch.randint(0, 2 * pooling + 1, (t, b), generator=gen)
    n = int(lengths.sum())
    return t, b, n, lengths, gen


def _permute(dev: Any, quick: bool) -> Built:
    import torch

    t, b, n, lengths, gen = _kjt(torch, quick)
    permute = torch.randperm(t, generator=gen).to(dev)
    values = torch.randint(0, 100_000, (n,), generator=gen).to(dev)
    weights = torch.rand(n, generator=gen).to(dev)
    lengths = lengths.int().to(dev)
    fn = _mod("fbgemm.permute.permute").permute_2D_sparse_data_npu
    nbytes = 2 * (t * b * 4 + n * 8 + n * 4)
    return Built(lambda: fn(permute, lengths, values, weights, n), nbytes)


def _bucketize(dev: Any, quick: bool) -> Built:
    import torch

    t, b, n, lengths, gen = _kjt(torch, quick)
    my_size, e = (2, 20) if quick else (8, 100_000)
    indices = torch.randint(0, e, (n,), generator=gen).to(dev)
    weights = torch.rand(n, generator=gen).to(dev)
    block_sizes = torch.full((t,), math.ceil(e / my_size), dtype=torch.int64).to(dev)
    lengths = lengths.reshape(-1).to(dev)
    fn = _mod("fbgemm.bucketize.bucketize").block_bucketize_sparse_features_npu
    nbytes = t * b * 8 * (1 + my_size) + n * (8 + 8 + 8 + 4 + 4)

    def run() -> Any:
        return fn(lengths, indices, False, True, block_sizes, my_size, weights)

    return Built(run, nbytes)


def _tbe(dev: Any, quick: bool, optimizer: str | None) -> Built:
    """The TBE lookup (pooling SUM, fp32) as ``split_embedding_codegen_lookup_<opt>_function_pt2``
    runs it (call.parse_call's arguments); with an optimizer, forward + backward + its step."""
    import torch

    t, e, d, b, pooling = (2, 50, 8, 4, 3) if quick else (32, 100_000, 128, 512, 20)
    call_mod, lookup = _mod("fbgemm.tbe.call"), _mod("fbgemm.tbe.lookup")
    gen = torch.Generator().manual_seed(2)
    n = t * b * pooling
    indices = torch.randint(0, e, (n,), generator=gen).to(dev)
    offsets = (torch.arange(t * b + 1) * pooling).to(dev)
    torch.manual_seed(2)  # the tables drawn on the device: 1.6 GB at the bench size
    weights = torch.rand(t * e * d, device=dev) * 0.1
    init = weights.clone()
    table = lambda buf, width: [  # noqa: E731
        buf,
        torch.zeros(t, dtype=torch.int32, device=dev),
        (torch.arange(t) * e * width).to(dev),
    ]
    a: dict[str, Any] = {
        "weights": table(weights, d),
        "D_offsets": (torch.arange(t + 1, dtype=torch.int32) * d).to(dev),
        "max_D": d,
        "total_D": t * d,
        "hash_size_cumsum": (torch.arange(t + 1) * e).to(dev),
        "indices": indices,
        "offsets": offsets,
        "pooling_mode": 0,
        "output_dtype": 0,
        "aux_tensor": [],
        "aux_int": [1],  # iter (Adam's bias correction divides by 1 - beta^iter)
        "aux_float": [0.0, 0.0],
        "aux_bool": [False] * 5,
        "learning_rate_tensor": torch.tensor(0.01),
    }
    states: list[Any] = []
    if optimizer == "rowwise_adagrad":
        states = [torch.zeros(t * e, device=dev)]
        a.update(momentum1=table(states[0], 1), optim_float=[1e-8, 0.0, 0.0], optim_int=[0])
    elif optimizer == "adam":
        states = [torch.zeros(t * e * d, device=dev), torch.zeros(t * e * d, device=dev)]
        a.update(momentum1=table(states[0], d), momentum2=table(states[1], d))
        a.update(optim_float=[1e-8, 0.9, 0.999, 0.0], optim_bool=[False])
    call = call_mod.parse_call(optimizer or "sgd", a)
    rows = n * d * 4 + n * 8 + t * b * d * 4  # rows read, indices, pooled output
    if optimizer is None:
        return Built(lambda: lookup.lookup_forward_only(call), rows, tol=1e-5)
    grad = torch.randn(b, t * d, generator=gen).to(dev)
    placeholder = torch.zeros(1, device=dev, requires_grad=True)
    unique = int(torch.unique(indices.cpu() + torch.arange(n) // (b * pooling) * e).numel())
    state_row = {"sgd": 0, "rowwise_adagrad": 4, "adam": 2 * d * 4}[optimizer]

    def run() -> Any:
        lookup.run_lookup(call, placeholder).backward(grad)
        return [weights, *states]

    def reset() -> None:
        weights.copy_(init)
        for s in states:
            s.zero_()

    nbytes = rows + b * t * d * 4 + unique * (2 * d * 4 + 2 * state_row)
    return Built(run, nbytes, tol=1e-4, reset=reset)


def _hstu(dev: Any, quick: bool, backward: bool) -> Built:
    import torch

    b, h, d, s = (1, 2, 32, 64) if quick else (8, 4, 128, 1024)
    dtype = torch.float32 if dev.type == "cpu" else torch.bfloat16
    gen = torch.Generator().manual_seed(3)
    q, k, v, g = (torch.randn(b, s, h, d, generator=gen).to(dev, dtype) for _ in range(4))
    hstu = _mod("mxrec.hstu.hstu_dense")
    causal = b * h * s * s * d  # one S x S x D product, causal half, in multiply-adds
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    if backward:
        return Built(
            lambda: hstu.hstu_dense_backward(g, q, k, v, None, None, 0)[:3], 0, 10 * causal, tol
        )
    return Built(lambda: hstu.hstu_dense(q, k, v, None, None, 0), 0, 4 * causal, tol)


_TBE = "T=32 E=1e5 D=128 B=512 L=20 fp32 SUM"
_TBE_QUICK = "T=2 E=50 D=8 B=4 L=3"
PROBES = [
    Probe("tbe forward", _TBE, _TBE_QUICK, lambda dev, q: _tbe(dev, q, None)),
    *(
        Probe(f"tbe fwd+bwd {opt}", _TBE, _TBE_QUICK, lambda dev, q, o=opt: _tbe(dev, q, o))
        for opt in ("sgd", "rowwise_adagrad", "adam")
    ),
    Probe("jagged_to_padded_dense", "B=128 D=128 max_len=128 fp32", "B=4 D=8 L=8",
          lambda dev, q: _jagged(dev, q, True)),
    Probe("dense_to_jagged", "B=128 D=128 max_len=128 fp32", "B=4 D=8 L=8",
          lambda dev, q: _jagged(dev, q, False)),
    Probe("permute_2D_sparse_data", "T=32 B=512 L~20 +weights", "T=3 B=4", _permute),
    Probe("block_bucketize_sparse_features", "T=32 B=512 L~20 my_size=8 sequence", "T=3 B=4",
          _bucketize),
    Probe("hstu_dense forward", "B=8 H=4 D=128 S=1024 causal bf16", "B=1 H=2 D=32 S=64",
          lambda dev, q: _hstu(dev, q, False)),
    Probe("hstu_dense backward", "B=8 H=4 D=128 S=1024 causal bf16", "B=1 H=2 D=32 S=64",
          lambda dev, q: _hstu(dev, q, True)),
]  # fmt: skip
