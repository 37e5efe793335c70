"""torchrec's quantized inference on npu, unchanged: its quant EBC over upstream's IntNBit TBE.

torchrec's ``quantize_inference_model`` (and ``quant.EmbeddingBagCollection.from_float`` with a
qconfig) applied to a float model already on npu builds upstream's
``IntNBitTableBatchedEmbeddingBagsCodegen`` with ``device=npu`` (``EmbeddingLocation.DEVICE``);
its lookups then run fbgemm_npu's ``int_nbit_split_embedding_codegen_lookup_function``.  No
torchrec symbol needed adapting for this (torchrec's quant path tests ``device.type == "cpu"``,
and every non-cpu device gets the accelerator path, int32 indices included).

Sharded (``shard_quant_model`` on one and two npus, ``fbgemm_npu.integrations.torchrec_quant``):
the tables on the planned npus at ``EmbeddingLocation.DEVICE``, each TBE's lookup counted on our
npu kernel, pooled embeddings per feature vs the unsharded CPU model within the same tolerance.

The oracle: the same float weights quantized and looked up on the CPU by upstream fbgemm.  The
quantized table bytes must be equal (the quantize formats are bit-exact); pooled embeddings within
``1e-5 + 1e-5 * |cpu|`` (the same bytes dequantized, only a summation order may differ), DLRM logits
within ``fbgemm_npu.examples.dlrm_inference``'s ``ATOL + RTOL * |cpu|``.
"""

from __future__ import annotations

import copy

import pytest
import torch

torchrec = pytest.importorskip("torchrec", reason="torchrec is not installed")

from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, KeyedJaggedTensor  # noqa: E402
from torchrec.inference.modules import quantize_inference_model  # noqa: E402
from torchrec.modules.embedding_configs import PoolingType  # noqa: E402

from fbgemm_npu.examples import dlrm_inference  # noqa: E402

# the user's set_propogate_device(True) for a block (torchrec's own inference tests set it)
from fbgemm_npu.integrations.torchrec_quant import propagating_device  # noqa: E402

NPU = torch.device("npu", 0)
ATOL = RTOL = 1e-5
DTYPES = {
    "int8": torch.qint8,
    "fp16": torch.float16,
    "int4": torch.quint4x2,
    "int2": torch.quint2x4,
}


class _Sparse(torch.nn.Module):
    """An EBC-only model: the pooled embeddings of every feature, concatenated."""

    def __init__(self, tables: list[EmbeddingBagConfig]) -> None:
        super().__init__()
        self.ebc = EmbeddingBagCollection(tables=tables, device=torch.device("cpu"))

    def forward(self, kjt: KeyedJaggedTensor) -> torch.Tensor:
        return self.ebc(kjt).values()


def _tables(
    dims: list[int], rows: int = 50, pooling: PoolingType = PoolingType.SUM
) -> list[EmbeddingBagConfig]:
    return [
        EmbeddingBagConfig(
            name=f"t{i}",
            embedding_dim=d,
            num_embeddings=rows,
            feature_names=[f"f{i}"],
            pooling=pooling,
        )
        for i, d in enumerate(dims)
    ]


def _model(tables: list[EmbeddingBagConfig], seed: int = 0) -> _Sparse:
    torch.manual_seed(seed)
    m = _Sparse(tables)
    for t in m.ebc.embedding_bags.values():
        torch.nn.init.uniform_(t.weight, -2.0, 2.0)
    return m.eval()


def _kjt(
    n_features: int, batch: int, rows: int, seed: int = 1, max_bag: int = 4
) -> KeyedJaggedTensor:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, max_bag + 1, (n_features * batch,), generator=g)
    lengths[0] = 0  # an empty bag
    values = torch.randint(0, rows, (int(lengths.sum()),), generator=g)
    return KeyedJaggedTensor.from_lengths_sync(
        keys=[f"f{i}" for i in range(n_features)], values=values, lengths=lengths
    )


def _bytes(q: torch.nn.Module) -> dict[str, torch.Tensor]:
    items = q.state_dict().items()
    return {n: getattr(b, "elem", b).detach().cpu() for n, b in items if "embedding_bags" in n}


