"""The jagged family on npu: budgets, bad inputs, documented divergences, torchrec, CPU calls.

Expected values come from upstream's CPU kernels or from ``conformance.specs.jagged_elementwise``'s
loop reference (``walk``), never from our kernels.  Budgets (OPS.md: 8 launches per jagged dim
for to-dense, 8 for dense_to_jagged, 10 for the elementwise ops; 0 syncs, 1 for dense_to_jagged
without ``total_L``) are held with ``FBGEMM_NPU_VALIDATE=0`` (the kernels), and the data check's
cost is pinned separately; every count is measured at two sizes and must not change.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from conformance.specs.jagged_elementwise import to_jagged_reference, walk
from fbgemm_npu.native.fbgemm.jagged import jagged as ours
from fbgemm_npu.testing.counters import assert_budget, count

F = torch.ops.fbgemm
NPU = "npu"


def _jagged(
    b: int,
    max_len: int,
    d: int,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    index: torch.dtype = torch.int64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Values ``[N, d]`` and offsets of ``b`` rows with lengths 0..max_len+2 (some truncated)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, max_len + 3, (b,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(index)
    values = torch.randn(int(offsets[-1]), d, generator=gen).to(dtype)
    return values, offsets


def _nested(b: int, seed: int = 0) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A 2-jagged-dim tensor: b rows of 0..3 sub-rows of 0..4 values, ``[N, 3]``."""
    gen = torch.Generator().manual_seed(seed)
    l0 = torch.randint(0, 4, (b,), generator=gen)
    o0 = torch.cat([torch.zeros(1, dtype=torch.int64), l0.cumsum(0)])
    l1 = torch.randint(0, 5, (int(o0[-1]),), generator=gen)
    o1 = torch.cat([torch.zeros(1, dtype=torch.int64), l1.cumsum(0)])
    return torch.randn(int(o1[-1]), 3, generator=gen), [o0, o1]


