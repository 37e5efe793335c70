"""Table-batched embeddings on npu: upstream's TBE modules train on the device like on the CPU.

Each test builds upstream's ``SplitTableBatchedEmbeddingBagsCodegen`` twice from the same
weights -- on the CPU (upstream's kernels: the oracle) and on npu (our kernels) -- runs the same
random batches through both, and compares outputs, weights and optimizer states.  Optimizers
upstream's CPU build cannot run (Adam, LAMB, LARS, ...) are checked against the float64
reference in ``tests/_tbe_reference.py`` instead.  Tolerances: fp32 1e-5 (SGD) / 1e-4 (adaptive
optimizers); half precision: 1e-2 relative (one half-precision rounding of a sum, see
``fbgemm_npu.native.fbgemm.tbe.forward``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_embedding_configs import SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
    BoundsCheckMode,
    EmbeddingLocation,
    PoolingMode,
)
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ComputeDevice,
    SplitTableBatchedEmbeddingBagsCodegen,
)

from tests import _tbe_reference as ref

NPU = torch.device("npu")
MIXED = [(40, 8), (25, 16), (30, 8)]
ONE_D = [(40, 8), (25, 8), (30, 8)]


@dataclass
class Batch:
    indices: torch.Tensor
    offsets: torch.Tensor
    per_sample_weights: torch.Tensor | None
    batch_size_per_feature_per_rank: list[list[int]] | None = None


def make_batches(
    specs: list[tuple[int, int]],
    B: int,
    steps: int,
    seed: int,
    weighted: bool = False,
    vbe: list[list[int]] | None = None,
    max_len: int = 4,
) -> list[Batch]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        idx, lens = [], []
        for t, (rows, _) in enumerate(specs):
            n_bags = sum(vbe[t]) if vbe else B
            lt = torch.randint(0, max_len + 1, (n_bags,), generator=g)
            lens.append(lt)
            # a skewed draw so that rows repeat inside a batch (exercises de-duplication)
            idx.append(torch.randint(0, min(rows, 7), (int(lt.sum()),), generator=g))
        lengths = torch.cat(lens)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
        indices = torch.cat(idx)
        psw = torch.rand(indices.numel(), generator=g) if weighted else None
        out.append(Batch(indices, offsets, psw, vbe))
    return out


def build(
    opt: O,
    specs: list[tuple[int, int]],
    device: str,
    style: str = "host",
    **kwargs: object,
) -> SplitTableBatchedEmbeddingBagsCodegen:
    if device == "cpu" or style == "host":
        loc, cd = EmbeddingLocation.HOST, ComputeDevice.CPU
    else:
        loc, cd = EmbeddingLocation.DEVICE, ComputeDevice.CUDA
    kwargs.setdefault("learning_rate", 0.05)
    return SplitTableBatchedEmbeddingBagsCodegen(
        [(e, d, loc, cd) for e, d in specs],
        optimizer=opt,
        device=torch.device(device),
        **kwargs,  # type: ignore[arg-type]
    )


def same_weights(
    a: SplitTableBatchedEmbeddingBagsCodegen, b: SplitTableBatchedEmbeddingBagsCodegen
) -> None:
    with torch.no_grad():
        for x, y in zip(a.split_embedding_weights(), b.split_embedding_weights(), strict=True):
            y.copy_(x.to(y.device))


def run(
    tbe: SplitTableBatchedEmbeddingBagsCodegen,
    batch: Batch,
    device: str,
    idx_dtype: torch.dtype,
    grad_seed: int,
    **kw: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One training step; returns (output, the grad_output it was given)."""
    psw = batch.per_sample_weights
    out = tbe(
        batch.indices.to(device=device, dtype=idx_dtype),
        batch.offsets.to(device=device, dtype=idx_dtype),
        per_sample_weights=None if psw is None else psw.to(device),
        batch_size_per_feature_per_rank=batch.batch_size_per_feature_per_rank,
        **kw,  # type: ignore[arg-type]
    )
    g = torch.Generator().manual_seed(grad_seed)
    grad = torch.randn(out.shape, generator=g).to(out.dtype)
    out.backward(grad.to(device))
    return out, grad


def assert_close(actual: torch.Tensor, expected: torch.Tensor, tol: float, what: str) -> None:
    torch.testing.assert_close(
        actual.detach().cpu().double(), expected.detach().cpu().double(), rtol=tol, atol=tol,
        msg=lambda m: f"{what}: {m}",
    )  # fmt: skip


