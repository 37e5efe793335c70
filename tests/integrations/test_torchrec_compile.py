"""torchrec's embedding collections on npu under ``torch.compile(fullgraph=True,
backend="aot_eager")``: forward over a KeyedJaggedTensor and backward, equal to eager.

* ``EmbeddingBagCollection`` (torch's embedding bags) trained by a torch optimizer;
* ``FusedEmbeddingBagCollection``, whose tables are upstream's TBE on npu (location HOST, as
  torchrec's CPU construction style): our pt2 lookup kernels, traced by AOTAutograd, with the
  fused optimizer stepping the tables in the compiled backward graph.

A DistributedModelParallel-sharded EBC does not compile with fullgraph in torchrec 1.9.2 (dynamo
stops in torchrec's ``get_resize_awaitables``: "Read uninitialized cell"), so it is not here.
Each case compiles once (~1 s static, a few seconds dynamic).
"""

from __future__ import annotations

import pytest
import torch
from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.modules.fused_embedding_modules import FusedEmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

NPU = torch.device("npu", 0)
SPECS = [(40, 8), (25, 16), (30, 8)]  # (rows, dim): two distinct dims
KEYS = [f"f{i}" for i in range(len(SPECS))]
B, STEPS = 4, 3


def _tables() -> list[EmbeddingBagConfig]:
    return [
        EmbeddingBagConfig(name=f"t{i}", embedding_dim=d, num_embeddings=n, feature_names=[k])
        for i, ((n, d), k) in enumerate(zip(SPECS, KEYS, strict=True))
    ]


def _kjts(dynamic: bool) -> list[KeyedJaggedTensor]:
    """Dynamic: other lengths every step; static: the same lengths, other rows."""
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(0, 4, (len(KEYS) * B,), generator=g)
    out = []
    for _ in range(STEPS):
        if dynamic:
            lengths = torch.randint(0, 4, (len(KEYS) * B,), generator=g)
        values = torch.randint(0, 25, (int(lengths.sum()),), generator=g)
        out.append(KeyedJaggedTensor(keys=KEYS, values=values, lengths=lengths).to(NPU))
    return out


def _ebc() -> torch.nn.Module:
    torch.manual_seed(0)
    return EmbeddingBagCollection(tables=_tables(), device=NPU)


def _fused() -> torch.nn.Module:
    torch.manual_seed(0)
    return FusedEmbeddingBagCollection(
        tables=_tables(),
        optimizer_type=torch.optim.SGD,
        optimizer_kwargs={"lr": 0.05},
        device=NPU,
        location=EmbeddingLocation.HOST,
    )


def _twins(build: object) -> tuple[torch.nn.Module, torch.nn.Module]:
    eager, target = build(), build()  # type: ignore[operator]
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for w in eager.state_dict().values():
            w.copy_(torch.rand(w.shape, generator=g) - 0.5)
        target.load_state_dict(eager.state_dict())
    return eager, target


def _close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(
        actual.detach().cpu(),
        expected.detach().cpu(),
        rtol=2e-6,
        atol=2e-6,
        msg=lambda m: f"{what}: {m}",
    )


def _train(build: object, dynamic: bool, torch_optimizer: bool) -> None:
    torch._dynamo.reset()
    eager, target = _twins(build)
    compiled = torch.compile(target, fullgraph=True, backend="aot_eager", dynamic=dynamic)
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (eager, target)]
    initial = {k: v.detach().cpu().clone() for k, v in target.state_dict().items()}
    for k, kjt in enumerate(_kjts(dynamic)):
        outs = []
        for module, opt in zip((eager, compiled), opts, strict=True):
            out = module(kjt)
            assert out.keys() == KEYS and out.values().device == NPU
            g = torch.Generator().manual_seed(k)
            out.values().backward(torch.randn(out.values().shape, generator=g).to(NPU))
            if torch_optimizer:
                opt.step()
                opt.zero_grad()
            outs.append(out.values())
        _close(outs[1], outs[0], f"pooled embeddings of step {k}")
        for (name, a), (_, e) in zip(
            target.state_dict().items(), eager.state_dict().items(), strict=True
        ):
            assert a.device == NPU, name
            _close(a, e, f"{name} after step {k}")
    for name, value in target.state_dict().items():
        assert not torch.equal(value.cpu(), initial[name]), f"{name}: training changed nothing"


def test_compiled_ebc_with_a_torch_optimizer_equals_eager() -> None:
    _train(_ebc, dynamic=False, torch_optimizer=True)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compiled_fused_ebc_on_our_tbe_equals_eager(dynamic: bool) -> None:
    _train(_fused, dynamic=dynamic, torch_optimizer=False)
