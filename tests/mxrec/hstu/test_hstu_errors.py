"""Hostile input to the HSTU ops (``mxrec::hstu_jagged.equal`` / ``.delta``, ``mxrec::hstu_dense``
and their backwards): each case a finding of the fuzz suite (tests/fuzz/test_fuzz_hstu.py) or a
category the issue names, held deterministically.  Bad input raises an error naming the op and
the argument (data conditions through the queued checks, read at ``check()``); valid edge cases
(``num_context + num_target == L - 1``, zero counts on empty sequences) equal the float64
reference.  Cases whose fix belongs to the
kernels' files are ``xfail(strict=True)``: an XPASS says the fix landed.
"""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.hstu.reference import hstu_jagged_reference
from fbgemm_npu.native._checks import validation_enabled
from fbgemm_npu.native._pending import check
from fbgemm_npu.native.mxrec.hstu import _layout

OFF = [0, 3, 3, 8]  # lengths 3, 0, 5
S, NQ, NK, D, DV = 6, 2, 1, 4, 3
I32_MAX = 2**31 - 1
data_checks = pytest.mark.skipif(
    not validation_enabled(), reason="FBGEMM_NPU_VALIDATE=0 turns the data checks off"
)


def _qkv(t: int = OFF[-1], device: str = "npu", seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(t, n, d, generator=g).to(device) for n, d in ((NQ, D), (NK, D), (NK, DV))]


def _jagged(device: str = "npu", backward: bool = False, **over: object) -> torch.Tensor:
    q, k, v = _qkv(device="cpu")
    kw: dict = {"q": q, "k": k, "v": v, "max_seq_len": S, "seq_offset": torch.tensor(OFF)}
    kw.update(over)
    kw = {n: a.to(device) if isinstance(a, torch.Tensor) else a for n, a in kw.items()}
    if backward:
        grad = torch.ones(OFF[-1], NQ, DV, device=device)
        return torch.ops.mxrec.hstu_jagged_backward(grad, **kw)[0]
    return torch.ops.mxrec.hstu_jagged(**kw)


def _raises(fn, pattern: str) -> None:  # type: ignore[no-untyped-def]
    check()  # nothing earlier is pending
    with pytest.raises((ValueError, RuntimeError), match=pattern):
        fn()
        check()


def _counts(nc: list[int] | None, nt: list[int] | None, dtype=torch.int64) -> dict:  # type: ignore[no-untyped-def]
    out = {"target_group_size": 1}
    if nc is not None:
        out["num_context"] = torch.tensor(nc, dtype=dtype)
    if nt is not None:
        out["num_target"] = torch.tensor(nt, dtype=dtype)
    return out


# --- num_context + num_target beyond the sequence (the issue: a clear error; a queued check) ---


@data_checks
@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize("max_seq_len", [S, 0], ids=["sized", "read_back"])
@pytest.mark.parametrize(
    ("nc", "nt"),
    [
        ([2, 0, 3], [2, 0, 2]),  # 4 > 3 in the first sequence
        ([0, 1, 0], [0, 0, 0]),  # a context row in the empty sequence
        (None, [0, 0, 6]),  # targets alone, 6 > 5
        ([4, 0, 0], None),  # context alone, 4 > 3
    ],
)
def test_counts_beyond_the_sequence_raise(nc, nt, max_seq_len, device, backward) -> None:  # type: ignore[no-untyped-def]
    kw = {**_counts(nc, nt), "max_seq_len": max_seq_len}
    _raises(
        lambda: _jagged(device, backward, **kw),
        r"hstu_jagged(_backward)?\.?.*: .*'num_(context|target)'.*below each sequence's length",
    )


@data_checks
@pytest.mark.parametrize("name", ["num_context", "num_target"])
@pytest.mark.parametrize("value", [2**32, 2**32 + 1, -(2**32) + 1, 2**31], ids=str)
def test_int64_counts_past_int32_raise_instead_of_wrapping(name: str, value: int) -> None:
    """2**32 cast to int32 is 0 (a valid count): the cast saturates, the check sees it."""
    counts = [value, 0, 0]
    _raises(lambda: _jagged(**{name: torch.tensor(counts), "target_group_size": 1}), name)


