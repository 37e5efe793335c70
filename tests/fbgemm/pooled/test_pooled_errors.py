"""Bad inputs of the pooled family: each raises a ``ValueError`` / ``RuntimeError`` naming the op
and the argument, invalid index lists upstream answers with another output width or reads out of
bounds included; with the data checks off, metadata is still checked.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing.pooled_inputs import keyed, kt_permute_args, pooled_args, spread, to_npu

F = torch.ops.fbgemm
NPU = "npu"
PERMUTE_OPS = (
    "permute_pooled_embs",
    "permute_pooled_embs_split",
    "permute_pooled_embs_auto_grad",
    "permute_pooled_embs_auto_grad_split",
)


def _permute_case(case: str) -> tuple[list[Any], type[Exception], str]:
    x, off, perm, inv_off, inv_perm = pooled_args(4, 4, 2)
    data = "permute_list' must be a permutation"
    cases: dict[str, tuple[list[Any], type[Exception], str]] = {
        "decreasing": (
            [x, torch.tensor([0, 4, 2, 6, 12]), perm, inv_off, inv_perm],
            RuntimeError,
            data,
        ),
        "negative": (
            [x, torch.tensor([0, -2, 4, 6, 12]), perm, inv_off, inv_perm],
            RuntimeError,
            data,
        ),
        "duplicate": ([x, off, torch.tensor([0, 0, 1, 2]), inv_off, inv_perm], RuntimeError, data),
        "out_of_range": (
            [x, off, torch.tensor([0, 1, 2, 7]), inv_off, inv_perm],
            RuntimeError,
            data,
        ),
        "too_long": (
            [x, off, torch.arange(6), inv_off, inv_perm],
            ValueError,
            "'offset_dim_list' must have at least",
        ),
        "empty": ([x, off, perm[:0], inv_off, inv_perm], ValueError, "'permute_list' must not"),
        "int32_offsets": (
            [x, off.int(), perm, inv_off, inv_perm],
            ValueError,
            "'offset_dim_list' must have dtype int64",
        ),
        "int32_permute": (
            [x, off, perm.int(), inv_off, inv_perm],
            ValueError,
            "'permute_list' must have dtype int64",
        ),
        "rank1": ([x[0], off, perm, inv_off, inv_perm], ValueError, "'pooled_embs' must be at"),
    }
    return cases[case]


PERMUTE_CASES = (
    "decreasing",
    "negative",
    "duplicate",
    "out_of_range",
    "too_long",
    "empty",
    "int32_offsets",
    "int32_permute",
    "rank1",
)


@pytest.mark.parametrize("case", PERMUTE_CASES)
@pytest.mark.parametrize("op", PERMUTE_OPS)
def test_permute_pooled_bad_inputs(op: str, case: str) -> None:
    args, exc, match = _permute_case(case)
    with pytest.raises(exc, match=f"fbgemm::{op}: .*{match}"):
        getattr(F, op)(*to_npu(args))
        fbgemm_npu.check()  # a deferred data check is raised here


def test_permute_pooled_devices_must_agree() -> None:
    x, *lists = pooled_args(3, 2, 2)
    with pytest.raises(
        RuntimeError,
        match="permute_pooled_embs: arguments 'pooled_embs' .*"
        "'permute_list' \\(cpu\\) must be on the same device",
    ):
        F.permute_pooled_embs(x.to(NPU), lists[0].to(NPU), lists[1], *to_npu(lists[2:]))


def test_validation_off_skips_only_data_checks(no_validation: None) -> None:
    args, _, _ = _permute_case("int32_offsets")
    with pytest.raises(ValueError, match="offset_dim_list"):
        F.permute_pooled_embs(*to_npu(args))
    args, _, _ = _permute_case("duplicate")
    F.permute_pooled_embs(*to_npu(args))  # trusted: no check, no error


def _multi_case(case: str) -> tuple[list[Any], type[Exception], str]:
    d = keyed(4, 3, 2)
    v = d["values"]
    permutes, in_shapes, out_shapes, out_lengths = kt_permute_args(d)
    bad = permutes.clone()
    rows = "'permutes' must copy inside the inputs and tile every output"
    if case == "in_tensor":
        bad[0, 0] = 5
    elif case == "in_offset":
        bad[1, 2] = 100
    elif case == "negative":
        bad[0, 4] = -1
    elif case == "order":
        bad = bad.flip(0)

    def mk(p: torch.Tensor, lengths: list[int] = out_lengths) -> list[Any]:
        return [v, p, in_shapes, out_shapes, lengths]

    cases: dict[str, tuple[list[Any], type[Exception], str]] = {
        "in_tensor": (mk(bad), RuntimeError, rows),
        "in_offset": (mk(bad), RuntimeError, rows),
        "negative": (mk(bad), RuntimeError, rows),
        "order": (mk(bad), RuntimeError, rows),
        "gap": (mk(permutes, [w + 1 for w in out_lengths]), RuntimeError, rows),
        "int64": (mk(permutes.long()), ValueError, "'permutes' must have dtype int32"),
        "columns": (mk(permutes[:, :5]), ValueError, "'permutes' must be 2-D with 6 columns"),
        "float64": (
            [[t.double() for t in v], permutes, in_shapes, out_shapes, out_lengths],
            ValueError,
            "'pooled_embs\\[0\\]' must have dtype float32, float16",
        ),
        "dtypes": (
            [[v[0], v[1].half()], permutes, in_shapes, out_shapes, out_lengths],
            ValueError,
            "'pooled_embs\\[0\\]' \\(float32\\) and 'pooled_embs\\[1\\]'",
        ),
        "rows": (
            [[v[0], v[1][:1]], permutes, in_shapes, out_shapes, out_lengths],
            ValueError,
            "'pooled_embs\\[1\\]' must be at least 2-D with at least 2 rows",
        ),
        "negative_length": (
            mk(permutes, [-1, *out_lengths[1:]]),
            ValueError,
            "'out_lengths' must be non-negative",
        ),
    }
    return cases[case]


MULTI_CASES = (
    "in_tensor",
    "in_offset",
    "negative",
    "order",
    "gap",
    "int64",
    "columns",
    "float64",
    "dtypes",
    "rows",
    "negative_length",
)


@pytest.mark.parametrize("case", MULTI_CASES)
def test_permute_multi_embedding_bad_inputs(case: str) -> None:
    args, exc, match = _multi_case(case)
    with pytest.raises(exc, match=f"fbgemm::permute_multi_embedding: .*{match}"):
        F.permute_multi_embedding(*to_npu(args))
        fbgemm_npu.check()  # a deferred data check is raised here


def test_permute_multi_embedding_devices_must_agree() -> None:
    d = keyed(4, 3, 2)
    args = to_npu([d["values"], *kt_permute_args(d)])
    with pytest.raises(
        RuntimeError,
        match="permute_multi_embedding: arguments 'pooled_embs\\[0\\]' \\(npu:0\\) and "
        "'permutes' \\(cpu\\)",
    ):
        F.permute_multi_embedding(args[0], args[1].cpu(), *args[2:])
    with pytest.raises(RuntimeError, match="'pooled_embs\\[0\\]' \\(npu:0\\) and 'pooled_embs"):
        F.permute_multi_embedding([args[0][0], args[0][1].to(f"{NPU}:1")], *args[1:])


def test_permutes_from_our_kt_regroup_arguments_are_checked_on_the_device() -> None:
    """Permutes from our kt_regroup_arguments carry no host rows (a plan kept beside a tensor can
    go stale, see ``pooled/_utils.py``): they are checked on the device like any others."""
    d = keyed(4, 3, 2)
    v = to_npu(d["values"])
    args = F.kt_regroup_arguments(v[0], d["keys"], d["lengths"], d["groups"])
    tiling = "fbgemm::permute_multi_embedding: argument 'permutes' must copy inside the inputs"
    with pytest.raises(RuntimeError, match=f"{tiling} and tile every output of 'out_lengths'"):
        F.permute_multi_embedding(v, *args[:3], [6, 6, 7])
        fbgemm_npu.check()
    with pytest.raises(RuntimeError, match=tiling):
        F.permute_multi_embedding([v[0][:, :5], v[1]], *args)
        fbgemm_npu.check()


@pytest.mark.parametrize(
    ("keys", "lengths", "groups", "match"),
    [
        ([["a"]], [[2]], [["a", "zz"]], "'groups\\[0\\]' names key 'zz', not in keys"),
        ([["a"]], [[2, 3]], [["a"]], "'lengths\\[0\\]' has 2 entries but 'keys\\[0\\]' names only"),
        ([["a"], ["b"]], [[2]], [["a"]], "'lengths' must have one list per list of 'keys'"),
    ],
)
def test_keyed_argument_errors(keys: Any, lengths: Any, groups: Any, match: str) -> None:
    v = [torch.zeros(2, 5, device=NPU) for _ in keys]
    for op in ("kt_regroup_arguments", "regroup_keyed_tensor"):
        with pytest.raises(ValueError, match=f"fbgemm::{op}: argument {match}"):
            if op == "kt_regroup_arguments":
                F.kt_regroup_arguments(v[0], keys, lengths, groups)
            else:
                F.regroup_keyed_tensor(v, keys, lengths, groups)


def test_regroup_lengths_beyond_the_values() -> None:
    """Upstream reads past the input here; ours names 'lengths' and the row."""
    v = [torch.zeros(2, 5, device=NPU)]
    with pytest.raises(ValueError, match="regroup_keyed_tensor: argument 'lengths' gives row 1"):
        F.regroup_keyed_tensor(v, [["a", "b"]], [[3, 3]], [["a", "b"]])


def test_cross_device_bad_inputs() -> None:
    ts = spread(2, 2, 3)
    with pytest.raises(
        RuntimeError,
        match="sum_reduce_to_one: argument 'input_tensors\\[1\\]' is "
        "on cpu but 'input_tensors\\[0\\]' on npu:0",
    ):
        F.sum_reduce_to_one([ts[0], ts[1].cpu()], torch.device(NPU, 0))
    with pytest.raises(ValueError, match="all_to_one_device: argument 'target_device' must be an"):
        F.all_to_one_device(ts, torch.device("cpu"))
    with pytest.raises(ValueError, match="sum_reduce_to_one: argument 'target_device' is npu:5"):
        F.sum_reduce_to_one(ts, torch.device(NPU, 5))
    with pytest.raises(
        ValueError,
        match="sum_reduce_to_one: argument 'input_tensors\\[1\\]' "
        "\\(torch.float32\\) cannot be added",
    ):
        F.sum_reduce_to_one([ts[0].long(), ts[1]], torch.device(NPU, 0))
    with pytest.raises(
        ValueError,
        match="sum_reduce_to_one: argument 'input_tensors\\[1\\]' of "
        "shape \\(2, 4\\) does not broadcast",
    ):
        F.sum_reduce_to_one([ts[0], torch.zeros(2, 4, device=NPU)], torch.device(NPU, 0))
    with pytest.raises(
        ValueError,
        match="merge_pooled_embeddings: argument 'pooled_embeddings' "
        "cannot be concatenated along cat_dim=0",
    ):
        F.merge_pooled_embeddings(
            [ts[0], torch.zeros(2, 4, device=NPU)], 2, torch.device(NPU, 0), 0
        )


def test_merge_refuses_floats_after_an_int_first_input() -> None:
    """cat into the first input's int32 raises a TypeError of torch's that named neither op nor
    argument (found by tests/fuzz/test_fuzz_pooled.py)."""
    xs = [torch.ones(2, 2, dtype=torch.int32, device=NPU), torch.ones(2, 3, device=f"{NPU}:1")]
    with pytest.raises(
        ValueError, match="merge_pooled_embeddings: argument 'pooled_embeddings' cannot be concat"
    ):
        F.merge_pooled_embeddings(xs, 2, torch.device(NPU, 0))


@pytest.mark.parametrize(
    ("op", "where", "arg"),
    [
        ("all_to_one_device", 0, "a copy of 'input_tensors\\[0\\]'"),
        ("all_to_one_device", 1, "a copy of 'input_tensors\\[0\\]'"),
        ("sum_reduce_to_one", 0, "a copy of 'input_tensors\\[0\\]'"),
        ("merge_pooled_embeddings", 1, "a copy of 'pooled_embeddings\\[0\\]'"),
        ("merge_pooled_embeddings", 0, "the concatenation along cat_dim=1"),
    ],
)
def test_cross_device_output_that_cannot_be_allocated(op: str, where: int, arg: str) -> None:
    """An expanded input (stride 0: 2**40 elements in 4 bytes) copied out in full: an error
    naming the op and the input, not the allocator's (found by tests/fuzz/test_fuzz_pooled.py)."""
    huge = torch.ones(1, 1, device=f"{NPU}:{where}").expand(2**20, 2**20)
    target = torch.device(NPU, 0)
    call = {
        "all_to_one_device": lambda: F.all_to_one_device([huge], target),
        "sum_reduce_to_one": lambda: F.sum_reduce_to_one([huge, huge], target),
        "merge_pooled_embeddings": lambda: F.merge_pooled_embeddings([huge, huge], 1, target),
    }[op]
    with pytest.raises(RuntimeError, match=f"{op}: {arg} .*cannot be allocated"):
        call()


