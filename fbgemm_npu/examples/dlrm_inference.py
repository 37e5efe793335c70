"""Quantized DLRM inference on npu, by torchrec's own quantization (the example's entry point).

``python -m fbgemm_npu.examples.dlrm_inference [--dtype int8|int4|fp16|mixed] ...``

torchrec's pieces, unchanged: ``torchrec.models.dlrm.DLRM`` over an ``EmbeddingBagCollection``,
``torchrec.inference.modules.quantize_inference_model`` (the float EBC becomes torchrec's quant
``EmbeddingBagCollection``; its tables live in upstream's IntNBit TBE
(``IntNBitTableBatchedEmbeddingBagsCodegen``, one weight dtype per table in ``weights_tys``),
built with ``device=npu``, i.e. ``EmbeddingLocation.DEVICE``) and ``KeyedJaggedTensor`` batches
on npu.  The float model is moved to the device first and quantized there (the row-wise quantize
ops run on npu); a model quantized on the CPU and then moved with ``.to(npu)`` keeps its tables
on the host, as it does for cuda (the TBE's ``weights_host`` is a plain attribute, not a
buffer): quantize where the model will serve.

The check: the same float weights quantized and served on the CPU by upstream fbgemm are the
oracle.  The quantized table bytes must be equal (the quantize formats are bit-exact) and the
logits must agree within ``ATOL + RTOL * |cpu|`` (the dense MLPs run float32 matmuls, whose
summation order a real NPU may change; on the simulated device they agree exactly).

``--shard N`` (1 or 2) also shards the npu model with torchrec's ``shard_quant_model`` over
``npu:0 .. npu:N-1`` in this one process (table-wise, torchrec's default plan; sharders with whole
quantized rows, which every weight dtype supports), loads the CPU model's quantized tables into
the shards (``load_state_dict``) and checks its logits against the CPU the same way (see
``fbgemm_npu/integrations/torchrec_quant.py``).

Prints samples/s of the npu serving loop (on the simulated device that measures the host CPU
running the simulator, not an NPU), the max difference against the CPU and whether the device is
simulated; exits 1 when the check fails.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from dataclasses import dataclass

import torch

__all__ = [
    "ATOL",
    "DTYPES",
    "RTOL",
    "InferenceConfig",
    "InferenceResult",
    "build_model",
    "main",
    "make_batches",
    "quantize",
    "run",
]

# Logit tolerance vs the CPU oracle: embeddings are looked up from identical bytes, so only the
# float32 dense layers (matmul summation order) and the pooled dequantized sums may differ.
ATOL = 1e-4
RTOL = 1e-3

# Table weight dtypes offered: torchrec's quant EBC supports these for IntNBit TBE tables.
DTYPES: dict[str, torch.dtype] = {
    "int8": torch.qint8,
    "int4": torch.quint4x2,
    "fp16": torch.float16,
}


@dataclass
class InferenceConfig:
    """Model and load of one run (the defaults are a small Criteo-shaped DLRM)."""

    num_tables: int = 8
    rows: int = 1000
    dim: int = 16
    dense_in: int = 13
    batch_size: int = 128
    batches: int = 8
    max_bag: int = 4
    dtype: str = "int8"  # a key of DTYPES, or "mixed": the tables cycle int8, fp16, int4
    seed: int = 0
    shard: int = 0  # > 0: also serve the model sharded by shard_quant_model over this many npus


@dataclass
class InferenceResult:
    """What :func:`run` measured."""

    device_kind: str  # "real" or "simulated"
    samples_per_s: float
    max_abs_diff: float  # logits, npu vs cpu, over every batch
    max_excess: float  # max(|npu - cpu| - (ATOL + RTOL * |cpu|)); <= 0 passes
    bytes_equal: bool  # every quantized table's bytes equal the CPU's
    outputs_on_device: bool
    shard_devices: tuple[str, ...] = ()  # the sharded model's table devices (cfg.shard > 0)
    shard_samples_per_s: float = 0.0
    shard_max_abs_diff: float = 0.0  # sharded npu logits vs cpu
    shard_max_excess: float = float("-inf")  # as max_excess; <= 0 passes

    @property
    def ok(self) -> bool:
        return (
            self.bytes_equal
            and self.outputs_on_device
            and max(self.max_excess, self.shard_max_excess) <= 0.0
        )


def _table_dtypes(cfg: InferenceConfig) -> dict[str, torch.dtype]:
    if cfg.dtype == "mixed":
        cycle = [DTYPES["int8"], DTYPES["fp16"], DTYPES["int4"]]
        return {f"t{i}": cycle[i % 3] for i in range(cfg.num_tables)}
    if cfg.dtype not in DTYPES:
        raise ValueError(
            f"dlrm_inference: dtype must be one of {[*DTYPES, 'mixed']}, got {cfg.dtype!r}"
        )
    return {f"t{i}": DTYPES[cfg.dtype] for i in range(cfg.num_tables)}


def build_model(cfg: InferenceConfig) -> torch.nn.Module:
    """torchrec's float DLRM on the CPU, seeded: ``num_tables`` tables ``t{i}``, ``rows x dim``."""
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
    from torchrec.models.dlrm import DLRM

    torch.manual_seed(cfg.seed)
    tables = [
        EmbeddingBagConfig(
            name=f"t{i}", embedding_dim=cfg.dim, num_embeddings=cfg.rows, feature_names=[f"f{i}"]
        )
        for i in range(cfg.num_tables)
    ]
    ebc = EmbeddingBagCollection(tables=tables, device=torch.device("cpu"))
    for table in ebc.embedding_bags.values():  # the default init is tiny; spread the rows
        torch.nn.init.uniform_(table.weight, -1.0, 1.0)
    model = DLRM(
        embedding_bag_collection=ebc,
        dense_in_features=cfg.dense_in,
        dense_arch_layer_sizes=[32, cfg.dim],
        over_arch_layer_sizes=[32, 1],
        dense_device=torch.device("cpu"),
    )
    return model.eval()


