"""The reorder family's errors (docs/design.md rule 9): each names the op and the argument, in
the exception class upstream raises where upstream raises (``NotImplementedError`` for its
dispatch macros' dtypes, ``RuntimeError`` for its checks and typed reads), ``ValueError`` where
upstream crashes or reads out of bounds instead.  Bad data (queued checks) raises at
``fbgemm_npu.check()``; with the checks off it stays inside the buffers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import fbgemm_npu
from conformance.specs.fbgemm.reorder.inputs import make_batch, split_by_request

F = torch.ops.fbgemm
NPU = "npu"
B = make_batch([2, 0, 1], 2, seed=0, max_len=3)  # NA = 3, T = 2
BC = make_batch([2, 0, 1], 2, True, seed=1)
SEQ = make_batch([2, 0, 1], 2, seed=2, dim=3, values_dtype=torch.float32)


def _d(t: torch.Tensor) -> torch.Tensor:
    return t.to(NPU)


def _lengths(lengths: Any = None, bo: Any = None, na: int = 3, *rest: Any) -> Any:
    lengths = _d(B.lengths) if lengths is None else lengths
    return F.reorder_batched_ad_lengths(
        lengths, _d(B.batch_offsets) if bo is None else bo, na, *rest
    )


def _indices(**kw: Any) -> Any:
    args = {
        "cat_ad_offsets": _d(B.offsets),
        "cat_ad_indices": _d(B.values),
        "reordered_cat_ad_offsets": _d(B.reordered),
        "batch_offsets": _d(B.batch_offsets),
        "num_ads_in_batch": 3,
    }
    args.update(kw)
    return F.reorder_batched_ad_indices(**args)


def _sequence(**kw: Any) -> Any:
    args = {
        "cat_sequence_embeddings_offsets": _d(SEQ.offsets),
        "cat_sequence_embeddings": _d(SEQ.values),
        "reordered_cat_sequence_embeddings_offsets": _d(SEQ.reordered),
        "batch_offsets": _d(SEQ.batch_offsets),
        "num_items_in_batch": 3,
    }
    args.update(kw)
    return F.reorder_batched_sequence_embeddings(**args)


def _cat(**kw: Any) -> Any:
    args = {
        "cat_ad_offsets": _d(B.offsets),
        "cat_ad_indices": [_d(p) for p in split_by_request(B)],
        "reordered_cat_ad_offsets": _d(B.reordered),
        "batch_offsets": _d(B.batch_offsets),
        "num_ads_in_batch": 3,
        "broadcast_indices": False,
        "total_num_indices": B.total,
    }
    args.update(kw)
    return F.cat_reorder_batched_ad_indices(**args)


NIE, RT, VE = NotImplementedError, RuntimeError, ValueError
BAD: dict[str, tuple[Callable[[], Any], type, str]] = {
    "lengths float64": (lambda: _lengths(_d(B.lengths.double())), NIE, "cat_ad_lengths"),
    "lengths bool": (lambda: _lengths(_d(B.lengths.bool())), NIE, "cat_ad_lengths"),
    "batch_offsets float": (lambda: _lengths(bo=_d(B.batch_offsets.float())), NIE, "batch_offsets"),
    "num_ads 0": (lambda: _lengths(na=0), VE, "num_ads_in_batch"),
    "one batch offset": (
        lambda: _lengths(bo=_d(torch.zeros(1, dtype=torch.int32))),
        VE,
        "batch_offsets",
    ),
    "lengths not T * NA": (lambda: _lengths(_d(B.lengths[:5])), RT, "cat_ad_lengths"),
    "broadcast lengths not B * T": (
        lambda: _lengths(_d(B.lengths[:5]), None, 3, True),
        VE,
        "cat_ad_lengths",
    ),
    "max_batch_size with broadcast": (
        lambda: _lengths(_d(BC.lengths), None, 3, True, 4),
        RT,
        "max_batch_size",
    ),
    "max_batch_size below NA": (lambda: _lengths(None, None, 3, False, 2), RT, "max_batch_size"),
    "lengths on cpu": (lambda: _lengths(bo=B.batch_offsets), RT, "batch_offsets"),
    "indices float64": (
        lambda: _indices(cat_ad_indices=_d(B.values.double())),
        NIE,
        "cat_ad_indices",
    ),
    "offsets float": (
        lambda: _indices(cat_ad_offsets=_d(B.offsets.float())),
        NIE,
        "cat_ad_offsets",
    ),
    "offsets dtypes differ": (
        lambda: _indices(reordered_cat_ad_offsets=_d(B.reordered.long())),
        RT,
        "reordered_cat_ad_offsets",
    ),
    "indices batch_offsets int64": (
        lambda: _indices(batch_offsets=_d(B.batch_offsets.long())),
        RT,
        "batch_offsets",
    ),
    "reordered not T * NA + 1": (
        lambda: _indices(reordered_cat_ad_offsets=_d(B.reordered[:-1])),
        VE,
        "reordered_cat_ad_offsets",
    ),
    "offsets too short": (
        lambda: _indices(cat_ad_offsets=_d(B.offsets[:-1])),
        VE,
        "cat_ad_offsets",
    ),
    "no num_indices_after_broadcast": (
        lambda: _indices(
            cat_ad_offsets=_d(BC.offsets),
            reordered_cat_ad_offsets=_d(BC.reordered),
            broadcast_indices=True,
        ),
        RT,
        "num_indices_after_broadcast",
    ),
    "huge num_indices_after_broadcast": (
        lambda: _indices(
            cat_ad_offsets=_d(BC.offsets),
            reordered_cat_ad_offsets=_d(BC.reordered),
            broadcast_indices=True,
            num_indices_after_broadcast=2**62,
        ),
        RT,
        "num_indices_after_broadcast",
    ),
    "embeddings 1-D": (
        lambda: _sequence(cat_sequence_embeddings=_d(SEQ.values[:, 0])),
        RT,
        "cat_sequence_embeddings",
    ),
    "embeddings int64": (
        lambda: _sequence(cat_sequence_embeddings=_d(SEQ.values.long())),
        NIE,
        "cat_sequence_embeddings",
    ),
    "embeddings batch_offsets dtype": (
        lambda: _sequence(batch_offsets=_d(SEQ.batch_offsets.long())),
        RT,
        "batch_offsets",
    ),
    "cat empty list": (lambda: _cat(cat_ad_indices=[]), VE, "cat_ad_indices"),
    "cat short list": (lambda: _cat(cat_ad_indices=[_d(B.values)]), VE, "cat_ad_indices"),
    "cat mixed dtypes": (
        lambda: _cat(
            cat_ad_indices=[
                _d(p.to(torch.int32 if k else torch.int64))
                for k, p in enumerate(split_by_request(B))
            ]
        ),
        RT,
        "cat_ad_indices[1]",
    ),
    "cat float64": (
        lambda: _cat(cat_ad_indices=[_d(p.double()) for p in split_by_request(B)]),
        NIE,
        "cat_ad_indices[0]",
    ),
    "cat part on cpu": (
        lambda: _cat(
            cat_ad_indices=[*(_d(p) for p in split_by_request(B)[:2]), split_by_request(B)[2]]
        ),
        RT,
        "cat_ad_indices[2]",
    ),
    "cat negative total": (lambda: _cat(total_num_indices=-1), RT, "total_num_indices"),
    "huge max_batch_size": (lambda: _lengths(None, None, 3, False, 2**61), RT, "max_batch_size"),
    "cat huge total": (lambda: _cat(total_num_indices=2**62), RT, "total_num_indices"),
    "cat max_batch_size below NA": (lambda: _cat(max_batch_size=2), VE, "max_batch_size"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_names_op_and_argument(name: str) -> None:
    call, cls, arg = BAD[name]
    with pytest.raises(cls) as info:
        call()
    text = str(info.value)
    assert "reorder" in text and arg in text, text


def test_none_is_refused() -> None:
    with pytest.raises((ValueError, RuntimeError, TypeError), match="batch_offsets|Tensor"):
        F.reorder_batched_ad_lengths(_d(B.lengths), None, 3)


def _bo(values: list[int]) -> torch.Tensor:
    return _d(torch.tensor(values, dtype=torch.int32))


BAD_DATA: dict[str, tuple[Callable[[], Any], str]] = {
    "batch_offsets decrease": (lambda: _lengths(bo=_bo([0, 3, 2, 3])), "batch_offsets"),
    "batch_offsets end short": (lambda: _lengths(bo=_bo([0, 1, 1, 2])), "batch_offsets"),
    "batch_offsets huge": (lambda: _lengths(bo=_bo([0, 2**30, 2**31 - 1, 3])), "batch_offsets"),
    "offsets decrease": (lambda: _indices(cat_ad_offsets=_d(B.offsets.flip(0))), "cat_ad_offsets"),
    "offsets past the indices": (
        lambda: _indices(cat_ad_offsets=_d(B.offsets * 2)),
        "cat_ad_offsets",
    ),
    "reordered inconsistent": (
        lambda: _indices(reordered_cat_ad_offsets=_d(torch.arange(7, dtype=torch.int32))),
        "reordered_cat_ad_offsets",
    ),
    "reordered negative": (
        lambda: _sequence(reordered_cat_sequence_embeddings_offsets=_d(SEQ.reordered - 4)),
        "reordered_cat_sequence_embeddings_offsets",
    ),
    "cat runs past a request's tensor": (
        lambda: _cat(cat_ad_indices=[_d(p[:1]) for p in split_by_request(B)]),
        "cat_ad_offsets",
    ),
}


@pytest.mark.parametrize("name", list(BAD_DATA))
def test_bad_data_raises_at_the_check(name: str) -> None:
    call, arg = BAD_DATA[name]
    with pytest.raises(RuntimeError) as info:
        call()
        fbgemm_npu.check()
    text = str(info.value)
    assert "reorder" in text and arg in text, text


@pytest.mark.parametrize("name", list(BAD_DATA))
def test_bad_data_with_the_checks_off_stays_in_bounds(name: str, no_validation: None) -> None:
    """Checks off: some result of the contract's size, never a crash or an error later."""
    out = BAD_DATA[name][0]()
    assert out.device.type == NPU
    fbgemm_npu.check()
