"""``fbgemm::sll_dense_jagged_cat_jagged_out`` and
``fbgemm::sll_jagged_self_substraction_jagged_out`` on npu.

``sll_dense_jagged_cat_jagged_out(a, b, a_offsets, max_seq_len)``: ``a [B]`` one value per
sequence, ``b`` the jagged values (``a_offsets [B + 1]``); ``c = cat_i([a[i], b[o_i : o_{i+1}]])``
(``B + b.numel()`` values) and ``c_offsets = a_offsets + arange(B + 1)`` (int64, as upstream's
promotion gives).  A scatter: ``a[i]`` to ``c_offsets[i]``, ``b[k]`` to ``k + seg(k) + 1`` with
``seg`` the segment ids of ``a_offsets`` (int32 ``index_add`` + ``cumsum``), both positions
clamped into ``c``.  The output size is ``B + b.numel()`` with no sync: offsets that start at 0,
never decrease and end at ``b.numel()`` (upstream's result has another size otherwise: refused
by the queued data check).  Dtypes: any, one for ``a`` and ``b``.  No autograd (upstream has
none); Meta added (upstream has none).  Launches: ``BUDGETS``.

``sll_jagged_self_substraction_jagged_out(a, offsets_a, offsets_b, max_seq_len)``: for each
sequence ``s = a[oa_i : oa_{i+1}]`` of ``n_i`` values, ``out[ob_i : ob_{i+1}] = (s[:-1, None] -
s[None, 1:]).flatten()``, ``(n_i - 1)^2`` values; ``out`` has ``offsets_b[-1]`` values (0 where
no sequence writes: upstream leaves them uninitialised).  The size is data: the one sync reads
it, the longest sequence ``L`` and the data checks in one copy (``DataChecks.read_with``).
Then ``[B, L]`` padded sequences (the jagged family's dense index, one gather), their pairwise
differences ``[B, L - 1, L - 1]`` in one broadcast ``sub``, and one scatter to ``ob_i + r (n_i -
1) + c``.  Dtypes: float32, float16, bfloat16, int32, int64.  Checked: offsets in ``[0, rows]``,
``offsets_b`` non-decreasing with ``ob_{i+1} - ob_i = max(n_i - 1, 0)^2`` (upstream raises on a
size mismatch, or leaves a length-1 sequence's block unwritten: refused), ``offsets_b[-1] >=
0``.  ``max_seq_len`` is unused, as upstream's CPU kernel leaves it.  No autograd upstream.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    allocation_of,
    check_same_device,
    check_same_dtype,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, segment_ids
from fbgemm_npu.native.fbgemm.jagged._utils import dense_index
from fbgemm_npu.native.fbgemm.jagged.to_jagged import scatter_rows
from fbgemm_npu.native.fbgemm.sll._utils import (
    assert_none_bad,
    checked,
    host_int,
    offsets_arg,
    outside,
    positions,
)

__all__ = ["KERNELS", "sll_dense_jagged_cat_npu", "sll_self_substraction_npu"]

CAT = "fbgemm::sll_dense_jagged_cat_jagged_out"
SUB = "fbgemm::sll_jagged_self_substraction_jagged_out"
_SUB_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)
_CAT_CHECK = (
    "argument 'a_offsets' must start at 0, never decrease and end at b.numel() (the output "
    "has a.numel() + b.numel() values)"
)
_SUB_CHECK = (
    "arguments 'offsets_a' / 'offsets_b': offsets_a must lie in [0, a.numel()], offsets_b run "
    "from 0 to offsets_b[-1] without decreasing (upstream leaves values outside the blocks "
    "uninitialised), and each block "
    "offsets_b[i + 1] - offsets_b[i] hold exactly (n_i - 1)**2 values, n_i = offsets_a[i + 1] - "
    "offsets_a[i] (0 for n_i <= 1)"
)


def _cat_args(
    a: object, b: object, a_offsets: object, max_seq_len: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    op = CAT
    av = check_tensor(op, "a", a)
    bv = check_tensor(op, "b", b)
    for arg, t in (("a", av), ("b", bv)):
        if t.dim() != 1:
            raise ValueError(f"{op}: argument '{arg}' must be 1-D, got shape {tuple(t.shape)}")
    o = offsets_arg(op, "a_offsets", a_offsets)
    host_int(op, "max_seq_len", max_seq_len)
    if av.size(0) != o.numel() - 1:
        raise ValueError(
            f"{op}: argument 'a' must hold one value per sequence: a.size(0) = {av.size(0)}, "
            f"a_offsets.numel() - 1 = {o.numel() - 1}"
        )
    if av.size(0) == 0:  # upstream's torch.cat of no pieces raises this ValueError
        raise ValueError(f"{op}: argument 'a_offsets' must describe at least one sequence (B >= 1)")
    check_same_dtype(op, a=av, b=bv)
    check_same_device(op, a=av, b=bv, a_offsets=o)
    return av, bv, o


def sll_dense_jagged_cat_npu(
    a: torch.Tensor, b: torch.Tensor, a_offsets: torch.Tensor, max_seq_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(c, c_offsets)``: each sequence of ``b`` led by its ``a`` value (module docstring)."""
    av, bv, o = _cat_args(a, b, a_offsets, max_seq_len)
    nb, n = av.numel(), bv.numel()
    dev = av.device
    c_offsets = o + arange_cached(nb + 1, dev)  # int64 either way, as upstream's promotion
    if validation_enabled():
        assert_none_bad(CAT, [o[:1] != 0, o[-1:] != n, o[:-1] > o[1:]], _CAT_CHECK)
    total = nb + n
    out = av.new_zeros(total)
    if total == 0:
        return out, c_offsets
    if nb > 0:
        out.index_copy_(0, c_offsets[:-1].clamp(0, total - 1), av)
    if n > 0:  # b[k] lands after its sequence's head and the k - o_s values before it
        seg = segment_ids(o, n)
        out.index_copy_(0, (arange_cached(n + 1, dev)[1:] + seg).clamp_(0, total - 1), bv)
    return out, c_offsets


