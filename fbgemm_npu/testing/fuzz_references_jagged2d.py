"""References for the jagged2d family's fuzz cases (``tests/fuzz/test_fuzz_jagged2d.py``):
``mxrec::concat_2d_jagged`` / ``mxrec::split_2d_jagged`` by per-batch Python slicing (Rec SDK's
goldens with the prefix, GR's replace), written apart from the kernels; float values in
float64, results cast back to the values' dtype."""

from __future__ import annotations

import torch


def _rows(values: torch.Tensor, offsets: torch.Tensor, batches: int, dense: int | None = None):
    x = values.double() if values.is_floating_point() else values
    if offsets.numel() == 0:
        n = x.size(1) if dense is None else dense
        return x.reshape(-1, x.size(-1)), [n * j for j in range(batches + 1)]
    return x, offsets.tolist()


def concat_2d_jagged(
    maxSeqlen, valuesA, valuesB, offsetA, offsetB, isReplace=False, nPrefixFromRight=0
):
    batches = max(offsetA.numel(), offsetB.numel()) - 1
    a, oa = _rows(valuesA, offsetA, batches)
    b, ob = _rows(valuesB, offsetB, batches)
    if isReplace:
        out = a.clone()
        for j in range(batches):
            q = min(oa[j + 1] - oa[j], ob[j + 1] - ob[j])
            if q:
                out[oa[j + 1] - q : oa[j + 1]] = b[ob[j + 1] - q : ob[j + 1]]
        if out.is_floating_point():
            out = out + 0 * b.sum()  # B is an input even where nothing is replaced
        return out.view(valuesA.shape).to(valuesA.dtype)
    parts = []
    for j in range(batches):
        bj = b[ob[j] : ob[j + 1]]
        p = min(nPrefixFromRight, bj.size(0))
        parts += [bj[:p], a[oa[j] : oa[j + 1]], bj[p:]]
    return torch.cat([*parts, a[oa[-1] :], b[ob[-1] :]]).to(valuesA.dtype)


def split_2d_jagged(values, maxSeqlen, offsetA, offsetB, dense_size=0, nPrefixToRight=0):
    batches = max(offsetA.numel(), offsetB.numel()) - 1
    v = values.double() if values.is_floating_point() else values
    dense = [dense_size * j for j in range(batches + 1)]
    oa = offsetA.tolist() if offsetA.numel() else dense
    ob = offsetB.tolist() if offsetB.numel() else dense
    a_rows, b_rows, r = [v[:0]], [v[:0]], 0
    for j in range(batches):
        la, lb = oa[j + 1] - oa[j], ob[j + 1] - ob[j]
        p = min(nPrefixToRight, lb)
        b_rows.append(v[r : r + p])
        a_rows.append(v[r + p : r + p + la])
        b_rows.append(v[r + p + la : r + la + lb])
        r += la + lb
    a, b = torch.cat(a_rows), torch.cat(b_rows)
    if offsetA.numel() == 0:
        a = a.view(batches, dense_size, v.size(1))
    if offsetB.numel() == 0:
        b = b.view(batches, dense_size, v.size(1))
    return a.to(values.dtype), b.to(values.dtype)
