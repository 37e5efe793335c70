"""Hostile input to ``fbgemm_npu.experimental.hstu`` and ``fbgemm::hstu_varlen_fwd_80`` /
``_bwd_80`` (docs/design.md rule 9): every bad argument raises an error naming the function (or
the op) and the argument -- wrong ranks and dtypes, heads that do not divide, cu_seqlens that do
not match the rows, window / func / rab shapes, the paged cache's arguments, quant_mode -- and
bad data (offsets, seqused, lengths, page ids) fails the queued checks, naming the argument, at
``fbgemm_npu.check()``, with the call itself memory-safe.
"""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.experimental.hstu import hstu_attn_qkvpacked_func, hstu_attn_varlen_func
from fbgemm_npu.native._checks import validation_enabled

FN = "hstu_attn_varlen_func"
I32 = torch.int32


def _call(**over: object) -> dict:
    """A valid call on npu (3 sequences, 4 heads, D 3), with ``over`` replacing arguments."""
    g = torch.Generator().manual_seed(0)
    kw: dict = {
        "q": torch.randn(6, 4, 3, generator=g).npu(),
        "k": torch.randn(6, 4, 3, generator=g).npu(),
        "v": torch.randn(6, 4, 3, generator=g).npu(),
        "cu_seqlens_q": torch.tensor([0, 2, 2, 6], dtype=I32).npu(),
        "cu_seqlens_k": torch.tensor([0, 2, 2, 6], dtype=I32).npu(),
        "seqused_q": None,
        "seqused_k": None,
        "max_seqlen_q": 4,
        "max_seqlen_k": 4,
        "scaling_seqlen": -1,
        "num_contexts": None,
        "num_targets": None,
    }
    kw.update(over)
    return kw


def _raises(names: tuple[str, ...], fn: str = FN, **over: object) -> None:
    with pytest.raises((ValueError, RuntimeError)) as info:
        hstu_attn_varlen_func(**_call(**over))
    text = str(info.value)
    assert fn in text, text
    assert any(f"'{n}'" in text for n in names), text


def _ok(**over: object) -> torch.Tensor:
    return hstu_attn_varlen_func(**_call(**over))


