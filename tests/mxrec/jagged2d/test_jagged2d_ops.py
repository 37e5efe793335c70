"""The jagged2d family on npu and CPU against references written from the definitions
(``conformance/specs/mxrec/jagged2d/jagged2d.py``: Rec SDK's goldens, GR's replace): every
dtype (int32 / int64 values included), int32 / int64 / mixed offsets, prefixes (larger than a
sequence too), replace, dense sides, values longer than their offsets, empty batches; each op
the other's backward; split's one read (none in concat's backward); and hostile offsets (not
monotone, not from 0, past the values, wrapped int32: memory-safe, then a clear error)."""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu
from conformance.specs.mxrec.jagged2d.jagged2d import concat_reference, split_reference
from fbgemm_npu.testing.counters import count

M = torch.ops.mxrec
DEVICES = ("npu", "cpu")
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)
OA = torch.tensor([0, 3, 3, 8, 9])
OB = torch.tensor([0, 4, 10, 10, 12])


def _values(rows: int, dtype: torch.dtype, d: int = 3) -> torch.Tensor:
    return (torch.randn(rows, d) * 100).to(dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 5])
def test_concat_and_split_match_the_references(device: str, dtype: torch.dtype, n: int) -> None:
    a, b = _values(11, dtype), _values(12, dtype)  # A has 2 rows past its offsets
    oa, ob = OA.to(torch.int32).to(device), OB.to(device)
    out = M.concat_2d_jagged(7, a.to(device), b.to(device), oa, ob, False, n)
    want = concat_reference(7, a, b, OA, OB, False, n)
    assert out.dtype == dtype and out.shape == (23, 3)
    assert torch.equal(out.cpu(), want.to(dtype))
    v = want[:21].to(dtype)  # the batches only: split returns A [9], B [12]
    sa, sb = M.split_2d_jagged(v.to(device), 7, oa, ob, 0, n)
    assert torch.equal(sa.cpu(), a[:9]) and torch.equal(sb.cpu(), b)


@pytest.mark.parametrize("device", DEVICES)
def test_replace_matches_gr(device: str) -> None:
    a, b = _values(9, torch.float32), _values(12, torch.float32)
    out = M.concat_2d_jagged(7, a.to(device), b.to(device), OA.to(device), OB.to(device), True)
    assert torch.equal(out.cpu().double(), concat_reference(7, a, b, OA, OB, True))
    # batch 0: lA 3, lB 4: all of A replaced by B[1:4]; batch 2: lA 5, lB 0: A kept
    assert torch.equal(out[:3].cpu(), b[1:4]) and torch.equal(out[3:8].cpu(), a[3:8])
    with pytest.raises(ValueError, match="concat_2d_jagged: argument 'nPrefixFromRight'"):
        M.concat_2d_jagged(7, a.to(device), b.to(device), OA.to(device), OB.to(device), True, 1)


@pytest.mark.parametrize("device", DEVICES)
def test_dense_sides(device: str) -> None:
    dense = _values(8, torch.float32).view(4, 2, 3)
    b = _values(12, torch.float32)
    empty = torch.empty(0, dtype=torch.int64, device=device)
    out = M.concat_2d_jagged(7, dense.to(device), b.to(device), empty, OB.to(device))
    want = concat_reference(7, dense, b, torch.empty(0), OB)
    assert torch.equal(out.cpu().double(), want)
    sa, sb = M.split_2d_jagged(out, 7, empty, OB.to(device), 2, 0)
    assert sa.shape == (4, 2, 3) and torch.equal(sa.cpu(), dense) and torch.equal(sb.cpu(), b)
    sb2, sa2 = M.split_2d_jagged(
        M.concat_2d_jagged(7, b.to(device), dense.to(device), OB.to(device), empty, False, 1),
        7,
        OB.to(device),
        empty,
        2,
        1,
    )
    assert torch.equal(sb2.cpu(), b) and torch.equal(sa2.cpu(), dense)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("replace", [False, True])
def test_concat_gradient_is_the_split(device: str, replace: bool) -> None:
    a, b = _values(11, torch.float32), _values(12, torch.float32)
    ga, gb = a.clone().to(device).requires_grad_(), b.clone().to(device).requires_grad_()
    out = M.concat_2d_jagged(7, ga, gb, OA.to(device), OB.to(device), replace, 0 if replace else 2)
    w = torch.randn(out.shape)
    (out * w.to(device)).sum().backward()
    ra, rb = a.double().requires_grad_(), b.double().requires_grad_()
    ref = concat_reference(7, ra, rb, OA, OB, replace, 0 if replace else 2)
    (ref * w.double()).sum().backward()
    assert torch.equal(ga.grad.cpu().double(), ra.grad.float().double())
    assert torch.equal(gb.grad.cpu().double(), rb.grad.float().double())


def test_concat_backward_reads_nothing() -> None:
    a = torch.randn(11, 3, device="npu", requires_grad=True)
    b = torch.randn(12, 3, device="npu", requires_grad=True)
    out = M.concat_2d_jagged(7, a, b, OA.npu(), OB.npu(), False, 1)
    g = torch.randn_like(out)
    with count() as c:
        out.backward(g)
    assert c.syncs == 0 and c.stalls == 0, c.sync_ops


