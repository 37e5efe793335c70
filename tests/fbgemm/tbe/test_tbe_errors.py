"""What the tbe fuzz tests (tests/fuzz/test_fuzz_tbe.py) found, each pinned by a deterministic
case: upstream's TBE module on npu against the same module on the CPU (upstream's kernels) in
the program of ``fbgemm_npu/testing/fuzz_tbe.py``, or a clear error naming the op and the
argument (docs/design.md rule 9) where upstream raises, crashes or reads past its buffers.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing.fuzz_tbe import tbe_step
from fbgemm_npu.testing.tbe_inputs import NPU, host_layout, rmsprop_ar_kwargs, rmsprop_ar_lookup

SGD = "fbgemm::split_embedding_codegen_lookup_sgd_function_pt2"
BOUNDS = "fbgemm::bounds_check_indices"
RMSPROP = "fbgemm::split_embedding_codegen_lookup_rowwise_rmsprop_ar_function_pt2"
SPECS = [(5, 4), (6, 8)]
INDICES = [0, 1, 2, 3, 4, 1]


def _weights(specs: list[tuple[int, int]] = SPECS) -> torch.Tensor:
    total = sum(r * d for r, d in specs)
    return torch.rand(total, generator=torch.Generator().manual_seed(0)) - 0.5


def _both(indices: list[int], offsets: list[int], **kw: Any) -> tuple[Any, Any]:
    """The program on npu and on the CPU (upstream), same inputs."""
    w, i, o = _weights(kw.get("specs", SPECS)), torch.tensor(indices), torch.tensor(offsets)
    kw.setdefault("specs", SPECS)
    ours = tbe_step(w.to(NPU), i.to(NPU), o.to(NPU), **kw)
    theirs = tbe_step(w, i, o, **kw)
    return ours, theirs


def _assert_same(ours: Any, theirs: Any) -> None:
    out, tables, states, _, _ = ours
    torch.testing.assert_close(out.cpu(), theirs[0], rtol=1e-5, atol=1e-6)
    for a, e in zip(tables + states, theirs[1] + theirs[2], strict=True):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("optimizer", ["EXACT_SGD", "EXACT_ROWWISE_ADAGRAD"])
def test_mean_ignores_the_indices_past_the_last_offset_like_upstream(optimizer: str) -> None:
    """Was silently wrong: torch's mean bag counted the indices past ``offsets[-1]`` into the
    last bag's divisor (upstream ignores them)."""
    specs = [(1, 4)]
    kw = {"specs": specs, "optimizer": optimizer, "mode": "NONE", "pooling": "MEAN"}
    ours, theirs = _both([0] * 6, [0, 2, 3], grad_seed=0, **kw)
    _assert_same(ours, theirs)


@pytest.mark.parametrize("optimizer", ["EXACT_SGD", "EXACT_ROWWISE_ADAGRAD"])
def test_no_bags_with_indices_trains_nothing_like_upstream(optimizer: str) -> None:
    """Was a crash of the backward (``Index 0 ... not in the valid range [0, 0)``): offsets
    ``[0]`` (B = 0) with indices, every index past the end (BoundsCheckMode.NONE; the other
    modes refuse or move the last offset)."""
    kw = {"specs": [(1, 4)], "optimizer": optimizer, "mode": "NONE", "grad_seed": 1}
    ours, theirs = _both([0, 0, 0], [0], **kw)
    assert ours[0].shape == (0, 4)
    _assert_same(ours, theirs)


