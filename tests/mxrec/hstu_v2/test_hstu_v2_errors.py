"""Hostile input to ``mxrec::hstu_forward_v2`` / ``mxrec::hstu_backward_v2``: each bad argument
raises a ``ValueError`` / ``RuntimeError`` naming the op and the argument (window sizes, the mask
rules that do not combine, arbitrary_func's shape / dtype, rab's shape / dtype, float8 and other
dtypes, sizes, offsets, counts, the hints, a tensor on another device); bad data (offsets,
lengths, ``L_q > L_k``, ``num_context + num_target >= L_q``) fails the queued data check naming
the op, after a valid call passed; with the checks off, bad offsets stay memory-safe."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native._pending import check

OFF_Q, OFF_K = [0, 2, 2, 5], [0, 3, 4, 7]  # q lengths 2, 0, 3 of k lengths 3, 1, 3
B, SQ, SK, NQ, NK, D, DV = 3, 3, 3, 4, 2, 4, 5
I32 = torch.int32


def _x() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "q": torch.randn(OFF_Q[-1], NQ, D, generator=g).npu(),
        "k": torch.randn(OFF_K[-1], NK, D, generator=g).npu(),
        "v": torch.randn(OFF_K[-1], NK, DV, generator=g).npu(),
        "grad": torch.randn(OFF_Q[-1], NQ, DV, generator=g).npu(),
        "rab": torch.randn(B, NQ, SQ, SK, generator=g).npu(),
    }


class On:
    """An argument left where it is (not moved to npu): mixed devices."""

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t


def _npu(over: dict) -> dict:
    return {
        n: (a.t if isinstance(a, On) else a.npu() if isinstance(a, torch.Tensor) else a)
        for n, a in over.items()
    }


def _forward(**over: object) -> torch.Tensor:
    x = _x()
    kw: dict = {"max_seq_len": SQ, "max_seq_len_k": SK}
    kw["seq_offset"], kw["seq_offset_k"] = torch.tensor(OFF_Q), torch.tensor(OFF_K)
    kw.update(over)
    q, k, v = (kw.pop(n, x[n]) for n in ("q", "k", "v"))
    return torch.ops.mxrec.hstu_forward_v2(*_npu({"q": q, "k": k, "v": v}).values(), **_npu(kw))


def _backward(**over: object) -> tuple:
    x = _x()
    kw: dict = {"max_seqlen_q": SQ, "max_seqlen_k": SK}
    kw["seq_offset_q"], kw["seq_offset_k"] = torch.tensor(OFF_Q, dtype=I32), torch.tensor(OFF_K)
    kw.update(over)
    grad, q, k, v = (kw.pop(n, x[n]) for n in ("grad", "q", "k", "v"))
    lead = _npu({"grad": grad, "q": q, "k": k, "v": v}).values()
    return torch.ops.mxrec.hstu_backward_v2(*lead, **_npu(kw))


def _af(*shape: int, dtype: torch.dtype = I32) -> torch.Tensor:
    return torch.zeros(*shape, dtype=dtype)


COUNTS = {"num_context": torch.tensor([1, 0, 1]), "num_target": torch.tensor([0, 0, 1])}
FORWARD = [
    ({"window_size_left": -2}, "window_size_left"),
    ({"window_size_right": -7}, "window_size_right"),
    ({"mask_type": 2, "window_size_right": 0}, "window_size"),
    ({"mask_type": 1}, "mask_type"),
    ({"mask_type": 4}, "mask_type"),
    ({"mask_type": 3}, "mask"),
    ({"mask_type": 3, "mask": torch.ones(B, NQ, SQ, SK + 1)}, "mask"),
    ({"arbitrary_func": _af(B, 1, SQ, 4, dtype=torch.float32)}, "arbitrary_func"),
    ({"arbitrary_func": _af(B, 1, SQ, 4, dtype=torch.int64)}, "arbitrary_func"),
    ({"arbitrary_func": _af(B, SQ, 4)}, "arbitrary_func"),
    ({"arbitrary_func": _af(B, 1, SQ, 3)}, "arbitrary_func"),
    ({"arbitrary_func": _af(B, 1, SQ + 1, 4)}, "arbitrary_func"),
    ({"arbitrary_func": _af(B + 1, 1, SQ, 4)}, "arbitrary_func"),
    ({"arbitrary_func": _af(B, 3, SQ, 4)}, "arbitrary_func"),
    ({"arbitrary_func": _af(B, 1, SQ, 0)}, "arbitrary_func"),
    ({"arbitrary_func": _af(B, 1, SQ, 4), "mask_type": 2}, "arbitrary_func"),
    ({"arbitrary_func": _af(B, 1, SQ, 4), "window_size_right": 0}, "window_size"),
    ({"arbitrary_func": _af(B, 1, SQ, 4), **COUNTS, "target_group_size": 1}, "arbitrary_func"),
    ({"rab": torch.randn(B, NQ, SQ, SK + 1)}, "rab"),
    ({"rab": torch.randn(B, NQ // 2, SQ, SK)}, "rab"),
    ({"rab": torch.randn(B, NQ, SQ, SK, dtype=torch.float16)}, "rab"),
    ({**COUNTS, "target_group_size": 1, "mask_type": 2}, "num_context"),
    ({**COUNTS, "target_group_size": 1, "window_size_left": 1}, "num_context"),
    ({**COUNTS}, "target_group_size"),  # the forward's default group size 0
    ({"target_group_size": -1}, "target_group_size"),
    ({"num_context": torch.tensor([1, 0]), "target_group_size": 1}, "num_context"),
    ({"num_target": torch.tensor([0.0, 0.0, 1.0]), "target_group_size": 1}, "num_target"),
    ({"q": torch.randn(5, NQ, D).to(torch.float8_e4m3fn).npu()}, "q"),
    ({"q": torch.randn(5, NQ, D, dtype=torch.float64).npu()}, "q"),
    ({"q": torch.zeros(5, NQ, D, dtype=torch.int32).npu()}, "q"),
    ({"k": torch.randn(7, 3, D).npu()}, "k"),
    ({"v": torch.randn(6, NK, DV).npu()}, "k"),
    ({"q": torch.randn(5, NQ, D + 1).npu()}, "k"),
    ({"max_seq_len": 0}, "max_seq_len"),
    ({"max_seq_len_k": -1}, "max_seq_len_k"),
    ({"max_seq_len": 10**6}, "max_seq_len"),  # past Rec SDK's 20480: hours of tiles
    ({"seq_offset": None}, "seq_offset"),
    ({"seq_offset": torch.tensor([0.0, 2.0, 2.0, 5.0])}, "seq_offset"),
    ({"seq_offset_k": torch.tensor([0, 7])}, "seq_offset_k"),
    ({"seq_offset": torch.tensor([5])}, "seq_offset"),
    ({"metadata": torch.zeros(4)}, "metadata"),
    ({"sparse_info": [torch.zeros(2, dtype=I32)] * 5}, "sparse_info"),
    ({"sparse_info": [torch.zeros(2, dtype=I32)] * 6}, "sparse_info"),  # no arbitrary_func
    ({"sparse_info": [torch.zeros(2)] * 6, "arbitrary_func": _af(B, 1, SQ, 4)}, "sparse_info"),
    ({"rab": "a string"}, "rab"),
    ({"seq_offset": On(torch.tensor(OFF_Q))}, "seq_offset"),  # on CPU, q on npu
    ({"rab": On(torch.randn(B, NQ, SQ, SK))}, "rab"),
    ({"arbitrary_func": On(_af(B, 1, SQ, 4))}, "arbitrary_func"),
    ({"num_context": On(torch.tensor([0, 0, 0])), "target_group_size": 1}, "num_context"),
]


@pytest.mark.parametrize(
    ("over", "arg"), FORWARD, ids=[f"{a}-{i}" for i, (_, a) in enumerate(FORWARD)]
)
def test_forward_argument_errors_name_the_op_and_argument(over: dict, arg: str) -> None:
    with pytest.raises((ValueError, RuntimeError), match=rf"hstu_forward_v2.*'{arg}"):
        _forward(**over)


BACKWARD = [
    ({"grad": torch.randn(OFF_Q[-1], NQ, DV + 1).npu()}, "grad"),
    ({"grad": torch.randn(OFF_Q[-1], NQ, DV, dtype=torch.float16).npu()}, "grad"),
    ({"window_size_left": -3}, "window_size_left"),
    ({"window_size_right": -2}, "window_size_right"),
    ({"arbitrary_func": _af(B, 1, SQ, 4), "window_size_right": 0}, "arbitrary_func"),
    ({"arbitrary_func": _af(B, 1, SQ, 4, dtype=torch.int64)}, "arbitrary_func"),
    ({**COUNTS}, "num_context"),  # the backward's default window (-1, -1) is not causal
    ({**COUNTS, "window_size_right": 0, "target_group_size": 0}, "target_group_size"),
    ({"max_seqlen_q": 0}, "max_seqlen_q"),
    ({"max_seqlen_k": 0}, "max_seqlen_k"),
    ({"max_seqlen_k": 20481}, "max_seqlen_k"),
    ({"seq_offset_q": torch.tensor([0, 2, 5])}, "seq_offset_k"),
    ({"rab": torch.randn(B, NQ, SK, SQ + 1)}, "rab"),
    ({"q": torch.randn(5, NQ, D).to(torch.bfloat16).npu()}, "grad"),
    ({"k": On(torch.randn(7, NK, D))}, "k"),  # k on CPU, q on npu
    ({"seq_offset_k": On(torch.tensor(OFF_K))}, "seq_offset_k"),
]


@pytest.mark.parametrize(
    ("over", "arg"), BACKWARD, ids=[f"{a}-{i}" for i, (_, a) in enumerate(BACKWARD)]
)
def test_backward_argument_errors_name_the_op_and_argument(over: dict, arg: str) -> None:
    with pytest.raises((ValueError, RuntimeError), match=rf"hstu_backward_v2.*'{arg}"):
        _backward(**over)


DATA = [
    ({"seq_offset": torch.tensor([0, 3, 2, 5])}, "seq_offset"),  # decreasing
    ({"seq_offset": torch.tensor([0, 2, 2, 4])}, "seq_offset"),  # ends before T_q
    ({"seq_offset_k": torch.tensor([1, 3, 4, 7])}, "seq_offset_k"),  # starts past 0
    ({"max_seq_len": 2}, "max_seq_len"),  # a q sequence of 3
    ({"seq_offset_k": torch.tensor([0, 1, 4, 7])}, "q length"),  # L_q 2 > L_k 1
    ({"num_context": torch.tensor([1, 0, 1]), "num_target": torch.tensor([1, 0, 1])}, "context"),
    ({"num_context": torch.tensor([0, 0, 0]), "num_target": torch.tensor([0, 0, 3])}, "num_target"),
    ({"num_target": torch.tensor([-1, 0, 0])}, "num_target"),
]  # fmt: skip


@pytest.mark.parametrize(("over", "what"), DATA, ids=[w for _, w in DATA])
def test_bad_data_fails_the_queued_check(over: dict, what: str) -> None:
    if any(n.startswith("num_") for n in over):
        over = {**over, "target_group_size": 1}
    check()
    _forward()
    check()  # the valid call passes
    with pytest.raises((ValueError, RuntimeError), match=rf"hstu_forward_v2.*{what}"):
        _forward(**over)
        check()


def test_context_plus_targets_equal_to_the_length_is_refused() -> None:
    """num_context + num_target < L_q per batch (Rec SDK: < max_seqlen_q): 2 + 1 = L_q = 3."""
    counts = {"num_context": torch.tensor([0, 0, 2]), "num_target": torch.tensor([0, 0, 1])}
    with pytest.raises(RuntimeError, match=r"hstu_backward_v2.*num_context \+ num_target"):
        _backward(**counts, window_size_right=0)
        check()


def test_bad_offsets_with_the_checks_off_stay_memory_safe(no_validation) -> None:  # type: ignore[no-untyped-def]
    out = _forward(
        seq_offset=torch.tensor([0, 9, -4, 100]), seq_offset_k=torch.tensor([7, 0, 50, 2])
    )
    assert out.shape == (OFF_Q[-1], NQ, DV)
    grads = _backward(seq_offset_q=torch.tensor([0, 9, -4, 100], dtype=I32))
    assert grads[0].shape == (OFF_Q[-1], NQ, D)
