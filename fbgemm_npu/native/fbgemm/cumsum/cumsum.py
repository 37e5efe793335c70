"""Cumulative sums: ``fbgemm::asynchronous_{complete,exclusive,inclusive}_cumsum`` and
``fbgemm::asynchronous_batched_complete_cumsum`` (2-D only, one complete scan per row) on npu.

Semantics, measured on upstream's CPU kernels (fbgemm-gpu-cpu 1.8.0):

* dtypes: int32, int64, float16, bfloat16, float32; the output has the input's dtype, and int32
  (int64) wraps on overflow mod 2**32 (2**64), exactly as upstream does;
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

On a 910B an int64 ``cumsum`` runs on the AI CPU (docs/hardware.md), and int64 inputs are
common (torchrec's offsets from int64 lengths), while the contract keeps the int64 output, whose
values may pass 2**31, and gives no size to decide a narrower type on the host.  So int64 is
scanned exactly as two int32 words (AI Core): the low words' sum mod 2**32, the carries out of
it recovered by one int64 add or subtract, and the high words plus carries scanned mod 2**32
(:func:`_complete_int64`, :func:`_scan_int64`): 4 launches and none on the AI CPU, where one
AI-CPU ``cumsum`` (plus a ``zero_``) did it before.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import check_dtype, check_ndim, check_tensor

__all__ = [
    "CUMSUM_DTYPES",
    "KERNELS",
    "asynchronous_batched_complete_cumsum_npu",
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
ASYNCHRONOUS_BATCHED_COMPLETE_CUMSUM = "fbgemm::asynchronous_batched_complete_cumsum"


def _check_input(op: str, t_in: object) -> torch.Tensor:
    """``t_in`` checked, and detached: upstream has no autograd formula for these ops, so the
    scans must not record one (``cumsum.out`` would refuse an input that requires grad).  What
    the caller gets is upstream's: autograd's not-implemented fallback marks the output as
    requiring grad when the input does, and its backward gives the input no gradient."""
    t = check_tensor(op, "t_in", t_in)
    return check_dtype(op, "t_in", t, CUMSUM_DTYPES).detach()


def _words(t: torch.Tensor) -> torch.Tensor:
    """The two int32 words of each element of the int64 tensor ``t``, any strides, as a view of
    shape ``(*t.shape, 2)``: ``[..., 0]`` the low word (its bits are the value mod 2**32),
    ``[..., 1]`` the high word (signed).  Little-endian, as on every host and device torch runs
    on (x86, aarch64, the Ascend AI Core).  Views only: an int64 view reaching every element
    with stride 1, its int32 reinterpretation, then the strides doubled."""
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    words = t.as_strided((span,), (1,)).view(torch.int32)
    return words.as_strided((*t.shape, 2), (*(2 * s for s in t.stride()), 1))


def _scan_int64(src: torch.Tensor, dim: int, out: torch.Tensor) -> None:
    """Inclusive int64 scan of ``src`` along ``dim`` (>= 0) into the view ``out``, exact mod 2**64
    (upstream's wrap), without an int64 ``cumsum`` (a 910B runs that on its AI CPU).

    With ``x = lo + 2**32 hi`` (``lo`` the unsigned low word, ``hi`` the signed high word) the sum
    is ``S_k = sum(lo) + 2**32 sum(hi)``, and ``sum(lo)`` is its low word ``L_k`` (an int32 scan,
    exact mod 2**32) plus ``2**32`` times the carries ``c_j = 1`` where ``L_{j-1} + lo_j`` passed
    2**32.  So the high word of ``S_k`` is ``sum_{j<=k} (hi_j + c_j)`` mod 2**32.  The carries come
    from one int64 subtraction: with ``P_k = L_k + 2**32 V_k`` (any high word ``V``),
    ``P_k - x_k = L_{k-1} + 2**32 (V_k - hi_k - c_k)`` because ``L_k = L_{k-1} + lo_k - 2**32 c_k``
    and ``0 <= L_{k-1} < 2**32``: its high word is ``V_k - hi_k - c_k``, so ``hi_k + c_k`` is
    ``V_k`` minus that.  Launches (all AI Core): an int32 scan of both words at once (``V`` = the
    high words' scan), the int64 ``out - src``, an int32 difference of high words, an int32 scan
    of ``hi + c`` into the high words of ``out`` (4, for 1 AI-CPU launch).
    """
    out_words = _words(out)
    torch.cumsum(_words(src), dim, dtype=torch.int32, out=out_words)
    behind = torch.sub(out, src)  # high word: V_k - hi_k - c_k; low word: L_{k-1}
    hi_and_carry = torch.sub(out_words[..., 1], _words(behind)[..., 1])
    torch.cumsum(hi_and_carry, dim, dtype=torch.int32, out=out_words[..., 1])


def _complete_int64(src: torch.Tensor, dim: int, out: torch.Tensor) -> None:
    """The complete int64 scan of ``src`` along ``dim`` (>= 0, ``n`` long) into the fresh ``out``
    (``n + 1`` long there): ``out[0] = 0``, ``out[k + 1] = S_k``, exact mod 2**64, without an
    int64 ``cumsum``.  As :func:`_scan_int64`, with the carries read off a zero-extended low word:
    once ``out`` is zeroed and its low words hold ``L`` (an int32 scan of the low words),
    ``out[k]`` is ``L_{k-1}`` with a zero high word, so ``y_k = x_k + out[k] = L_k + 2**32 (hi_k +
    c_k)`` (``lo_k + L_{k-1} = L_k + 2**32 c_k``); an int32 scan of ``y``'s high words gives the
    high words of ``out[1:]``, whose low words already hold ``L``.  Launches (all AI Core):
    ``zero_``, the low words' scan, the int64 ``add``, the high words' scan (4, for 2 with one on
    the AI CPU)."""
    n = src.size(dim)
    out.zero_()
    if src.numel() == 0:
        return
    sums = _words(out.narrow(dim, 1, n))
    torch.cumsum(_words(src)[..., 0], dim, dtype=torch.int32, out=sums[..., 0])
    ahead = torch.add(src, out.narrow(dim, 0, n))  # high word: hi_k + c_k; low word: L_k
    torch.cumsum(_words(ahead)[..., 1], dim, dtype=torch.int32, out=sums[..., 1])


def _complete_into(src: torch.Tensor, dim: int, out: torch.Tensor) -> None:
    """``out`` (``src.size(dim) + 1`` long along ``dim`` >= 0) = 0 followed by the inclusive scan
    of ``src``.  ``dtype=src.dtype`` keeps int32 as int32 (``torch.cumsum`` would otherwise
    promote integers to int64), which reproduces upstream's wrap-around on overflow: the wider
    accumulator torch uses internally agrees with int32 arithmetic modulo 2**32.  int64:
    :func:`_complete_int64` (an int64 ``cumsum`` runs on a 910B's AI CPU).
    Launches: ``zero_`` of the leading element and ``cumsum.out`` into the rest (int64: 4)."""
    if src.dtype == torch.int64:
        _complete_int64(src, dim, out)
        return
    n = src.size(dim)
    out.narrow(dim, 0, 1).zero_()
    torch.cumsum(src, dim, dtype=src.dtype, out=out.narrow(dim, 1, n))


def asynchronous_complete_cumsum_npu(t_in: torch.Tensor) -> torch.Tensor:
    """Complete cumsum: ``out[..., 0] = 0`` and ``out[..., j + 1] = sum(t_in[..., : j + 1])``.

    ``t_in`` is 1-D ``(N,)`` (output ``(N + 1,)``) or 2-D ``(R, C)`` (output ``(R, C + 1)``, one
    scan per row).  Dtypes: int32, int64, float16, bfloat16, float32; output dtype = input dtype.
    This is the offsets-from-lengths op of torchrec's jagged tensors.

    Launches ``zero_`` of the leading column and ``cumsum.out`` into the rest of a freshly
    allocated output (the allocation is not a launch); int64: 4 (:func:`_complete_int64`, no
    int64 ``cumsum``).  For 2-D input the ``out=`` view is strided, and a backend that scans into
    a contiguous scratch and copies back adds that copy.  Launches and syncs: ``BUDGETS`` in
    ``budgets.py`` (docs/ops.md).
    """
    t = _check_input(ASYNCHRONOUS_COMPLETE_CUMSUM, t_in)
    check_ndim(ASYNCHRONOUS_COMPLETE_CUMSUM, "t_in", t, (1, 2))
    dim = t.dim() - 1
    n = t.size(dim)
    out = t.new_empty((*t.shape[:-1], n + 1))
    _complete_into(t, dim, out)
    return out


def asynchronous_batched_complete_cumsum_npu(values: torch.Tensor) -> torch.Tensor:
    """Batched complete cumsum: ``values`` ``(B, N)`` -> ``(B, N + 1)``, row ``b`` being
    ``0, cumsum(values[b])``: ``out[b, 0] = 0``, ``out[b, j + 1] = sum(values[b, : j + 1])``.

    Upstream's CPU kernel is the 2-D complete cumsum (the same dtypes: int32, int64, float16,
    bfloat16, float32; int32 / int64 wrap), and refuses any other rank: so is ours, by name.
    Launches as :func:`asynchronous_complete_cumsum_npu` on 2-D input: ``zero_`` + ``cumsum.out``
    (int64: 4, two int32 words, no AI-CPU int64 ``cumsum``).
    """
    op = ASYNCHRONOUS_BATCHED_COMPLETE_CUMSUM
    t = check_tensor(op, "values", values)
    if t.dim() >= 2 and t.size(0) == 0:  # upstream: (0, N + 1) for any such input, any dtype
        return t.new_zeros(0, t.size(1) + 1)
    t = check_dtype(op, "values", t, CUMSUM_DTYPES).detach()
    check_ndim(op, "values", t, (2,))
    out = t.new_empty((t.size(0), t.size(1) + 1))
    _complete_into(t, 1, out)
    return out


def asynchronous_exclusive_cumsum_npu(t_in: torch.Tensor) -> torch.Tensor:
    """Exclusive cumsum over ``t_in`` flattened in logical order: ``out[0] = 0``,
    ``out[i] = sum(flat[:i])``; the output has ``t_in``'s shape (0-D and empty included).

    Dtypes: int32, int64, float16, bfloat16, float32; output dtype = input dtype.  The result is
    computed as an inclusive scan of ``flat[:-1]`` written into ``out[1:]``, never as
    ``cumsum - t_in``: that subtraction would lose float precision and is not upstream's math.

    Launches ``zero_`` of ``out[0]`` and ``cumsum.out`` into ``out[1:]`` (int64: 4, by
    :func:`_complete_int64`), plus a ``clone`` when ``t_in`` is a non-contiguous view that cannot
    be flattened without a copy (the ``strided`` path).  Launches and syncs: ``BUDGETS`` in
    ``budgets.py`` (docs/ops.md).
    """
    t = _check_input(ASYNCHRONOUS_EXCLUSIVE_CUMSUM, t_in)
    flat = t.reshape(-1)  # a view when strides allow; else a copy in logical order
    out = t.new_empty(t.shape)
    if flat.numel() > 0:  # 0-D: one element, out = 0; empty: nothing to write
        _complete_into(flat[:-1], 0, out.view(-1))
    return out


def asynchronous_inclusive_cumsum_npu(t_in: torch.Tensor) -> torch.Tensor:
    """Inclusive cumsum over ``t_in`` flattened in logical order: ``out[i] = sum(flat[: i + 1])``;
    the output has ``t_in``'s shape (0-D and empty included).

    Dtypes: int32, int64, float16, bfloat16, float32; output dtype = input dtype.

    Launches ``cumsum`` (int64: 4, by :func:`_scan_int64`), plus a ``clone`` when ``t_in`` is a
    non-contiguous view that cannot be flattened without a copy (the ``strided`` path).  Launches
    and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    t = _check_input(ASYNCHRONOUS_INCLUSIVE_CUMSUM, t_in)
    flat = t.reshape(-1)  # a view when strides allow; else a copy in logical order
    if t.dtype != torch.int64:
        return torch.cumsum(flat, 0, dtype=t.dtype).view(t.shape)
    out = t.new_empty(t.shape)
    if flat.numel() > 0:
        _scan_int64(flat, 0, out.view(-1))
    return out


KERNELS = {
    ASYNCHRONOUS_COMPLETE_CUMSUM: {"PrivateUse1": asynchronous_complete_cumsum_npu},
    ASYNCHRONOUS_EXCLUSIVE_CUMSUM: {"PrivateUse1": asynchronous_exclusive_cumsum_npu},
    ASYNCHRONOUS_INCLUSIVE_CUMSUM: {"PrivateUse1": asynchronous_inclusive_cumsum_npu},
    ASYNCHRONOUS_BATCHED_COMPLETE_CUMSUM: {"PrivateUse1": asynchronous_batched_complete_cumsum_npu},
}