def _npu(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(NPU)
    if isinstance(x, (list, tuple)):
        return type(x)(_npu(t) for t in x)
    return x


@pytest.fixture
def no_validation(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
    yield


# ---- budgets ------------------------------------------------------------------------------------

SIZES = ((4, 3, 2), (128, 64, 128))  # (B, max_len, D): the counts must not depend on them


def _cases(b: int, max_len: int, d: int) -> dict[str, tuple[Callable[[], Any], int, int]]:
    """op -> (call on npu, kernel launches without the data check, data check launches)."""
    v, o = _npu(_jagged(b, max_len, d))
    n = v.size(0)
    v1 = v[:, 0].contiguous()
    dense = torch.randn(b, max_len, d, device=NPU)
    v2, o2 = _npu(_nested(b))
    ln = torch.randint(0, max_len + 2, (5, b), device=NPU)
    okp = [0, *torch.cumsum(ln.sum(1), 0).tolist()]
    vs = torch.randn(okp[-1], d, device=NPU)
    vec = torch.randn(b * 2, max_len, device=NPU)
    a = torch.randn(n, 2 * d, device=NPU)
    return {
        # to-dense: 6 kernels (arange, add, ge, masked_fill_, constant_pad_nd, index_select);
        # OPS.md budgets 8 per jagged dim: met without the check, which adds floor_divide,
        # masked_fill_, any, logical_not, _assert_async (11 with it).
        "jagged_to_padded_dense": (lambda: F.jagged_to_padded_dense(v, [o], [max_len], -1.0), 6, 5),
        "jagged_1d_to_dense": (lambda: F.jagged_1d_to_dense(v1, o, max_len, 0), 6, 5),
        "jagged_2d_to_dense": (lambda: F.jagged_2d_to_dense(v, o, max_len), 6, 5),
        # Two jagged dims: +7 for the second level (pair gather, clamp, arange, add, ge, or, fill);
        # 13 <= 16.  Its check adds sub + floor_divide and a cat (21 with it, budget 16).
        "jagged_to_padded_dense[2 dims]": (
            lambda: F.jagged_to_padded_dense(v2, o2, [3, 4], 0.0),
            13,
            8,
        ),
        # to-jagged: zero_, arange, add, ge, masked_fill_, index_put_ (6 <= 8); check +5.
        "dense_to_jagged": (lambda: F.dense_to_jagged(dense, [o], n), 6, 5),
        "jagged_to_padded_dense_backward": (
            lambda: F.jagged_to_padded_dense_backward(dense, [o], n),
            6,
            5,
        ),
        # stacked: host-to-device copy of the per-key constants, cat, cumsum, minimum, arange,
        # add, ge, masked_fill_, constant_pad_nd, index_select: 10 for any T (budget 8: the per-key
        # slice starts and limits cost the copy and cat + minimum; a fused kernel reads them).
        "stacked_jagged_2d_to_dense": (
            lambda: F.stacked_jagged_2d_to_dense(vs, ln, okp, [max_len] * 5, 0),
            10,
            5,
        ),
        # elementwise (budget 10): to-dense/to-jagged plus 1 op; dense_dense: stack + 2 adds.
        "jagged_dense_elementwise_add": (
            lambda: F.jagged_dense_elementwise_add(v, [o], dense),
            7,
            5,
        ),
        "jagged_dense_elementwise_mul": (
            lambda: F.jagged_dense_elementwise_mul(v, [o], dense),
            7,
            5,
        ),
        "jagged_dense_elementwise_add_jagged_output": (
            lambda: F.jagged_dense_elementwise_add_jagged_output(v, [o], dense),
            7,
            5,
        ),
        "jagged_dense_dense_elementwise_add_jagged_output": (
            lambda: F.jagged_dense_dense_elementwise_add_jagged_output(v, [o], dense, dense),
            9,
            5,
        ),
        # index (4) + gather, mul, masked_fill_, sum: 8 <= 10; check +4.
        "batched_dense_vec_jagged_2d_mul": (
            lambda: F.batched_dense_vec_jagged_2d_mul(vec, a, o),
            8,
            4,
        ),
    }


OPS = list(_cases(*SIZES[0]))


@pytest.mark.parametrize("op", OPS)
def test_kernel_budget_does_not_grow(op: str, no_validation: None) -> None:
    counts = []
    for size in SIZES:
        fn, kernel, _ = _cases(*size)[op]
        counts.append(assert_budget(fn, launches=kernel, syncs=0).launches)
    assert counts[0] == counts[1] == _cases(*SIZES[0])[op][1], counts


@pytest.mark.parametrize("op", OPS)
def test_data_check_cost(op: str) -> None:
    """With validation on (the default) the data check adds a fixed number of launches."""
    counts = []
    for size in SIZES:
        fn, kernel, check = _cases(*size)[op]
        counts.append(assert_budget(fn, launches=kernel + check, syncs=0).launches)
    _, kernel, check = _cases(*SIZES[0])[op]
    assert counts == [kernel + check] * 2


def test_dense_to_jagged_without_total_l_syncs_once(no_validation: None) -> None:
    for b, max_len, d in SIZES:
        v, o = _npu(_jagged(b, max_len, d))
        dense = torch.randn(b, max_len, d, device=NPU)
        c = assert_budget(lambda d=dense, o=o: F.dense_to_jagged(d, [o]), launches=7, syncs=1)
        assert c.syncs == 1 and c.launches == 7  # + amax; the length is the data's max offset


# ---- bad inputs: an error naming the op and the argument ---------------------------------------

_VC = torch.arange(1.0, 6.0).view(5, 1)
_OC = torch.tensor([0, 2, 2, 5])
_V, _O = _VC.to(NPU), _OC.to(NPU)  # the bad-input lambdas build the rest on npu (call_on_npu)
J2D = "fbgemm::jagged_to_padded_dense"


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: F.jagged_to_padded_dense(_V, [], [], 0.0),
            rf"{J2D}: argument 'offsets' must hold 1 to 5",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [_O] * 6, [1] * 6, 0.0),
            "argument 'offsets' must hold 1 to 5",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [_O.view(1, 4)], [2], 0.0),
            r"argument 'offsets\[0\]' must be 1-D",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [_O.float()], [2], 0.0),
            r"'offsets\[0\]' must have dtype int32 or int64",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [torch.tensor([0, 2, 3]), _O.int()], [2, 2], 0.0),
            r"argument 'offsets\[1\]' has dtype int32 but 'offsets\[0\]' has int64",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [torch.zeros(0, dtype=torch.int64)], [2], 0.0),
            r"argument 'offsets\[0\]' must have at least one entry",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V.double(), [_O], [2], 0.0),
            "argument 'values' must have dtype",
        ),
        (
            lambda: F.jagged_to_padded_dense(torch.tensor(1.0), [_O], [2], 0.0),
            "argument 'values' must have at least 1 dim",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V.view(5, 1, 1).expand(5, 2, 1), [_O], [2], 0.0),
            "argument 'values' of shape .* size-1 middle dims",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [_O], [2, 2], 0.0),
            "argument 'max_lengths' must have one entry per jagged dim",
        ),
        (
            lambda: F.jagged_to_padded_dense(_V, [_O], [-1], 0.0),
            r"argument 'max_lengths\[0\]' must be >= 0",
        ),
        (
            lambda: F.jagged_1d_to_dense(_V, _O, 3, 0),
            "fbgemm::jagged_1d_to_dense: argument 'values' must be 1-D",
        ),
        (
            lambda: F.jagged_1d_to_dense(_V.view(-1), _O, 0, 0),
            "argument 'max_sequence_length' must be > 0",
        ),
        (
            lambda: F.jagged_to_padded_dense_backward(_V, [_O], -1),
            "argument 'total_L' must be >= 0",
        ),
        (
            lambda: F.jagged_to_padded_dense_backward(torch.zeros(4, 2), [_O], 5),
            "argument 'grad_output' has batch size 4",
        ),
        (
            lambda: F.dense_to_jagged(torch.zeros(3, 3), [_O]),
            "fbgemm::dense_to_jagged: argument 'dense' must be 3-D",
        ),
        (
            lambda: F.dense_to_jagged(torch.zeros(2, 3, 1), [_O]),
            "argument 'dense' has batch size 2",
        ),
        (
            lambda: F.jagged_dense_elementwise_add(_V, [_O], torch.zeros(3, 2)),
            "argument 'y' must have 3 dims",
        ),
        (
            lambda: F.jagged_dense_elementwise_mul(_V, [_O], torch.zeros(2, 2, 1)),
            "argument 'y' has batch size 2",
        ),
        (
            lambda: F.jagged_dense_elementwise_mul_backward(
                torch.ones(5, 1), [_O], torch.ones(3, 2, 1).half(), _V
            ),
            "must share one dtype",
        ),
        (
            lambda: F.stacked_jagged_1d_to_dense(_V.view(-1), _O, [0, 5], [2], 0),
            "argument 'lengths' must be 2-D",
        ),
        (
            lambda: F.stacked_jagged_1d_to_dense(_V.view(-1), _O.view(2, 2), [0, 5], [2, 2], 0),
            "'offset_per_key' needs T \\+ 1 = 3 entries",
        ),
        (
            lambda: F.stacked_jagged_2d_to_dense(_V, _O.view(2, 2), [0, 2, 5], [2, -1], 0),
            r"argument 'max_lengths_per_key\[1\]' must be >= 0",
        ),
        (
            lambda: F.stacked_jagged_2d_to_dense(_V, _O.view(2, 2).float(), [0, 2, 5], [2, 2], 0),
            "argument 'lengths' must have dtype int32 or int64",
        ),
        (
            lambda: F.batched_dense_vec_jagged_2d_mul(torch.ones(5, 4), torch.ones(5, 6), _O),
            r"B = 3 \(a_offsets",
        ),
        (
            lambda: F.batched_dense_vec_jagged_2d_mul(torch.ones(6), torch.ones(5, 6), _O),
            "argument 'v' must be 2-D",
        ),
        (
            lambda: F.batched_dense_vec_jagged_2d_mul(
                torch.ones(6, 4), torch.ones(5, 6).half(), _O
            ),
            "arguments 'v' \\(float32\\) and 'a_values' \\(float16\\) must have the same dtype",
        ),
    ],
)
def test_metadata_errors_name_op_and_argument(call: Callable[[], Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call_on_npu(call)


def call_on_npu(call: Callable[[], Any]) -> Any:
    """Run ``call`` with npu as the default device of the tensors it builds inline."""
    with torch.device(NPU):
        return call()


@pytest.mark.parametrize(
    "call, op, arg",
    [
        # Reads past the values: a row reaching row 5 of 5 (upstream reads garbage).
        (
            lambda: F.jagged_to_padded_dense(_V, [torch.tensor([0, 2, 2, 7])], [4], 0.0),
            J2D,
            "offsets",
        ),
        # A negative offset (upstream reads before the buffer).
        (
            lambda: F.jagged_to_padded_dense(_V, [torch.tensor([-1, 2, 3])], [3], 0.0),
            J2D,
            "offsets",
        ),
        # Two jagged dims whose counts disagree: offsets[0] ends at 3, offsets[1] has 2 rows.
        (
            lambda: F.jagged_to_padded_dense(
                _V, [torch.tensor([0, 2, 3]), torch.tensor([0, 1, 5])], [2, 2], 0.0
            ),
            J2D,
            "offsets",
        ),
        # Writes past total_L (upstream writes out of bounds: heap corruption).
        (
            lambda: F.dense_to_jagged(torch.ones(3, 3, 1), [_O], 4),
            "fbgemm::dense_to_jagged",
            "x_offsets",
        ),
        (
            lambda: F.jagged_to_padded_dense_backward(torch.ones(3, 3), [_O], 3),
            "fbgemm::jagged_to_padded_dense_backward",
            "offsets",
        ),
        # Jagged output: offsets reaching past x_values' rows.
        (
            lambda: F.jagged_dense_elementwise_mul(
                _V, [torch.tensor([0, 2, 2, 7])], torch.ones(3, 4, 1)
            ),
            "fbgemm::jagged_dense_elementwise_mul",
            "x_offsets",
        ),
        # Stacked: lengths summing past the values (key 1 reads rows 5..8 of 7).
        (
            lambda: F.stacked_jagged_1d_to_dense(
                torch.ones(7), torch.tensor([[1, 2], [0, 5]]), [0, 3, 7], [2, 5], 0
            ),
            "fbgemm::stacked_jagged_1d_to_dense",
            "lengths",
        ),
        (
            lambda: F.batched_dense_vec_jagged_2d_mul(
                torch.ones(3, 4), torch.ones(5, 6), torch.tensor([0, 2, 2, 9])
            ),
            "fbgemm::batched_dense_vec_jagged_2d_mul_forward",
            "a_offsets",
        ),
    ],
)
def test_data_errors_name_op_and_argument(call: Callable[[], Any], op: str, arg: str) -> None:
    with pytest.raises(RuntimeError, match=rf"{op}: argument.* '{arg}'|{op}: arguments '{arg}'"):
        call_on_npu(call)


def test_device_mismatch_is_refused() -> None:
    v, o = _npu(_jagged(4, 3, 2))
    with pytest.raises(RuntimeError, match=r"'offsets\[0\]' is on cpu but the data is on npu:0"):
        F.jagged_to_padded_dense(v, [o.cpu()], [3], 0.0)
    with pytest.raises(RuntimeError, match=r"'offsets\[0\]' is on npu:1"):
        F.jagged_to_padded_dense(v, [o.to("npu:1")], [3], 0.0)
    with pytest.raises(RuntimeError, match="'x_values' \\(npu:0\\) and 'y' \\(cpu\\)"):
        F.jagged_dense_elementwise_add(v, [o], torch.zeros(4, 3, 2))
    with pytest.raises(RuntimeError, match="'values' \\(npu:0\\) and 'lengths' \\(cpu\\)"):
        F.stacked_jagged_2d_to_dense(v, torch.ones(1, 4, dtype=torch.int64), [0, 4], [2], 0)


def test_validation_off_skips_only_the_data_check(no_validation: None) -> None:
    """FBGEMM_NPU_VALIDATE=0 drops the data check (offsets are then trusted, as upstream trusts
    them); metadata errors remain."""
    with pytest.raises(ValueError, match="'max_lengths'"):
        F.jagged_to_padded_dense(_V, [_O], [2, 2], 0.0)
    with count() as c:
        F.jagged_to_padded_dense(_V, [_O], [2], 0.0)
    assert "aten._assert_async.msg" not in c.launch_ops


# ---- inputs upstream accepts silently: we give its result ----------------------------------------


@pytest.mark.parametrize(
    "offsets, note",
    [
        ([0, 3, 2, 5], "decreasing: row 1 has length -1, all padding"),
        ([0, 2, 3], "last offset below values.size(0): the tail is ignored"),
        ([0, 2, 2, 7], "last offset past values.size(0) but truncation never reads there"),
        ([1, 2, 2, 5], "first offset above 0"),
    ],
)
def test_odd_offsets_give_upstreams_result(offsets: list[int], note: str) -> None:
    o = torch.tensor(offsets)
    expected = F.jagged_to_padded_dense(_VC, [o], [3], -1.0)
    assert torch.equal(F.jagged_to_padded_dense(_V, [o.to(NPU)], [3], -1.0).cpu(), expected), note


def test_dense_to_jagged_decreasing_offsets_match_upstream_on_the_simulator() -> None:
    """Overlapping rows: upstream's last write wins; ours does on CPU (``index_put_`` applies
    writes in order there); on a device the winner is unspecified (documented in jagged.py)."""
    dense = torch.arange(9.0).view(3, 3, 1)
    o = torch.tensor([0, 3, 2, 5])
    expected = F.dense_to_jagged_forward(dense, [o])
    assert torch.equal(F.dense_to_jagged_forward(dense.to(NPU), [o.to(NPU)]).cpu(), expected)


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"),
    reason="upstream's int cast of NaN / out-of-range padding is C++ UB; we follow x86",
)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("pad", [float("nan"), 1e10, -1e30, 2.0**62 + 5, -2.9])
def test_integer_padding_cast_matches_the_x86_build(dtype: torch.dtype, pad: float) -> None:
    v = _VC.to(dtype)
    expected = F.jagged_to_padded_dense(v, [_OC], [3], pad)
    assert torch.equal(F.jagged_to_padded_dense(v.to(NPU), [_O], [3], pad).cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("pad", [1e10, -1e-30, 1.001, float("-inf"), 65519.0])
def test_float_padding_rounds_like_upstream(dtype: torch.dtype, pad: float) -> None:
    v = _VC.to(dtype)
    expected = F.jagged_to_padded_dense(v, [_OC], [3], pad)
    assert torch.equal(F.jagged_to_padded_dense(v.to(NPU), [_O], [3], pad).cpu(), expected)



@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int32])
@pytest.mark.parametrize("pad", [1e5, 1e40, 3e9, float("nan"), float("inf"), 65505.0])
@pytest.mark.parametrize("max_len", [0, 2])
def test_padding_out_of_range_with_no_values_raises_like_upstream(
    dtype: torch.dtype, pad: float, max_len: int
) -> None:
    """With empty values upstream converts the padding with c10's overflow check (and raises);
    ours must raise exactly then, naming the argument, and else give upstream's result."""
    v, o = torch.ones(0, 2, dtype=dtype), torch.tensor([0, 0])
    try:
        expected = F.jagged_to_padded_dense(v, [o], [max_len], pad)
    except RuntimeError:
        with pytest.raises(ValueError, match="jagged_to_padded_dense: argument 'padding_value'"):
            F.jagged_to_padded_dense(v.to(NPU), [o.to(NPU)], [max_len], pad)
        return
    got = F.jagged_to_padded_dense(v.to(NPU), [o.to(NPU)], [max_len], pad).cpu()
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)