@pytest.mark.parametrize("extra", [2**20, 2**40])
def test_out_lengths_past_what_the_rows_can_fill(no_validation: None, extra: int) -> None:
    """More output columns than the rows can fill (each at most the widest input): refused on
    the host, data checks on or off, before the plan allocates one entry per column (2**40 ran
    out of host memory with the allocator's words, found by tests/fuzz/test_fuzz_pooled_regroup.py).
    A smaller excess is the data check's (the "gap" case above)."""
    d = keyed(4, 3, 2)
    permutes, in_shapes, out_shapes, out_lengths = kt_permute_args(d)
    lengths = [out_lengths[0] + extra, *out_lengths[1:]]
    args = to_npu([d["values"], permutes, in_shapes, out_shapes])
    with pytest.raises(RuntimeError, match="permute_multi_embedding: .*'out_lengths' asks for"):
        F.permute_multi_embedding(*args, lengths)


# Deferred checks (FBGEMM_NPU_VALIDATE=deferred): a call on bad data runs before its check is
# read, so every gather and scatter must stay inside its buffer (the simulator raises on an
# index out of bounds: the call itself would fail); the queued check names the op and argument.
PERMUTE_DATA_CASES = ("decreasing", "negative", "duplicate", "out_of_range")
MULTI_DATA_CASES = ("in_tensor", "in_offset", "negative", "order", "gap")


