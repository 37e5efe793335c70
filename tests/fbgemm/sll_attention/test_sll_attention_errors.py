"""Bad input to the sll_attention ops: an error naming the op and the argument (rule 9), never
a crash or a silently wrong result.  Data checks are queued (``FBGEMM_NPU_VALIDATE``'s
default): ``fbgemm_npu.check()`` raises them.  The refusals where upstream's CPU and GPU kernels
disagree (a length past ``max_seq_len`` for the jagged2 ops and the basic attention, offsets
that do not end at ``q_weights.size(0)``) are here too, each against upstream's own behaviour."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import fbgemm_npu

F = torch.ops.fbgemm
NPU = "npu"
OFF = torch.tensor([0, 2, 2, 5])
OT = torch.tensor([0, 4, 4, 13])
G = torch.Generator().manual_seed(0)


def _r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=G).to(dtype)


def _npu(args: tuple) -> tuple:
    return tuple(a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args)


Q, K, V = _r(5, 3), _r(5, 3), _r(5, 2)
KD, BIAS = _r(3, 3, 4), _r(3, 2, 4)
QH = _r(2, 5, 3)

# name: (op, args, the argument the message names, whether upstream's CPU kernel raises too)
BAD: dict[str, tuple[Callable[..., Any], tuple, str, bool]] = {
    "softmax float64": (F.sll_jagged_softmax, (_r(5, 2).double(), OFF, 3), "x", True),
    "softmax 1-D": (F.sll_jagged_softmax, (_r(5), OFF, 3), "x", True),
    "softmax 2-D offsets": (F.sll_jagged_softmax, (_r(5, 2), OFF.view(1, 4), 3), "x_offsets", True),
    "softmax offsets past x": (F.sll_jagged_softmax, (_r(4, 2), OFF, 3), "x_offsets", False),
    "softmax decreasing": (
        F.sll_jagged_softmax,
        (_r(5, 2), torch.tensor([0, 3, 1, 5]), 3),
        "x_offsets",
        False,
    ),
    "softmax float offsets": (F.sll_jagged_softmax, (_r(5, 2), OFF.float(), 3), "x_offsets", True),
    "jagged2 length past max_seq_len": (
        F.sll_jagged2_softmax,
        (_r(13), OFF, OT, 2, False),
        "max_seq_len",
        False,
    ),
    "jagged2 steps not squares": (
        F.sll_jagged2_softmax,
        (_r(13), OFF, torch.tensor([0, 4, 5, 13]), 3, False),
        "offsets_total",
        True,
    ),
    "jagged2 n_b**2 wraps int32": (  # 65536**2 is 0 in int32
        F.sll_jagged2_softmax,
        (_r(4), *(torch.tensor(v, dtype=torch.int32) for v in ([0, 65536], [0, 0])), 70000, False),
        "offsets_total",
        True,
    ),
    "jagged2 short offsets": (
        F.sll_jagged2_softmax,
        (_r(13), OFF[:3], OT, 3, False),
        "offsets",
        True,
    ),
    "jagged2 x too short": (F.sll_jagged2_softmax, (_r(10), OFF, OT, 3, False), "offsets", True),
    "jagged2 int x": (F.sll_jagged2_softmax, (_r(13).long(), OFF, OT, 3, False), "x", True),
    "padded not a square": (
        F.sll_jagged2_to_padded_dense,
        (_r(13), torch.tensor([0, 4, 5, 13]), 3, 0.0),
        "offsets",
        True,
    ),
    "padded n past max_length": (
        F.sll_jagged2_to_padded_dense,
        (_r(13), OT, 2, 0.0),
        "max_length",
        True,
    ),
    "padded negative max_length": (
        F.sll_jagged2_to_padded_dense,
        (_r(13), OT, -1, 0.0),
        "max_length",
        True,
    ),
    "padded values too short": (
        F.sll_jagged2_to_padded_dense,
        (_r(9), OT, 3, 0.0),
        "offsets",
        True,
    ),
    "dense bias batch": (
        F.sll_jagged_dense_flash_attention,
        (Q, KD, _r(5, 3), _r(2, 2, 4), OFF, 3),
        "attn_bias",
        True,
    ),
    "dense bias T": (
        F.sll_jagged_dense_flash_attention,
        (Q, KD, _r(5, 3), _r(3, 2, 5), OFF, 3),
        "attn_bias",
        True,
    ),
    "dense k batch": (
        F.sll_jagged_dense_flash_attention,
        (Q, _r(2, 3, 4), _r(5, 3), BIAS, OFF, 3),
        "k_weights",
        False,
    ),
    "dense q float64": (
        F.sll_jagged_dense_flash_attention,
        (Q.double(), KD, _r(5, 3), BIAS, OFF, 3),
        "q_weights",
        True,
    ),
    "dense v short": (
        F.sll_jagged_dense_flash_attention,
        (_r(7, 3), KD, _r(5, 3), BIAS, OFF, 3),
        "v_weights",
        True,
    ),
    "dense offsets past q": (
        F.sll_jagged_dense_flash_attention,
        (Q, KD, _r(5, 3), BIAS, torch.tensor([0, 2, 2, 9]), 4),
        "offsets",
        False,
    ),
    "basic length past max_seq_len, mask": (
        F.sll_jagged_flash_attention_basic,
        (Q, K, V, OFF, 2, True),
        "max_seq_len",
        True,
    ),
    "basic length past max_seq_len": (
        F.sll_jagged_flash_attention_basic,
        (Q, K, V, OFF, 2),
        "max_seq_len",
        False,
    ),
    "basic offsets end before q": (
        F.sll_jagged_flash_attention_basic,
        (_r(7, 3), _r(7, 3), _r(7, 2), OFF, 3),
        "offsets",
        False,
    ),
    "basic offsets start at 1": (
        F.sll_jagged_flash_attention_basic,
        (Q, K, V, torch.tensor([1, 2, 2, 5]), 3),
        "offsets",
        True,
    ),
    "basic mixed dtypes": (
        F.sll_jagged_flash_attention_basic,
        (Q, K.double(), V, OFF, 3),
        "k_weights",
        True,
    ),
    "basic k rows": (
        F.sll_jagged_flash_attention_basic,
        (Q, _r(6, 3), V, OFF, 3),
        "k_weights",
        False,
    ),
    "multi 2-D q": (F.sll_multi_head_jagged_flash_attention, (Q, Q, Q, OFF, 3), "q_weights", True),
    "multi v shape": (
        F.sll_multi_head_jagged_flash_attention,
        (QH, QH, _r(2, 5, 4), OFF, 3),
        "v_weights",
        True,
    ),
    "multi offsets past q": (
        F.sll_multi_head_jagged_flash_attention,
        (QH, QH, QH, torch.tensor([0, 2, 6, 8]), 3),
        "offsets",
        True,
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_names_op_and_argument(name: str) -> None:
    op, args, arg, upstream_raises = BAD[name]
    short = op._qualified_op_name.split("::")[1]
    if upstream_raises and "multi" not in name:  # upstream's CPU kernel (none for multi-head)
        with pytest.raises((RuntimeError, ValueError, IndexError, NotImplementedError)):
            op(*args)
    with pytest.raises((RuntimeError, ValueError)) as info:
        op(*_npu(args))
        fbgemm_npu.check()
    assert short in str(info.value) and arg in str(info.value), str(info.value)


def test_none_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="sll_jagged_softmax.*'x'"):
        F.sll_jagged_softmax(None, OFF.to(NPU), 3)
    with pytest.raises(ValueError, match="sll_jagged2_to_padded_dense.*'offsets'"):
        F.sll_jagged2_to_padded_dense(_r(4).to(NPU), None, 2, 0.0)


def test_mixed_devices_are_refused_by_name() -> None:
    with pytest.raises(RuntimeError, match="sll_jagged_softmax.*x_offsets"):
        F.sll_jagged_softmax(_r(5, 2).to(NPU), OFF, 3)


def test_masked_positions_give_no_nan_even_from_garbage() -> None:
    """Rows past the offsets (and past max_seq_len) holding inf / NaN never reach a result."""
    x = _r(7, 2)
    x[5:] = float("nan")  # past the last offset: nothing reads them
    got = F.sll_jagged_softmax(x.to(NPU), OFF.to(NPU), 2).cpu()
    assert not got[:5].isnan().any() and (got[5:] == 0).all()
    q = _r(7, 3)
    q[5:] = float("inf")
    out = F.sll_multi_head_jagged_flash_attention(
        *(t.unsqueeze(0).to(NPU) for t in (q, q, q)), OFF.to(NPU), 2
    )
    assert torch.isfinite(out.cpu()).all()


def test_a_huge_max_seq_len_costs_no_memory() -> None:
    """The padded length is capped by the rows the inputs can hold (upstream's loops allocate
    nothing by max_seq_len): 2**40 gives the result of a max_seq_len past every length."""
    o = OFF.to(NPU)
    x = _r(5, 2).to(NPU)
    assert torch.equal(F.sll_jagged_softmax(x, o, 2**40).cpu(), F.sll_jagged_softmax(x, o, 9).cpu())
    x2 = _r(13).to(NPU)
    ot = OT.to(NPU)
    big, small = (F.sll_jagged2_softmax(x2, o, ot, m, False).cpu() for m in (2**40, 4))
    assert torch.equal(big, small)
    q, qh = Q.to(NPU), QH.to(NPU)
    k, bias = KD.to(NPU), BIAS.to(NPU)
    # the results scale by 1 / max_seq_len: compare the scaled ones
    got = F.sll_jagged_flash_attention_basic(q, q, q, o, 2**30).cpu() * 2**30
    torch.testing.assert_close(got, F.sll_jagged_flash_attention_basic(q, q, q, o, 4).cpu() * 4)
    got = F.sll_multi_head_jagged_flash_attention(qh, qh, qh, o, 2**30).cpu() * 2**30
    want = F.sll_multi_head_jagged_flash_attention(qh, qh, qh, o, 4).cpu() * 4
    torch.testing.assert_close(got, want)
    got = F.sll_jagged_dense_flash_attention(q, k, q, bias, o, 2**40).cpu()
    torch.testing.assert_close(got, F.sll_jagged_dense_flash_attention(q, k, q, bias, o, 5).cpu())
    fbgemm_npu.check()


def test_an_output_that_cannot_be_allocated_names_max_length() -> None:
    with pytest.raises(RuntimeError, match="sll_jagged2_to_padded_dense.*max_length"):
        F.sll_jagged2_to_padded_dense(_r(13).to(NPU), OT.to(NPU), 2**40, 0.0)


@pytest.mark.parametrize(
    ("rows", "offsets", "max_seq_len"),
    [
        (0, [5], 3),  # no sequence, offsets past the (no) rows
        (3, [0], 3),  # no sequence, rows left over
        (3, [0, 2], 3),  # one sequence ending before q's last row
        (3, [0, 8], 2),  # one running past q, the rows read (max_seq_len 2) inside it
        (3, [0, 8], 0),
    ],
)
def test_dense_offsets_must_end_at_q_rows(rows: int, offsets: list[int], max_seq_len: int) -> None:
    """Upstream's size check wants ``offsets[-1] == q_weights.size(0)``; ours returned a
    valid-looking result where the rows it read stayed inside q (the fuzz suite's finding:
    ``past_end`` offsets with no sequence, or truncated by ``max_seq_len``)."""
    b = len(offsets) - 1
    args = [_r(rows, 3), _r(b, 3, 4), _r(rows, 2), _r(b, 2, 4), torch.tensor(offsets), max_seq_len]
    with pytest.raises(RuntimeError):  # upstream's CPU kernel
        F.sll_jagged_dense_flash_attention(*args)
    on_npu = [a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args]
    with pytest.raises(
        (RuntimeError, ValueError), match="sll_jagged_dense_flash_attention.*offsets"
    ):
        F.sll_jagged_dense_flash_attention(*on_npu)
        fbgemm_npu.check()