def compare_training(
    opt: O,
    specs: list[tuple[int, int]],
    *,
    style: str = "host",
    steps: int = 2,
    B: int = 5,
    weighted: bool = False,
    idx_dtype: torch.dtype = torch.int64,
    tol: float = 1e-5,
    vbe: list[list[int]] | None = None,
    **kwargs: object,
) -> None:
    cpu = build(opt, specs, "cpu", **kwargs)
    npu = build(opt, specs, "npu", style, **kwargs)
    same_weights(cpu, npu)
    ftm = kwargs.get("feature_table_map")
    feature_specs = specs if ftm is None else [specs[t] for t in ftm]  # type: ignore[union-attr]
    batches = make_batches(feature_specs, B, steps, seed=7, weighted=weighted, vbe=vbe)
    for i, batch in enumerate(batches):
        o_cpu, _ = run(cpu, batch, "cpu", idx_dtype, grad_seed=i)
        o_npu, _ = run(npu, batch, "npu", idx_dtype, grad_seed=i)
        assert o_npu.device.type == "npu"
        assert o_npu.dtype == o_cpu.dtype and o_npu.shape == o_cpu.shape
        assert_close(o_npu, o_cpu, tol, f"output, step {i}")
        for t, (a, b) in enumerate(
            zip(cpu.split_embedding_weights(), npu.split_embedding_weights(), strict=True)
        ):
            assert_close(b, a, tol, f"weights of table {t}, step {i}")
        for t, (sa, sb) in enumerate(
            zip(cpu.split_optimizer_states(), npu.split_optimizer_states(), strict=True)
        ):
            for a, b in zip(sa, sb, strict=True):
                assert_close(b, a, tol, f"optimizer state of table {t}, step {i}")


@pytest.mark.parametrize("style", ["host", "device"])
@pytest.mark.parametrize(
    ("opt", "tol"),
    [(O.EXACT_SGD, 1e-5), (O.EXACT_ADAGRAD, 1e-4), (O.EXACT_ROWWISE_ADAGRAD, 1e-4)],
)
def test_training_matches_upstream_cpu(opt: O, tol: float, style: str) -> None:
    compare_training(opt, MIXED, style=style, tol=tol)


@pytest.mark.parametrize(
    ("case", "specs", "kwargs"),
    [
        ("mean", MIXED, {"pooling_mode": PoolingMode.MEAN}),
        ("sequence", ONE_D, {"pooling_mode": PoolingMode.NONE}),
        ("weighted", MIXED, {"weighted": True}),
        ("int32", MIXED, {"idx_dtype": torch.int32}),
        ("one_d", ONE_D, {}),
        ("fp16_weights", MIXED, {"weights_precision": SparseType.FP16, "tol": 1e-2}),
        ("fp16_output", MIXED, {"output_dtype": SparseType.FP16, "tol": 1e-2}),
        ("vbe", MIXED, {"vbe": [[2, 3], [1, 4], [5, 0]]}),
    ],
)
def test_modes_match_upstream_cpu(case: str, specs: list[tuple[int, int]], kwargs: dict) -> None:
    kwargs = dict(kwargs)
    kwargs.setdefault("tol", 1e-4)
    compare_training(O.EXACT_ROWWISE_ADAGRAD, specs, **kwargs)


def test_sgd_vbe_and_style_device_matches_upstream_cpu() -> None:
    compare_training(O.EXACT_SGD, MIXED, style="device", vbe=[[2, 3], [1, 4], [5, 0]])


