"""Hostile-input fuzz of the permute family's sparse-data permutes
(fbgemm_npu/native/fbgemm/permute/); ``invert_permute`` and ``expand_into_jagged_permute`` are in
``test_fuzz_permute_index.py``.

Valid calls of the six ops, in every layout (strided, transposed, stride 0, storage offsets), dtype
and size (no features, an empty batch, an empty permute), on npu:0 or npu:1, equal upstream's CPU
kernels (run on contiguous copies), gradients included where upstream has them; the forms only
upstream's CUDA kernels take (int64 ``permute``, bfloat16 / int / 2-D weights, 1-D float16
weights, gradients with repeated features) are judged by the loop references of
``fbgemm_npu/testing/permute_inputs.py``.  Every hostile category of the issue gets a clear
error naming the op and the argument: out-of-range and negative permutes, lengths that do not
match values, negative lengths, int32 lengths near 2**31, sizes that disagree or cannot be
allocated, wrong dtypes, wrong ranks, None and objects, mixed devices, buffers that overlap
themselves.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import (
    INT32_MAX,
    in_layout,
    not_a_tensor,
    other_dtype,
    seeded,
)

FAMILY = "permute"
REF = "fbgemm_npu.testing.permute_inputs:"
# form -> (op, reference, the name of its values argument)
FORMS = {
    "2d": ("permute_2D_sparse_data", "permute_2d_reference", "values"),
    "data": ("permute_sparse_data", "permute_2d_reference", "values"),
    "1d": ("permute_1D_sparse_data", "permute_1d_reference", "values"),
    "input1d": ("permute_2D_sparse_data_input1D", "permute_input1d_reference", "values"),
    "psf": ("permute_sparse_features", "permute_features_reference", "indices"),
    "prealloc": ("permute_2D_sparse_preallocated_out", None, "values"),
}
INDEX = (torch.int32, torch.int64)
VALUE_DTYPES = (torch.int32, torch.int64, torch.float32, torch.float16, torch.bfloat16)
WEIGHT_DTYPES = (*VALUE_DTYPES[2:], torch.float64, torch.int32, torch.int64)
CPU_WEIGHTS = {"1d": (torch.float32, torch.float64)}  # others: float32, float16, float64
NO_STRIDE0 = ("contiguous", "strided", "transposed", "offset")  # for buffers written to


def _fill(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randint(-64, 64, shape, generator=gen).to(dtype) / 8
    return torch.randint(-(2**31), INT32_MAX, shape, generator=gen, dtype=torch.int64).to(dtype)


def _sparse(data: Any, form: str) -> dict[str, Any]:
    """A valid call of ``form`` as keyword arguments, plus ``_total`` / ``_kind`` /
    ``_tail`` (popped before the call)."""
    gen = seeded(data)
    t_in = data.draw(st.integers(0, 6), label="T_in")
    b = 1 if form == "1d" else data.draw(st.integers(1 if form == "input1d" else 0, 5), label="B")
    l_dtype = data.draw(st.sampled_from(INDEX), label="lengths dtype")
    zeros = data.draw(st.booleans(), label="zero lengths")
    lengths = torch.randint(0, 1 if zeros else 6, (t_in, b), generator=gen).to(l_dtype)
    kind = data.draw(st.sampled_from(("permutation", "repeats", "empty")), label="permute kind")
    if kind == "empty" or t_in == 0:
        perm = []
    elif kind == "permutation":
        perm = torch.randperm(t_in, generator=gen).tolist()
    else:
        perm = torch.randint(0, t_in, (data.draw(st.integers(1, 8)),), generator=gen).tolist()
    permute = torch.tensor(perm, dtype=data.draw(st.sampled_from(INDEX), label="permute dtype"))
    total_in = int(lengths.sum())
    total = int(lengths[permute.long()].sum()) if perm else 0
    tail = data.draw(st.sampled_from((0, 0, 3)), label="tail")
    v_dtype = l_dtype if form == "psf" else data.draw(st.sampled_from(VALUE_DTYPES))
    call: dict[str, Any] = {
        "permute": in_layout(data, permute),
        "lengths": in_layout(data, lengths.reshape(-1) if form in ("1d", "input1d") else lengths),
        FORMS[form][2]: in_layout(data, _fill(gen, (total_in + tail,), v_dtype)),
        "_total": total,
        "_kind": kind if perm else "empty",
        "_tail": tail,
    }
    if form == "input1d":
        call["stride"] = b
    if data.draw(st.booleans(), label="weights"):
        w_dtype = data.draw(st.sampled_from(WEIGHT_DTYPES), label="weights dtype")
        cols = data.draw(st.sampled_from(((), (), (2,))), label="weights columns")
        call["weights"] = in_layout(data, _fill(gen, (total_in + tail, *cols), w_dtype))
    if form != "psf" and data.draw(st.booleans(), label="permuted_lengths_sum"):
        call["permuted_lengths_sum"] = total
    return call


def _upstream_judges(form: str, call: dict[str, Any]) -> bool:
    """Whether upstream's CPU kernel takes this valid call (else: the loop reference)."""
    w = call.get("weights")
    cpu_weights = CPU_WEIGHTS.get(form, (torch.float32, torch.float16, torch.float64))
    weights_ok = w is None or (w.dtype in cpu_weights and w.dim() == 1)
    return call["permute"].dtype == torch.int32 and weights_ok


