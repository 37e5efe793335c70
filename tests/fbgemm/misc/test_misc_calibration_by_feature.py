"""``fbgemm::histogram_binning_calibration_by_feature`` and
``fbgemm::generic_histogram_binning_calibration_by_feature`` on npu: parity with upstream's CPU
kernels (ids exact, predictions within rounding) over segment lengths 0 / 1 / 2, values past
``num_segments`` and negative ones, int32 / int64 metadata; and the errors of bad input, each
naming the op and the argument."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native._pending import check

F = torch.ops.fbgemm
NPU = "npu"
S, NB = 4, 10
TOL = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}


def _npu(args: tuple) -> tuple:
    return tuple(a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args)


def _common(n: int, dtype: torch.dtype, meta: torch.dtype, seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    logit = (torch.randn(n, generator=g) * 3).to(dtype)
    sl = torch.randint(0, 3, (n,), generator=g).to(meta)
    sv = torch.randint(-2, S + 3, (int(sl.sum()),), generator=g).to(meta)
    ex = torch.randint(0, 30, ((S + 1) * NB,), generator=g).double()
    ex[::3] = 0
    pos = (ex * torch.rand(ex.numel(), generator=g, dtype=torch.float64)).floor()
    return logit, sv, sl, ex, pos


def _same(want: tuple, got: tuple, dtype: torch.dtype) -> None:
    assert got[0].dtype == dtype and got[0].shape == want[0].shape
    torch.testing.assert_close(got[1].cpu(), want[1], rtol=0, atol=0)
    tol = TOL[dtype]
    torch.testing.assert_close(got[0].cpu().float(), want[0].float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("meta", [torch.int64, torch.int32])
@pytest.mark.parametrize("n", [0, 9, 400])
def test_by_feature_equals_upstream_cpu(dtype: torch.dtype, meta: torch.dtype, n: int) -> None:
    logit, sv, sl, ex, pos = _common(n, dtype, meta, n)
    args = (logit, sv, sl, S, ex, pos, NB, 0.4, 0.0, 1.0, 5, 0.9)
    want = F.histogram_binning_calibration_by_feature(*args)
    got = F.histogram_binning_calibration_by_feature(*_npu(args))
    check()
    _same(want, got, dtype)


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("meta", [torch.int64, torch.int32])
@pytest.mark.parametrize("n", [0, 9, 400])
def test_generic_equals_upstream_cpu(dtype: torch.dtype, meta: torch.dtype, n: int) -> None:
    logit, sv, sl, ex, pos = _common(n, dtype, meta, n + 1)
    edges = torch.sort(torch.rand(NB - 1, generator=torch.Generator().manual_seed(n)))[0]
    args = (logit, sv, sl, S, ex, pos, edges.double(), 2.0, 3, 0.7)
    want = F.generic_histogram_binning_calibration_by_feature(*args)
    got = F.generic_histogram_binning_calibration_by_feature(*_npu(args))
    check()
    _same(want, got, dtype)


LOGIT, SV, SL, EX, POS = _common(6, torch.float32, torch.int64, 7)
BY = (LOGIT, SV, SL, S, EX, POS, NB, 0.4, 0.0, 1.0, 5, 0.9)
BAD_BY = {
    "lengths per logit": ((LOGIT, SV, SL[:4], *BY[3:]), "segment_lengths"),
    "negative length": ((LOGIT, SV, torch.tensor([1, -1, 1, 1, 0, 0]), *BY[3:]), "segment_lengths"),
    "lengths past values": ((LOGIT, SV[:0], torch.ones(6, dtype=torch.int64), *BY[3:]), "segment"),
    "float values": ((LOGIT, SV.float(), *BY[2:]), "segment_value"),
    "float32 bins": ((*BY[:4], EX.float(), *BY[5:]), "bin_num_examples"),
    "bins past the table": ((*BY[:6], NB * 3, *BY[7:]), "num_bins"),
}


@pytest.mark.parametrize("name", list(BAD_BY))
def test_by_feature_bad_input(name: str) -> None:
    args, arg = BAD_BY[name]
    op = "histogram_binning_calibration_by_feature"
    with pytest.raises((RuntimeError, ValueError), match=op) as info:
        F.histogram_binning_calibration_by_feature(*_npu(args))
        check()  # a queued data check is read here
    assert arg in str(info.value)


def test_generic_bad_table_size_and_boundaries_dtype() -> None:
    edges = torch.linspace(0.1, 0.9, NB - 1, dtype=torch.float64)
    op = "generic_histogram_binning_calibration_by_feature"
    args = (LOGIT, SV, SL, S, EX[:-1], POS[:-1], edges, 0.4, 5, 0.9)
    with pytest.raises(ValueError, match=f"{op}.*bin_num_examples"):
        F.generic_histogram_binning_calibration_by_feature(*_npu(args))
    args = (LOGIT, SV, SL, S, EX, POS, edges.float(), 0.4, 5, 0.9)
    with pytest.raises((RuntimeError, ValueError), match=f"{op}.*bin_boundaries"):
        F.generic_histogram_binning_calibration_by_feature(*_npu(args))