def compare_reference(
    opt: O,
    specs: list[tuple[int, int]],
    *,
    style: str = "device",
    steps: int = 2,
    B: int = 5,
    weighted: bool = False,
    pooling: PoolingMode = PoolingMode.SUM,
    vbe: list[list[int]] | None = None,
    tol: float = 1e-4,
    hp: dict | None = None,
    **kwargs: object,
) -> None:
    """Ours on npu against the float64 reference (optimizers / modes upstream's CPU lacks)."""
    hp = dict(hp or {})
    hp.setdefault("learning_rate", 0.05)
    tbe_hp = dict(hp)
    if "weight_decay_mode" in tbe_hp:
        from fbgemm_gpu.tbe.config.optimizer_config import WeightDecayMode

        tbe_hp["weight_decay_mode"] = WeightDecayMode(tbe_hp["weight_decay_mode"])
    npu = build(opt, specs, "npu", style, pooling_mode=pooling, **tbe_hp, **kwargs)
    g = torch.Generator().manual_seed(3)
    tables = [torch.rand(e, d, generator=g) * 2 - 1 for e, d in specs]
    with torch.no_grad():
        for w, t in zip(npu.split_embedding_weights(), tables, strict=True):
            w.copy_(t)
    name = {
        O.EXACT_SGD: "sgd", O.EXACT_ADAGRAD: "adagrad", O.EXACT_ROWWISE_ADAGRAD: "rowwise_adagrad",
        O.ADAM: "adam", O.PARTIAL_ROWWISE_ADAM: "partial_rowwise_adam", O.LAMB: "lamb",
        O.PARTIAL_ROWWISE_LAMB: "partial_rowwise_lamb", O.LARS_SGD: "lars_sgd",
    }[opt]  # fmt: skip
    extra = kwargs.get("extra_optimizer_config")
    if extra is not None and getattr(extra, "use_rowwise_bias_correction", False):
        hp["use_rowwise_bias_correction"] = 1.0
    reference = ref.ReferenceTBE(tables, name, pooling.value, **hp)
    for i, batch in enumerate(make_batches(specs, B, steps, seed=11, weighted=weighted, vbe=vbe)):
        out, grad = run(npu, batch, "npu", torch.int64, grad_seed=i)
        expected = reference.forward_backward(
            batch.indices, batch.offsets, batch.per_sample_weights, grad, vbe
        )
        assert_close(out.reshape(-1), expected, tol, f"output, step {i}")
        for t, w in enumerate(npu.split_embedding_weights()):
            assert_close(w, reference.tables[t], tol, f"weights of table {t}, step {i}")
        for t, states in enumerate(npu.split_optimizer_states()):
            expected_states = list(reference.states[t])
            if hp.get("use_rowwise_bias_correction"):
                expected_states.append(reference.row_counter[t])
            for s, (a, b) in enumerate(zip(states, expected_states, strict=True)):
                assert_close(a.reshape(b.shape), b, tol, f"state {s} of table {t}, step {i}")


@pytest.mark.parametrize(
    ("opt", "hp"),
    [
        (O.ADAM, {"weight_decay": 0.01}),
        (O.PARTIAL_ROWWISE_ADAM, {"weight_decay": 0.01}),
        (O.LAMB, {"weight_decay": 0.01}),
        (O.PARTIAL_ROWWISE_LAMB, {"weight_decay": 0.01}),
        (O.LARS_SGD, {"weight_decay": 0.01, "eta": 0.01}),
    ],
)
def test_optimizers_upstream_cpu_lacks_match_reference(opt: O, hp: dict) -> None:
    compare_reference(opt, MIXED, hp=hp)


def test_adam_rowwise_bias_correction_matches_reference() -> None:
    from fbgemm_gpu.tbe.config.optimizer_config import UserEnabledConfigDefinition

    compare_reference(
        O.ADAM, MIXED, steps=3,
        extra_optimizer_config=UserEnabledConfigDefinition(use_rowwise_bias_correction=True),
    )  # fmt: skip


@pytest.mark.parametrize(
    "hp",
    [
        {"weight_decay": 0.1, "weight_decay_mode": 1},
        {"weight_decay": 0.1, "weight_decay_mode": 2},
        {"max_norm": 0.5},
    ],
    ids=["L2", "DECOUPLE", "max_norm"],
)
@pytest.mark.parametrize("style", ["host", "device"])
def test_rowwise_adagrad_cuda_features_match_reference(hp: dict, style: str) -> None:
    # upstream's CPU kernel ignores weight decay and max_norm; its CUDA kernel applies them
    compare_reference(O.EXACT_ROWWISE_ADAGRAD, MIXED, style=style, hp=hp)


def test_weighted_mean_matches_reference() -> None:
    # upstream's CPU backward leaves out the 1 / bag length for weighted MEAN (CUDA divides)
    compare_reference(O.EXACT_SGD, MIXED, style="host", weighted=True, pooling=PoolingMode.MEAN)


@pytest.mark.parametrize(
    ("kwargs", "tol"),
    [
        ({"weights_precision": SparseType.BF16}, 3e-2),
        ({"output_dtype": SparseType.BF16}, 2e-2),
        ({"weights_precision": SparseType.FP16, "output_dtype": SparseType.BF16}, 2e-2),
    ],
    ids=["bf16_weights", "bf16_output", "fp16_weights_bf16_output"],
)
def test_bf16_matches_reference(kwargs: dict, tol: float) -> None:
    # upstream's CPU kernels have no bf16; CUDA does
    compare_reference(O.EXACT_ROWWISE_ADAGRAD, MIXED, style="host", tol=tol, **kwargs)


# --- metadata ops: upstream's CPU kernels are the oracle -------------------------------------