def _grad(form: str, call: dict[str, Any], upstream: bool) -> tuple[str, ...]:
    """The float inputs whose gradients are compared (the 2-D op has autograd); upstream's
    backward only for a permutation of inputs as long as the lengths' sum, else the reference."""
    if form != "2d":
        return ()
    names = tuple(k for k in ("values", "weights") if _is_float(call.get(k)))
    if upstream and (call["_kind"] != "permutation" or call["_tail"]):
        return ()  # upstream's backward reads out of bounds here: the reference judges below
    return names


def _is_float(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def _case(form: str, call: dict[str, Any], **kw: Any) -> Case:
    args = {k: v for k, v in call.items() if not k.startswith("_")}
    return Case(f"fbgemm::{FORMS[form][0]}", (), args, **kw)


def _buffers(data: Any, call: dict[str, Any]) -> None:
    """Preallocated outputs for ``permute_2D_sparse_preallocated_out``, each given or not."""
    lengths, total = call["lengths"], call["_total"]
    shape = (call["permute"].numel(), lengths.shape[1])
    if data.draw(st.booleans(), label="lengths buffer"):
        flat = data.draw(st.booleans(), label="flat lengths buffer")
        buf = torch.full((shape[0] * shape[1],) if flat else shape, -1, dtype=lengths.dtype)
        call["permuted_lengths_out"] = in_layout(data, buf, NO_STRIDE0)
    for name, src in (("permuted_indices_out", "values"), ("permuted_weights_out", "weights")):
        given = call.get(src)
        if given is not None and data.draw(st.booleans(), label=name):
            rows = total + data.draw(st.sampled_from((0, 0, 2)), label="extra rows")
            buf = torch.full((rows, *given.shape[1:]), 7, dtype=given.dtype)
            call[name] = in_layout(data, buf, NO_STRIDE0)


@fuzz_test(FAMILY)
def test_fuzz_permute_sparse_valid(data: Any) -> Case:
    """The six sparse-data permutes on valid input, in any layout, on npu:0 or npu:1."""
    form = data.draw(st.sampled_from(tuple(FORMS)), label="op")
    call = _sparse(data, form)
    if form == "prealloc":
        w = call.get("weights")
        if w is not None and (w.dtype not in (torch.float32, torch.float64) or w.dim() != 1):
            call.pop("weights")  # no reference writes buffers: only what upstream's CPU takes
        call["permute"] = call["permute"].to(torch.int32)
        _buffers(data, call)
    upstream = _upstream_judges(form, call)
    grad = _grad(form, call, upstream)
    oracle = None if upstream else REF + str(FORMS[form][1])
    if form == "2d" and not grad and data.draw(st.booleans(), label="grad by the reference"):
        grad = tuple(k for k in ("values", "weights") if _is_float(call.get(k)))
        oracle = REF + "permute_2d_reference"
    if data.draw(st.integers(0, 4), label="device") == 0:  # the whole call on npu:1
        call = {k: On(v, "npu:1") if isinstance(v, torch.Tensor) else v for k, v in call.items()}
        return _case(form, call, oracle=oracle, grad=grad, label="valid on npu:1")
    return _case(form, call, oracle=oracle, grad=grad, label=f"valid {call['_kind']}")


HOSTILE = (
    "permute out of range",
    "negative lengths",
    "lengths exceed values",
    "int32 lengths near 2**31",
    "weights too short",
    "wrong permuted_lengths_sum",
    "dtype",
    "not a tensor",
    "rank",
    "mixed devices",
    "stride",
    "buffer",
)


def _nonempty(data: Any, form: str) -> dict[str, Any]:
    """A valid call with at least one feature, one sample and one value read."""
    call = _sparse(data, form)
    vkey = FORMS[form][2]
    if call["permute"].numel() and int(call["lengths"].sum()) > 0:
        return call
    lengths = torch.tensor([[2, 1], [3, 0]], dtype=call["lengths"].dtype)
    if form == "1d":
        lengths = lengths[:, :1]
    n = int(lengths.sum())
    call.update(
        lengths=lengths.reshape(-1) if form in ("1d", "input1d") else lengths,
        permute=torch.tensor([1, 0], dtype=call["permute"].dtype),
        _total=n,
        _tail=0,
        _kind="permutation",
    )
    call[vkey] = torch.arange(n).to(call[vkey].dtype)
    if form == "input1d":
        call["stride"] = 2
    if "weights" in call:
        call["weights"] = torch.ones((n, *call["weights"].shape[1:]), dtype=torch.float32)
    if "permuted_lengths_sum" in call:
        call["permuted_lengths_sum"] = n
    return call


def _t_in(form: str, call: dict[str, Any]) -> int:
    n = call["lengths"].numel()
    if form == "1d":
        return n
    if form == "input1d":
        return n // call["stride"]
    return call["lengths"].shape[0]


@fuzz_test(FAMILY)
def test_fuzz_permute_sparse_hostile(data: Any) -> Case:
    """One hostile argument in an otherwise valid call of a sparse-data permute."""
    form = data.draw(st.sampled_from(tuple(FORMS)), label="op")
    how = data.draw(st.sampled_from(HOSTILE), label="hostile")
    call = _nonempty(data, form)
    vkey = FORMS[form][2]
    err: dict[str, Any] = {"expect": "error", "label": how}
    if how == "permute out of range":
        perm = call["permute"].clone()
        k = data.draw(st.integers(0, perm.numel() - 1))
        big = _t_in(form, call) + data.draw(st.sampled_from((0, 1, 1000, INT32_MAX - 10)))
        perm[k] = data.draw(st.sampled_from((big, -1, -(2**31))))
        call["permute"] = in_layout(data, perm)
        return _case(form, call, names=("permute",), **err)
    if how in ("negative lengths", "int32 lengths near 2**31"):
        lengths = call["lengths"].contiguous().clone()
        flat = lengths.view(-1)
        k = data.draw(st.integers(0, flat.numel() - 1))
        if how == "negative lengths":
            flat[k] = -data.draw(st.sampled_from((1, 5, 2**31 - 1)))
        else:  # int32 lengths whose sum wraps past 2**31: far more than the values hold
            lengths = lengths.to(torch.int32)
            lengths.view(-1)[k] = INT32_MAX - data.draw(st.integers(0, 10))
            if form == "psf":
                call[vkey] = call[vkey].to(torch.int32)
        call["lengths"] = in_layout(data, lengths)
        call.pop("permuted_lengths_sum", None)
        return _case(form, call, names=("lengths",), **err)
    if how == "lengths exceed values":
        total_in = int(call["lengths"].sum())
        short = data.draw(st.integers(1, total_in), label="values missing")
        call[vkey] = call[vkey][: total_in - short]
        return _case(form, call, names=("lengths", vkey), **err)
    if how == "weights too short":
        n = int(call["lengths"].sum()) - data.draw(st.integers(1, 3))
        call["weights"] = torch.ones(max(n, 0), dtype=torch.float32)
        return _case(form, call, names=("weights",), **err)
    if how == "wrong permuted_lengths_sum":
        if form == "psf":
            form = "2d"
        total = call["_total"]
        call["permuted_lengths_sum"] = data.draw(
            st.sampled_from((total + 1, max(total - 1, 0) if total else 1, -1, 2**40, 2**62))
        )
        return _case(form, call, names=("permuted_lengths_sum",), **err)
    if how == "dtype":
        return _bad_dtype(data, form, call, err)
    if how == "not a tensor":
        arg = data.draw(st.sampled_from(("permute", "lengths", vkey, "weights")), label="arg")
        value = not_a_tensor(data)
        if arg == "weights" and value is None:
            value = "weights"
        call[arg] = value
        return _case(form, call, names=(arg,), **err)
    if how == "rank":
        if form in ("2d", "data", "psf", "prealloc"):
            call["lengths"] = call["lengths"].reshape(-1, *data.draw(st.sampled_from(((), (1, 1)))))
            return _case(form, call, names=("lengths",), **err)
        n = call[vkey].numel()
        call["weights"] = torch.ones(n, 1, 1)
        return _case(form, call, names=("weights",), **err)
    if how == "mixed devices":
        tensors = [k for k, v in call.items() if isinstance(v, torch.Tensor)]
        arg = data.draw(st.sampled_from(tensors), label="arg")
        call[arg] = On(call[arg], data.draw(st.sampled_from(("cpu", "npu:1"))))
        return _case(form, call, names=tuple(tensors), **err)
    if how == "stride":
        form = "input1d"
        call = _nonempty(data, form)
        n = call["lengths"].numel()
        call["stride"] = data.draw(st.sampled_from((0, -1, n + 1, -(2**40))))
        return _case(form, call, names=("stride",), **err)
    return _bad_buffer(data, err)


def _bad_dtype(data: Any, form: str, call: dict[str, Any], err: dict[str, Any]) -> Case:
    vkey = FORMS[form][2]
    allowed = {"permute": INDEX, "lengths": INDEX, vkey: VALUE_DTYPES}
    if "weights" in call:
        allowed["weights"] = WEIGHT_DTYPES
    arg = data.draw(st.sampled_from(tuple(allowed)), label="arg")
    dtype = other_dtype(data, allowed[arg])
    call[arg] = in_layout(data, call[arg].to(dtype))
    names: tuple[str, ...] = (arg,)
    if form == "psf" and arg in ("lengths", vkey) and dtype in INDEX:
        names = ("lengths", vkey)  # psf: lengths and indices must share a dtype
    return _case(form, call, names=names, **err)


def _bad_buffer(data: Any, err: dict[str, Any]) -> Case:
    """A preallocated buffer of the wrong dtype, too few rows, or overlapping itself."""
    call = _nonempty(data, "prealloc")
    call["permute"] = call["permute"].to(torch.int32)
    call["weights"] = torch.ones(call["values"].numel(), dtype=torch.float32)
    call["permuted_lengths_sum"] = call["_total"]
    total, shape = call["_total"], (call["permute"].numel(), call["lengths"].shape[1])
    bufs = {
        "permuted_lengths_out": torch.zeros(shape, dtype=call["lengths"].dtype),
        "permuted_indices_out": torch.zeros(total, dtype=call["values"].dtype),
        "permuted_weights_out": torch.zeros(total, dtype=torch.float32),
    }
    name = data.draw(st.sampled_from(tuple(bufs)), label="buffer")
    how = data.draw(st.sampled_from(("dtype", "short", "overlapping")), label="buffer fault")
    buf = bufs[name]
    if how == "overlapping" and buf.numel() < 2:
        how = "dtype"  # one element cannot overlap itself
    if how == "dtype":
        buf = buf.to(other_dtype(data, (buf.dtype,)))
    elif how == "short" and name != "permuted_lengths_out":
        buf = buf[: total - 1]
    elif how == "short":
        buf = buf.reshape(-1)[1:]
    else:  # stride 0: every element written to one place
        buf = buf.reshape(-1)[:1].reshape((1,) * buf.dim()).expand(buf.shape)
    call[name] = buf
    return _case("prealloc", call, names=(name,), **err)