def quantize(model: torch.nn.Module, device: torch.device, cfg: InferenceConfig) -> torch.nn.Module:
    """A copy of ``model`` moved to ``device`` and quantized there by torchrec."""
    from torchrec.inference.modules import quantize_inference_model

    moved = copy.deepcopy(model).to(device)
    return quantize_inference_model(moved, per_table_weight_dtype=_table_dtypes(cfg)).eval()


def make_batches(cfg: InferenceConfig) -> list[tuple[torch.Tensor, object]]:
    """``batches`` CPU batches (dense features, KeyedJaggedTensor); bag lengths 0..max_bag."""
    from torchrec import KeyedJaggedTensor

    g = torch.Generator().manual_seed(cfg.seed + 1)
    keys = [f"f{i}" for i in range(cfg.num_tables)]
    out = []
    for _ in range(cfg.batches):
        dense = torch.randn(cfg.batch_size, cfg.dense_in, generator=g)
        lengths = torch.randint(0, cfg.max_bag + 1, (cfg.num_tables * cfg.batch_size,), generator=g)
        values = torch.randint(0, cfg.rows, (int(lengths.sum()),), generator=g)
        out.append(
            (dense, KeyedJaggedTensor.from_lengths_sync(keys=keys, values=values, lengths=lengths))
        )
    return out


def _table_bytes(qmodel: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Each quantized table's bytes (the quant EBC's ``embedding_bags.<t>.weight``), on the CPU.

    INT4 / INT2 tables come as torchrec's ``UInt4Tensor`` / ``UInt2Tensor`` wrappers, which
    implement no ``aten.equal``: their ``elem`` is the uint8 byte table.
    """
    items = qmodel.state_dict().items()
    return {n: getattr(b, "elem", b).detach().cpu() for n, b in items if "embedding_bags" in n}


def _serve(
    qmodel: torch.nn.Module, batches: list, device: torch.device
) -> tuple[list[torch.Tensor], float]:
    """Logits of every batch on ``device`` and the serving loop's samples/s (inputs moved first)."""
    placed = [(d.to(device), kjt.to(device)) for d, kjt in batches]
    sync = getattr(getattr(torch, device.type, None), "synchronize", None)
    with torch.inference_mode():
        qmodel(*placed[0])  # warm-up: first-call caches
        if sync is not None:
            sync()
        start = time.perf_counter()
        outs = [qmodel(d, kjt) for d, kjt in placed]
        if sync is not None:
            sync()
        elapsed = time.perf_counter() - start
    samples = sum(d.shape[0] for d, _ in placed)
    return outs, samples / max(elapsed, 1e-9)