# ---- beyond upstream's CPU kernels --------------------------------------------------------------


def test_jagged_output_rows_after_the_last_offset_are_uncovered_like_cuda() -> None:
    """x_values longer than the offsets: upstream CPU raises (it sizes the jagged y by the offsets),
    CUDA and ours leave the tail rows uncovered (y = 0 there)."""
    x = torch.arange(1.0, 8.0).view(7, 1)
    y = torch.full((3, 2, 1), 100.0)
    with pytest.raises(RuntimeError):
        F.jagged_dense_elementwise_add_jagged_output(x, [_OC], y)
    got = F.jagged_dense_elementwise_add_jagged_output(x.to(NPU), [_O], y.to(NPU))[0]
    assert torch.equal(got.cpu(), x + to_jagged_reference(y, [_OC], 7))


def test_transposed_dense_with_two_jagged_dims_is_accepted() -> None:
    """Upstream views the dense input as [B, -1, D] and raises when it cannot; ours copies."""
    v, offs = _nested(3)
    dense = torch.randn(3, 3, 4, 3).permute(3, 2, 1, 0).contiguous().permute(3, 2, 1, 0)
    got = F.dense_to_jagged_forward(dense.to(NPU), _npu(offs), v.size(0)).cpu()
    assert torch.equal(got, F.dense_to_jagged_forward(dense.contiguous(), offs, v.size(0)))


