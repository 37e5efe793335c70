"""Hostile input to the inference TBE lookup: errors that name the op and the argument, and the
cases where ours states a behaviour of its own (upstream's FP8 kernel and -1)."""

from __future__ import annotations

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import SparseType as S

import fbgemm_npu
from fbgemm_npu.testing.op_samples_inference import lookup_case, to_device

F = torch.ops.fbgemm
NAME = "int_nbit_split_embedding_codegen_lookup_function"


def _npu(**changes: object) -> dict:
    _, kwargs = to_device(lookup_case([S.INT8, S.INT4], [8, 8], minus_one=False), "npu")
    kwargs.update(changes)
    return kwargs


def _call(kwargs: dict) -> torch.Tensor:
    return F.int_nbit_split_embedding_codegen_lookup_function(**kwargs)


@pytest.mark.parametrize(
    ("arg", "change"),
    [
        ("dev_weights", lambda k: k["dev_weights"].float()),
        ("weights_offsets", lambda k: k["weights_offsets"].int()),
        ("weights_tys", lambda k: k["weights_tys"].int()),
        ("D_offsets", lambda k: k["D_offsets"].long()),
        ("indices", lambda k: k["indices"].float()),
        ("offsets", lambda k: k["offsets"].view(1, -1)),
        ("pooling_mode", lambda k: 3),
        ("output_dtype", lambda k: 3),  # INT4 output: upstream's own kernel crashes on it
        ("output_dtype", lambda k: 2),  # INT8 output of pooled bags
        ("indice_weights", lambda k: torch.ones(1, device="npu")),
        ("indice_weights", lambda k: torch.ones_like(k["indices"], dtype=torch.float16)),
        ("total_D", lambda k: 17),
        ("weights_tys", lambda k: torch.tensor([5, 2], dtype=torch.uint8, device="npu")),
    ],
)
def test_bad_arguments_are_named(arg: str, change) -> None:
    kwargs = _npu()
    kwargs[arg] = change(kwargs)
    with pytest.raises((ValueError, RuntimeError), match=rf"{NAME}.*{arg}"):
        _call(kwargs)


def test_none_tensor_is_named() -> None:
    with pytest.raises(ValueError, match=rf"{NAME}.*'indices'"):
        _call(_npu(indices=None))


def test_out_of_range_index_is_a_queued_error() -> None:
    """Upstream raises for an index past its table; ours queues the check (no sync), clamps
    the row (memory-safe) and raises at the next check point, naming 'indices'."""
    fbgemm_npu.check()
    kwargs = _npu()
    bad = kwargs["indices"].clone()
    bad[0] = 10**6
    out = _call({**kwargs, "indices": bad})
    assert out.shape == (3, 16)
    with pytest.raises(RuntimeError, match=rf"{NAME}.*'indices'"):
        fbgemm_npu.check()
    bad[0] = -2
    _call({**kwargs, "indices": bad})
    with pytest.raises(RuntimeError, match=rf"{NAME}.*'indices'"):
        fbgemm_npu.check()


def test_non_monotone_offsets_are_a_queued_error() -> None:
    fbgemm_npu.check()
    kwargs = _npu()
    off = kwargs["offsets"].clone()
    off[1] = off[-1] + 5
    _call({**kwargs, "offsets": off})
    with pytest.raises(RuntimeError, match=rf"{NAME}.*'offsets'"):
        fbgemm_npu.check()


def test_fp8_without_exponent_parameters() -> None:
    _, kwargs = to_device(lookup_case([S.FP8], [8], minus_one=False), "npu")
    with pytest.raises(RuntimeError, match=rf"{NAME}.*fp8_exponent_bits"):
        _call({**kwargs, "fp8_exponent_bits": -1})