def _compare(outs: list[torch.Tensor], refs: list[torch.Tensor]) -> tuple[float, float]:
    """max |npu - cpu| and max(|npu - cpu| - (ATOL + RTOL * |cpu|)) over every batch."""
    max_diff, excess = 0.0, float("-inf")
    for o, r in zip(outs, refs, strict=True):
        diff = (o.detach().cpu().float() - r.float()).abs()
        max_diff = max(max_diff, float(diff.max()))
        excess = max(excess, float((diff - (ATOL + RTOL * r.float().abs())).max()))
    return max_diff, excess


def shard(
    qmodel: torch.nn.Module, tables_from: torch.nn.Module, world_size: int
) -> torch.nn.Module:
    """``qmodel`` sharded table-wise by torchrec's ``shard_quant_model`` over ``npu:0 ..
    npu:world_size-1`` (one process: inference sharding needs no process group), with the
    quantized tables of ``tables_from`` loaded; the dense layers stay where ``qmodel`` has them.

    The sharders keep whole quantized rows in the state dict (torchrec's default splits scale /
    bias off, which it supports for integer tables only, not fp16); the npu shards' rows are
    16-byte aligned as the unsharded model's (fbgemm_npu/integrations/torchrec_quant.py).
    """
    from torchrec.distributed.fused_params import (
        FUSED_PARAM_QUANT_STATE_DICT_SPLIT_SCALE_BIAS,
        FUSED_PARAM_REGISTER_TBE_BOOL,
    )
    from torchrec.distributed.quant_embeddingbag import QuantEmbeddingBagCollectionSharder
    from torchrec.inference.modules import shard_quant_model

    fused = {
        FUSED_PARAM_REGISTER_TBE_BOOL: True,
        FUSED_PARAM_QUANT_STATE_DICT_SPLIT_SCALE_BIAS: False,
    }
    sharded, _ = shard_quant_model(
        copy.deepcopy(qmodel), world_size=world_size, compute_device="npu",
        sharding_device="npu", sharders=[QuantEmbeddingBagCollectionSharder(fused_params=fused)],
    )  # fmt: skip
    # tables only (the TBEs' own buffers differ per shard); INT4 / INT2 tables as their bytes:
    # torchrec's UInt4Tensor / UInt2Tensor wrappers do not copy into a plain shard
    items = tables_from.state_dict().items()
    tables = {k: getattr(v, "elem", v) for k, v in items if ".embedding_bags." in k}
    sharded.load_state_dict(tables, strict=False)
    return sharded.eval()


def _table_devices(qmodel: torch.nn.Module) -> tuple[str, ...]:
    from fbgemm_gpu.split_table_batched_embeddings_ops_inference import (
        IntNBitTableBatchedEmbeddingBagsCodegen as TBE,
    )

    devices = {str(m.weights_dev.device) for m in qmodel.modules() if isinstance(m, TBE)}
    return tuple(sorted(devices))