def _bounds_check(mode: int, idx: torch.Tensor, off: torch.Tensor, rows: torch.Tensor,
                  device: str, B_offsets: torch.Tensor | None = None) -> object:  # fmt: skip
    idx, off = idx.clone().to(device), off.clone().to(device)
    warn = torch.zeros(1, dtype=torch.int64, device=device)
    try:
        torch.ops.fbgemm.bounds_check_indices(
            rows.to(device), idx, off, mode, warn, None,
            B_offsets=None if B_offsets is None else B_offsets.to(device),
            max_B=-1 if B_offsets is None else 8,
        )  # fmt: skip
    except RuntimeError:
        return "raises"
    return idx.tolist(), off.tolist(), warn.tolist()


@pytest.mark.parametrize("mode", [m.value for m in BoundsCheckMode])
def test_bounds_check_indices_matches_upstream_cpu(mode: int) -> None:
    g = torch.Generator().manual_seed(mode)
    for _ in range(40):
        T, B = (
            int(torch.randint(1, 4, (1,), generator=g)),
            int(torch.randint(1, 4, (1,), generator=g)),
        )
        N = int(torch.randint(0, 12, (1,), generator=g))
        rows = torch.randint(1, 6, (T,), generator=g)
        idx = torch.randint(-2, 7, (N,), generator=g)
        off = torch.sort(torch.randint(0, N + 1, (T * B + 1,), generator=g)).values
        # upstream's CPU kernel reads indices through unrepaired offsets in modes NONE / V2_*
        # (it segfaults on broken ones): break offsets only where it repairs or raises
        if mode <= BoundsCheckMode.IGNORE.value and torch.rand(1, generator=g) < 0.6:
            off[torch.randint(0, T * B + 1, (1,), generator=g)] = torch.randint(
                -3, N + 4, (1,), generator=g
            )
        vbe = None
        if torch.rand(1, generator=g) < 0.3:  # VBE: the same bags, per-feature counts
            vbe = torch.tensor([0, *[B * (t + 1) for t in range(T)]], dtype=torch.int32)
        expected = _bounds_check(mode, idx, off, rows, "cpu", vbe)
        assert _bounds_check(mode, idx, off, rows, "npu", vbe) == expected, (idx, off, rows)


def test_bounds_check_fatal_names_op_and_argument() -> None:
    idx = torch.tensor([0, 9], device=NPU)
    off = torch.tensor([0, 1, 2], device=NPU)
    warn = torch.zeros(1, dtype=torch.int64, device=NPU)
    rows = torch.tensor([5, 5], device=NPU)
    with pytest.raises(RuntimeError, match="bounds_check_indices: argument 'indices'"):
        torch.ops.fbgemm.bounds_check_indices(rows, idx, off, 0, warn)
    with pytest.raises(ValueError, match="bounds_check_indices: argument 'offsets'"):
        torch.ops.fbgemm.bounds_check_indices(rows, idx, off[:2], 1, warn)


def test_vbe_and_infos_metadata_match_upstream_cpu() -> None:
    bs = [[1, 2, 0], [3, 0, 1], [2, 2, 2]]
    dims = [4, 8, 12]
    T, R = len(bs), len(bs[0])
    D_offsets = torch.tensor([0, 4, 12, 24], dtype=torch.int32)
    B_offsets = torch.tensor([0, 3, 7, 13], dtype=torch.int32)
    brpf = torch.tensor([[0, *torch.tensor(b).cumsum(0).tolist()] for b in bs], dtype=torch.int32)
    ofr = [0]
    for r in range(R):
        for t in range(T):
            ofr.append(ofr[-1] + bs[t][r] * dims[t])
    args = (B_offsets, brpf, torch.tensor(ofr), D_offsets)
    nb, mask = torch.ops.fbgemm.get_infos_metadata(D_offsets, 13, T)
    assert torch.ops.fbgemm.get_infos_metadata(D_offsets.to(NPU), 13, T) == (nb, mask)
    expected = torch.ops.fbgemm.generate_vbe_metadata(*args, 12, False, 3, nb, 13)
    actual = torch.ops.fbgemm.generate_vbe_metadata(
        *[a.to(NPU) for a in args], 12, False, 3, nb, 13
    )
    for a, e in zip(actual, expected, strict=True):
        assert a.device.type == "npu" and a.dtype == e.dtype
        assert torch.equal(a.cpu(), e)


# --- budgets (OPS.md section 2) ----------------------------------------------------------------

_OPT_NAMES = {
    O.EXACT_SGD: "sgd", O.EXACT_ADAGRAD: "adagrad", O.EXACT_ROWWISE_ADAGRAD: "rowwise_adagrad",
    O.ADAM: "adam", O.PARTIAL_ROWWISE_ADAM: "partial_rowwise_adam", O.LAMB: "lamb",
    O.PARTIAL_ROWWISE_LAMB: "partial_rowwise_lamb", O.LARS_SGD: "lars_sgd",
}  # fmt: skip


