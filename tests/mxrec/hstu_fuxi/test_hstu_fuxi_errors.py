"""Hostile input to ``mxrec::hstu_fuxi`` / ``mxrec::hstu_dense_backward_fuxi``: every range Rec SDK
refuses (``TestHstuJaggedInvalidParams``: batch 0, maxSeqLen 0 / -1 / 20481, maskType -1 / 1 / 4 /
10, integer and float64 dtypes, empty tensors) and every bad offset, shape, dtype, device or
layout gives a ValueError / RuntimeError naming the op and the argument, on the host (the offsets
are a host list: nothing is queued, nothing read back); garbage past a sequence's length in the
biases or the mask never reaches an output."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native._pending import pending
from fbgemm_npu.native.mxrec.hstu_fuxi._args import MAX_SEQ_LEN
from fbgemm_npu.testing.budgets import drain_checks

S, N, D, OFF = 4, 2, 3, [0, 2, 2, 5]
FWD, BWD = "hstu_fuxi", "hstu_dense_backward_fuxi"


def _args(**over: object) -> dict:
    g = torch.Generator().manual_seed(0)
    kw: dict = {
        "q": torch.randn(5, N, D, generator=g), "k": torch.randn(5, N, D, generator=g),
        "v": torch.randn(5, N, D, generator=g), "timestampBias": torch.rand(3, S, S, generator=g),
        "positionBias": torch.rand(1, S, S, generator=g), "maxSeqLen": S, "layout": "jagged",
        "seqOffset": OFF,
    }  # fmt: skip
    kw.update(over)
    return {n: (a.npu() if isinstance(a, torch.Tensor) else a) for n, a in kw.items()}


BAD_FORWARD = [
    ({"seqOffset": [0]}, "seqOffset"),  # batch 0
    ({"seqOffset": None}, "seqOffset"),
    ({"seqOffset": [1, 2, 5]}, "seqOffset"),
    ({"seqOffset": [0, 2, 2, 4]}, "seqOffset"),
    ({"seqOffset": [0, 3, 2, 5]}, "seqOffset"),
    ({"seqOffset": [0, 5, 5, 5]}, "seqOffset"),  # a sequence longer than maxSeqLen
    ({"maxSeqLen": 0}, "maxSeqLen"),
    ({"maxSeqLen": -1}, "maxSeqLen"),
    ({"maxSeqLen": MAX_SEQ_LEN + 1}, "maxSeqLen"),
    ({"maskType": -1}, "maskType"),
    ({"maskType": 1}, "maskType"),
    ({"maskType": 4}, "maskType"),
    ({"maskType": 10}, "maskType"),
    ({"maskType": 3}, "mask"),
    ({"maskType": 3, "mask": torch.ones(3, N, S, S + 1)}, "mask"),
    ({"maskType": 3, "mask": torch.ones(3, N, S, S, dtype=torch.float16)}, "mask"),
    ({"q": torch.zeros(5, N, D, dtype=torch.int32)}, "q"),
    ({"q": torch.zeros(5, N, D, dtype=torch.int64)}, "q"),
    ({"q": torch.zeros(5, N, D, dtype=torch.uint8)}, "q"),
    ({"q": torch.zeros(5, N, D, dtype=torch.float64)}, "q"),
    ({"q": torch.zeros(0, N, D), "seqOffset": [0, 0]}, "q"),  # empty
    ({"q": torch.zeros(5, N, 0)}, "q"),  # head dim 0
    ({"k": torch.zeros(5, N + 1, D)}, "k"),  # no GQA
    ({"v": torch.zeros(5, N, D + 1)}, "v"),
    ({"v": torch.zeros(5, N, D, dtype=torch.float16)}, "v"),
    ({"q": torch.zeros(1, 5, N, D)}, "q"),  # 4-D with the jagged layout
    ({"layout": "dense"}, "layout"),
    ({"positionBias": None}, "positionBias"),
    ({"timestampBias": None}, "timestampBias"),
    ({"timestampBias": torch.zeros(2, S, S)}, "timestampBias"),
    ({"positionBias": torch.zeros(3, S, S)}, "positionBias"),
    ({"positionBias": torch.zeros(1, S, S, dtype=torch.bfloat16)}, "positionBias"),
    ({"q": None}, "q"),
    ({"timestampBias": 3}, "timestampBias"),
]


@pytest.mark.parametrize(
    ("over", "arg"), BAD_FORWARD, ids=[f"{a}-{i}" for i, (_, a) in enumerate(BAD_FORWARD)]
)
def test_forward_errors_name_the_op_and_argument(over: dict, arg: str) -> None:
    drain_checks()
    with pytest.raises((ValueError, RuntimeError), match=rf"{FWD}.*{arg}"):
        torch.ops.mxrec.hstu_fuxi(**_args(**over))
    assert not pending(), "a host-checked argument must not queue a device check"


def test_normal_layout_errors() -> None:
    q = torch.randn(2, S, N, D).npu()
    with pytest.raises(ValueError, match=rf"{FWD}.*maxSeqLen"):
        torch.ops.mxrec.hstu_fuxi(q, q, q, maxSeqLen=S + 1)
    with pytest.raises(ValueError, match=rf"{FWD}.*maxSeqLen"):
        torch.ops.mxrec.hstu_fuxi(q, q, q)  # maxSeqLen 0: Rec SDK wants q.size(1)
    with pytest.raises(ValueError, match=rf"{FWD}.*q"):
        torch.ops.mxrec.hstu_fuxi(q[0], q[0], q[0], maxSeqLen=S)  # 3-D with "normal"


def test_mixed_devices_are_refused() -> None:
    kw = _args()
    kw["timestampBias"] = kw["timestampBias"].cpu()
    with pytest.raises(RuntimeError, match=rf"{FWD}.*timestampBias"):
        torch.ops.mxrec.hstu_fuxi(**kw)
    kw = _args()
    kw["k"] = kw["k"].cpu()
    with pytest.raises(RuntimeError, match=rf"{FWD}.*k"):
        torch.ops.mxrec.hstu_fuxi(**kw)
    kw = _args(maskType=3, mask=torch.ones(3, N, S, S))
    kw["mask"] = kw["mask"].to("npu:1")
    with pytest.raises(RuntimeError, match=rf"{FWD}.*mask"):
        torch.ops.mxrec.hstu_fuxi(**kw)
    kw = _bwd_args()
    kw["grad"] = kw["grad"].to("npu:1")
    with pytest.raises(RuntimeError, match=rf"{BWD}.*grad"):
        torch.ops.mxrec.hstu_dense_backward_fuxi(**kw)


def test_sizes_that_cannot_be_allocated_are_named() -> None:
    """5 rows of D = 2**20 (60 MiB of q, k, v) padded to 3 x 20480 rows would take 720 GiB: the
    allocator's refusal comes back naming the op and the arguments that asked for the size."""
    q = torch.randn(5, 1, 2**20).npu()
    with pytest.raises(RuntimeError, match=rf"{FWD}.*maxSeqLen.*cannot be allocated"):
        torch.ops.mxrec.hstu_fuxi(q, q, q, maxSeqLen=MAX_SEQ_LEN, layout="jagged", seqOffset=OFF)


