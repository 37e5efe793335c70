"""``fbgemm::get_unique_indices`` and ``fbgemm::get_unique_indices_with_inverse`` on npu: the
sorted distinct values of 1-D linear (cache) indices, padded to the input's size.

Semantics, from upstream's CPU kernel (fbgemm-gpu-cpu 1.8.0, ``linearize_cache_indices_cpu``'s
file), measured: for ``N`` indices ``v`` with ``U`` distinct values,

* ``unique_indices``: ``v``'s dtype, ``[N]``: the distinct values ascending, then zeros;
* ``unique_indices_length``: int32 ``[1]``, ``U``;
* ``unique_indices_count`` (``compute_count``): int32 ``[N]``, each distinct value's count, then
  zeros; else None;
* ``linear_index_positions_sorted`` (``compute_inverse_indices``, the ``_with_inverse`` op
  only): int32 ``[N]``, the stable argsort of ``v``; else None.

Every output size is the input's: no sync.  ``max_indices`` bounds the values: they lie in
``[0, max_indices]`` (the CUDA kernel's radix sort takes that many bits; upstream's CPU kernel
ignores it, ``linearize_cache_indices`` gives pruned indices the value ``max_indices``).  Ours
checks that range (queued: ``native/_pending.py``) and takes int32 / int64 indices only (the CUDA
kernel's index types; upstream's CPU kernel also sorts floats and bools).

A 910B sorts integer keys and runs ``unique`` on its AI CPU (docs/hardware.md).  The route here
stays on the AI Core: the stable order of ``v`` by float32 keys, exact below ``2**24``
(``max_indices < 2**24``: one ``sort``), else by 24-bit digits, least significant first (a radix
of float sorts, ``_order.stable_bucket_order``); the sorted values ``s = v[order]``; a run start
where ``s`` changes; the 0-based run of each position ``r = cumsum(starts)`` (int32); the unique
values scattered to ``r`` (``index_put`` into cached zeros: equal values write equal values),
``U = r[-1] + 1``, the counts an int32 ``index_add`` of ones at ``r``, the positions the order
cast to int32.  A one-hot over ``[0, max_indices]`` would avoid the sort but needs
``max_indices`` elements (a cache's size: 10**8 rows and more) and still no stable position.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    DataChecks,
    check_dtype,
    check_ndim,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import filled_i32
from fbgemm_npu.native.fbgemm.bucketize._order import stable_bucket_order

__all__ = ["KERNELS", "get_unique_indices_npu", "get_unique_indices_with_inverse_npu"]

UNIQUE = "fbgemm::get_unique_indices"
WITH_INVERSE = "fbgemm::get_unique_indices_with_inverse"
LIMIT = 2**31 - 1  # upstream: numel < INT32_MAX (int32 counts and positions)

Outputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]


def _check(op: str, linear_indices: torch.Tensor, max_indices: int) -> torch.Tensor:
    v = check_tensor(op, "linear_indices", linear_indices)
    check_ndim(op, "linear_indices", v, (1,))
    check_dtype(op, "linear_indices", v, INDEX_DTYPES)
    if v.numel() >= LIMIT:
        raise ValueError(f"{op}: argument 'linear_indices' must have fewer than 2**31 - 1 elements")
    if v.numel() > 0 and max_indices < 0:
        raise ValueError(f"{op}: argument 'max_indices' must be non-negative, got {max_indices}")
    return v.detach()


def _unique(
    op: str, v: torch.Tensor, max_indices: int, compute_count: bool, compute_inverse: bool
) -> Outputs:
    """The module docstring's program.  Launches (``budgets.py``): the order (cast, ``sort``;
    per extra 24-bit digit ``remainder`` / ``floor_divide``, cast, ``sort``, two gathers), the
    gather of the sorted values, the run starts (``fill_``, ``ne``), ``cumsum``, ``index_put``,
    the length's ``add``, the counts' ``index_add`` and the positions' cast when asked.  Data
    check: ``aminmax`` of the values in ``[0, max_indices]``, queued."""
    n, dev = v.numel(), v.device
    i32 = torch.int32
    if n == 0:  # upstream: an empty result, a length of 0, empty counts / positions
        return (
            torch.empty_like(v),
            torch.zeros(1, dtype=i32, device=dev),
            torch.empty(0, dtype=i32, device=dev) if compute_count else None,
            torch.empty(0, dtype=i32, device=dev) if compute_inverse else None,
        )
    if validation_enabled():
        checks = DataChecks(op)
        lo, hi = torch.aminmax(v)
        what = f"argument 'linear_indices' must hold values in [0, max_indices = {max_indices}]"
        checks.add(lo, 0, None, what)
        checks.add(hi, None, max_indices, what)
        checks.assert_on_device()
    order = stable_bucket_order(v, max_indices + 1)
    s = v.index_select(0, order)
    starts = torch.empty(n, dtype=torch.bool, device=dev)
    starts[:1].fill_(False)
    torch.ne(s[1:], s[:-1], out=starts[1:])
    run = torch.cumsum(starts, 0, dtype=i32)
    # int64 values as int32 pairs: the scatter's zeros then come from the shared int32 cache
    words = 2 if v.dtype == torch.int64 else 1
    zeros = filled_i32(n * words, 0, dev).view(n, words)
    values = s.view(i32).view(n, words)
    unique = torch.ops.aten.index_put.default(zeros, [run], values).view(v.dtype).view(n)
    length = torch.add(run[-1:], 1)
    count = None
    if compute_count:
        count = torch.index_add(filled_i32(n, 0, dev), 0, run, filled_i32(n, 1, dev))
    positions = order.to(i32) if compute_inverse else None
    return unique, length, count, positions


def get_unique_indices_npu(
    linear_indices: torch.Tensor, max_indices: int, compute_count: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(unique_indices, unique_indices_length, unique_indices_count)``: see the module
    docstring; 8 launches (+1 with counts) for ``max_indices < 2**24``, no sync."""
    op = UNIQUE
    v = _check(op, linear_indices, max_indices)
    return _unique(op, v, max_indices, compute_count, False)[:3]


def get_unique_indices_with_inverse_npu(
    linear_indices: torch.Tensor,
    max_indices: int,
    compute_count: bool,
    compute_inverse_indices: bool = False,
) -> Outputs:
    """As :func:`get_unique_indices_npu`, plus the stable argsort of ``linear_indices`` as int32
    when ``compute_inverse_indices`` (one cast more)."""
    op = WITH_INVERSE
    v = _check(op, linear_indices, max_indices)
    return _unique(op, v, max_indices, compute_count, compute_inverse_indices)


def _fake(
    linear_indices: torch.Tensor,
    max_indices: int,
    compute_count: bool,
    compute_inverse_indices: bool = False,
) -> Outputs:
    """Meta (upstream registers none): every output sized by the input (the length ``[1]``)."""
    n = linear_indices.numel()
    i32 = torch.int32
    return (
        torch.empty_like(linear_indices),
        linear_indices.new_empty(1, dtype=i32),
        linear_indices.new_empty(n, dtype=i32) if compute_count else None,
        linear_indices.new_empty(n, dtype=i32) if compute_inverse_indices else None,
    )


def _fake_unique(
    linear_indices: torch.Tensor, max_indices: int, compute_count: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    return _fake(linear_indices, max_indices, compute_count)[:3]


KERNELS = {
    UNIQUE: {"PrivateUse1": get_unique_indices_npu, "Meta": _fake_unique},
    WITH_INVERSE: {"PrivateUse1": get_unique_indices_with_inverse_npu, "Meta": _fake},
}