def test_fp8_minus_one_is_skipped() -> None:
    """Upstream's FP8 CPU kernel stops at a -1 index and leaves the rest of that feature's bags
    zero (its other types, and its CUDA kernels, skip a -1: a pruned row).  Ours skips it for
    FP8 too: the float64 sum of the other rows."""
    args, kwargs = lookup_case([S.FP8], [8], minus_one=False)
    kwargs["indices"][0] = -1
    ref = torch.zeros(3, 8, dtype=torch.float64)
    # every row alone (pooling NONE) is upstream's exact decode of the row
    single = F.int_nbit_split_embedding_codegen_lookup_function(
        *args, **{**kwargs, "pooling_mode": 2, "indices": kwargs["indices"].clamp_min(0)}
    ).double()
    off = kwargs["offsets"]
    for b in range(3):
        for i in range(int(off[b]), int(off[b + 1])):
            if kwargs["indices"][i] >= 0:
                ref[b] += single[i]
    got = _call(to_device((args, kwargs), "npu")[1]).cpu()
    torch.testing.assert_close(got.double(), ref, rtol=1e-6, atol=1e-6)


def test_negative_weights_offsets_are_refused() -> None:
    kwargs = _npu()
    kwargs["weights_offsets"] = torch.tensor([0, -64], device="npu")
    with pytest.raises(ValueError, match=rf"{NAME}.*'weights_offsets'"):
        _call(kwargs)


def test_no_bags_gives_upstreams_zeros() -> None:
    """Offsets too short for one bag per feature (B = 0): upstream returns zeros, for NONE one
    row per index."""
    for pooling in (0, 2):
        args, kwargs = lookup_case([S.INT8, S.INT8], [8, 8], pooling=pooling, minus_one=False)
        kwargs["offsets"] = kwargs["offsets"][:1]
        want = F.int_nbit_split_embedding_codegen_lookup_function(*args, **kwargs)
        got = _call(to_device((args, kwargs), "npu")[1]).cpu()
        assert got.shape == want.shape
        torch.testing.assert_close(got, want)


def test_broken_offsets_without_indices_are_a_queued_error() -> None:
    """Bags but no index at all: the offsets are still checked (the fuzz found [0, -1] with no
    index accepted: the early return for an empty batch skipped the checks)."""
    fbgemm_npu.check()
    kwargs = _npu()
    empty = kwargs["indices"][:0]
    for off in ([0, -1, 0, 0, 0, 0, 0], [0, 0, 0, 2, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0]):
        offsets = torch.tensor(off, device="npu")
        out = _call({**kwargs, "indices": empty, "offsets": offsets})
        assert out.shape == (3, 16)
        with pytest.raises(RuntimeError, match=rf"{NAME}.*'offsets'"):
            fbgemm_npu.check()
    good = _call(
        {**kwargs, "indices": empty, "offsets": torch.zeros(7, device="npu", dtype=torch.int64)}
    )
    fbgemm_npu.check()
    assert good.abs().sum().item() == 0


def test_int8_output_minus_one_is_a_zero_row() -> None:
    """Pooling NONE with INT8 output: upstream's CPU kernel leaves the row of a -1 and every row
    after it in the bag unwritten (other bytes each call; the fuzz saw them); ours writes a zero
    row for the -1 and copies the rest, equal to upstream's rows of the same indices without
    the -1."""
    args, kwargs = lookup_case([S.INT8], [8], pooling=2, output=S.INT8, minus_one=False)
    kwargs["indices"][1] = -1
    got = _call(to_device((args, kwargs), "npu")[1]).cpu()
    want = F.int_nbit_split_embedding_codegen_lookup_function(
        *args, **{**kwargs, "indices": kwargs["indices"].clamp_min(0)}
    )
    assert got.dtype == torch.uint8 and got[1].abs().sum().item() == 0
    keep = torch.arange(got.size(0)) != 1
    assert torch.equal(got[keep], want[keep])


def test_d_offsets_of_another_length_refused_for_nobag_too() -> None:
    """Pooling NONE reads max_D, not D_offsets, yet a D_offsets of another T is a broken layout
    (the fuzz found it accepted for NONE when no bag was read)."""
    for off in (lambda k: k["offsets"][:1], lambda k: k["offsets"]):
        _, kwargs = to_device(lookup_case([S.INT8, S.INT4], [8, 8], pooling=2), "npu")
        kwargs.update(D_offsets=kwargs["D_offsets"][:-1], offsets=off(kwargs))
        with pytest.raises(ValueError, match=rf"{NAME}.*'D_offsets'"):
            _call(kwargs)
