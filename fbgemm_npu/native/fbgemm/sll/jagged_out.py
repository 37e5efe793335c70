"""``fbgemm::sll_array_jagged_bmm_jagged_out`` and ``fbgemm::sll_jagged_jagged_bmm_jagged_out``
on npu: batched matmuls whose output is jagged.

``B = x_lengths.numel()``; offsets are read at ``[i]`` (and ``[i + 1]`` where upstream slices to
it).  Upstream's CPU math (``cpu_sll.py``), with ``S = sum(z_lengths)`` output rows::

    array:  n_i = y_lengths[i], c_i = min(n_i, max_seq_len),
            A_i = x[xo_i : xo_{i+1}].view(n_i, n_i)[:c_i, :c_i]          (x 1-D)
            out[zo_i + r] = (A_i @ y[yo_i : yo_i + c_i])[r],  r < c_i     out [S, D], 0 elsewhere
    jagged: X_i = x[xo_i : xo_{i+1}] (M_i rows), Y_i = y[yo_i : yo_{i+1}] (N_i rows),
            out[zo_i : zo_{i+1}] = (X_i @ Y_i^T).flatten()                out [S] (not capped)

(upstream leaves the jagged op's unwritten values uninitialised; ours are 0).  The output size
is data: the op's one sync reads ``S`` and the padded length ``L`` (the longest ``c_i``; for the
jagged op the longest ``M_i`` and ``N_i``) with the data checks in one copy
(``DataChecks.read_with``).  Then: ``[B, L]`` row indices (a cached ``arange`` added to the
starts), one gather per input with its padding zeroed, one ``bmm``, one scatter of the products
to their output rows (padding at a spare row).  No loop over ``B``.

Autograd (``jagged_out_autograd.py``): the gradients of the math above, from the same padded
operands (``grad_A = dZ Y^T``, ``grad_Y = A^T dZ``; ``grad_X = dZ Y``, ``grad_Y = dZ^T X``),
scattered with ``index_add_``.  Upstream's backward is the same where the usual layout holds
(``z`` laid out as ``y`` for the array op; ``x_lengths = y_lengths`` and every length ``<=
max_seq_len`` for the jagged op); elsewhere it returns gradients of other shapes, or of rows the
forward never read (it uncaps the array op's, caps the jagged op's), which ours do not.

Checked (queued with the read): lengths ``>= 0``; offsets inside the rows they index; array:
each ``x`` block of exactly ``n_i^2`` values (upstream's ``view``), ``y`` and output rows in
range where ``c_i > 0``, output blocks that do not overlap; jagged: ``z`` blocks of exactly
``M_i N_i`` values, non-decreasing ``z_offsets``.  Dtypes: float32, float16, bfloat16 (one for
``x`` and ``y``); offsets and lengths int32 / int64.  Launches: ``BUDGETS`` in ``budgets.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    allocation_of,
    check_same_device,
    check_same_dtype,
    validation_enabled,
)
from fbgemm_npu.native.fbgemm.jagged.to_jagged import scatter_rows
from fbgemm_npu.native.fbgemm.sll._utils import (
    checked,
    host_int,
    lengths_arg,
    offsets_arg,
    outside,
    positions,
)

__all__ = [
    "ARRAY",
    "JAGGED",
    "array_args",
    "array_forward",
    "array_layout",
    "jagged_args",
    "jagged_forward",
    "jagged_layout",
    "jagged_sizes",
    "named",
    "sll_array_jagged_bmm_npu",
    "sll_jagged_jagged_bmm_jagged_out_npu",
]

ARRAY = "fbgemm::sll_array_jagged_bmm_jagged_out"
JAGGED = "fbgemm::sll_jagged_jagged_bmm_jagged_out"
_ARRAY_CHECK = (
    "arguments 'x_offsets' / 'y_offsets' / 'z_offsets' / 'y_lengths': every length must be "
    ">= 0, every x block x_offsets[i + 1] - x_offsets[i] hold exactly y_lengths[i]**2 values, "
    "x_offsets lie in [0, x.numel()], and the rows read (y_offsets[i] + r) and written "
    "(z_offsets[i] + r), r < min(y_lengths[i], max_seq_len), lie inside y and the output "
    "(sum(z_lengths) rows) without the output blocks overlapping"
)
_JAGGED_CHECK = (
    "arguments 'x_offsets' / 'y_offsets' / 'z_offsets': x and y offsets must lie in [0, rows], "
    "z_offsets run from 0 to sum(z_lengths) without decreasing (upstream leaves values "
    "outside the blocks uninitialised), and each z block "
    "z_offsets[i + 1] - z_offsets[i] hold exactly M_i * N_i values (the rows of x and y "
    "between their offsets)"
)
_Layout = dict[str, torch.Tensor]


def _common(
    op: str, x: torch.Tensor, y: torch.Tensor, t: dict[str, object], extra: int
) -> dict[str, torch.Tensor]:
    """Lengths / offsets checked by name; offsets trimmed to the ``B + extra`` entries read."""
    xl = lengths_arg(op, "x_lengths", t["x_lengths"], 0)
    b = xl.numel()
    out = {"x_lengths": xl}
    for name in ("y_lengths", "z_lengths"):
        out[name] = lengths_arg(op, name, t[name], b if name == "y_lengths" else 0)
    for name in ("x_offsets", "y_offsets", "z_offsets"):
        need = b + 1 if name == "x_offsets" or extra else b
        out[name] = offsets_arg(op, name, t[name], need)[:need]
    check_same_dtype(op, x=x, y=y)
    check_same_device(op, x=x, y=y, **out)  # type: ignore[arg-type]
    out["y_lengths"] = out["y_lengths"][:b]
    return out


def _array_read(
    x: torch.Tensor, y: torch.Tensor, a: dict[str, torch.Tensor], cap: int
) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """The array op's one sync: ``(n, c, S, L)`` with the data checks read in the same copy."""
    op, nx, ny = ARRAY, x.numel(), y.size(0)
    b = a["y_lengths"].numel()
    n = a["y_lengths"].to(torch.int64)
    c = n.clamp(0, cap)
    z_total = a["z_lengths"].sum(dtype=torch.int64)
    checks = DataChecks(op)
    if validation_enabled() and b > 0:
        xo, yo, zo = a["x_offsets"], a["y_offsets"], a["z_offsets"]
        sizes = (xo[1:] - xo[:-1]).clamp_(min=0)
        used = c > 0
        y_end, z_end = yo + c, zo + c
        bad = [n < 0, sizes != n * n, outside(xo, nx)]
        bad.append(used & ((yo < 0) | (y_end > ny)))
        bad.append(used & ((zo < 0) | (z_end > z_total)))
        bad.append(used[:-1] & (z_end[:-1] > zo[1:]))
        flat = torch.cat([t.reshape(-1) for t in bad])
        checks.require(flat.any().logical_not_(), _ARRAY_CHECK)
    longest = c.amax() if b > 0 else z_total.new_zeros(())
    total, length = checks.read_with([z_total, longest])
    if total < 0:  # upstream's torch.zeros raises a RuntimeError
        raise RuntimeError(f"{op}: argument 'z_lengths' sums to {total}: a negative output size")
    return n, c, total, length