@data_checks
@pytest.mark.parametrize("device", ["npu", "cpu"])
def test_counts_that_fill_the_sequence_raise(device: str) -> None:
    """``num_context + num_target == L``: the issue makes ``>= L`` an error (Rec SDK's adapter
    lets ``== L`` through)."""
    _raises(lambda: _jagged(device, **_counts([1, 0, 3], [2, 0, 2])), "num_context")


@pytest.mark.parametrize("device", ["npu", "cpu"])
def test_counts_one_short_of_the_sequence_and_zero_on_an_empty_one_are_valid(device: str) -> None:
    """``num_context + num_target == L - 1`` (and 0 + 0 for the empty sequence)."""
    kw = _counts([1, 0, 2], [1, 0, 2])
    out = _jagged(device, **kw)
    check()
    q, k, v = _qkv(device="cpu")
    ref = hstu_jagged_reference(q, k, v, torch.tensor(OFF), max_seq_len=S, **kw)
    torch.testing.assert_close(out.cpu().double(), ref, rtol=1e-4, atol=1e-5)


# --- offsets whose int32 cast wraps ---


@data_checks
@pytest.mark.parametrize(
    "offsets",
    [
        [0, 2**32 + 3, 2**32 + 3, 2**32 + 8],  # int32: 0, 3, 3, 8 (valid) if wrapped
        [0, 3, 2**32 + 3, 8],  # int32: 0, 3, 3, 8
        [-(2**32), 3, 3, 8],  # int32: 0, 3, 3, 8
    ],
)
@pytest.mark.parametrize("op", ["equal", "delta"])
def test_int64_offsets_past_int32_raise_instead_of_wrapping(offsets: list[int], op: str) -> None:
    off = torch.tensor(offsets, dtype=torch.int64)
    if op == "equal":
        _raises(lambda: _jagged(seq_offset=off), r"hstu_jagged.*'seq_offset'")
        return
    q, k, v = _qkv()
    kw = {"max_seq_len": S, "max_seq_len_k": S}
    _raises(
        lambda: torch.ops.mxrec.hstu_jagged.delta(
            q, k, v, seq_offset=off.npu(), seq_offset_k=torch.tensor(OFF).npu(), **kw
        ),
        r"hstu_jagged.*'seq_offset'",
    )
    _raises(
        lambda: torch.ops.mxrec.hstu_jagged.delta(
            q, k, v, seq_offset=torch.tensor(OFF).npu(), seq_offset_k=off.npu(), **kw
        ),
        r"hstu_jagged.*'seq_offset_k'",
    )


@data_checks
@pytest.mark.parametrize("max_seq_len", [S, 0], ids=["sized", "read_back"])
@pytest.mark.parametrize(
    "offsets",
    [
        [0, I32_MAX, -(2**31) + 5, 8],  # int32 steps wrap: 2**31 - 1, +6, -2**31 + 3
        [0, 5, 3, 8],  # plainly decreasing, every length within max_seq_len but one
        [0, -(2**31), 0, 8],  # a step of 2**31 wraps to -2**31
    ],
)
def test_decreasing_int32_offsets_raise(offsets: list[int], max_seq_len: int) -> None:
    """Sized, "non-decreasing" is read as "every length >= 0" (_layout.queue_data_checks)."""
    off = torch.tensor(offsets, dtype=torch.int32)
    _raises(lambda: _jagged(seq_offset=off, max_seq_len=max_seq_len), r"hstu_jagged.*seq_offset")


# --- metadata errors of every kind the issue lists: the op and the argument named ---