@pytest.mark.parametrize(
    ("offsets", "why"),
    [
        ([0, 3, 2, 5, 6], "decreases"),  # upstream's CPU kernel reads uninitialised memory
        ([0, 1, 2, 3, 9], "past the end"),
        ([0, -3, 2, 5, 6], "negative"),
        ([2, 3, 4, 5, 6], "not from 0"),  # upstream skips indices[:2]; torch's bag cannot
    ],
)
def test_broken_offsets_without_a_bounds_check_raise_naming_offsets(
    offsets: list[int], why: str
) -> None:
    """Were torch's internal messages (``Expected i < index_size``, ``offsets[0] has to be
    0``) or, on a device without those checks, reads past the buffers: BoundsCheckMode.NONE
    hands broken offsets to the lookup, whose data check now refuses them."""
    w = _weights().to(NPU)
    with pytest.raises(RuntimeError, match=f"{SGD}.*'offsets'"):
        tbe_step(
            w,
            torch.tensor(INDICES).to(NPU),
            torch.tensor(offsets).to(NPU),
            specs=SPECS,
            mode="NONE",
        )
        fbgemm_npu.check()  # where a caller reads the result: the data checks deferred


@pytest.mark.parametrize("pooling", ["SUM", "MEAN"])
# FATAL's bounds check refuses all but offsets not from 0 (as upstream's): the lookup's check does
@pytest.mark.parametrize(("mode", "op"), [("NONE", SGD), ("FATAL", f"({BOUNDS}|{SGD})")])
@pytest.mark.parametrize(
    "offsets", [[0, 3, 2, 5, 6], [0, 1, 2, 3, 9], [0, -3, 2, 5, 6], [2, 3, 4, 5, 6]]
)
def test_broken_offsets_with_deferred_checks_stay_in_the_buffers(
    offsets: list[int], mode: str, op: str, pooling: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was torch's ``offsets[0] has to be 0`` / ``offsets[-1] can not be greater than input's
    length`` from inside the forward (a 910B's bag kernel reads past ``indices``): with the
    checks deferred the call runs on, so the bag kernel takes all-zero offsets where the check
    failed; the call returns (forward and backward) and the queued check names the op and
    'offsets'."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "deferred")
    fbgemm_npu.check()
    w = _weights().to(NPU)
    idx, off = torch.tensor(INDICES).to(NPU), torch.tensor(offsets).to(NPU)
    tbe_step(w, idx, off, specs=SPECS, mode=mode, pooling=pooling, grad_seed=0)
    with pytest.raises(RuntimeError, match=f"{op}: .*'offsets'"):
        fbgemm_npu.check()


@pytest.mark.parametrize("offsets", [[], [0, 1, 3, 6]])
def test_offsets_of_the_wrong_length_raise_naming_offsets(offsets: list[int]) -> None:
    """Were ``Trying to create tensor with negative dimension`` (empty offsets) or a wrong
    bag count; upstream's CPU bounds check segfaults on empty offsets."""
    w, i = _weights().to(NPU), torch.tensor(INDICES).to(NPU)
    o = torch.tensor(offsets, dtype=torch.int64).to(NPU)
    with pytest.raises(ValueError, match=f"{SGD}: argument 'offsets' has {len(offsets)}"):
        tbe_step(w, i, o, specs=SPECS, mode="NONE")
    if not offsets:
        warning = torch.zeros(1, dtype=torch.int64, device=NPU)
        rows = torch.tensor([5, 6], device=NPU)
        with pytest.raises(ValueError, match=f"{BOUNDS}: argument 'offsets' is empty"):
            torch.ops.fbgemm.bounds_check_indices(rows, i, o, 1, warning)


@pytest.mark.parametrize("mode", ["WARNING", "NONE"])
@pytest.mark.parametrize("which", ["indices", "offsets", "per_sample_weights"])
def test_an_input_on_another_device_raises_naming_it(mode: str, which: str) -> None:
    """Was torch's ``Expected all tensors to be on the same device`` (naming no op)."""
    w = _weights().to(NPU)
    i, o = torch.tensor(INDICES).to(NPU), torch.tensor([0, 1, 2, 3, 6]).to(NPU)
    psw = torch.rand(len(INDICES)).to(NPU)
    args = {"indices": i, "offsets": o, "per_sample_weights": psw}
    args[which] = args[which].cpu()
    op = BOUNDS if mode == "WARNING" else SGD
    arg = "weights" if which == "per_sample_weights" and mode == "WARNING" else which
    arg = "indice_weights" if which == "per_sample_weights" and mode == "NONE" else arg
    with pytest.raises(RuntimeError, match=f"{op}: arguments .*'{arg}'.* same device"):
        tbe_step(
            w, args["indices"], args["offsets"], args["per_sample_weights"], specs=SPECS, mode=mode
        )


@pytest.mark.parametrize("n", [5, 7])
def test_per_sample_weights_of_the_wrong_length_raise(n: int) -> None:
    """Without a bounds check (which checks the length) the lookup names them."""
    w, i = _weights().to(NPU), torch.tensor(INDICES).to(NPU)
    o, psw = torch.tensor([0, 1, 2, 3, 6]).to(NPU), torch.rand(n).to(NPU)
    match = f"{SGD}: argument 'indice_weights'.* has {n} elements; it must have one per index"
    with pytest.raises(ValueError, match=match):
        tbe_step(w, i, o, psw, specs=SPECS, mode="NONE")
    # the raw op (upstream's modules cast the weights to float32 first)
    layout = host_layout(SPECS, NPU)
    states = [torch.zeros(layout.total_rows, device=NPU) for _ in range(2)]
    kwargs = rmsprop_ar_kwargs(layout, _weights().to(NPU), states, i, o, 1)
    kwargs["indice_weights"] = torch.ones(len(INDICES), dtype=torch.float64, device=NPU)
    with pytest.raises(ValueError, match=f"{RMSPROP}: argument 'indice_weights'.*1-D float32"):
        rmsprop_ar_lookup(**kwargs)


@pytest.mark.parametrize("which", ["indices", "offsets"])
def test_bounds_check_cannot_repair_an_expanded_tensor_in_place(which: str) -> None:
    """Was torch's ``more than one element of the written-to tensor refers to a single memory
    location``: WARNING and IGNORE write their repairs into ``indices`` / ``offsets``."""
    rows = torch.tensor([5, 6], device=NPU)
    i = torch.tensor([1, 1, 1, 1], device=NPU)
    o = torch.tensor([0, 1, 2, 3, 4], device=NPU)
    if which == "indices":
        i = i[:1].expand(4)
    else:
        o = torch.zeros(1, dtype=torch.int64, device=NPU).expand(5)
    warning = torch.zeros(1, dtype=torch.int64, device=NPU)
    with pytest.raises(ValueError, match=f"{BOUNDS}: argument '{which}' has elements that share"):
        torch.ops.fbgemm.bounds_check_indices(rows, i, o, 1, warning)
    if which == "indices":
        torch.ops.fbgemm.bounds_check_indices(rows, i, o, 0, warning)  # FATAL writes nothing


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.uint8])
def test_non_integer_indices_raise_naming_indices(dtype: torch.dtype) -> None:
    """BoundsCheckMode.NONE hands them straight to the lookup."""
    w, o = _weights().to(NPU), torch.tensor([0, 1, 2, 3, 6]).to(NPU)
    i = torch.tensor(INDICES).to(dtype).to(NPU)
    with pytest.raises(ValueError, match=f"{SGD}: argument 'indices' must have dtype"):
        tbe_step(w, i, o, specs=SPECS, mode="NONE")