@pytest.fixture
def deferred(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "deferred")


@pytest.mark.parametrize("case", PERMUTE_DATA_CASES)
@pytest.mark.parametrize("op", PERMUTE_OPS)
def test_permute_pooled_bad_data_stays_in_bounds_while_deferred(
    deferred: None, op: str, case: str
) -> None:
    """Block ids clamped (segment ids), ranks and columns from sorts: in range whatever the data."""
    args, _, match = _permute_case(case)
    out = getattr(F, op)(*to_npu(args))  # no error yet: memory-safe
    assert out.shape == args[0].shape
    with pytest.raises(RuntimeError, match=f"fbgemm::{op}: .*{match}"):
        fbgemm_npu.check()


@pytest.mark.parametrize("op", PERMUTE_OPS[2:])
def test_bad_inverse_lists_stay_in_bounds_in_the_backward_while_deferred(
    deferred: None, op: str
) -> None:
    """The backward is the plain permute with the inverse lists: checked (and clamped) there."""
    x, off, perm, inv_off, _ = pooled_args(4, 4, 2)
    xd = x.to(NPU).requires_grad_()
    bad = torch.tensor([0, 0, 9, 1])
    y = getattr(F, op)(xd, *to_npu([off, perm, inv_off, bad]))
    (grad,) = torch.autograd.grad(y, xd, torch.ones_like(y))
    assert grad.shape == x.shape
    base = op.replace("_auto_grad", "")
    with pytest.raises(RuntimeError, match=f"fbgemm::{base}: argument 'permute_list' must be"):
        fbgemm_npu.check()