def _tbes(q: torch.nn.Module) -> list[torch.nn.Module]:
    from fbgemm_gpu.split_table_batched_embeddings_ops_inference import (
        IntNBitTableBatchedEmbeddingBagsCodegen,
    )

    return [m for m in q.modules() if isinstance(m, IntNBitTableBatchedEmbeddingBagsCodegen)]


def _check_pair(
    q_npu: torch.nn.Module, q_cpu: torch.nn.Module, kjts: list[KeyedJaggedTensor]
) -> None:
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation

    b_npu, b_cpu = _bytes(q_npu), _bytes(q_cpu)
    assert b_npu.keys() == b_cpu.keys() and b_cpu
    for k in b_cpu:
        assert torch.equal(b_npu[k], b_cpu[k]), f"quantized table {k} differs from upstream CPU"
    tbes = _tbes(q_npu)
    assert tbes, "torchrec built no IntNBit TBE"
    for tbe in tbes:  # the tables live on the device, not the host
        assert tbe.current_device.type == "npu"
        assert all(loc == EmbeddingLocation.DEVICE for loc in tbe.weights_physical_placements)
        assert tbe.weights_dev.device.type == "npu" and tbe.weights_dev.numel() > 0
    with torch.inference_mode():
        for kjt in kjts:
            out = q_npu(kjt.to(NPU))
            ref = q_cpu(kjt)
            assert out.device.type == "npu" and out.dtype == ref.dtype and out.shape == ref.shape
            torch.testing.assert_close(out.cpu(), ref, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_quantize_inference_model_per_dtype(dtype: str) -> None:
    tables = _tables([8, 16, 32, 24])  # int2 rows need an even byte count: dim % 8 == 0
    m = _model(tables)
    per_table = dict.fromkeys((t.name for t in tables), DTYPES[dtype])
    q_cpu = quantize_inference_model(copy.deepcopy(m), per_table_weight_dtype=per_table)
    q_npu = quantize_inference_model(copy.deepcopy(m).to(NPU), per_table_weight_dtype=per_table)
    kjts = [_kjt(len(tables), b, 50, seed=s) for s, b in ((1, 5), (2, 1), (3, 17))]
    _check_pair(q_npu, q_cpu, kjts)


def test_mixed_dtypes_mean_pooling_fp16_output() -> None:
    """Three weight dtypes in one TBE (``weights_tys`` per table), mean pooling, half output."""
    tables = _tables([8, 16, 24, 12, 4, 32], pooling=PoolingType.MEAN)
    m = _model(tables, seed=3)
    cycle = [torch.qint8, torch.float16, torch.quint4x2]
    per_table = {t.name: cycle[i % 3] for i, t in enumerate(tables)}
    kw = {"per_table_weight_dtype": per_table, "output_dtype": torch.float16}
    q_cpu = quantize_inference_model(copy.deepcopy(m), **kw)
    q_npu = quantize_inference_model(copy.deepcopy(m).to(NPU), **kw)
    (tbe,) = _tbes(q_npu)
    assert len(set(tbe.weights_tys.cpu().tolist())) == 3
    _check_pair(q_npu, q_cpu, [_kjt(len(tables), 9, 50, seed=7)])


def test_from_float_with_qconfig() -> None:
    """torchrec's other entry: ``quant.EmbeddingBagCollection.from_float``, EBC with a qconfig."""
    from torchrec.quant.embedding_modules import EmbeddingBagCollection as QuantEBC
    from torchrec.quant.embedding_modules import QuantConfig

    qconfig = QuantConfig(
        activation=torch.quantization.PlaceholderObserver.with_args(dtype=torch.float),
        weight=torch.quantization.PlaceholderObserver.with_args(dtype=torch.qint8),
    )
    ebc = _model(_tables([16, 8])).ebc
    ebc_npu = copy.deepcopy(ebc).to(NPU)
    ebc.qconfig = qconfig
    ebc_npu.qconfig = qconfig
    q_cpu, q_npu = QuantEBC.from_float(ebc), QuantEBC.from_float(ebc_npu)
    kjt = _kjt(2, 6, 50, seed=4)
    with torch.inference_mode():
        out = q_npu(kjt.to(NPU))
        ref = q_cpu(kjt)
    assert out.keys() == ref.keys()
    assert out.values().device.type == "npu"
    torch.testing.assert_close(out.values().cpu(), ref.values(), atol=ATOL, rtol=RTOL)


def test_quantized_on_cpu_then_moved_is_refused_by_name() -> None:
    """Quantize where the model serves.

    A CPU-quantized model moved by ``.to(npu)`` keeps its tables in the TBE's ``weights_host`` (a
    plain attribute, as for cuda); the lookup names the op and argument instead of reading host
    memory."""
    tables = _tables([8])
    q = quantize_inference_model(_model(tables)).to(NPU)
    with pytest.raises(
        RuntimeError, match=r"int_nbit_split_embedding_codegen_lookup_function.*dev_weights"
    ):
        with torch.inference_mode():
            q(_kjt(1, 3, 50).to(NPU))


def test_dlrm_inference_example_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m fbgemm_npu.examples.dlrm_inference --shard 2``, tiny: passes, unsharded and
    sharded over npu:0 / npu:1, and says what it ran on."""
    argv = "--tables 3 --rows 40 --dim 8 --batch-size 8 --batches 2 --dtype mixed --shard 2"
    assert dlrm_inference.main(argv.split()) == 0
    text = capsys.readouterr().out
    assert "check: PASS" in text and "samples/s" in text and "FAIL" not in text
    assert "over 2 npu(s), tables on npu:0, npu:1:" in text
    assert "simulated: True" in text or "simulated: False" in text


def test_dlrm_inference_run_detects_a_wrong_result() -> None:
    """The example's checks can fail: a logit offset beyond the tolerance is reported."""
    cfg = dlrm_inference.InferenceConfig(num_tables=2, rows=20, dim=8, batch_size=4, batches=1)
    cfg.shard = 1
    res = dlrm_inference.run(cfg, "simulated")
    assert res.ok and res.bytes_equal and res.outputs_on_device and res.shard_devices == ("npu:0",)
    assert max(res.max_abs_diff, res.shard_max_abs_diff) <= dlrm_inference.ATOL
    for field in ("max_excess", "shard_max_excess"):
        assert not dlrm_inference.InferenceResult(**{**res.__dict__, field: 1e-3}).ok


# --- shard_quant_model: sharded quantized inference on one and two npus (torchrec_quant) -------


def _split_quantized(dims: list[int], dtypes: list[torch.dtype], **kw: object) -> _Sparse:
    """The model quantized on the CPU with split scale / bias state dicts (the sharders' default),
    table ``t{i}`` in ``dtypes[i % len(dtypes)]``."""
    from torchrec.quant.embedding_modules import (
        quant_prep_enable_quant_state_dict_split_scale_bias_for_types as split_scale_bias,
    )

    tables = _tables(dims)
    m = _model(tables, seed=len(dims))
    if kw.pop("split", True):
        split_scale_bias(m, [EmbeddingBagCollection])
    per_table = {t.name: dtypes[i % len(dtypes)] for i, t in enumerate(tables)}
    return quantize_inference_model(m, per_table_weight_dtype=per_table, **kw)


def _shard(q_cpu: torch.nn.Module, world_size: int, **kw: object) -> torch.nn.Module:
    """torchrec's ``shard_quant_model`` onto ``npu:0 .. npu:world_size-1``, then the CPU model's
    tables loaded, as torchrec does (its TBE buffers' layout differs per shard: tables only)."""
    from torchrec.inference.modules import shard_quant_model

    sharded, _ = shard_quant_model(
        copy.deepcopy(q_cpu), world_size=world_size, compute_device="npu",
        sharding_device="npu", **kw,
    )  # fmt: skip
    dst, items = sharded.state_dict(), q_cpu.state_dict().items()
    # INT4 / INT2 whole rows (a plain uint8 shard) as bytes: torchrec's wrappers copy into theirs
    tables = {k: v.elem if type(dst[k]) is torch.Tensor and hasattr(v, "elem") else v
              for k, v in items if ".embedding_bags." in k}  # fmt: skip
    loaded = sharded.load_state_dict(tables, strict=False)
    assert not loaded.unexpected_keys and not [k for k in loaded.missing_keys if "_bags." in k]
    return sharded


def _check_sharded(
    sharded: torch.nn.Module, q_cpu: torch.nn.Module, devices: set[str], n_features: int
) -> None:
    """Tables at EmbeddingLocation.DEVICE on exactly ``devices``; every TBE's lookup runs our npu
    kernel once per batch; pooled embeddings per feature within ATOL + RTOL * |cpu|."""
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation

    from fbgemm_npu.testing.counters import count

    tbes = _tbes(sharded)
    assert {str(t.weights_dev.device) for t in tbes} == devices
    for tbe in tbes:
        assert all(loc == EmbeddingLocation.DEVICE for loc in tbe.weights_physical_placements)
        assert tbe.weights_dev.numel() > 0 and tbe.weights_host.numel() == 0
    for seed, batch in ((1, 5), (2, 1), (3, 17)):
        kjt = _kjt(n_features, batch, 50, seed=seed)
        with torch.inference_mode(), count() as c:
            out = sharded.ebc(kjt.to(NPU)).to_dict()
        with torch.inference_mode():
            ref = q_cpu.ebc(kjt).to_dict()
        lookups = [x for x in c.calls if x.op.startswith("fbgemm.int_nbit_split_embedding_")]
        assert len(lookups) == len(tbes), c.summary()
        assert out.keys() == ref.keys()
        for key, r in ref.items():  # the sharded KeyedTensor orders its keys by shard
            assert out[key].device == NPU and out[key].dtype == r.dtype
            torch.testing.assert_close(out[key].cpu(), r, atol=ATOL, rtol=RTOL)


def test_shard_quant_model_on_one_npu() -> None:
    """torchrec's defaults (table-wise by its planner, split scale / bias), one npu, int8; the
    user sets no propagate-device flag and finds it as it was."""
    from torchrec.distributed.global_settings import get_propogate_device

    q_cpu = _split_quantized([8, 16, 24], [torch.qint8])
    assert not get_propogate_device()
    sharded = _shard(q_cpu, 1)
    assert not get_propogate_device()
    _check_sharded(sharded, q_cpu, {"npu:0"}, 3)


def test_shard_quant_model_on_two_npus_every_sharding_type() -> None:
    """Two npus in one process by an explicit plan: column-wise (ranks 1, 0: permuted), row-wise
    and table-wise on each rank, int8 / int4 / int2 / int8 tables."""
    from torchrec.distributed.sharding_plan import column_wise, row_wise, table_wise
    from torchrec.distributed.sharding_plan import construct_module_sharding_plan as plan_of
    from torchrec.distributed.types import ShardingPlan

    q_cpu = _split_quantized([16, 32, 64, 8], [torch.qint8, torch.quint4x2, torch.quint2x4])
    per_param = {
        "t0": column_wise(ranks=[1, 0], compute_kernel="quant"),
        "t1": row_wise(compute_kernel="quant"),
        "t2": table_wise(rank=1, compute_kernel="quant"),
        "t3": table_wise(rank=0, compute_kernel="quant"),
    }
    msp = plan_of(q_cpu.ebc, per_param, local_size=2, world_size=2, device_type="npu")
    sharded = _shard(q_cpu, 2, sharding_plan=ShardingPlan({"ebc": msp}))
    specs = sorted((str(t.weights_dev.device), s[0], s[1], s[2]) for t in _tbes(sharded)
                   for s in t.embedding_specs)  # fmt: skip
    assert specs == [
        ("npu:0", "t0", 50, 8), ("npu:0", "t1", 25, 32), ("npu:0", "t3", 50, 8),
        ("npu:1", "t0", 50, 8), ("npu:1", "t1", 25, 32), ("npu:1", "t2", 50, 64),
    ]  # fmt: skip
    _check_sharded(sharded, q_cpu, {"npu:0", "npu:1"}, 4)


def test_shard_quant_model_row_wise_by_the_planner_with_propagation_set() -> None:
    """The planner's row-wise plan over two npus, with the user's set_propogate_device(True)
    (torchrec's own inference tests set it): the same result as without it; torchrec's fx trace
    of the sharded model (its publish path) serves the same."""
    from torchrec.distributed.planner import ParameterConstraints
    from torchrec.fx import symbolic_trace

    q_cpu = _split_quantized([8, 16], [torch.quint4x2])
    rw = ParameterConstraints(sharding_types=["row_wise"], compute_kernels=["quant"])
    with propagating_device():
        sharded = _shard(q_cpu, 2, constraints={"t0": rw, "t1": rw})
        _check_sharded(sharded, q_cpu, {"npu:0", "npu:1"}, 2)
    kjt = _kjt(2, 5, 50).to(NPU)
    with torch.inference_mode():
        torch.testing.assert_close(symbolic_trace(sharded)(kjt), sharded(kjt), atol=0, rtol=0)


def test_shard_quant_model_whole_rows_mixed_dtypes_fp16_output() -> None:
    """Sharders without split scale / bias (fp16 tables need it: torchrec's split state dict has
    no qparams for them, on the CPU too): the shards' rows must be the unsharded model's bytes,
    16-byte aligned as on cuda (t0: int8 x 8 = 12 bytes -> 16)."""
    from torchrec.distributed.fused_params import FUSED_PARAM_QUANT_STATE_DICT_SPLIT_SCALE_BIAS
    from torchrec.distributed.fused_params import FUSED_PARAM_REGISTER_TBE_BOOL as REGISTER
    from torchrec.distributed.quant_embeddingbag import QuantEmbeddingBagCollectionSharder

    dtypes = [torch.qint8, torch.float16, torch.quint4x2]
    q_cpu = _split_quantized([8, 16, 24, 12], dtypes, split=False, output_dtype=torch.float16)
    fused = {REGISTER: True, FUSED_PARAM_QUANT_STATE_DICT_SPLIT_SCALE_BIAS: False}
    sharded = _shard(q_cpu, 2, sharders=[QuantEmbeddingBagCollectionSharder(fused_params=fused)])
    assert all(t.row_alignment == 16 for t in _tbes(sharded))
    _check_sharded(sharded, q_cpu, {"npu:0", "npu:1"}, 4)


def test_cpu_sharding_is_torchrecs_own() -> None:
    """Sharded on the CPU the kernel is torchrec's: tables at HOST, row alignment 1."""
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
    from torchrec.inference.modules import shard_quant_model

    q_cpu = _split_quantized([8, 16], [torch.qint8])
    kjt = _kjt(2, 6, 50)
    with propagating_device():  # torchrec's cpu sharding needs it (else it picks cuda)
        sharded, _ = shard_quant_model(copy.deepcopy(q_cpu), compute_device="cpu",
                                       sharding_device="cpu")  # fmt: skip
        sharded.load_state_dict(q_cpu.state_dict(), strict=False)
        (tbe,) = _tbes(sharded)
        assert tbe.row_alignment == 1 and tbe.weights_host.numel() > 0
        assert all(loc == EmbeddingLocation.HOST for loc in tbe.weights_physical_placements)
        with torch.inference_mode():
            torch.testing.assert_close(sharded(kjt), q_cpu(kjt), atol=0, rtol=0)


def test_revert_restores_torchrec_and_apply_reinstalls() -> None:
    """Reverted, an npu shard meets torchrec's HOST tables again (upstream's TBE refuses them)."""
    from torchrec.distributed.quant_embedding_kernel import QuantBatchedEmbeddingBag

    from fbgemm_npu.integrations import torchrec_quant

    q_cpu = _split_quantized([8], [torch.qint8])
    wrapped = QuantBatchedEmbeddingBag.__init__
    try:
        torchrec_quant.revert()
        assert not torchrec_quant.is_applied()
        assert QuantBatchedEmbeddingBag.__init__ is not wrapped
        with propagating_device(), pytest.raises(AssertionError, match="EmbeddingLocation.HOST"):
            _shard(q_cpu, 1)
    finally:
        torchrec_quant.apply()
    assert torchrec_quant.is_applied()
    new = QuantBatchedEmbeddingBag.__init__
    torchrec_quant.apply()  # idempotent: nothing wrapped twice
    assert QuantBatchedEmbeddingBag.__init__ is new
    _check_sharded(_shard(q_cpu, 1), q_cpu, {"npu:0"}, 1)


def test_a_moved_torchrec_is_reported_by_name() -> None:
    from fbgemm_npu.integrations import torchrec_quant as tq

    (patch, *_) = tq.PATCHES
    moved = tq.Patch(patch.module, patch.name, patch.wrapper, consts=("no-such-device",))
    with pytest.raises(RuntimeError, match=r"QuantBatchedEmbeddingBag.__init__.*no-such-device"):
        tq._check_code(moved, tq._resolve(patch)[2].__wrapped__)
