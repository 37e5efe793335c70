"""Hostile-input fuzz of the disentangle family (fbgemm_npu/native/mxrec/disentangle/).

Valid inputs in every layout (strided, transposed, offset, stride 0), dtype, pos_attr_type,
mask and relative_pos rank and size (zero-size too), positions anywhere in int64 / int32 (near
2**31 and 2**63: clamped by contract) equal the float64 references of
``conformance/specs/mxrec/disentangle/fuzz_oracles.py`` (no upstream CPU kernel exists: ours is
the CPU kernel), the gradients of all five float inputs and the mask included; the backward op
with any subset of output gradients likewise.  Everything else is a clear error naming the op
and the argument: non-tensors, dtypes, ranks, shapes that disagree, pos_attr_types outside Rec
SDK's three, non-finite scales, inputs on two devices, float64 on npu.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.disentangle_inputs import disentangle_inputs, score_scale
from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import INT32_MAX, in_layout, not_a_tensor

FAMILY = "disentangle"
REF = "conformance.specs.mxrec.disentangle.fuzz_oracles:"
FWD, BWD = "mxrec::disentangle_attention", "mxrec::disentangle_attention_backward"
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 8e-2}
TYPES = ("c2p", "p2c", "c2p|p2c")
NAMES = ("query_layer", "key_layer", "value_layer", "pos_key_layer", "pos_query_layer",
         "relative_pos", "attn_mask")  # fmt: skip


def _draw(data: Any) -> tuple[list[torch.Tensor], str, float]:
    """Valid arguments of the forward op, each in a drawn layout."""
    b, n = data.draw(st.integers(0, 3), label="b"), data.draw(st.integers(0, 3), label="n")
    s, d = data.draw(st.integers(0, 8), label="s"), data.draw(st.integers(0, 6), label="d")
    dtype = data.draw(st.sampled_from(FLOATS))
    a = disentangle_inputs(
        b, n, s, d, dtype, seed=data.draw(st.integers(0, 2**31 - 1), label="seed"),
        mask_dims=data.draw(st.sampled_from((3, 4))),
        rel_dims=data.draw(st.sampled_from((2, 3, 4))),
        rel_dtype=data.draw(st.sampled_from((torch.int64, torch.int32))),
        buckets=data.draw(st.sampled_from((None, (4, 16)))),
    )  # fmt: skip
    far = data.draw(st.sampled_from((0, 1, 2)), label="positions")
    if far == 1:  # far out of the table, both signs
        top = INT32_MAX if a[5].dtype == torch.int32 else 2**63 - 1
        a[5] = torch.where(a[5] >= 0, torch.full_like(a[5], top), torch.full_like(a[5], -top - 1))
    elif far == 2:
        a[5] = a[5] * 1000
    kind = data.draw(st.sampled_from(TYPES))
    return [in_layout(data, t) for t in a], kind, score_scale(kind, max(d, 1))


@fuzz_test(FAMILY)
def test_fuzz_disentangle_valid(data: Any) -> Case:
    """The forward in every layout, dtype and size, with the gradients of the float inputs."""
    a, kind, c = _draw(data)
    tol = TOL[a[0].dtype]
    grad = (0, 1, 2, 3, 4, 6) if data.draw(st.booleans(), label="grad") else ()
    return Case(FWD, (*a, kind, c), oracle=REF + "forward", grad=grad, rtol=tol, atol=tol,
                label="valid forward" + (" + grad" if grad else ""))  # fmt: skip


@fuzz_test(FAMILY)
def test_fuzz_disentangle_backward_valid(data: Any) -> Case:
    """The backward op with any subset of output gradients, with and without the mask."""
    a, kind, c = _draw(data)
    if data.draw(st.booleans(), label="no mask"):
        a[6] = torch.zeros(a[6].shape, dtype=a[6].dtype)  # read for the shape only: mask None
        mask = None
    else:
        mask = a[6]
    probs = torch.ops.mxrec.disentangle_attention(*(t.contiguous() for t in a), kind, c)[1]
    b, n, s, d = a[0].shape
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="grad seed"))
    given = data.draw(st.lists(st.booleans(), min_size=3, max_size=3), label="given")
    shapes = ((b, n, s, d), (b, n, s, s), (b, n, s, s))
    gs = [torch.randn(sh, generator=gen).to(a[0].dtype) if k else None
          for sh, k in zip(shapes, given, strict=True)]  # fmt: skip
    tol = TOL[a[0].dtype]
    return Case(BWD, (*gs, *a[:6], mask, probs, kind, c), oracle=REF + "backward", rtol=tol,
                atol=tol, label="valid backward")  # fmt: skip


@fuzz_test(FAMILY)
def test_fuzz_disentangle_invalid(data: Any) -> Case:
    """A non-tensor, a dtype, a rank or shape, a pos_attr_type, a scale, two devices."""
    a, kind, c = _draw(data)
    how = data.draw(st.sampled_from(("object", "dtype", "shape", "kind", "scale", "device")))
    i = data.draw(st.integers(0, 6), label="argument")
    names: tuple[str, ...] = (NAMES[i],)
    args: list[Any] = [*a, kind, c]
    if how == "object":
        args[i] = not_a_tensor(data)
    elif how == "dtype":
        wrong = (torch.float64, torch.int32, torch.bool, torch.uint8) if i != 5 else (
            torch.float32, torch.int16, torch.bool, torch.uint8)  # fmt: skip
        args[i] = args[i].to(data.draw(st.sampled_from(wrong)))
        if i == 0:  # query's dtype is the rule: the others disagree with it
            names = NAMES
    elif how == "shape":
        t = args[i]
        # a rank past the allowed ones, or one more column (even of a zero-size tensor); not
        # a leading 1 on relative_pos (s, s) / (1, s, s) or a mask of b == 1: those are valid
        col = torch.zeros((*t.shape[:-1], 1), dtype=t.dtype)
        more_rank = (t.dim() == 4 or i in (3, 4)) and data.draw(st.booleans())
        args[i] = t.unsqueeze(0) if more_rank else torch.cat([t, col], -1)
        if i == 0:
            names = NAMES
    elif how == "kind":
        args[7] = data.draw(st.sampled_from(("", "c2p|", "P2C", "p2c|c2p", "c2p,p2c", "none")))
        names = ("pos_attr_type",)
    elif how == "scale":
        args[8] = data.draw(st.sampled_from((float("nan"), float("inf"), -float("inf"))))
        names = ("score_scale",)
    else:
        args[i] = On(args[i], data.draw(st.sampled_from(("cpu", "npu:1"))))
        names = NAMES
    return Case(FWD, tuple(args), expect="error", names=names, label=f"invalid {how}")