def test_five_jagged_dims_and_not_six() -> None:
    o = [torch.tensor([0, 1])] * 5
    v = torch.arange(1.0, 3.0).view(2, 1)
    expected = F.jagged_to_padded_dense(v[:1], o, [2] * 5, -1.0)
    assert torch.equal(
        F.jagged_to_padded_dense(v[:1].to(NPU), _npu(o), [2] * 5, -1.0).cpu(), expected
    )
    with pytest.raises(ValueError, match="1 to 5 offsets tensors"):
        F.jagged_to_padded_dense(v.to(NPU), _npu(o + o[:1]), [2] * 6, 0.0)


def test_walk_reference_agrees_with_upstream() -> None:
    """The loop reference used by the tests is itself checked against upstream."""
    v, offs = _nested(5, seed=3)
    dense = F.jagged_to_padded_dense(v, offs, [3, 4], 0.0).view(-1, 3)
    pos, rows = walk(offs, [3, 4])
    assert torch.equal(dense[pos], v[rows])


def test_mul_gradient_with_mixed_dtypes() -> None:
    """Upstream's backward raises for float32 x half; ours returns the promoted gradients."""
    x = torch.arange(1.0, 6.0).view(5, 1).to(NPU).requires_grad_()
    y = torch.ones(3, 2, 1, dtype=torch.float16, device=NPU).requires_grad_()
    F.jagged_dense_elementwise_mul(x, [_O], y)[0].sum().backward()
    assert x.grad.dtype == torch.float32 and y.grad.dtype == torch.float16
    assert x.grad.cpu().view(-1).tolist() == [1.0, 1.0, 1.0, 1.0, 0.0]