def _lookup_counts(
    monkeypatch: pytest.MonkeyPatch, opt: O, specs: list[tuple[int, int]], B: int
) -> tuple[tuple[int, int], tuple[int, int]]:
    """(launches, syncs) of the lookup op's forward and of the backward + optimizer step, on the
    second training step of a TBE whose layout was registered up front."""
    from fbgemm_npu.split_table import register_tbe_layout
    from fbgemm_npu.testing.counters import count

    name = f"split_embedding_codegen_lookup_{_OPT_NAMES[opt]}_function_pt2"
    real = getattr(torch.ops.fbgemm, name)
    seen: dict[str, object] = {}

    def counted(**kwargs: object) -> torch.Tensor:
        with count() as c:
            out = real(**kwargs)
        seen["forward"] = c
        return out

    monkeypatch.setattr(torch.ops.fbgemm, name, counted)
    tbe = build(opt, specs, "npu", "device")
    register_tbe_layout(tbe)
    fwd = bwd = (0, 0)
    for i, batch in enumerate(make_batches(specs, B, 2, seed=5)):
        out = tbe(batch.indices.to(NPU), batch.offsets.to(NPU))
        grad = torch.ones_like(out)
        with count() as cb:
            out.backward(grad)
        c = seen["forward"]
        fwd, bwd = (c.launches, c.syncs), (cb.launches, cb.syncs)  # type: ignore[attr-defined]
        if i == 0:  # registered layout: even the first call needs no sync
            assert fwd[1] == 0 and bwd[1] == 0, (fwd, bwd)
    return fwd, bwd


@pytest.mark.parametrize("opt", list(_OPT_NAMES))
def test_lookup_budget_is_per_distinct_dim_and_independent_of_table_count(
    monkeypatch: pytest.MonkeyPatch, opt: O
) -> None:
    one = _lookup_counts(monkeypatch, opt, [(50, 8)], B=3)
    many = _lookup_counts(monkeypatch, opt, [(20 + t, 8) for t in range(32)], B=7)
    assert one == many, (one, many)
    (f_launch, f_sync), (b_launch, b_sync) = one
    assert f_sync == 0 and b_sync == 0
    assert f_launch <= 10, f"forward: {f_launch} launches, budget 10 per distinct D"
    assert b_launch <= 40, f"backward + optimizer: {b_launch} launches, budget 40 per distinct D"
    # two distinct dims; every table of one dim starts at the same residue modulo that dim (see
    # fbgemm_npu.native.fbgemm.tbe._utils: the launch count is per (dim, residue) class)
    two_dims = _lookup_counts(monkeypatch, opt, [(30, 8), (30, 16), (26, 8), (40, 16)], B=3)
    assert two_dims[0][0] <= 2 * 10 and two_dims[1][0] <= 2 * 40, two_dims


def _counter_kwargs(case: str) -> dict:
    from fbgemm_gpu.tbe.config.optimizer_config import (
        CounterBasedRegularizationDefinition as Counter,
    )
    from fbgemm_gpu.tbe.config.optimizer_config import (
        CounterWeightDecayMode,
        CowClipDefinition,
        LearningRateMode,
        WeightDecayMode,
    )

    if case.startswith("cowclip"):
        wd_mode = (
            CounterWeightDecayMode.L2 if case == "cowclip_l2" else CounterWeightDecayMode.DECOUPLE
        )
        return {
            "weight_decay": 0.05,
            "weight_decay_mode": WeightDecayMode.COWCLIP,
            "cowclip_regularization": CowClipDefinition(
                counter_weight_decay_mode=wd_mode, counter_halflife=2,
                weight_norm_coefficient=0.5, lower_bound=0.01,
            ),
        }  # fmt: skip
    modes = {
        "counter_decouple": (
            CounterWeightDecayMode.DECOUPLE,
            3,
            LearningRateMode.TAIL_ID_LR_INCREASE,
        ),
        "counter_l2": (CounterWeightDecayMode.L2, -1, LearningRateMode.TAIL_ID_LR_DECREASE),
        "counter_sgd": (CounterWeightDecayMode.DECOUPLE, 0, LearningRateMode.COUNTER_SGD),
        "adagradw": (CounterWeightDecayMode.ADAGRADW, -1, LearningRateMode.EQUAL),
    }
    wd_mode, halflife, lr_mode = modes[case]
    return {
        "weight_decay": 0.05,
        "weight_decay_mode": WeightDecayMode.COUNTER,
        "counter_based_regularization": Counter(
            counter_weight_decay_mode=wd_mode, counter_halflife=halflife,
            adjustment_iter=-1, adjustment_ub=2.0, learning_rate_mode=lr_mode,
        ),
    }  # fmt: skip