BAD_ARGS = [
    ({"q": torch.zeros(8, NQ)}, "'q'"),
    ({"q": torch.zeros(8, NQ, D, 1)}, "'q'"),
    ({"q": torch.zeros(8, 3, D), "k": torch.zeros(8, 2, D), "v": torch.zeros(8, 2, DV)}, "'k'"),
    ({"v": torch.zeros(8, 2, DV)}, "'k'"),  # k's heads differ from v's
    ({"k": torch.zeros(7, NK, D)}, "'k'"),
    ({"k": torch.zeros(8, NK, D + 1)}, "'k'"),
    ({"q": torch.zeros(8, NQ, D).int()}, "'q'"),
    ({"q": torch.zeros(8, NQ, D).double()}, "'q'"),
    ({"seq_offset": torch.tensor([0.0, 3.0, 3.0, 8.0])}, "'seq_offset'"),
    ({"seq_offset": torch.tensor([False, True, True, True])}, "'seq_offset'"),
    ({"seq_offset": torch.tensor(OFF).view(2, 2)}, "'seq_offset'"),
    ({"seq_offset": torch.tensor(0)}, "'seq_offset'"),
    ({"num_context": torch.tensor([0.0, 0.0, 0.0])}, "'num_context'"),
    ({"num_target": torch.tensor([[0, 0, 0]])}, "'num_target'"),
    ({"num_target": torch.tensor([0, 0])}, "'num_target'"),
    ({"mask_type": 3, "mask": torch.ones(3, NQ, S, S).bool()}, "'mask'"),
    ({"mask_type": 3, "mask": torch.ones(3, NQ, S + 1, S)}, "'mask'"),
    ({"attn_bias": torch.ones(3, NQ, S, S - 1)}, "'attn_bias'"),
    ({"attn_bias": torch.ones(2, NQ, S, S)}, "'attn_bias'"),
]


@pytest.mark.parametrize(("over", "arg"), BAD_ARGS)
def test_bad_arguments_name_the_op_and_the_argument(over: dict, arg: str) -> None:
    _raises(lambda: _jagged(**over), rf"hstu_jagged.*{arg}")


@pytest.mark.parametrize("name", ["seq_offset", "num_context", "attn_bias", "mask", "k"], ids=str)
@pytest.mark.parametrize("where", ["cpu", "npu:1"])
def test_an_argument_on_another_device_is_named(name: str, where: str) -> None:
    q, k, v = _qkv()
    kw: dict = {"max_seq_len": S, "seq_offset": torch.tensor(OFF).npu(), "mask_type": 3}
    kw["mask"] = torch.ones(3, NQ, S, S).npu()
    kw["attn_bias"] = torch.zeros(3, NQ, S, S).npu()
    kw["num_context"] = torch.zeros(3, dtype=torch.int32).npu()
    if name == "k":
        k = k.to(where)
    else:
        kw[name] = kw[name].to(where)
    _raises(lambda: torch.ops.mxrec.hstu_jagged(q, k, v, **kw), rf"hstu_jagged.*'{name}'")


@pytest.mark.parametrize("value", [None, "q", 3, [1.0]], ids=repr)
def test_a_non_tensor_q_is_named(value: object) -> None:
    _, k, v = _qkv()
    _raises(
        lambda: torch.ops.mxrec.hstu_jagged(
            value, k, v, max_seq_len=S, seq_offset=torch.tensor(OFF).npu()
        ),
        r"hstu_jagged.*'?q'?",
    )


def test_dense_errors_name_the_op_and_the_argument() -> None:
    q, k, v = (t.reshape(2, 4, *t.shape[1:]) for t in _qkv())
    dense = torch.ops.mxrec.hstu_dense
    _raises(lambda: dense(q[0], k[0], v[0]), r"hstu_dense.*'q'")
    _raises(lambda: dense(q, k, v, max_seq_len=3), r"hstu_dense.*'max_seq_len'")
    _raises(lambda: dense(q, k[:, :3], v[:, :3]), r"hstu_dense.*'k'")
    _raises(lambda: dense(q, k, v, torch.ones(2, NQ, 3, 3).npu(), None, 3), r"hstu_dense.*'mask'")