@pytest.mark.parametrize("case", MULTI_DATA_CASES)
def test_permute_multi_embedding_bad_data_stays_in_bounds_while_deferred(
    deferred: None, case: str
) -> None:
    """Tensor ids clamped onto an empty padding row, ``src`` clamped into the inputs: the
    gather, the autograd backward's scatter and permute_multi_embedding_function's forward and
    reverse all stay inside their buffers; each call's check names 'permutes'."""
    (values, permutes, in_shapes, out_shapes, lengths), _, match = _multi_case(case)
    index = to_npu([permutes, in_shapes, out_shapes])
    leaves = [v.to(NPU).requires_grad_() for v in values]
    outs = F.permute_multi_embedding(leaves, *index, lengths)
    assert [tuple(o.shape) for o in outs] == [(2, n) for n in lengths]
    grads = torch.autograd.grad(outs, leaves, [torch.ones_like(o) for o in outs])
    assert [g.shape for g in grads] == [v.shape for v in values]
    with pytest.raises(RuntimeError, match=f"fbgemm::permute_multi_embedding: .*{match}"):
        fbgemm_npu.check()
    fn, widths = F.permute_multi_embedding_function, [v.size(1) for v in values]
    outs = fn(to_npu(values), *index, lengths, False)
    assert [tuple(o.shape) for o in outs] == [(2, n) for n in lengths]
    grads = [torch.ones(2, n, device=NPU) for n in lengths]
    back = fn(grads, index[0], index[2], index[1], widths, True)  # out_shapes and in_shapes swap
    assert [tuple(b.shape) for b in back] == [(2, w) for w in widths]
    with pytest.raises(RuntimeError, match=f"fbgemm::permute_multi_embedding_function: .*{match}"):
        fbgemm_npu.check()