@pytest.mark.parametrize(
    "case",
    ["counter_decouple", "counter_l2", "counter_sgd", "adagradw", "cowclip_l2", "cowclip_decouple"],
)
def test_rowwise_adagrad_with_counter_matches_upstream_cpu(case: str) -> None:
    compare_training(O.EXACT_ROWWISE_ADAGRAD, MIXED, steps=3, tol=1e-4, **_counter_kwargs(case))


def _rmsprop_ar_call(device: str, weights: torch.Tensor, state: list[torch.Tensor], batch: Batch,
                     it: int, grad: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """One step of the rowwise_rmsprop_ar pt2 op (no module in 1.8.0 builds it): host layout."""
    dims = [8, 16, 8]
    rows = [40, 25, 30]
    d = torch.device(device)
    w_off = torch.tensor([0, 320, 720], device=d)
    r_off = torch.tensor([0, 40, 65], device=d)
    placements = torch.full((3,), 3, dtype=torch.int32, device=d)
    ph = torch.zeros(0, device=d, requires_grad=True)
    out = torch.ops.fbgemm.split_embedding_codegen_lookup_rowwise_rmsprop_ar_function_pt2(
        placeholder_autograd_tensor=ph,
        weights=[weights, placements, w_off],
        D_offsets=torch.tensor([0, 8, 24, 32], dtype=torch.int32, device=d),
        total_D=sum(dims), max_D=16,
        hash_size_cumsum=torch.tensor([0, 40, 65, 95], device=d), total_hash_size_bits=7,
        indices=batch.indices.to(d), offsets=batch.offsets.to(d), pooling_mode=0,
        indice_weights=None, feature_requires_grad=None, output_dtype=0,
        aux_tensor=[None, None, None, torch.zeros(0, dtype=torch.int32, device=d), *[None] * 3],
        aux_int=[it, 30, (1 << 30) - 1], aux_float=[0.0, 1.0],
        aux_bool=[False, False, True, False, False, False, True],
        momentum1=[state[0], placements, r_off], prev_iter=[state[1], placements, r_off],
        learning_rate_tensor=torch.tensor(0.05), optim_float=[1e-8, 0.3, 0.9, 0.2],
    )  # fmt: skip
    out.backward(grad.to(d))
    del rows
    return out


def test_rowwise_rmsprop_ar_op_matches_upstream_cpu() -> None:
    g = torch.Generator().manual_seed(0)
    weights = torch.rand(960, generator=g)
    ours_w, ours_s = weights.to(NPU), [torch.zeros(95, device=NPU), torch.zeros(95, device=NPU)]
    cpu_s = [torch.zeros(95), torch.zeros(95)]
    for i, batch in enumerate(make_batches(MIXED, 4, 3, seed=2)):
        grad = torch.randn(4, 32, generator=g)
        o_cpu = _rmsprop_ar_call("cpu", weights, cpu_s, batch, i + 1, grad)
        o_npu = _rmsprop_ar_call("npu", ours_w, ours_s, batch, i + 1, grad)
        assert_close(o_npu, o_cpu, 1e-5, f"output, step {i}")
        assert_close(ours_w, weights, 1e-4, f"weights, step {i}")
        for s in range(2):
            assert_close(ours_s[s], cpu_s[s], 1e-4, f"state {s}, step {i}")


@pytest.mark.parametrize("pooling", [PoolingMode.SUM, PoolingMode.MEAN])
def test_per_sample_weight_gradient_matches_upstream_cpu(pooling: PoolingMode) -> None:
    cpu = build(O.EXACT_SGD, MIXED, "cpu", pooling_mode=pooling)
    npu = build(O.EXACT_SGD, MIXED, "npu", "device", pooling_mode=pooling)
    same_weights(cpu, npu)
    batch = make_batches(MIXED, 5, 1, seed=4, weighted=True)[0]
    frg = torch.tensor([1, 0, 1], dtype=torch.int32)
    grads = []
    for tbe, dev in ((cpu, "cpu"), (npu, "npu")):
        psw = batch.per_sample_weights.clone().to(dev).requires_grad_()
        out = tbe(batch.indices.to(dev), batch.offsets.to(dev), per_sample_weights=psw,
                  feature_requires_grad=frg.to(dev))  # fmt: skip
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(dev))
        grads.append(psw.grad)
    assert grads[1].device.type == "npu"
    assert_close(grads[1], grads[0], 1e-5, "per-sample weight gradient")