def _cat_meta(
    a: torch.Tensor, b: torch.Tensor, a_offsets: torch.Tensor, max_seq_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream registers no Meta kernel: the shapes of a valid call's result."""
    return a.new_empty(a.numel() + b.numel()), a_offsets.new_empty(
        a_offsets.shape, dtype=torch.int64
    )


def _sub_args(
    a: object, offsets_a: object, offsets_b: object, max_seq_len: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    op = SUB
    av = checked(op, "a", a, 1, _SUB_DTYPES)
    oa = offsets_arg(op, "offsets_a", offsets_a)
    ob = offsets_arg(op, "offsets_b", offsets_b, oa.numel())
    host_int(op, "max_seq_len", max_seq_len)
    check_same_device(op, a=av, offsets_a=oa, offsets_b=ob)
    return av, oa, ob


def sll_self_substraction_npu(
    a: torch.Tensor, offsets_a: torch.Tensor, offsets_b: torch.Tensor, max_seq_len: int
) -> torch.Tensor:
    """``out[ob_i + r (n_i - 1) + c] = s_i[r] - s_i[c + 1]``: see the module docstring."""
    op = SUB
    av, oa, ob_all = _sub_args(a, offsets_a, offsets_b, max_seq_len)
    b, s = oa.numel() - 1, av.numel()
    ob = ob_all[: b + 1]
    last = ob_all[-1]
    n = (oa[1:] - oa[:-1]).clamp_(min=0).to(torch.int64)
    checks = DataChecks(op)
    if validation_enabled():  # B = 0 too: nothing may be left unwritten
        m = (n - 1).clamp_(min=0)
        bad = [outside(oa, s), ob[:1] != 0, ob[-1:] != last, ob[:-1] > ob[1:]]
        bad.append((ob[1:] - ob[:-1]) != m * m)
        flat = torch.cat([t.reshape(-1) for t in bad])
        checks.require(flat.any().logical_not_(), _SUB_CHECK)
    longest = n.amax() if b > 0 else last.new_zeros(())
    total, length = checks.read_with([last, longest])
    if total < 0:  # upstream's torch.empty raises a RuntimeError
        raise RuntimeError(f"{op}: argument 'offsets_b' ends at {total}: a negative output size")
    with allocation_of(op, f"the output of offsets_b[-1] = {total} values"):
        if total == 0 or length <= 1 or s == 0:
            return av.new_zeros(total)
        idx, _ = dense_index([oa], [length], None)  # type: ignore[misc]
        seqs = av.index_select(0, idx.clamp_(0, s - 1).view(-1)).view(b, length)
        diff = seqs[:, :-1, None] - seqs[:, None, 1:]  # [B, L - 1, L - 1]
        w = length - 1
        m = (n - 1).clamp_(min=0)
        r = positions(w, av.device)
        pos = ob[:-1, None, None] + (r[:, None] * m[:, None, None] + r)  # ob_i + r m_i + c
        ok = (r[:, None] < m[:, None, None]) & (r < m[:, None, None])
        rows = torch.where(ok, pos, total).clamp_(0, total)  # padding at the spare row
        return scatter_rows(diff.reshape(-1, 1), rows.view(-1), total).view(total)


KERNELS = {
    CAT: {"PrivateUse1": sll_dense_jagged_cat_npu, "Meta": _cat_meta},
    SUB: {"PrivateUse1": sll_self_substraction_npu},
}