def test_stacked_outputs_are_views_of_one_grid() -> None:
    ln = torch.tensor([[1, 2], [0, 3]])
    got = F.stacked_jagged_2d_to_dense(torch.ones(6, 2, device=NPU), ln.to(NPU), [0, 3, 6], [2, 3])
    assert got[0]._base is got[1]._base is not None
    assert [tuple(t.shape) for t in got] == [(2, 2, 2), (2, 3, 2)]


def test_stacked_meta_shapes() -> None:
    out = F.stacked_jagged_1d_to_dense(
        torch.empty(7, device="meta"),
        torch.empty(2, 4, dtype=torch.int64, device="meta"),
        [0, 3, 7],
        [2, 5],
        0,
    )
    assert [tuple(t.shape) for t in out] == [(4, 2), (4, 5)]


# ---- registration and CPU calls ----------------------------------------------------------------


def test_composite_ops_have_npu_kernels() -> None:
    for op in ("jagged_to_padded_dense", "dense_to_jagged"):
        for key in ("PrivateUse1", "AutogradPrivateUse1"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"fbgemm::{op}", key), (op, key)
    with count() as c:
        F.dense_to_jagged(torch.ones(3, 3, 1, device=NPU), [_O], 5)
    assert not c.missing_kernels


def test_kernels_run_on_cpu_tensors() -> None:
    """The kernels are device-generic: on CPU tensors they give upstream's result."""
    v, o = _jagged(16, 8, 4, seed=5, index=torch.int32)
    assert torch.equal(
        ours.jagged_to_padded_dense_npu(v, [o], [8], 0.5),
        F.jagged_to_padded_dense(v, [o], [8], 0.5),
    )
    dense = torch.randn(16, 8, 4)
    assert torch.equal(
        ours.dense_to_jagged_forward_npu(dense, [o], v.size(0)),
        F.dense_to_jagged_forward(dense, [o], v.size(0)),
    )


# ---- torchrec on npu ----------------------------------------------------------------------------


def test_torchrec_jagged_tensor_to_padded_dense() -> None:
    jt_mod = pytest.importorskip("torchrec.sparse.jagged_tensor", reason="torchrec not importable")
    lengths = torch.tensor([2, 0, 3, 1])
    values = torch.arange(1.0, 7.0)
    expected = jt_mod.JaggedTensor(values=values, lengths=lengths).to_padded_dense(2, -1.0)
    jt = jt_mod.JaggedTensor(values=values.to(NPU), lengths=lengths.to(NPU))
    with count() as c:
        got = jt.to_padded_dense(2, -1.0)
    assert got.device.type == NPU and torch.equal(got.cpu(), expected)
    assert not c.missing_kernels
