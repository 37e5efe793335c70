"""Hostile-input fuzz of the eeg family (fbgemm_npu/native/fbgemm/eeg/).

Valid calls equal upstream's CPU kernels (its estimator and its generator, seeded by upstream
with 0: deterministic): index traces of heavy hitters over a uniform tail (int64, 1-D or 2-D, in
drawn layouts: strided, stride 0, transposed, offset), and distributions inside the sampler's
contract (probabilities summing to at most 1, ``zipf_q + len > 0``, ``zipf_s >= 0``, a Zipf tail
of at least one index).  A trace upstream cannot fit (too few distinct indices) is its error,
named.  Invalid calls get a clear error naming the op and the argument: other dtypes and ranks,
objects, negative indices, empty traces, heavy hitters that are not probabilities, ``zipf_q`` /
``zipf_s`` outside the contract or not finite, a ``max_index`` without a tail, negative
``num_indices``, tables that cannot be allocated (``max_index`` / ``num_indices`` of 2**40 and
more); upstream hangs, crashes or reads out of bounds on several of these (eeg.py).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, not_a_tensor, other_dtype, seeded

EST = "fbgemm::tbe_estimate_indices_distribution"
GEN = "fbgemm::tbe_generate_indices_from_distribution"


def _trace(data: Any) -> torch.Tensor:
    gen = seeded(data)
    n = data.draw(st.sampled_from((200, 1000, 3000)), label="n")
    rows = data.draw(st.sampled_from((8, 50, 500, 2**16)), label="rows")
    hot = torch.randint(0, data.draw(st.integers(1, 8), label="hot rows"), (n // 4,), generator=gen)
    return torch.cat([hot, torch.randint(0, rows, (n - n // 4,), generator=gen)])


def _distribution(data: Any) -> list[Any]:
    k = data.draw(st.integers(0, 6), label="hitters")
    p = torch.rand(k, generator=seeded(data)).double()
    if k:
        p = p / p.sum() * data.draw(st.sampled_from((0.0, 0.3, 0.9, 1.0)), label="mass")
    dtype = data.draw(st.sampled_from((torch.float32, torch.float64)), label="dtype")
    q = data.draw(st.sampled_from((1.0, 0.5, 3.0, 100.0, -k + 0.5)), label="zipf_q")
    s = data.draw(st.sampled_from((0.0, 0.5, 1.0, 1.2, 2.0)), label="zipf_s")
    tail = data.draw(st.sampled_from((1, 2, 10, 1000)), label="tail")
    num = data.draw(st.sampled_from((0, 1, 64, 2000)), label="num_indices")
    return [p.to(dtype), q, s, k + tail, num]


def _object(data: Any) -> object:
    """A non-tensor, but not None: None carries no dispatch key, so the call reaches upstream's
    CompositeImplicitAutograd kernel and its words, never a kernel of ours (rule 1)."""
    value = not_a_tensor(data)
    return "indices" if value is None else value


@fuzz_test("eeg")
def test_fuzz_eeg_valid(data: Any) -> Case:
    """Both tools on valid input, the tensor in a drawn layout (or 2-D, on the CPU, on npu:1)."""
    if data.draw(st.booleans(), label="estimate"):
        t = _trace(data)
        if data.draw(st.booleans(), label="2-D"):
            t = t.view(2, -1)
        elsewhere = data.draw(st.sampled_from((None, None, None, "cpu", "npu:1")))
        if elsewhere == "cpu":  # upstream's own CPU kernel: contiguous (it misreads strides)
            t = On(t, "cpu")
        else:
            t = in_layout(data, t)
            t = On(t, elsewhere) if elsewhere else t
        # a trace upstream cannot fit (too few distinct indices for its Zipf tail) is its error
        return Case(EST, (t,), expect="equal_or_error", names=("indices",), label="valid estimate")
    args = _distribution(data)
    args[0] = in_layout(data, args[0])
    return Case(GEN, tuple(args), label="valid generate")


@fuzz_test("eeg")
def test_fuzz_eeg_invalid(data: Any) -> Case:
    """A refused argument of either tool: a clear error naming it."""
    if data.draw(st.booleans(), label="estimate"):
        how = data.draw(st.sampled_from(("object", "dtype", "negative", "empty")), label="how")
        t: Any = _trace(data)
        if how == "object":
            t = _object(data)
        elif how == "dtype":
            t = t.to(other_dtype(data, (torch.int64,)))
        elif how == "negative":
            t[data.draw(st.integers(0, t.numel() - 1))] = -data.draw(st.integers(1, 2**40))
        else:
            t = t[:0]
        return Case(EST, (t,), expect="error", names=("indices",), label=f"estimate {how}")
    args = _distribution(data)
    k = args[0].numel()
    how = data.draw(
        st.sampled_from(
            ("object", "dtype", "rank", "probabilities", "q", "s", "max_index", "num", "huge")
        ),
        label="how",
    )
    names = {"q": "zipf_q", "s": "zipf_s", "num": "num_indices", "huge": "max_index"}
    name = names.get(how, "heavy_hitters" if how != "max_index" else "max_index")
    if how == "object":
        args[0] = _object(data)
    elif how == "dtype":
        args[0] = args[0].to(other_dtype(data, (torch.float32, torch.float64)))
    elif how == "rank":
        args[0] = args[0].view(1, -1) if data.draw(st.booleans()) else torch.tensor(0.1)
    elif how == "probabilities":
        bad = data.draw(st.sampled_from((-0.1, float("nan"), float("inf"), 1.5)))
        args[0] = torch.cat([args[0], args[0].new_tensor([bad])])
        args[3] += 1
    elif how == "q":
        args[1] = data.draw(st.sampled_from((-float(k), -k - 3.0, float("nan"), float("inf"))))
    elif how == "s":
        args[2] = data.draw(st.sampled_from((-0.5, -3.0, float("nan"), float("inf"))))
    elif how == "max_index":
        args[3] = data.draw(st.sampled_from((k, k - 1, 0, -1, -(2**40))))
    elif how == "num":
        args[4] = data.draw(st.sampled_from((-1, -(2**40))))
    else:  # tables upstream cannot allocate
        which = data.draw(st.sampled_from((3, 4)), label="argument")
        args[which] = data.draw(st.sampled_from((2**40, 2**62, 2**63 - 1)))
        name = ("max_index", "num_indices")[which - 3]
    return Case(GEN, tuple(args), expect="error", names=(name,), label=f"generate {how}")