def test_batch_times_max_seq_len_past_int32_is_refused() -> None:
    off = [0] * (2**31 // MAX_SEQ_LEN + 1) + [5]  # B = 104858 sequences, all but one empty
    with pytest.raises(ValueError, match=rf"{FWD}.*maxSeqLen"):
        torch.ops.mxrec.hstu_fuxi(
            **_args(seqOffset=off, maxSeqLen=MAX_SEQ_LEN, timestampBias=None, positionBias=None)
        )


def _bwd_args(**over: object) -> dict:
    kw = _args()
    kw["biasTimestamp"], kw["biasPosition"] = kw.pop("timestampBias"), kw.pop("positionBias")
    kw["grad"] = torch.randn(5, N, 3 * D).npu()
    kw.update({n: (a.npu() if isinstance(a, torch.Tensor) else a) for n, a in over.items()})
    return kw


BAD_BACKWARD = [
    ({"layout": "normal"}, "layout"),  # Rec SDK's backward is jagged only
    ({"grad": torch.randn(5, N, D)}, "grad"),  # [T, N, D] where the biases need [T, N, 3D]
    ({"grad": torch.randn(5, 3 * N * D)}, "grad"),  # the forward's layout, not the backward's
    ({"grad": torch.randn(5, N, 3 * D, dtype=torch.float16)}, "grad"),
    ({"biasPosition": None}, "biasPosition"),
    ({"biasTimestamp": torch.zeros(1, S, S)}, "biasTimestamp"),
    ({"seqOffset": [0]}, "seqOffset"),
    ({"maxSeqLen": MAX_SEQ_LEN + 1}, "maxSeqLen"),
    ({"maskType": 1}, "maskType"),
    ({"maskType": 3}, "mask"),
    ({"q": torch.zeros(5, N, D, dtype=torch.float64)}, "q"),
    ({"grad": None}, "grad"),
]


@pytest.mark.parametrize(
    ("over", "arg"), BAD_BACKWARD, ids=[f"{a}-{i}" for i, (_, a) in enumerate(BAD_BACKWARD)]
)
def test_backward_errors_name_the_op_and_argument(over: dict, arg: str) -> None:
    drain_checks()
    with pytest.raises((ValueError, RuntimeError), match=rf"{BWD}.*{arg}"):
        torch.ops.mxrec.hstu_dense_backward_fuxi(**_bwd_args(**over))
    assert not pending()


def test_mask_is_ignored_outside_mask_type_3() -> None:
    """Rec SDK: maskType 0 builds its own causal mask, 2 uses none, whatever ``mask`` holds."""
    junk = torch.full((3, N, S, S), float("nan"))
    for mask_type in (0, 2):
        base = torch.ops.mxrec.hstu_fuxi(**_args(maskType=mask_type))
        out = torch.ops.mxrec.hstu_fuxi(**_args(maskType=mask_type, mask=junk))
        torch.testing.assert_close(out, base, rtol=0, atol=0)


@pytest.mark.parametrize("mask_type", [0, 2, 3])
def test_garbage_past_the_lengths_never_reaches_a_result(mask_type: int) -> None:
    """NaN in the biases and the mask past each sequence's length: the same outputs and
    gradients as with zeros there (only the valid rows and keys are read into a sum)."""
    lens = [OFF[b + 1] - OFF[b] for b in range(3)]
    clean = {
        "timestampBias": torch.rand(3, S, S),
        "positionBias": torch.rand(1, S, S),
        "mask": torch.ones(3, N, S, S),
    }
    dirty = {n: t.clone() for n, t in clean.items()}
    for b, n in enumerate(lens):
        dirty["timestampBias"][b, n:] = dirty["timestampBias"][b, :, n:] = float("nan")
        dirty["mask"][b, :, n:] = dirty["mask"][b, :, :, n:] = float("nan")
    dirty["positionBias"][0, max(lens) :] = float("nan")
    results = []
    for biases in (clean, dirty):
        kw = _args(maskType=mask_type, **biases)
        leaves = [kw[n].requires_grad_() for n in ("q", "k", "v", "timestampBias", "positionBias")]
        out = torch.ops.mxrec.hstu_fuxi(**kw)
        out.sum().backward()
        valid = [
            leaf.grad[:, :2, :2] if leaf.dim() == 3 and leaf.size(1) == S else leaf.grad
            for leaf in leaves
        ]
        results.append([out, *valid])
    for a, b in zip(*results, strict=True):
        assert not b.isnan().any()
        torch.testing.assert_close(a, b)