def test_bounds_check_weights_of_the_wrong_size_raise_runtime_error_like_upstream() -> None:
    """Upstream's CPU kernel raises RuntimeError ("weights size 3 is not equal to indices size
    2"); ours raised ValueError: the same type now, with our message naming op and argument."""
    rows, i, o = torch.tensor([10, 10]), torch.tensor([1, 2]), torch.tensor([0, 1, 2])
    w = torch.ones(3)
    for device, match in (("cpu", "weights size 3 is not equal to indices size 2"), (NPU, None)):
        warning = torch.zeros(1, dtype=torch.int64, device=device)
        args = [t.to(device) for t in (rows, i, o)]
        with pytest.raises(RuntimeError, match=match or f"{BOUNDS}: argument 'weights' has 3"):
            torch.ops.fbgemm.bounds_check_indices(*args, 1, warning, w.to(device))


def _nfp8_tbe(style: str, optimizer: Any) -> Any:
    from fbgemm_gpu.split_embedding_configs import SparseType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation as Loc
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import ComputeDevice as Dev

    if style == "mirror":  # ours, from fbgemm_npu.split_table: npu by default
        from fbgemm_npu.split_table_batched_embeddings_ops_training import (
            SplitTableBatchedEmbeddingBagsCodegen as TBE,
        )
    else:
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            SplitTableBatchedEmbeddingBagsCodegen as TBE,
        )
    where = (Loc.HOST, Dev.CPU) if style == "cpu" else (Loc.DEVICE, Dev.CUDA)
    kw = {} if style == "cpu" else {"device": torch.device(NPU)}
    specs = [(r, d, *where) for r, d in SPECS]
    return TBE(specs, optimizer=optimizer, weights_precision=SparseType.NFP8, **kw)