def _out_rows(pad: torch.Tensor, pos: torch.Tensor, total: int | None) -> torch.Tensor:
    """The output rows of the padded positions: padding at the spare row ``total`` and every row
    clamped into ``[0, total]`` (where, clamp); ``total=None`` (a traced backward, whose output
    size is an unbacked symbol no graph may carry over): padding at -1, unclamped -- the forward
    kernel that ran on the data checked it."""
    if total is None:
        return torch.where(pad, -1, pos)
    return torch.where(pad, total, pos).clamp_(0, total)


def array_layout(
    x: torch.Tensor,
    y: torch.Tensor,
    a: dict[str, torch.Tensor],
    n: torch.Tensor,
    c: torch.Tensor,
    total: int | None,
    length: int,
) -> _Layout:
    """The array op's padded operands for ``L = length`` (any bound of the ``c_i``): the rows,
    masks and the gathered ``ap [B, L, L]``, ``yp [B, L, D]`` ({} when nothing is read)."""
    nx, ny, d = x.numel(), y.size(0), y.size(1)
    b = n.numel()
    if length == 0 or b == 0 or nx == 0 or ny == 0:
        return {}
    j = positions(length, x.device)
    pad = j >= c[:, None]  # [B, L]
    yrows = (a["y_offsets"][:, None] + j).clamp_(0, ny - 1)
    xidx = a["x_offsets"][:-1, None, None] + (j[:, None] * n[:, None, None] + j)
    xidx = xidx.clamp_(0, nx - 1)
    zrows = _out_rows(pad, a["z_offsets"][:, None] + j, total)
    lay = {"pad": pad, "xpad": pad[:, :, None] | pad[:, None, :], "yrows": yrows, "xidx": xidx}
    lay["zrows"] = zrows
    yp = y.index_select(0, yrows.view(-1)).view(b, length, d)
    lay["yp"] = yp.masked_fill_(pad[..., None], 0)
    ap = x.index_select(0, xidx.view(-1)).view(b, length, length)
    lay["ap"] = ap.masked_fill_(lay["xpad"], 0)
    return lay


