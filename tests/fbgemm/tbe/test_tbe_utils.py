"""The TBE utilities upstream serves on CUDA only (its CPU build has the schemas, no kernel):
``transpose_embedding_input`` and ``reset_weight_momentum`` on npu, against references written
from the CUDA kernels' math (``fbgemm_npu/testing/tbe_utils_reference.py``: plain loops), and
their errors.  ``reset_weight_momentum`` is reached as users reach it: upstream's
``SplitTableBatchedEmbeddingBagsCodegen.reset_embedding_weight_momentum`` (and the mirror's
class), on a rowwise AdaGrad TBE that has trained a step."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O

import fbgemm_npu
from fbgemm_npu.testing.op_samples_tbe_utils import reset_args
from fbgemm_npu.testing.tbe_inputs import NPU, make_batches, training_tbe
from fbgemm_npu.testing.tbe_utils_reference import (
    reset_weight_momentum_reference,
    transpose_embedding_input_reference,
)

F = torch.ops.fbgemm
HSC = torch.tensor([0, 10, 25, 40])  # T = 3 features


def _batch(T: int = 3, B: int = 4, seed: int = 0, rows: int = 10) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 4, (T * B,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    return torch.randint(0, rows, (int(offsets[-1]),), generator=g), offsets


def _same(args: tuple[Any, ...], **kw: Any) -> None:
    """Ours on npu equals the reference on the CPU, every output exactly (dtype included)."""
    want = transpose_embedding_input_reference(*args, **kw)
    on = [a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args]
    kw_on = {k: v.to(NPU) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    got = F.transpose_embedding_input(*on, **kw_on)
    fbgemm_npu.check()
    for i, (a, e) in enumerate(zip(got, want, strict=True)):
        assert a.dtype == e.dtype and torch.equal(a.cpu(), e), (i, a.cpu(), e)


@pytest.mark.parametrize("bits", [6, 30, 64])
@pytest.mark.parametrize("nobag", [False, True])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_transpose_embedding_input_equals_the_cuda_math(
    bits: int, nobag: bool, dtype: torch.dtype
) -> None:
    """Pooled and sequence infos; keys below 2**24 (float sort), 2**48 (two digits) and the
    full signed width; int32 and int64 indices; repeated rows (runs longer than 1)."""
    idx, off = _batch(seed=bits)
    _same((HSC.to(dtype), bits, idx.to(dtype), off.to(dtype)), nobag=nobag)


def test_transpose_embedding_input_sorts_by_the_low_bits_only_like_the_radix_sort() -> None:
    """Linear indices past 2**bits: upstream's radix sort reads the low bits (stable), the runs
    are of the full values."""
    idx = torch.tensor([3, 17, 1, 33, 19, 3, 40, 8])
    off = torch.tensor([0, 2, 3, 3, 5, 6, 8])
    _same((HSC, 4, idx, off))


@pytest.mark.parametrize("bits", [26, 29, 30])
def test_transpose_embedding_input_infos_wrap_like_the_uint32(bits: int) -> None:
    """``(t << info_B_num_bits) | b`` as a uint32 read as int32: negative past 2**31."""
    idx, off = _batch(seed=1)
    _same((HSC, 6, idx, off), info_B_num_bits=bits)


@pytest.mark.parametrize("nobag", [False, True])
def test_transpose_embedding_input_vbe(nobag: bool) -> None:
    g = torch.Generator().manual_seed(2)
    bt = [(t, b) for t, n in enumerate([2, 5, 1]) for b in range(n)]  # per-feature batch sizes
    infos = torch.tensor([(t << 26) | b for t, b in bt], dtype=torch.int32)
    lengths = torch.randint(0, 4, (len(bt),), generator=g)
    off = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    idx = torch.randint(0, 10, (int(off[-1]),), generator=g)
    _same((HSC, 6, idx, off), nobag=nobag, vbe_b_t_map=infos, info_B_mask=(1 << 26) - 1)


def test_transpose_embedding_input_index_select_and_total_unique() -> None:
    idx, _ = _batch(seed=3)
    tlo = torch.tensor([0, 5, 5, idx.numel()])
    kw = {"is_index_select": True, "total_L_offsets": tlo, "fixed_L_per_warp": 3}
    _same((HSC, 6, idx, torch.zeros(1, dtype=torch.int64)), num_warps_per_feature=9, **kw)
    idx, off = _batch(seed=4)
    runs = int(
        torch.unique(
            HSC[torch.arange(3).repeat_interleave(4)][
                torch.searchsorted(off[1:], torch.arange(idx.numel()), right=True)
            ]
            + idx
        ).numel()
    )
    for unique in (runs, runs + 5):
        _same((HSC, 6, idx, off), total_unique_indices=unique)


def test_transpose_embedding_input_empty() -> None:
    _same((HSC, 6, torch.zeros(0, dtype=torch.int64), torch.zeros(13, dtype=torch.int64)))
    _same((HSC, 6, torch.zeros(0, dtype=torch.int64), torch.zeros(13, dtype=torch.int64)),
          total_unique_indices=3)  # fmt: skip


def _call_transpose(**kw: Any) -> Any:
    idx, off = _batch(seed=5)
    a = {"hash_size_cumsum": HSC, "total_hash_size_bits": 6, "indices": idx, "offsets": off}
    a.update(kw)
    return F.transpose_embedding_input(
        **{k: v.to(NPU) if isinstance(v, torch.Tensor) else v for k, v in a.items()}
    )


@pytest.mark.parametrize(
    ("kw", "error", "names"),
    [
        ({"offsets": torch.arange(12)}, ValueError, "'offsets'"),  # not B * T + 1
        ({"offsets": torch.arange(13, dtype=torch.int32)}, RuntimeError, "'offsets'"),
        ({"indices": torch.ones(4)}, ValueError, "'indices'"),
        ({"indices": torch.ones(2, 2, dtype=torch.int64)}, ValueError, "'indices'"),
        ({"hash_size_cumsum": torch.tensor([0])}, ValueError, "'hash_size_cumsum'"),
        ({"total_hash_size_bits": -1}, ValueError, "'total_hash_size_bits'"),
        ({"total_unique_indices": -2}, RuntimeError, "'total_unique_indices'"),
        ({"info_B_num_bits": 1}, ValueError, "'info_B_num_bits'"),  # B = 4 > 2**1
        ({"vbe_b_t_map": torch.zeros(12, dtype=torch.int32)}, RuntimeError, "'info_B_mask'"),
        ({"vbe_b_t_map": torch.zeros(3, dtype=torch.int32), "info_B_mask": 7}, ValueError,
         "'vbe_b_t_map'"),
        ({"is_index_select": True}, RuntimeError, "'fixed_L_per_warp'"),
        ({"is_index_select": True, "fixed_L_per_warp": 2, "num_warps_per_feature": 2},
         RuntimeError, "'total_L_offsets'"),
        ({"hash_size_cumsum": None}, ValueError, "'hash_size_cumsum'"),
    ],
)  # fmt: skip
def test_transpose_embedding_input_refuses_bad_arguments_by_name(
    kw: dict[str, Any], error: type, names: str
) -> None:
    with pytest.raises(error, match=f"transpose_embedding_input: argument.*{names}"):
        _call_transpose(**kw)


@pytest.mark.parametrize(
    ("kw", "names"),
    [
        ({"offsets": torch.tensor([0, 2, 3, 3, 5, 6, 8, 9, 9, 9, 9, 9, 99])}, "'offsets'"),
        ({"offsets": torch.tensor([1, 2, 3, 3, 5, 6, 8, 9, 9, 9, 9, 9, 10])}, "'offsets'"),
        ({"total_unique_indices": 1}, "'total_unique_indices'"),
        ({"vbe_b_t_map": torch.full((12,), 9 << 26, dtype=torch.int32), "info_B_mask": 7},
         "'vbe_b_t_map'"),
    ],
)  # fmt: skip
def test_transpose_embedding_input_queues_what_upstream_leaves_undefined(
    kw: dict[str, Any], names: str
) -> None:
    """Offsets that do not cover the indices (upstream leaves them unwritten), more runs than
    ``total_unique_indices`` or a feature past T (upstream writes / reads past its buffers):
    queued data checks, raised at the next check point; the call stays in its buffers."""
    idx = torch.arange(10)
    kw.setdefault("offsets", torch.tensor([0, 2, 3, 3, 5, 6, 8, 9, 9, 9, 9, 9, 10]))
    _call_transpose(indices=idx, **kw)
    with pytest.raises(RuntimeError, match=f"transpose_embedding_input: .*{names}"):
        fbgemm_npu.check()


def _trained(style: str) -> Any:
    """A rowwise AdaGrad TBE after one training step (non-zero momentum)."""
    specs = [(10, 8), (6, 4), (7, 12), (5, 4)]
    if style == "mirror":  # ours, from fbgemm_npu.split_table: npu by default
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation as Loc
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import ComputeDevice as Dev

        from fbgemm_npu.split_table_batched_embeddings_ops_training import (
            SplitTableBatchedEmbeddingBagsCodegen,
        )

        tbe = SplitTableBatchedEmbeddingBagsCodegen(
            [(e, d, Loc.DEVICE, Dev.CUDA) for e, d in specs], optimizer=O.EXACT_ROWWISE_ADAGRAD
        )
    else:
        tbe = training_tbe(O.EXACT_ROWWISE_ADAGRAD, specs, NPU, style="cuda_user")
    with torch.no_grad():
        tbe.weights_dev.copy_(torch.rand(tbe.weights_dev.shape) + 1)
    b = make_batches(specs, 3, 1, seed=0)[0]
    out = tbe(b.indices.to(NPU), b.offsets.to(NPU))
    out.backward(torch.ones_like(out))
    return tbe


@pytest.mark.parametrize("style", ["upstream", "mirror"])
def test_reset_embedding_weight_momentum_equals_the_cuda_math(style: str) -> None:
    """torchrec's ITEP call: buffers mapped to tables out of order, a table without pruned
    rows, a repeated pruned index; every other row and momentum kept."""
    tbe = _trained(style)
    pi = torch.tensor([1, 3, 3, 0, 5, 2, 4, 5, 1])
    pio = torch.tensor([0, 3, 6, 8, 9, 9])
    lt = torch.tensor([0, 1, 2, 3], dtype=torch.int32)
    bid = torch.tensor([0, 2, 1, 4], dtype=torch.int32)  # buffer 3 unused, buffer 4 empty
    before = [t.detach().cpu().clone() for t in (tbe.weights_dev, tbe.momentum1_dev)]
    offs = [t.cpu() for t in (tbe.weights_offsets, tbe.momentum1_offsets, tbe.D_offsets)]
    want = reset_weight_momentum_reference(
        before[0], offs[0], before[1], offs[1], offs[2], pi, pio, lt, bid
    )
    assert (before[1] > 0).sum() > 0 and not torch.equal(want[1], before[1])
    tbe.reset_embedding_weight_momentum(pi, pio, lt, bid)
    fbgemm_npu.check()
    assert torch.equal(tbe.weights_dev.detach().cpu(), want[0])
    assert torch.equal(tbe.momentum1_dev.detach().cpu(), want[1])


@pytest.mark.parametrize("D", [2, 6, 8])
def test_reset_weight_momentum_resets_chunks_of_four_like_the_kernel(D: int) -> None:
    """Direct calls with dims upstream's module never builds (not multiples of 4): the row's
    first ``4 * (D // 4)`` elements, the momentum only with a first chunk; UVM buffers."""
    a = reset_args("cpu")
    a["D_offsets"] = torch.tensor([0, D, D + 4], dtype=torch.int32)
    a["weights_offsets"] = torch.tensor([0, 5 * D])
    a["dev_weights"] = torch.rand(5 * D + 12)
    want = reset_weight_momentum_reference(
        a["dev_weights"], a["weights_offsets"], a["momentum1_dev"], a["momentum1_offsets"],
        a["D_offsets"], a["pruned_indices"], a["pruned_indices_offsets"], a["logical_table_ids"],
        a["buffer_ids"],
    )  # fmt: skip
    on = {k: v.to(NPU) if isinstance(v, torch.Tensor) else v for k, v in a.items()}
    on["uvm_weights"], on["dev_weights"] = on["dev_weights"], on["uvm_weights"]
    F.reset_weight_momentum(**on)
    fbgemm_npu.check()
    assert torch.equal(on["uvm_weights"].cpu(), want[0])
    assert torch.equal(on["momentum1_dev"].cpu(), want[1])


@pytest.mark.parametrize(
    ("change", "error", "names"),
    [
        ({"total_cache_hash_size": 3, "lxu_cache_weights": torch.ones(2, 8)}, RuntimeError,
         "'lxu_cache_weights'"),
        ({"uvm_weights": torch.ones(4)}, RuntimeError, "'dev_weights' and 'uvm_weights'"),
        ({"dev_weights": torch.ones(52, dtype=torch.float8_e4m3fn)}, NotImplementedError,
         "'dev_weights'"),
        ({"momentum1_dev": torch.ones(8, dtype=torch.float16)}, ValueError, "'momentum1_dev'"),
        ({"pruned_indices": torch.ones(4, dtype=torch.int32)}, ValueError, "'pruned_indices'"),
        ({"buffer_ids": torch.zeros(3, dtype=torch.int32)}, ValueError, "'buffer_ids'"),
        ({"D_offsets": torch.tensor([0, 8], dtype=torch.int32)}, ValueError, "'D_offsets'"),
        ({"pruned_indices": None}, ValueError, "'pruned_indices'"),
        ({"momentum1_offsets": torch.tensor([0, 6])}, ValueError, "'momentum1_offsets'"),
        ({"weights_offsets": torch.tensor([-4, 40])}, ValueError, "'weights_offsets'"),
    ],
)  # fmt: skip
def test_reset_weight_momentum_refuses_bad_arguments_by_name(
    change: dict[str, Any], error: type, names: str
) -> None:
    a = {**reset_args("cpu"), **change}
    on = {k: v.to(NPU) if isinstance(v, torch.Tensor) else v for k, v in a.items()}
    with pytest.raises(error, match=f"reset_weight_momentum: argument.*{names}"):
        F.reset_weight_momentum(**on)


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"buffer_ids": torch.tensor([1, 1], dtype=torch.int32)}, "names a buffer twice"),
        ({"buffer_ids": torch.tensor([0, 2], dtype=torch.int32)}, "'buffer_ids' must be < 2"),
        ({"logical_table_ids": torch.tensor([1, 2], dtype=torch.int32)}, "'logical_table_ids'"),
        ({"pruned_indices": torch.tensor([2, 0, 4, 5])}, "'pruned_indices'"),  # table 0: 5 rows
        ({"pruned_indices_offsets": torch.tensor([0, 1, 9])}, "'pruned_indices_offsets'"),
    ],
)  # fmt: skip
def test_reset_weight_momentum_queues_what_would_write_elsewhere(
    change: dict[str, Any], names: str
) -> None:
    """What makes upstream's kernel write outside the pruned rows: queued data checks; the call
    itself writes only inside its buffers."""
    a = {**reset_args("cpu"), **change}
    on = {k: v.to(NPU) if isinstance(v, torch.Tensor) else v for k, v in a.items()}
    F.reset_weight_momentum(**on)
    with pytest.raises(RuntimeError, match=f"reset_weight_momentum: .*{names}"):
        fbgemm_npu.check()
