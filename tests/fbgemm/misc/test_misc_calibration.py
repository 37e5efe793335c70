"""``fbgemm::histogram_binning_calibration`` on npu: parity with upstream's CPU kernel (float32
within float32 rounding, bin ids exact away from bin edges; half types within their rounding)
and the errors of bad input, each naming the op and the argument."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native._pending import check

F = torch.ops.fbgemm
NPU = "npu"


def _bins(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ex = torch.randint(0, 40, (n,), generator=g).double()
    return ex, (ex * torch.rand(n, generator=g, dtype=torch.float64)).floor()


def _npu(args: tuple) -> tuple:
    return tuple(a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "scalars",
    [(0.4, 0.0, 1.0, 10, 0.9995), (1.0, 0.0, 1.0, 0, 0.5), (2.5, 0.0, 1.0, 25, 0.0)],
)
@pytest.mark.parametrize("shape", [(0,), (7,), (3, 50)])
def test_equals_upstream_cpu(dtype: torch.dtype, scalars: tuple, shape: tuple) -> None:
    pw, lo, hi, after, w = scalars
    logit = (torch.randn(shape, generator=torch.Generator().manual_seed(1)) * 3).to(dtype)
    ex, pos = _bins(20, 2)
    args = (logit, ex, pos, pw, lo, hi, after, w)
    want = F.histogram_binning_calibration(*args)
    got = F.histogram_binning_calibration(*_npu(args))
    check()
    assert got[0].dtype == dtype and got[0].shape == logit.shape
    assert got[1].dtype == torch.int64 and got[1].shape == (logit.numel(),)
    torch.testing.assert_close(got[1].cpu(), want[1], rtol=0, atol=0)
    tol = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
    torch.testing.assert_close(got[0].cpu().float(), want[0].float(), rtol=tol, atol=tol)


GOOD = (torch.randn(5), *_bins(10, 3), 0.4, 0.0, 1.0, 10, 0.9995)
BAD = {
    "float64 logit": ((GOOD[0].double(), *GOOD[1:]), "logit"),
    "int logit": ((GOOD[0].long(), *GOOD[1:]), "logit"),
    "float32 bins": ((GOOD[0], GOOD[1].float(), *GOOD[2:]), "bin_num_examples"),
    "bins differ": ((GOOD[0], GOOD[1], GOOD[2][:4], *GOOD[3:]), "bin_num_positives"),
    "weight 0": ((*GOOD[:3], 0.0, *GOOD[4:]), "positive_weight"),
    "bounds reversed": ((*GOOD[:4], 1.0, 0.0, *GOOD[6:]), "upper_bound"),
    "upper below 1": ((GOOD[0] + 9, *GOOD[1:5], 0.5, *GOOD[6:]), "upper_bound"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_names_op_and_argument(name: str) -> None:
    args, arg = BAD[name]
    with pytest.raises((RuntimeError, ValueError), match="histogram_binning_calibration") as info:
        F.histogram_binning_calibration(*_npu(args))
        check()  # a queued data check is read here
    assert arg in str(info.value)


def test_mixed_devices_are_refused() -> None:
    args = _npu(GOOD)
    with pytest.raises((RuntimeError, ValueError), match="histogram_binning_calibration"):
        F.histogram_binning_calibration(args[0], GOOD[1], *args[2:])