@pytest.mark.parametrize("style", ["upstream", "mirror"])
@pytest.mark.parametrize("optimizer", ["EXACT_SGD", "EXACT_ROWWISE_ADAGRAD"])
@pytest.mark.parametrize("grad", [True, False], ids=["train", "eval"])
def test_nfp8_weights_raise_naming_weights_like_upstream_cpu(
    style: str, optimizer: str, grad: bool
) -> None:
    """``weights_precision=SparseType.NFP8`` (float8_e4m3fn tables) built on npu and failed deep
    inside the forward (torch's embedding bag refusing the dtype).  Upstream's CPU kernel has no
    FP8 forward either and raises NotImplementedError; ours raises that class before launching
    anything, naming the op, the argument and the precision."""
    from fbgemm_gpu.split_embedding_configs import EmbOptimType

    opt = getattr(EmbOptimType, optimizer)
    idx, off = torch.tensor(INDICES), torch.tensor([0, 2, 3, 4, 6])
    cpu = _nfp8_tbe("cpu", opt)
    with pytest.raises(NotImplementedError, match="Float8_e4m3fn"):
        cpu(idx, off)
    tbe = _nfp8_tbe(style, opt)
    assert tbe.split_embedding_weights()[0].dtype == torch.float8_e4m3fn
    with torch.set_grad_enabled(grad), pytest.raises(NotImplementedError) as err:
        tbe(idx.to(NPU), off.to(NPU))
    msg = str(err.value)
    assert "split_embedding_codegen_lookup_" in msg and "argument 'weights'" in msg
    assert "NFP8" in msg and "float8_e4m3fn" in msg


def _dense_lookup(w: torch.Tensor) -> torch.Tensor:
    dev = w.device
    return torch.ops.fbgemm.dense_embedding_codegen_lookup_function(
        dev_weights=w, weights_offsets=torch.tensor([0, 20], device=dev),
        D_offsets=torch.tensor([0, 4, 12], dtype=torch.int32, device=dev), total_D=12, max_D=8,
        hash_size_cumsum=torch.tensor([0, 5, 11], device=dev), total_hash_size_bits=4,
        indices=torch.tensor(INDICES, device=dev), offsets=torch.tensor([0, 3, 6], device=dev),
        pooling_mode=0, indice_weights=None, feature_requires_grad=None, output_dtype=0,
    )  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float8_e5m2, torch.int32, torch.uint8], ids=str)
def test_dense_lookup_refuses_non_float_weights_naming_dev_weights(dtype: torch.dtype) -> None:
    """The dense lookup op called with tables of a dtype our lookups do not read: upstream's
    CPU kernel raises NotImplementedError for FP8 and int32 rows (it reads uint8 rows, which a
    training TBE cannot build on npu); ours raises that class for all three, naming
    'dev_weights', where it failed inside torch's embedding bag."""
    w = torch.zeros(sum(r * d for r, d in SPECS), dtype=dtype)
    if dtype != torch.uint8:
        with pytest.raises(NotImplementedError, match="not implemented for"):
            _dense_lookup(w)
    match = "dense_embedding_codegen_lookup_function: argument 'dev_weights'"
    with pytest.raises(NotImplementedError, match=match):
        _dense_lookup(w.to(NPU))