@pytest.mark.parametrize("device", DEVICES)
def test_split_gradient_is_the_concat(device: str) -> None:
    v = _values(24, torch.float32)  # 3 rows past the batches: no gradient
    gv = v.clone().to(device).requires_grad_()
    sa, sb = M.split_2d_jagged(gv, 7, OA.to(device), OB.to(device), 0, 1)
    wa, wb = torch.randn(sa.shape), torch.randn(sb.shape)
    ((sa * wa.to(device)).sum() + (sb * wb.to(device)).sum()).backward()
    rv = v.double().requires_grad_()
    ra, rb = split_reference(rv, 7, OA, OB, 0, 1)
    ((ra * wa.double()).sum() + (rb * wb.double()).sum()).backward()
    assert torch.equal(gv.grad.cpu().double(), rv.grad.float().double())
    assert torch.equal(gv.grad[21:].cpu(), torch.zeros(3, 3))


@pytest.mark.parametrize("device", DEVICES)
def test_empty_batches_and_values(device: str) -> None:
    z = torch.zeros(2, dtype=torch.int64, device=device)
    e = torch.empty(0, 4, device=device)
    assert M.concat_2d_jagged(0, e, e, z, z).shape == (0, 4)
    sa, sb = M.split_2d_jagged(e, 0, z, z)
    assert sa.shape == (0, 4) and sb.shape == (0, 4)


def test_hostile_offsets_are_memory_safe_and_raise() -> None:
    a, b = torch.randn(9, 3, device="npu"), torch.randn(12, 3, device="npu")
    bad = (
        [0, 5, 3, 8, 9],  # not monotone
        [1, 3, 3, 8, 9],  # not from 0
        [0, 3, 3, 8, 99],  # past the values
        [0, 3, 3, -(2**31), 9],  # wrapped int32
        [0, 2**31 - 1, 3, 8, 9],
    )
    for o in bad:
        oa = torch.tensor(o, dtype=torch.int32, device="npu")
        out = M.concat_2d_jagged(7, a, b, oa, OB.npu())  # every row read inside A and B
        assert out.shape == (21, 3)
        with pytest.raises(RuntimeError, match="concat_2d_jagged: arguments 'offsetA' and "):
            fbgemm_npu.check()
        with pytest.raises(ValueError, match="split_2d_jagged: arguments 'offsetA' and "):
            M.split_2d_jagged(out, 7, oa, OB.npu())  # read at the call: its sizes


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"offsetB": torch.tensor([0, 4, 12])}, "'offsetA' .* and 'offsetB' .* same length"),
        ({"offsetA": torch.tensor([[0, 3]])}, "argument 'offsetA' must be 1-D"),
        ({"offsetA": torch.tensor([0.0, 3, 3, 8, 9])}, "argument 'offsetA' must have dtype"),
        ({"offsetA": torch.tensor([0])}, "argument 'offsetA' must have length B \\+ 1 >= 2"),
        ({"offsetA": OA[:0], "offsetB": OB[:0]}, "both empty"),
        ({"valuesB": torch.randn(12, 4)}, "same width D and dtype"),
        ({"valuesB": torch.randn(12, 3).double()}, "argument 'valuesB' must have dtype"),
        ({"valuesA": torch.randn(9, 3, 1)}, "argument 'valuesA' must be 2-D"),
        ({"offsetA": torch.empty(0, dtype=torch.int64)}, "argument 'valuesA' must be 3-D"),
        ({"nPrefixFromRight": -1}, "argument 'nPrefixFromRight' must be >= 0"),
        ({"maxSeqlen": -1}, "argument 'maxSeqlen' must be >= 0"),
    ],
)
def test_concat_errors_name_the_op_and_argument(kwargs: dict, pattern: str) -> None:
    args = {
        "maxSeqlen": 7,
        "valuesA": torch.randn(9, 3),
        "valuesB": torch.randn(12, 3),
        "offsetA": OA,
        "offsetB": OB,
    }
    args.update(kwargs)
    for device in DEVICES:
        moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in args.items()}
        with pytest.raises(ValueError, match=f"mxrec::concat_2d_jagged: .*{pattern}"):
            M.concat_2d_jagged(**moved)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"values": torch.randn(21)}, "argument 'values' must be 2-D"),
        ({"values": torch.randn(21, 3).to(torch.uint8)}, "argument 'values' must have dtype"),
        ({"values": torch.randn(20, 3)}, "offsetA\\[-1\\] \\+ offsetB\\[-1\\] <= values"),
        ({"offsetA": torch.empty(0, dtype=torch.int64), "dense_size": 9}, "'dense_size' = 9"),
        ({"nPrefixToRight": -2}, "argument 'nPrefixToRight' must be >= 0"),
        ({"dense_size": -1}, "argument 'dense_size' must be >= 0"),
    ],
)
def test_split_errors_name_the_op_and_argument(kwargs: dict, pattern: str) -> None:
    args = {"values": torch.randn(21, 3), "maxSeqlen": 7, "offsetA": OA, "offsetB": OB}
    args.update(kwargs)
    for device in DEVICES:
        moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in args.items()}
        with pytest.raises(ValueError, match=f"mxrec::split_2d_jagged: .*{pattern}"):
            M.split_2d_jagged(**moved)


def test_two_devices_and_none() -> None:
    with pytest.raises(RuntimeError, match="concat_2d_jagged: arguments '.*' .* same device"):
        M.concat_2d_jagged(7, torch.randn(9, 3, device="npu"), torch.randn(12, 3), OA, OB)
    with pytest.raises(ValueError, match="split_2d_jagged: argument 'offsetB' must be a Tensor"):
        M.split_2d_jagged(torch.randn(21, 3, device="npu"), 7, OA.npu(), None)