def array_forward(
    x: torch.Tensor, y: torch.Tensor, a: dict[str, torch.Tensor], cap: int
) -> tuple[torch.Tensor, _Layout]:
    """The array op's output and the padded layout it was computed on."""
    n, c, total, length = _array_read(x, y, a, cap)
    d = y.size(1)
    with allocation_of(ARRAY, f"the output of sum(z_lengths) = {total} rows of {d}"):
        lay = array_layout(x, y, a, n, c, total, length)
        if not lay:
            return y.new_zeros((total, d)), lay
        prod = torch.bmm(lay["ap"], lay["yp"])
        return scatter_rows(prod.view(-1, d), lay["zrows"].view(-1), total), lay


def array_args(
    x: object, y: object, t: dict[str, object], cap: object
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor], int]:
    """The array op's arguments checked by name (offsets trimmed to the entries read)."""
    op = ARRAY
    xv, yv = checked(op, "x", x, 1), checked(op, "y", y, 2)
    cap = host_int(op, "max_seq_len", cap)
    if cap < 0:
        raise ValueError(f"{op}: argument 'max_seq_len' must be >= 0, got {cap}")
    return xv, yv, _common(op, xv, yv, t, 0), cap


def jagged_args(
    x: object, y: object, t: dict[str, object], cap: object
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor], int]:
    """The jagged op's arguments checked by name (offsets trimmed to the entries read)."""
    op = JAGGED
    xv, yv = checked(op, "x", x, 2), checked(op, "y", y, 2)
    cap = host_int(op, "max_seq_len", cap)
    if xv.size(1) != yv.size(1):  # upstream's matmul raises a RuntimeError
        raise RuntimeError(
            f"{op}: arguments 'x' {tuple(xv.shape)} and 'y' {tuple(yv.shape)} must have the "
            "same inner dim D"
        )
    return xv, yv, _common(op, xv, yv, t, 1), cap