@pytest.mark.parametrize("layout", ["expanded", "transposed", "strided"])
def test_non_contiguous_q_k_v_equal_the_reference(layout: str) -> None:
    q, k, v = _qkv(device="cpu")
    if layout == "expanded":
        q, k, v = (t[:1].expand(t.shape) for t in (q, k, v))
    elif layout == "transposed":
        q, k, v = (t.transpose(0, 1).contiguous().transpose(0, 1) for t in (q, k, v))
    else:  # every other row of a buffer twice as long
        q, k, v = (torch.stack([t, torch.zeros_like(t)], 1)[:, 0] for t in (q, k, v))
    assert not q.is_contiguous()
    out = torch.ops.mxrec.hstu_jagged(
        q.npu(), k.npu(), v.npu(), max_seq_len=S, seq_offset=torch.tensor(OFF).npu()
    )
    ref = hstu_jagged_reference(q, k, v, torch.tensor(OFF), max_seq_len=S)
    torch.testing.assert_close(out.cpu().double(), ref, rtol=1e-4, atol=1e-5)


# --- sizes: a huge max_seq_len is refused before the padded tiles run (it hung: 2**20 rows of
# two sequences ran ~10**6 tiles); q without heads ---


@pytest.mark.parametrize("value", [20481, 2**20, 2**31, 2**40], ids=str)
@pytest.mark.parametrize("op", ["equal", "delta_q", "delta_k"])
def test_a_max_seq_len_past_rec_sdks_range_is_refused(op: str, value: int) -> None:
    q, k, v = _qkv()
    off = torch.tensor(OFF).npu()
    if op == "equal":
        _raises(lambda: _jagged(max_seq_len=value), r"hstu_jagged.*max_seq_len")
        return
    kw = {"max_seq_len": S, "max_seq_len_k": S, "seq_offset": off, "seq_offset_k": off}
    name = "max_seq_len" if op == "delta_q" else "max_seq_len_k"
    kw[name] = value
    _raises(lambda: torch.ops.mxrec.hstu_jagged.delta(q, k, v, **kw), rf"hstu_jagged.*'{name}'")


def test_the_bound_itself_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound is Rec SDK's 20480; at it a call runs, one past it is refused (shown at a bound
    of 8: a call at 20480 costs ~30 s on the simulated device)."""
    assert _layout.MAX_SEQ_LEN == 20480
    monkeypatch.setattr(_layout, "MAX_SEQ_LEN", 8)
    out = _jagged(max_seq_len=8)
    check()
    q, k, v = _qkv(device="cpu")
    ref = hstu_jagged_reference(q, k, v, torch.tensor(OFF), max_seq_len=8)
    torch.testing.assert_close(out.cpu().double(), ref, rtol=1e-4, atol=1e-6)
    _raises(lambda: _jagged(max_seq_len=9), r"hstu_jagged.*'max_seq_len' must be <= 8")


@pytest.mark.parametrize("op", ["jagged", "dense"])
def test_q_without_heads_is_refused(op: str) -> None:
    """It passed ``N_q % N_k == 0`` and failed inside (a reshape of 0 elements)."""
    if op == "jagged":
        _raises(lambda: _jagged(q=torch.zeros(8, 0, D)), r"hstu_jagged.*'q'")
        return
    q, k, v = (t.reshape(2, 4, *t.shape[1:]) for t in _qkv())
    _raises(lambda: torch.ops.mxrec.hstu_dense(q[:, :, :0], k, v), r"hstu_dense.*'q'")


# --- which argument a data error names, where it is raised at the call (read-back, sync) ---


@data_checks
def test_key_lengths_past_max_seq_len_k_name_it() -> None:
    """The condition on the keys' lengths named max_seq_len (the q bound), not max_seq_len_k."""
    q, k, v = _qkv()
    off = torch.tensor(OFF).npu()
    _raises(
        lambda: torch.ops.mxrec.hstu_jagged.delta(
            q, k, v, max_seq_len=S, max_seq_len_k=4, seq_offset=off, seq_offset_k=off
        ),
        r"hstu_jagged.delta: .*argument 'seq_offset_k': its sequence lengths must be <= "
        r"max_seq_len_k = 4",
    )


