"""Cumulative sums: ``fbgemm::asynchronous_{complete,exclusive,inclusive}_cumsum`` on npu.

Semantics, measured on upstream's CPU kernels (fbgemm-gpu-cpu 1.8.0):

* dtypes: int32, int64, float16, bfloat16, float32; the output has the input's dtype, and int32
  wraps on overflow (two's complement), exactly as upstream does;
* ``asynchronous_complete_cumsum``: 1-D ``(N,)`` -> ``(N + 1,)`` starting with 0; 2-D ``(R, C)``
  -> ``(R, C + 1)``, each row its own complete cumsum; any other rank is an error;
* ``asynchronous_exclusive_cumsum`` / ``asynchronous_inclusive_cumsum``: any rank, 0-D included;
  the scan runs over the tensor flattened in logical (row-major) order, whatever its strides, and
  the output has the input's shape.

Precision: upstream CPU accumulates float16 / bfloat16 sequentially in the half type itself
(3000 x 0.1 sums to 256 in float16 and to 32 in bfloat16; the true sum is 300).  ``torch.cumsum``
accumulates in a wider type and rounds once per output element, so our half-precision results are
closer to the exact sum than upstream's; the conformance suite compares half types against a
float64 reference for that reason.

Upstream has CPU and Meta kernels for these ops but no autograd formula, so only ``PrivateUse1`` is
registered, and the kernels scan a detached input: a float input that requires grad gets
upstream's result (an output that requires grad through autograd's not-implemented node, with no
gradient for the input), not an error from ``cumsum.out`` nor a gradient upstream does not give.
The kernels are device-generic: called directly they also run on CPU tensors.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import check_dtype, check_ndim, check_tensor

__all__ = [
    "CUMSUM_DTYPES",
    "KERNELS",
    "asynchronous_complete_cumsum_npu",
    "asynchronous_exclusive_cumsum_npu",
    "asynchronous_inclusive_cumsum_npu",
]

CUMSUM_DTYPES: tuple[torch.dtype, ...] = (
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
)

ASYNCHRONOUS_COMPLETE_CUMSUM = "fbgemm::asynchronous_complete_cumsum"
ASYNCHRONOUS_EXCLUSIVE_CUMSUM = "fbgemm::asynchronous_exclusive_cumsum"
ASYNCHRONOUS_INCLUSIVE_CUMSUM = "fbgemm::asynchronous_inclusive_cumsum"


def _check_input(op: str, t_in: object) -> torch.Tensor:
    """``t_in`` checked, and detached: upstream has no autograd formula for these ops, so the
    scans must not record one (``cumsum.out`` would refuse an input that requires grad).  What
    the caller gets is upstream's: autograd's not-implemented fallback marks the output as
    requiring grad when the input does, and its backward gives the input no gradient."""
    t = check_tensor(op, "t_in", t_in)
    return check_dtype(op, "t_in", t, CUMSUM_DTYPES).detach()


def _scan_into(src: torch.Tensor, dim: int, out: torch.Tensor) -> None:
    """Inclusive scan of ``src`` along ``dim`` written into the view ``out`` (``cumsum.out``).

    ``dtype=src.dtype`` keeps int32 as int32 (``torch.cumsum`` would otherwise promote integers to
    int64), which reproduces upstream's wrap-around on overflow: the wider accumulator torch uses
    internally agrees with int32 arithmetic modulo 2**32.
    """
    torch.cumsum(src, dim, dtype=src.dtype, out=out)


def asynchronous_complete_cumsum_npu(t_in: torch.Tensor) -> torch.Tensor:
    """Complete cumsum: ``out[..., 0] = 0`` and ``out[..., j + 1] = sum(t_in[..., : j + 1])``.

    ``t_in`` is 1-D ``(N,)`` (output ``(N + 1,)``) or 2-D ``(R, C)`` (output ``(R, C + 1)``, one
    scan per row).  Dtypes: int32, int64, float16, bfloat16, float32; output dtype = input dtype.
    This is the offsets-from-lengths op of torchrec's jagged tensors.

    Launches ``zero_`` of the leading column and ``cumsum.out`` into the rest of a freshly
    allocated output (the allocation is not a launch); for 2-D input the ``out=`` view is strided,
    and a backend that scans into a contiguous scratch and copies back adds that copy.
    Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    t = _check_input(ASYNCHRONOUS_COMPLETE_CUMSUM, t_in)
    check_ndim(ASYNCHRONOUS_COMPLETE_CUMSUM, "t_in", t, (1, 2))
    dim = t.dim() - 1
    n = t.size(dim)
    out = t.new_empty((*t.shape[:-1], n + 1))
    out.narrow(dim, 0, 1).zero_()
    _scan_into(t, dim, out.narrow(dim, 1, n))
    return out


def asynchronous_exclusive_cumsum_npu(t_in: torch.Tensor) -> torch.Tensor:
    """Exclusive cumsum over ``t_in`` flattened in logical order: ``out[0] = 0``,
    ``out[i] = sum(flat[:i])``; the output has ``t_in``'s shape (0-D and empty included).

    Dtypes: int32, int64, float16, bfloat16, float32; output dtype = input dtype.  The result is
    computed as an inclusive scan of ``flat[:-1]`` written into ``out[1:]``, never as
    ``cumsum - t_in``: that subtraction would lose float precision and is not upstream's math.

    Launches ``zero_`` of ``out[0]`` and ``cumsum.out`` into ``out[1:]``, plus a ``clone`` when
    ``t_in`` is a non-contiguous view that cannot be flattened without a copy (the ``strided``
    path).  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    t = _check_input(ASYNCHRONOUS_EXCLUSIVE_CUMSUM, t_in)
    flat = t.reshape(-1)  # a view when strides allow; else a copy in logical order
    out = t.new_empty(t.shape)
    out_flat = out.view(-1)
    # Slicing (not narrow) so the empty and 0-D cases need no branch: both slices clamp.
    out_flat[:1].zero_()
    _scan_into(flat[:-1], 0, out_flat[1:])
    return out


def asynchronous_inclusive_cumsum_npu(t_in: torch.Tensor) -> torch.Tensor:
    """Inclusive cumsum over ``t_in`` flattened in logical order: ``out[i] = sum(flat[: i + 1])``;
    the output has ``t_in``'s shape (0-D and empty included).

    Dtypes: int32, int64, float16, bfloat16, float32; output dtype = input dtype.

    Launches ``cumsum``, plus a ``clone`` when ``t_in`` is a non-contiguous view that cannot be
    flattened without a copy (the ``strided`` path).  Launches and syncs: ``BUDGETS`` in
    ``budgets.py`` (docs/ops.md).
    """
    t = _check_input(ASYNCHRONOUS_INCLUSIVE_CUMSUM, t_in)
    flat = t.reshape(-1)  # a view when strides allow; else a copy in logical order
    return torch.cumsum(flat, 0, dtype=t.dtype).view(t.shape)


KERNELS = {
    ASYNCHRONOUS_COMPLETE_CUMSUM: {"PrivateUse1": asynchronous_complete_cumsum_npu},
    ASYNCHRONOUS_EXCLUSIVE_CUMSUM: {"PrivateUse1": asynchronous_exclusive_cumsum_npu},
    ASYNCHRONOUS_INCLUSIVE_CUMSUM: {"PrivateUse1": asynchronous_inclusive_cumsum_npu},
}