def jagged_sizes(a: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``M_i``, ``N_i`` (int64): the rows of x and y between their offsets (0 if decreasing)."""
    xo, yo = a["x_offsets"], a["y_offsets"]
    m = (xo[1:] - xo[:-1]).clamp_(min=0).to(torch.int64)
    return m, (yo[1:] - yo[:-1]).clamp_(min=0).to(torch.int64)


def _jagged_read(
    x: torch.Tensor, y: torch.Tensor, a: dict[str, torch.Tensor], m: torch.Tensor, n: torch.Tensor
) -> tuple[int, int, int]:
    """The jagged op's one sync: ``(S, L_m, L_n)`` with the data checks read in the same copy."""
    op, nx, ny = JAGGED, x.size(0), y.size(0)
    xo, yo, zo = a["x_offsets"], a["y_offsets"], a["z_offsets"]
    b = xo.numel() - 1
    z_total = a["z_lengths"].sum(dtype=torch.int64)
    checks = DataChecks(op)
    if validation_enabled():  # B = 0 too: nothing may be left unwritten
        bad = [outside(xo, nx), outside(yo, ny), zo[:1] != 0, zo[-1:] != z_total]
        bad.append(zo[:-1] > zo[1:])
        bad.append((zo[1:] - zo[:-1]) != m * n)
        flat = torch.cat([t.reshape(-1) for t in bad])
        checks.require(flat.any().logical_not_(), _JAGGED_CHECK)
    if b > 0:
        total, lm, ln = checks.read_with([z_total, m.amax(), n.amax()])
    else:
        total, lm, ln = checks.read_with([z_total])[0], 0, 0
    if total < 0:  # upstream's torch.empty raises a RuntimeError
        raise RuntimeError(f"{op}: argument 'z_lengths' sums to {total}: a negative output size")
    return total, lm, ln


def jagged_layout(
    x: torch.Tensor,
    y: torch.Tensor,
    a: dict[str, torch.Tensor],
    mn: tuple[torch.Tensor, torch.Tensor],
    total: int | None,
    lm: int,
    ln: int,
) -> _Layout:
    """The jagged op's padded operands for ``L_m``, ``L_n``: rows, masks, ``xp [B, L_m, D]``,
    ``yp [B, L_n, D]`` and the output positions ({} when nothing is read or written)."""
    nx, ny, d = x.size(0), y.size(0), x.size(1)
    xo, yo, zo = a["x_offsets"], a["y_offsets"], a["z_offsets"]
    m, n = mn
    b = m.numel()
    if lm == 0 or ln == 0 or d == 0 or total == 0 or b == 0 or nx == 0 or ny == 0:
        return {}
    jm, jn = positions(lm, x.device), positions(ln, x.device)
    xpad, ypad = jm >= m[:, None], jn >= n[:, None]
    lay = {"xpad": xpad, "ypad": ypad}
    lay["xrows"] = (xo[:-1, None] + jm).clamp_(0, nx - 1)
    lay["yrows"] = (yo[:-1, None] + jn).clamp_(0, ny - 1)
    pos = zo[:-1, None, None] + (jm[:, None] * n[:, None, None] + jn)
    lay["zpad"] = xpad[:, :, None] | ypad[:, None, :]
    lay["zrows"] = _out_rows(lay["zpad"], pos, total)
    xp = x.index_select(0, lay["xrows"].view(-1)).view(b, lm, d)
    lay["xp"] = xp.masked_fill_(xpad[..., None], 0)
    yp = y.index_select(0, lay["yrows"].view(-1)).view(b, ln, d)
    lay["yp"] = yp.masked_fill_(ypad[..., None], 0)
    return lay


def jagged_forward(
    x: torch.Tensor, y: torch.Tensor, a: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, _Layout]:
    """The jagged op's output and the padded layout it was computed on."""
    mn = jagged_sizes(a)
    total, lm, ln = _jagged_read(x, y, a, *mn)
    with allocation_of(JAGGED, f"the output of sum(z_lengths) = {total} values"):
        lay = jagged_layout(x, y, a, mn, total, lm, ln)
        if not lay:
            return x.new_zeros(total), lay
        prod = torch.bmm(lay["xp"], lay["yp"].transpose(1, 2))
        return scatter_rows(prod.reshape(-1, 1), lay["zrows"].view(-1), total).view(total), lay


def named(
    x_lengths: object,
    x_offsets: object,
    y_lengths: object,
    y_offsets: object,
    z_lengths: object,
    z_offsets: object,
) -> dict[str, object]:
    """The lengths / offsets arguments by their schema names."""
    return {
        "x_lengths": x_lengths,
        "x_offsets": x_offsets,
        "y_lengths": y_lengths,
        "y_offsets": y_offsets,
        "z_lengths": z_lengths,
        "z_offsets": z_offsets,
    }


def sll_array_jagged_bmm_npu(
    x: torch.Tensor, y: torch.Tensor, x_lengths: torch.Tensor, x_offsets: torch.Tensor,
    y_lengths: torch.Tensor, y_offsets: torch.Tensor, z_lengths: torch.Tensor,
    z_offsets: torch.Tensor, max_seq_len: int, allow_tf32: bool,
) -> torch.Tensor:  # fmt: skip
    """``[sum(z_lengths), D]``: each capped square block of ``x`` times its rows of ``y``."""
    t = named(x_lengths, x_offsets, y_lengths, y_offsets, z_lengths, z_offsets)
    return array_forward(*array_args(x, y, t, max_seq_len))[0]


def sll_jagged_jagged_bmm_jagged_out_npu(
    x: torch.Tensor, y: torch.Tensor, x_lengths: torch.Tensor, x_offsets: torch.Tensor,
    y_lengths: torch.Tensor, y_offsets: torch.Tensor, z_lengths: torch.Tensor,
    z_offsets: torch.Tensor, max_seq_len: int, allow_tf32: bool,
) -> torch.Tensor:  # fmt: skip
    """``[sum(z_lengths)]``: each ``X_i Y_i^T``, flattened, at ``z_offsets[i]``."""
    t = named(x_lengths, x_offsets, y_lengths, y_offsets, z_lengths, z_offsets)
    xv, yv, a, _ = jagged_args(x, y, t, max_seq_len)
    return jagged_forward(xv, yv, a)[0]