@pytest.mark.parametrize(
    ("pooling", "weighted"),
    [(PoolingMode.SUM, False), (PoolingMode.MEAN, False), (PoolingMode.SUM, True)],
)
def test_dense_tbe_trains_with_a_torch_optimizer_like_upstream_cpu(
    pooling: PoolingMode, weighted: bool
) -> None:
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        DenseTableBatchedEmbeddingBagsCodegen,
    )

    from fbgemm_npu.split_table import register_tbe_layout

    cpu = DenseTableBatchedEmbeddingBagsCodegen(MIXED, pooling_mode=pooling, use_cpu=True)
    npu = DenseTableBatchedEmbeddingBagsCodegen(MIXED, pooling_mode=pooling, use_cpu=True)
    with torch.no_grad():
        npu.weights.copy_(cpu.weights)
    npu = npu.to(NPU)
    register_tbe_layout(npu)
    opts = [torch.optim.Adagrad(m.parameters(), lr=0.1) for m in (cpu, npu)]
    for i, batch in enumerate(make_batches(MIXED, 5, 2, seed=6, weighted=weighted)):
        outs = []
        for tbe, opt, dev in ((cpu, opts[0], "cpu"), (npu, opts[1], "npu")):
            opt.zero_grad()
            psw = batch.per_sample_weights
            out = tbe(batch.indices.to(dev), batch.offsets.to(dev),
                      per_sample_weights=None if psw is None else psw.to(dev))  # fmt: skip
            out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(i)).to(dev))
            opt.step()
            outs.append(out)
        assert_close(outs[1], outs[0], 1e-5, f"output, step {i}")
        assert_close(npu.weights.grad, cpu.weights.grad, 1e-5, f"weights gradient, step {i}")
        assert_close(npu.weights, cpu.weights, 1e-4, f"weights, step {i}")


def test_none_optimizer_returns_the_weights_gradient() -> None:
    """OptimType.NONE (CUDA only upstream): no update; the gradient of ``weights_dev`` is upstream's
    sparse COO ``[total_hash_size, D]`` -- dense on a backend without sparse tensors (the
    simulator) -- with each touched row's summed gradient."""
    tbe = build(O.NONE, ONE_D, "npu", "device")
    g = torch.Generator().manual_seed(8)
    tables = [torch.rand(e, d, generator=g) for e, d in ONE_D]
    with torch.no_grad():
        for w, t in zip(tbe.split_embedding_weights(), tables, strict=True):
            w.copy_(t)
    reference = ref.ReferenceTBE(tables, "sgd", 0, learning_rate=1.0)
    batch = make_batches(ONE_D, 5, 1, seed=9)[0]
    n_unique = sum(
        int(torch.unique(batch.indices[batch.offsets[t * 5] : batch.offsets[t * 5 + 5]]).numel())
        for t in range(3)
    )
    out, grad = run(tbe, batch, "npu", torch.int64, grad_seed=0, total_unique_indices=n_unique)
    reference.forward_backward(batch.indices, batch.offsets, None, grad)
    assert_close(out.reshape(-1), reference_out(tables, batch), 1e-5, "output")
    wgrad = tbe.weights_dev.grad
    assert wgrad is not None and wgrad.device.type == "npu"
    wgrad = wgrad.to_dense() if wgrad.is_sparse else wgrad
    expected = torch.cat([t - r for t, r in zip(tables, reference.tables, strict=True)])
    assert_close(wgrad, expected, 1e-5, "weights gradient")
    for w, t in zip(tbe.split_embedding_weights(), tables, strict=True):
        assert_close(w, t, 0.0, "weights must not change")


def reference_out(tables: list[torch.Tensor], batch: Batch) -> torch.Tensor:
    return ref.ReferenceTBE(tables, "sgd", 0, learning_rate=0.0).forward_backward(
        batch.indices, batch.offsets, None, torch.zeros(5 * sum(t.size(1) for t in tables))
    )