@data_checks
@pytest.mark.xfail(
    strict=True,
    reason="hstu_delta.py: 'every q length must be <= its k length' names no argument; read "
    "back (max_seq_len 0) or FBGEMM_NPU_VALIDATE=sync raise it alone: name seq_offset / "
    "seq_offset_k",
)
def test_a_q_sequence_longer_than_its_keys_names_the_offsets() -> None:
    q, k, v = _qkv()
    kw = {"max_seq_len": 0, "max_seq_len_k": 0}
    _raises(
        lambda: torch.ops.mxrec.hstu_jagged.delta(
            q, k, v, seq_offset=torch.tensor([0, 3, 3, 8]).npu(),
            seq_offset_k=torch.tensor([0, 2, 3, 8]).npu(), **kw,
        ),
        r"hstu_jagged.delta: .*'seq_offset(_k)?'",
    )  # fmt: skip


@pytest.mark.xfail(
    strict=True,
    reason="hstu_jagged.py / hstu_delta.py: the backwards check grad's shape and dtype, not its "
    "device: an unclear 'Expected all tensors to be on the same device' from the padded "
    "gather's cat (the fuzz suite's finding); check_same_device(op, q=q, grad=grad)",
)
@pytest.mark.parametrize("where", ["cpu", "npu:1"])
@pytest.mark.parametrize("op", ["equal", "delta"])
def test_a_grad_on_another_device_is_named(op: str, where: str) -> None:
    q, k, v = _qkv()
    grad = torch.ones(OFF[-1], NQ, DV, device=where)
    off = torch.tensor(OFF).npu()
    if op == "equal":
        fn = lambda: torch.ops.mxrec.hstu_jagged_backward(  # noqa: E731
            grad, q, k, v, max_seq_len=S, seq_offset=off
        )
    else:
        fn = lambda: torch.ops.mxrec.hstu_jagged_backward.delta(  # noqa: E731
            grad, q, k, v, max_seq_len=S, max_seq_len_k=S, seq_offset=off, seq_offset_k=off
        )
    _raises(fn, r"hstu_jagged_backward.*'grad'")


# --- fixed in the kernels' files: an empty batch, delta's counts at key positions ---


@pytest.mark.parametrize("op", ["equal", "delta"])
def test_a_batch_of_empty_sequences_returns_an_empty_output(op: str) -> None:
    q, k, v = _qkv(t=0)
    off = torch.zeros(3, dtype=torch.int64).npu()
    if op == "equal":
        out = torch.ops.mxrec.hstu_jagged(q, k, v, max_seq_len=S, seq_offset=off)
    else:
        out = torch.ops.mxrec.hstu_jagged.delta(
            q, k, v, max_seq_len=S, max_seq_len_k=S, seq_offset=off, seq_offset_k=off
        )
    check()
    assert out.shape == (0, NQ, DV)


@data_checks
def test_delta_counts_beyond_the_key_sequence_raise() -> None:
    q, k, v = _qkv()  # q lengths 3, 0, 5 of k lengths 3, 0, 5
    _raises(
        lambda: torch.ops.mxrec.hstu_jagged.delta(
            q, k, v, max_seq_len=S, max_seq_len_k=S, seq_offset=torch.tensor(OFF).npu(),
            seq_offset_k=torch.tensor(OFF).npu(), num_context=torch.tensor([2, 0, 3]).npu(),
            num_target=torch.tensor([2, 0, 2]).npu(), target_group_size=1,
        ),
        r"hstu_jagged.*'num_(context|target)'",
    )  # fmt: skip