def run(cfg: InferenceConfig, device_kind: str) -> InferenceResult:
    """Quantize one DLRM on npu and on the CPU, serve the same batches on both, compare."""
    model = build_model(cfg)
    batches = make_batches(cfg)
    npu = torch.device("npu", 0)
    q_npu = quantize(model, npu, cfg)
    q_cpu = quantize(model, torch.device("cpu"), cfg)
    b_npu, b_cpu = _table_bytes(q_npu), _table_bytes(q_cpu)
    bytes_equal = b_npu.keys() == b_cpu.keys() and all(
        torch.equal(b_npu[k], b_cpu[k]) for k in b_cpu
    )
    outs, rate = _serve(q_npu, batches, npu)
    refs, _ = _serve(q_cpu, batches, torch.device("cpu"))
    on_device = all(o.device.type == "npu" for o in outs)
    res = InferenceResult(device_kind, rate, *_compare(outs, refs), bytes_equal, on_device)
    if cfg.shard > 0:
        sharded = shard(q_npu, q_cpu, cfg.shard)
        s_outs, res.shard_samples_per_s = _serve(sharded, batches, npu)
        res.shard_devices = _table_devices(sharded)
        res.outputs_on_device &= all(o.device == npu for o in s_outs)
        res.shard_max_abs_diff, res.shard_max_excess = _compare(s_outs, refs)
        if res.shard_devices != tuple(f"npu:{i}" for i in range(cfg.shard)):
            res.shard_max_excess = float("inf")  # the tables are not where the plan put them
    return res


def _activate_device() -> str:
    """Import fbgemm_npu and make ``npu`` usable: the real device, else the simulated one."""
    import fbgemm_npu

    kind = fbgemm_npu.device_kind()
    if kind == "none":
        os.environ["FBGEMM_NPU_SIMULATE"] = "1"
        from fbgemm_npu.testing import simulate

        kind = simulate()
    return kind


def main(argv: list[str] | None = None) -> int:
    """Command line entry: prints the result, returns 0 when the check passes, else 1."""
    d = InferenceConfig()
    p = argparse.ArgumentParser(
        prog="python -m fbgemm_npu.examples.dlrm_inference", description=__doc__.split("\n")[0]
    )
    p.add_argument("--tables", type=int, default=d.num_tables)
    p.add_argument("--rows", type=int, default=d.rows)
    p.add_argument("--dim", type=int, default=d.dim, help="embedding dim (a multiple of 4)")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--batches", type=int, default=d.batches)
    p.add_argument("--max-bag", type=int, default=d.max_bag)
    p.add_argument("--dtype", default=d.dtype, choices=[*DTYPES, "mixed"])
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument(
        "--shard", type=int, default=d.shard, choices=[0, 1, 2],
        help="also serve it sharded by torchrec's shard_quant_model over 1 or 2 npus",
    )  # fmt: skip
    a = p.parse_args(argv)
    cfg = InferenceConfig(
        num_tables=a.tables, rows=a.rows, dim=a.dim, batch_size=a.batch_size, batches=a.batches,
        max_bag=a.max_bag, dtype=a.dtype, seed=a.seed, shard=a.shard,
    )  # fmt: skip
    kind = _activate_device()
    import torchrec  # noqa: F401  - importing torchrec applies fbgemm_npu's torchrec adaptations

    res = run(cfg, kind)
    simulated = kind != "real"
    print(f"device: {'SIMULATED npu (host CPU runs the kernels)' if simulated else 'Ascend NPU'}")
    print(
        f"model: DLRM, {cfg.num_tables} tables x {cfg.rows} rows x {cfg.dim}, weights {cfg.dtype}; "
        f"{cfg.batches} batches of {cfg.batch_size}"
    )
    print(
        f"throughput: {res.samples_per_s:.1f} samples/s"
        + (" (simulated device)" if simulated else "")
    )
    print(f"max |npu - cpu| logits: {res.max_abs_diff:.3g} (tolerance {ATOL} + {RTOL} * |cpu|)")
    print(
        f"quantized tables equal to cpu: {res.bytes_equal}; outputs on npu: {res.outputs_on_device}"
    )
    if cfg.shard:
        print(
            f"sharded (shard_quant_model, table-wise) over {cfg.shard} npu(s), tables on "
            f"{', '.join(res.shard_devices)}: {res.shard_samples_per_s:.1f} samples/s, "
            f"max |npu - cpu| logits {res.shard_max_abs_diff:.3g}; check: "
            + ("PASS" if res.shard_max_excess <= 0.0 else "FAIL")
        )
    print(f"simulated: {simulated}")
    print("check: " + ("PASS" if res.ok else "FAIL"))
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