R = torch.randn
BAD_METADATA = {
    "q_rank": ({"q": R(6, 12).npu()}, ("q",)),
    "k_float64": ({"k": R(6, 4, 3, dtype=torch.float64).npu()}, ("k",)),
    "heads_not_dividing": ({"k": R(6, 3, 3).npu(), "v": R(6, 3, 3).npu()}, ("k",)),
    "v_rows": ({"v": R(5, 4, 3).npu()}, ("v", "k")),
    "head_dim": ({"k": R(6, 4, 2).npu()}, ("k",)),
    "cu_seqlens_k_elements": (
        {"cu_seqlens_k": torch.tensor([0, 6], dtype=I32).npu()},
        ("cu_seqlens_k",),
    ),
    "cu_seqlens_q_float": ({"cu_seqlens_q": torch.tensor([0.0, 2, 2, 6]).npu()}, ("cu_seqlens_q",)),
    "cu_seqlens_q_2d": ({"cu_seqlens_q": torch.zeros(2, 2, dtype=I32).npu()}, ("cu_seqlens_q",)),
    "cu_seqlens_cpu": ({"cu_seqlens_q": torch.tensor([0, 2, 2, 6], dtype=I32)}, ("cu_seqlens_q",)),
    "seqused_elements": ({"seqused_q": torch.tensor([1, 2], dtype=I32).npu()}, ("seqused_q",)),
    "max_q_above_k": ({"max_seqlen_q": 5}, ("max_seqlen_q",)),
    "max_negative": ({"max_seqlen_k": -1, "max_seqlen_q": -1}, ("max_seqlen_q", "max_seqlen_k")),
    "scaling_zero": ({"scaling_seqlen": 0}, ("scaling_seqlen",)),
    "targets_not_causal": ({"num_targets": torch.tensor([0, 0, 1]).npu()}, ("num_targets",)),
    "contexts_local": (
        {"num_contexts": torch.tensor([0, 0, 1]).npu(), "window_size": (2, 0)},
        ("num_contexts",),
    ),
    "targets_elements": (
        {"num_targets": torch.tensor([0, 1]).npu(), "window_size": (-1, 0)},
        ("num_targets",),
    ),
    "group_zero": ({"target_group_size": 0}, ("target_group_size",)),
    "group_float": ({"target_group_size": 1.5}, ("target_group_size",)),
    "scaling_float": ({"scaling_seqlen": 2.0}, ("scaling_seqlen",)),
    "alpha_tensor": ({"alpha": torch.tensor(1.0)}, ("alpha",)),
    "window_not_pair": ({"window_size": (1, 2, 3)}, ("window_size",)),
    "window_not_ints": ({"window_size": "causal"}, ("window_size",)),
    "rab_heads_not_dividing": ({"rab": R(3, 3, 4, 4).npu()}, ("rab",)),
    "rab_shape": ({"rab": R(3, 4, 4, 5).npu()}, ("rab",)),
    "rab_rank": ({"rab": R(3, 4, 4).npu()}, ("rab",)),
    "rab_dtype": ({"rab": R(3, 4, 4, 4).half().npu()}, ("rab",)),
    "has_drab_without_rab": ({"has_drab": True}, ("has_drab",)),
    "func_rank": ({"func": torch.zeros(3, 6, dtype=I32).npu()}, ("func",)),
    "func_even": ({"func": torch.zeros(1, 2, 6, dtype=I32).npu()}, ("func",)),
    "func_rows": ({"func": torch.zeros(1, 3, 5, dtype=I32).npu()}, ("func",)),
    "func_int64": ({"func": torch.zeros(1, 3, 6, dtype=torch.int64).npu()}, ("func",)),
    "func_heads": ({"func": torch.zeros(3, 3, 6, dtype=I32).npu()}, ("func",)),
    "func_with_targets": (
        {
            "func": torch.zeros(1, 3, 6, dtype=I32).npu(),
            "window_size": (-1, 0),
            "num_targets": torch.tensor([0, 0, 1]).npu(),
        },
        ("func",),
    ),  # fmt: skip
    "quant_mode": ({"quant_mode": 1}, ("quant_mode",)),
    "paged_partial": ({"kv_cache": R(2, 2, 4, 4, 3).npu()}, ("kv_cache",)),
    "paged_cache_shape": (
        {
            "kv_cache": R(2, 3, 4, 4, 3).npu(),
            "page_offsets": torch.tensor([0, 1, 1, 2]).npu(),
            "page_ids": torch.tensor([0, 1]).npu(),
            "last_page_lens": torch.tensor([2, 1, 4]).npu(),
        },
        ("kv_cache",),
    ),  # fmt: skip
    "paged_offsets_elements": (
        {
            "kv_cache": R(2, 2, 4, 4, 3).npu(),
            "page_offsets": torch.tensor([0, 2]).npu(),
            "page_ids": torch.tensor([0, 1]).npu(),
            "last_page_lens": torch.tensor([2, 1, 4]).npu(),
        },
        ("page_offsets",),
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", sorted(BAD_METADATA))
def test_bad_metadata_is_named(case: str) -> None:
    over, names = BAD_METADATA[case]
    _raises(names, **over)


def test_quant_mode_error_says_what_is_refused() -> None:
    with pytest.raises(ValueError, match="hstu_attn_varlen_func: argument 'quant_mode' 3.*FP8"):
        _ok(quant_mode=3)
    assert _ok(quant_mode=None).shape == (6, 4, 3)  # None and -1: no quantization


def test_qkvpacked_errors_name_it() -> None:
    kw = _call()
    base = {n: kw[n] for n in ("cu_seqlens_q", "cu_seqlens_k", "seqused_q", "seqused_k")}
    sizes = {"max_seqlen_q": 4, "max_seqlen_k": 4}
    with pytest.raises(ValueError, match="hstu_attn_qkvpacked_func: argument 'qkv'"):
        hstu_attn_qkvpacked_func(R(6, 2, 4, 3).npu(), **base, **sizes)
    with pytest.raises(ValueError, match="hstu_attn_qkvpacked_func: argument 'rab'"):
        hstu_attn_qkvpacked_func(R(6, 3, 4, 3).npu(), **base, **sizes, rab=R(3, 3, 4, 4).npu())


def test_the_ops_name_themselves() -> None:
    """Direct calls of the ops: the op's name, the argument; None for a Tensor argument."""
    kw = _call()
    args = [kw[n] for n in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "seqused_q",
                            "seqused_k", "max_seqlen_q", "max_seqlen_k")]  # fmt: skip
    with pytest.raises(ValueError, match="fbgemm::hstu_varlen_fwd_80: argument 'q'"):
        torch.ops.fbgemm.hstu_varlen_fwd_80(None, *args[1:])
    with pytest.raises(ValueError, match="fbgemm::hstu_varlen_fwd_80: argument 'func'"):
        torch.ops.fbgemm.hstu_varlen_fwd_80(*args, func=torch.zeros(1, 2, 6, dtype=I32).npu())
    dout = torch.randn(6, 4, 3).npu()
    with pytest.raises(ValueError, match="fbgemm::hstu_varlen_bwd_80: argument 'dout'"):
        torch.ops.fbgemm.hstu_varlen_bwd_80(dout[:5], *args)
    with pytest.raises(ValueError, match="fbgemm::hstu_varlen_bwd_80: argument 'has_drab'"):
        torch.ops.fbgemm.hstu_varlen_bwd_80(dout, *args, has_drab=True)
    with pytest.raises(ValueError, match="fbgemm::hstu_varlen_bwd_80: argument 'dq'"):
        torch.ops.fbgemm.hstu_varlen_bwd_80(dout, *args, dq=torch.zeros(5, 4, 3).npu())


def _paged(**over: object) -> dict:
    """A valid paged call: 1 + 2 queries (1 target each) against 5 and 4 keys in pages of 2."""
    g = torch.Generator().manual_seed(1)
    kw = _call(
        q=torch.randn(3, 4, 3, generator=g).npu(), k=torch.randn(3, 4, 3, generator=g).npu(),
        v=torch.randn(3, 4, 3, generator=g).npu(),
        cu_seqlens_q=torch.tensor([0, 1, 3], dtype=I32).npu(),
        cu_seqlens_k=torch.tensor([0, 5, 9], dtype=I32).npu(), max_seqlen_q=2, max_seqlen_k=5,
        num_targets=torch.tensor([1, 1]).npu(), window_size=(-1, 0),
        kv_cache=torch.randn(4, 2, 2, 4, 3, generator=g).npu(),
        page_offsets=torch.tensor([0, 2, 4]).npu(), page_ids=torch.tensor([3, 0, 2, 1]).npu(),
        last_page_lens=torch.tensor([2, 1]).npu(),
    )  # fmt: skip
    kw.update(over)
    return kw


BAD_DATA = {
    "cu_seqlens_q_past_rows": (_call, {"cu_seqlens_q": [0, 2, 2, 7]}, "cu_seqlens_q"),
    "cu_seqlens_k_decreasing": (_call, {"cu_seqlens_k": [0, 3, 2, 6]}, "cu_seqlens_k"),
    "cu_seqlens_q_not_at_0": (_call, {"cu_seqlens_q": [1, 2, 2, 6]}, "cu_seqlens_q"),
    "seqused_q_past_segment": (_call, {"seqused_q": [3, 0, 4]}, "seqused_q"),
    "seqused_k_negative": (_call, {"seqused_k": [2, -1, 4]}, "seqused_k"),
    "length_past_max": (_call, {"max_seqlen_q": 3, "max_seqlen_k": 3}, "max_seqlen_q"),
    "q_longer_than_k": (_call, {"cu_seqlens_k": [0, 1, 2, 6]}, "query length"),
    "targets_past_queries": (
        _call,
        {"num_targets": [3, 0, 1], "window_size": (-1, 0)},
        "num_targets",
    ),
    "contexts_negative": (
        _call,
        {"num_contexts": [0, -1, 1], "window_size": (-1, 0)},
        "num_contexts",
    ),
    "page_ids_out_of_range": (_paged, {"page_ids": [3, 0, 9, 1]}, "page_ids"),
    "page_offsets_decreasing": (_paged, {"page_offsets": [0, 3, 2]}, "page_offsets"),
    "last_page_lens_past_page": (_paged, {"last_page_lens": [3, 1]}, "last_page_len"),
    "cache_not_matching_keys": (_paged, {"cu_seqlens_k": [0, 5, 10]}, "paged KV cache"),
}


@pytest.mark.parametrize("case", sorted(BAD_DATA))
def test_bad_data_fails_the_queued_checks(case: str) -> None:
    if not validation_enabled():
        pytest.skip("FBGEMM_NPU_VALIDATE=0 turns the data checks off")
    build, over, name = BAD_DATA[case]
    kw = build()
    for n, val in over.items():
        kw[n] = torch.tensor(val, dtype=kw[n].dtype if isinstance(kw.get(n), torch.Tensor)
                             else torch.int32).npu() if isinstance(val, list) else val  # fmt: skip
    with torch.no_grad():
        out = hstu_attn_varlen_func(**kw)  # memory-safe: runs, the error is queued
    assert out.shape == kw["q"].shape[:2] + (kw["v"].size(2),)
    with pytest.raises(RuntimeError, match=name):
        fbgemm_npu.check()