def test_set_learning_rate_and_state_dict_round_trip() -> None:
    opt = O.EXACT_ROWWISE_ADAGRAD
    cpu = build(opt, MIXED, "cpu")
    npu = build(opt, MIXED, "npu", "device")
    same_weights(cpu, npu)
    b0, b1, b2 = make_batches(MIXED, 4, 3, seed=12)
    for tbe, dev in ((cpu, "cpu"), (npu, "npu")):
        run(tbe, b0, dev, torch.int64, grad_seed=0)
        tbe.set_learning_rate(0.2)
        run(tbe, b1, dev, torch.int64, grad_seed=1)
    assert npu.get_learning_rate() == pytest.approx(0.2)
    restored = build(opt, MIXED, "npu", "device")
    restored.load_state_dict(npu.state_dict())
    restored.set_learning_rate(0.2)
    run(cpu, b2, "cpu", torch.int64, grad_seed=2)
    run(restored, b2, "npu", torch.int64, grad_seed=2)
    for a, b in zip(cpu.split_embedding_weights(), restored.split_embedding_weights(), strict=True):
        assert_close(b, a, 1e-4, "weights after restore")
    for sa, sb in zip(cpu.split_optimizer_states(), restored.split_optimizer_states(), strict=True):
        for a, b in zip(sa, sb, strict=True):
            assert_close(b, a, 1e-4, "optimizer states after restore")


def test_bad_output_dtype_names_op_and_argument() -> None:
    with pytest.raises(ValueError, match="lookup_sgd_function_pt2: argument 'output_dtype'"):
        build(O.EXACT_SGD, MIXED, "npu", "device", output_dtype=SparseType.INT8)(
            torch.tensor([0], device=NPU), torch.tensor([0, 1, 1, 1], device=NPU)
        )


@pytest.mark.parametrize(
    ("pooling", "weighted"),
    [(PoolingMode.MEAN, False), (PoolingMode.SUM, True), (PoolingMode.MEAN, True)],
)
def test_vbe_modes_match_reference(pooling: PoolingMode, weighted: bool) -> None:
    compare_reference(
        O.EXACT_ROWWISE_ADAGRAD, MIXED, style="host", pooling=pooling, weighted=weighted,
        vbe=[[2, 3], [1, 4], [5, 0]],
    )  # fmt: skip


def test_inference_forward_matches_training_forward() -> None:
    tbe = build(O.EXACT_ROWWISE_ADAGRAD, MIXED, "npu", "device")
    batch = make_batches(MIXED, 5, 1, seed=13)[0]
    idx, off = batch.indices.to(NPU), batch.offsets.to(NPU)
    with torch.no_grad():
        eval_out = tbe(idx, off)
    assert eval_out.grad_fn is None
    train_out = tbe(idx, off)
    assert train_out.grad_fn is not None
    assert torch.equal(eval_out.cpu(), train_out.detach().cpu())
    # the PrivateUse1 kernel (below autograd) computes the same forward
    with torch._C._AutoDispatchBelowAutograd():
        below = tbe(idx, off)
    assert torch.equal(below.cpu(), eval_out.cpu())


@pytest.mark.parametrize("opt", [O.EXACT_SGD, O.EXACT_ADAGRAD, O.EXACT_ROWWISE_ADAGRAD])
def test_gradient_clipping_matches_upstream_cpu(opt: O) -> None:
    # upstream clips grad_output itself (before per-sample weights and de-duplication)
    compare_training(opt, MIXED, tol=1e-4, gradient_clipping=True, max_gradient=0.05, weighted=True)


def test_global_weight_decay_sets_prev_iter_of_touched_rows() -> None:
    """DECOUPLE_GLOBAL (mixed dims): each step sets ``prev_iter`` of the touched rows, and only
    theirs, to the iteration (the decay itself is checked against the reference in
    ``conformance/test_tbe.py``)."""
    from fbgemm_gpu.tbe.config.optimizer_config import GlobalWeightDecayDefinition, WeightDecayMode

    tbe = build(
        O.EXACT_ROWWISE_ADAGRAD, MIXED, "npu", "device", weight_decay=0.1,
        weight_decay_mode=WeightDecayMode.DECOUPLE_GLOBAL,
        global_weight_decay=GlobalWeightDecayDefinition(start_iter=0),
    )  # fmt: skip
    for it, batch in enumerate(make_batches(MIXED, 3, 2, seed=1), 1):
        before = tbe.prev_iter_dev.detach().cpu().clone()
        out = tbe(batch.indices.to(NPU), batch.offsets.to(NPU))
        out.backward(torch.ones_like(out))
        after = tbe.prev_iter_dev.detach().cpu()
        changed = after != before
        assert changed.any() and (after[changed] == it).all()
        assert ((after == it) | (after == before)).all()


@pytest.mark.parametrize("opt", [O.EXACT_SGD, O.EXACT_ROWWISE_ADAGRAD])
def test_shared_tables_match_upstream_cpu(opt: O) -> None:
    # two features read table 0: their rows are de-duplicated together (upstream CPU needs the
    # features of a shared table to be adjacent)
    compare_training(opt, MIXED, tol=1e-4, feature_table_map=[0, 0, 1, 2])
