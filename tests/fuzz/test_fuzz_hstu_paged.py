"""Hostile-input fuzz of the paged HSTU family (fbgemm_npu/native/mxrec/hstu_paged/):
``mxrec::hstu_paged`` (forward only: Rec SDK's inference op).

Valid calls (``conformance/specs/mxrec/hstu_paged/inputs.paged_case``: 1-4 sequences with caches
of 0-12 (or 0-70) rows in pages of 1-5 or 32 rows handed out shuffled from a pool with 0-2 spare
pages -- or page ids drawn with repeats, pages shared --, 0-4 new history rows and 0-3 targets
(fewer than the q rows; one call in eight as many: valid, a paged q's history is its cache) or
no ``num_target``; ``seq_offset_k`` / ``seq_offset_t`` given or
not; GQA ratios 1-3, D 1-8; ``max_seq_len`` / ``max_seq_len_k`` the longest plus 0-2, or 0 =
read back; mask_type 0 with group sizes 1-3, 2 or 3 (an unused mask with 0 / 2); a bias, alpha,
silu_scale; float32 / float16 / bfloat16, int32 / int64 metadata mixed; NaN wherever the op
must not read (``_garbage``); every tensor strided, transposed, expanded or offset; on npu:0,
npu:1 or the CPU kernel; one call in three in query tiles of 1-3 rows) equal the float64
reference (``conformance/specs/mxrec/hstu_paged/fuzz_oracles.py``, written from Rec SDK's
golden: no upstream CPU kernel exists), at the conformance spec's tolerances (float32 1e-4,
float16 1e-2, bfloat16 6e-2: the parity tests' 2e-5 / 3e-3 / 2e-2 are relative to ``max |ref|``,
these are per element).  Everything else is a clear error naming the op and the argument, on
npu:0, npu:1 or the CPU: non-tensors, ranks, dtypes, head counts and dims, the cache's shape,
page data out of range (ids past the pool or negative, ``last_page_len`` 0 or past the page
size, ``page_offsets`` not monotone / not from 0 / not ending at ``len(page_ids)``,
int32-wrapped; queued checks), the metadata's lengths, ``seq_offset`` broken every way,
``seq_offset_k`` / ``seq_offset_t`` that disagree with the pages and counts or do not start at
0, ``num_target`` past its sequence, group sizes, mask types and mask / bias shapes, sizes too
small, negative or huge, a tensor on another device.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.specs.mxrec.hstu_paged.inputs import paged_case
from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import INT32_MAX, bad_offsets, in_layout, seeded

FAMILY = "hstu_paged"
OP = "mxrec::hstu_paged"
REF = "conformance.specs.mxrec.hstu_paged.fuzz_oracles:paged"
TILES = "conformance.specs.mxrec.hstu_paged.fuzz_oracles:paged_in_tiles"  # ours, small tiles
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}
META = ("seq_offset", "page_offsets", "page_ids", "last_page_len")
OPTIONAL = ("mask", "attn_bias", "num_target", "seq_offset_k", "seq_offset_t")
FLAT = ("contiguous", "strided", "expanded", "offset")  # 1-D layouts


def _draw(data: Any, full_targets: bool = True) -> tuple[dict, dict]:
    """Valid keyword arguments and what they were drawn from (``full_targets``: some calls with
    as many targets as q rows: ``meta["full"]``)."""
    gen = seeded(data)
    b = data.draw(st.integers(1, 4), label="B")
    longest = data.draw(st.sampled_from((12, 12, 12, 70)), label="longest cache")
    cache = [data.draw(st.integers(0, longest)) for _ in range(b)]
    new = [data.draw(st.integers(0, 4)) for _ in range(b)]
    targets = [data.draw(st.integers(0, 3)) for _ in range(b)] if data.draw(st.booleans()) else None
    # targets filling a whole q range (n_t == L_q > 0): valid, the sequence's history is in the
    # cache (the n_c + n_t < L rule is for a whole sequence); one call in eight
    full = full_targets and targets is not None and data.draw(st.integers(0, 7)) == 0
    if targets is not None and not full:
        new = [max(n, 1) if t else n for n, t in zip(new, targets, strict=True)]
    full = full and any(t and not n for n, t in zip(new, targets or [], strict=True))
    nk, ratio = data.draw(st.integers(1, 2)), data.draw(st.sampled_from((1, 2, 3)))
    dtype = data.draw(st.sampled_from(FLOATS))
    ps = data.draw(st.sampled_from((1, 2, 3, 4, 5, 32)), label="page_size")
    kw = paged_case(
        cache, new, targets, page_size=ps, heads=(nk * ratio, nk),
        dim=data.draw(st.integers(1, 8)), dtype=dtype,
        index_dtype=data.draw(st.sampled_from((torch.int32, torch.int64))),
        seed=data.draw(st.integers(0, 2**16)), spare_pages=data.draw(st.integers(0, 2)),
    )  # fmt: skip
    pool, ids = kw["kv_cache"].size(0), kw["page_ids"]
    if ids.numel() and data.draw(st.booleans(), label="shared pages"):
        kw["page_ids"] = torch.randint(0, pool, ids.shape, generator=gen).to(ids.dtype)
    if targets is not None:
        kw["target_group_size"] = data.draw(st.integers(1, 3), label="group")
    else:  # without num_target the group size is unused
        kw["target_group_size"] = data.draw(st.sampled_from((0, 0, 2)), label="group")
    for name in ("seq_offset_k", "seq_offset_t"):
        if name in kw and data.draw(st.booleans(), label=f"drop {name}"):
            del kw[name]
    lq = [a + t for a, t in zip(new, targets or [0] * b, strict=True)]
    sq, sk = kw["max_seq_len"], kw["max_seq_len_k"]  # the longest (at least 1)
    if data.draw(st.integers(0, 3), label="read back max_seq_len") == 0:
        kw["max_seq_len"] = 0
    else:
        sq = kw["max_seq_len"] = sq + data.draw(st.integers(0, 2))
    if data.draw(st.integers(0, 3), label="read back max_seq_len_k") == 0:
        kw["max_seq_len_k"] = 0
    else:
        sk = kw["max_seq_len_k"] = sk + data.draw(st.integers(0, 2))
    nq = nk * ratio
    kw["mask_type"] = data.draw(st.sampled_from((0, 0, 2, 3)), label="mask_type")
    if kw["mask_type"] == 3 or data.draw(st.integers(0, 7), label="unused mask") == 0:
        kw["mask"] = (torch.rand(b, nq, sq, sk, generator=gen) > 0.3).to(dtype)
    if data.draw(st.booleans(), label="bias"):
        kw["attn_bias"] = (0.5 * torch.randn(b, nq, sq, sk, generator=gen)).to(dtype)
    kw["alpha"] = data.draw(st.sampled_from((1.0, 0.5, 2.0, None)), label="alpha")
    kw["silu_scale"] = data.draw(st.sampled_from((0.0, 0.0, 0.25)), label="silu_scale")
    for name, t in list(kw.items()):
        if not isinstance(t, torch.Tensor) or t.numel() == 0:
            continue
        if t.is_floating_point() and data.draw(st.integers(0, 7), label=f"{name} same rows") == 0:
            kw[name] = t[:1].expand(t.shape).clone()  # equal along dim 0: may be expanded
        elif not t.is_floating_point() and data.draw(st.integers(0, 3), label=f"{name} dtype") == 0:
            kw[name] = t.to(torch.int32 if t.dtype == torch.int64 else torch.int64)  # mixed
    if data.draw(st.integers(0, 3), label="garbage") == 0:
        _garbage(kw, lq, targets or [0] * b)
    for name, t in list(kw.items()):
        if isinstance(t, torch.Tensor):
            kw[name] = in_layout(data, t) if t.is_floating_point() else in_layout(data, t, FLAT)
    meta = {
        "B": b, "nq": nq, "nk": nk, "dtype": dtype, "ps": ps, "pool": pool, "sq": sq, "sk": sk,
        "cache": cache, "lq": lq, "nt": targets, "full": full,
    }  # fmt: skip
    return kw, meta


def _garbage(kw: dict, lq: list[int], nt: list[int]) -> None:
    """NaN wherever the op must not read (uninitialised memory may hold anything): the cache
    cells past each ``last_page_len`` and the unused pages, the k / v rows that are no target
    (keys come from the cache and the targets only), the bias and the custom mask past each
    sequence's ``[L_q, L_k]``.  Host loops of a test builder."""
    cache, po, ids, last = (kw[n] for n in ("kv_cache", *META[1:]))
    ps, nan = cache.size(2), float("nan")
    used = torch.zeros(cache.size(0), ps, dtype=torch.bool)
    keep = torch.zeros(kw["k"].size(0), dtype=torch.bool)
    lk, at = [], 0
    for b, (n, t) in enumerate(zip(lq, nt, strict=True)):
        pages = ids[int(po[b]) : int(po[b + 1])].tolist()
        for i, p in enumerate(pages):
            used[p, : int(last[b]) if i == len(pages) - 1 else ps] = True
        lk.append(max(len(pages) - 1, 0) * ps + (int(last[b]) if pages else 0) + t)
        keep[at + n - t : at + n] = True
        at += n
    cache.masked_fill_(~used.view(cache.size(0), 1, ps, 1, 1), nan)
    for name in ("k", "v"):
        kw[name].masked_fill_(~keep.view(-1, 1, 1), nan)
    for name in ("mask", "attn_bias"):
        if name in kw:
            t, junk = kw[name], nan
            for b, (n, k) in enumerate(zip(lq, lk, strict=True)):
                t[b, :, n:] = junk
                t[b, :, :, k:] = junk


def _placed(data: Any, kw: dict) -> tuple[dict, str]:
    """Every tensor on npu:0 (the default), npu:1 or the CPU (our CPU kernel)."""
    where = data.draw(st.sampled_from(("npu:0", "npu:0", "npu:1", "cpu")), label="device")
    if where == "npu:0":
        return kw, ""
    return {n: On(t, where) if isinstance(t, torch.Tensor) else t for n, t in kw.items()}, where


def _valid_case(kw: dict, meta: dict, label: str) -> Case:
    tol = TOL[meta["dtype"]]
    if meta["full"]:  # as many targets as q rows (_draw): valid (the history is the cache)
        label += " full targets"
    return Case(OP, (), kw, oracle=REF, label=label, rtol=tol, atol=tol)


@fuzz_test(FAMILY)
def test_fuzz_hstu_paged_valid(data: Any) -> Case:
    """hstu_paged on valid input: every page layout, mask rule, dtype, tensor layout, device;
    one call in three in query tiles of 1-3 rows (a tile budget of that many score rows)."""
    kw, meta = _draw(data)
    kw, where = _placed(data, kw)
    case = _valid_case(kw, meta, f"valid {where}".strip())
    if case.expect == "equal" and data.draw(st.integers(0, 2), label="tiles") == 0:
        rows = data.draw(st.integers(1, 3), label="tile rows")
        kw["tile_elements"] = meta["B"] * meta["nq"] * meta["sk"] * rows
        case.target, case.op_name = TILES, OP
        case.label = f"valid in tiles {where}".strip()
    return case


SPOILS = (
    "object", "rank", "dtype", "mixed_dtype", "heads", "cache_shape", "cache_dtype",
    "meta_dtype", "meta_shape", "page_ids", "last_page_len", "page_offsets", "seq_offset",
    "restated", "restated_meta", "num_target", "counts_meta", "group", "mask_type", "mask",
    "sizes", "device",
)  # fmt: skip
OBJECTS = (3, 2.5, "values", [1, 2, 3], (0, 1), {"a": 1}, object())


def _pick(data: Any, t: torch.Tensor, label: str) -> int:
    return data.draw(st.integers(0, t.numel() - 1), label=label)


def _with_pages(meta: dict) -> list[int]:
    return [i for i, c in enumerate(meta["cache"]) if c > 0]


def _spoil(data: Any, kw: dict, meta: dict, how: str) -> tuple[str, ...] | None:
    """Break ``kw`` in place as ``how`` says; the argument names an error may give (None: ``how``
    does not apply to this call, which stays valid)."""
    b, nq, nk, dtype, ps = meta["B"], meta["nq"], meta["nk"], meta["dtype"], meta["ps"]
    if how == "object":
        name = data.draw(st.sampled_from(("q", "k", "v", *META, "kv_cache", *OPTIONAL)))
        choices = OBJECTS if name in OPTIONAL else (None, *OBJECTS)
        kw[name] = data.draw(st.sampled_from(choices), label="not a tensor")
        return (name,)
    if how == "rank":
        name = data.draw(st.sampled_from(("q", "k", "v", "kv_cache")))
        kw[name] = kw[name][..., 0] if data.draw(st.booleans()) else kw[name].unsqueeze(-1)
        return (name, "q", "k", "v", "kv_cache")
    if how in ("dtype", "mixed_dtype"):
        name = data.draw(st.sampled_from(("q", "k", "v")))
        bad = (torch.float64, torch.int32, torch.bool, torch.uint8)
        to = data.draw(st.sampled_from(bad if how == "dtype" else FLOATS))
        if to == dtype:
            return None
        kw[name] = kw[name].to(to)
        return ("q", "k", "v", "kv_cache")  # a mixed q names kv_cache (q's dtype) or k / v
    if how == "heads":
        kind = data.draw(st.sampled_from(("k heads", "v heads", "v dim", "no q heads")))
        t, d = kw["k"], kw["q"].size(2)
        if kind == "no q heads":
            kw["q"] = kw["q"][:, :0]
            return ("q",)
        if kind == "v dim":
            kw["v"] = torch.zeros(t.size(0), nk, d + 1, dtype=dtype)
            return ("v", "kv_cache", "head dim")
        n = nq + 1 if kind == "k heads" else nk + 1
        for name in ("k", "v") if kind == "k heads" else ("v",):
            kw[name] = torch.zeros(t.size(0), n, d, dtype=dtype)
        return ("k", "v")
    if how == "cache_shape":
        c = kw["kv_cache"]
        p, d = c.size(0), c.size(4)
        shape = data.draw(
            st.sampled_from(
                ((p, 3, ps, nk, d), (p, 1, ps, nk, d), (p, 2, 0, nk, d), (p, 2, ps, nk + 1, d),
                 (p, 2, ps, nk, d + 1), (p, 2, ps, nk * d), (p, 2, ps, nk, d, 1))
            )
        )  # fmt: skip
        kw["kv_cache"] = torch.zeros(shape, dtype=dtype)
        return ("kv_cache",)
    if how == "cache_dtype":
        bad = (*FLOATS, torch.float64, torch.int32, torch.uint8)
        to = data.draw(st.sampled_from([d for d in bad if d != dtype]))
        kw["kv_cache"] = kw["kv_cache"].to(to)
        return ("kv_cache",)
    if how == "meta_dtype":
        name = data.draw(st.sampled_from(META))
        to = data.draw(st.sampled_from((torch.float32, torch.bool, torch.int16, torch.uint8)))
        kw[name] = kw[name].to(to)
        return (name,)
    if how == "meta_shape":
        name = data.draw(st.sampled_from(("page_offsets", "last_page_len", "seq_offset")))
        t = kw[name]
        kind = data.draw(st.sampled_from(("2-D", "longer", "shorter")))
        if kind == "2-D":
            kw[name] = t.view(1, -1)
        elif kind == "longer":
            kw[name] = torch.cat([t, t[-1:]]) if t.numel() else torch.zeros(1, dtype=t.dtype)
        elif name == "seq_offset" and t.numel() <= 2:
            kw[name] = t[:1]  # fewer than 2 offsets
        else:
            kw[name] = t[:-1]
        # a seq_offset of another length changes the batch: the per-batch arguments name it
        return (name, "last_page_len", "page_offsets", "num_target", "seq_offset_k",
                "seq_offset_t", "mask", "attn_bias")  # fmt: skip
    if how == "page_ids":
        ids = kw["page_ids"].clone()
        if ids.numel() == 0:
            return None
        i = _pick(data, ids, "slot")
        kind = data.draw(st.sampled_from(("past the pool", "negative", "wrapped")))
        if kind == "wrapped" and ids.dtype == torch.int64:
            ids[i] = 2**32 + int(ids[i])  # an int32 cast would wrap it into range
        else:
            ids[i] = -1 if kind == "negative" else meta["pool"] + data.draw(st.integers(0, 5))
        kw["page_ids"] = ids
        return ("page_ids",)
    if how == "last_page_len":
        with_pages = _with_pages(meta)
        if not with_pages:
            return None
        last = kw["last_page_len"].clone()
        i = data.draw(st.sampled_from(with_pages), label="sequence")
        value = data.draw(st.sampled_from((0, -1, ps + 1, ps + 7, 2**32 + 1)))
        if value > INT32_MAX and last.dtype == torch.int32:
            value = -(2**31)
        last[i] = value
        kw["last_page_len"] = last
        return ("last_page_len",)
    if how == "page_offsets":
        _, kw["page_offsets"] = bad_offsets(data, kw["page_offsets"], kw["page_ids"].numel())
        return ("page_offsets",)
    if how == "seq_offset":
        _, kw["seq_offset"] = bad_offsets(data, kw["seq_offset"], kw["q"].size(0))
        return ("seq_offset", "num_target")  # a length below num_target is the counts' error
    if how == "restated":
        name = data.draw(st.sampled_from(("seq_offset_k", "seq_offset_t")))
        lengths = (
            [c + t for c, t in zip(meta["cache"], meta["nt"] or [0] * b, strict=True)]
            if name == "seq_offset_k"
            else (meta["nt"] or [0] * b)
        )
        steps = torch.tensor(lengths, dtype=torch.int64)
        off = torch.zeros(b + 1, dtype=torch.int64)
        shift = data.draw(st.sampled_from((0, 0, 7, -3, INT32_MAX - 1)), label="shift")
        if shift == 0:  # a step that disagrees
            steps[data.draw(st.integers(0, b - 1))] += data.draw(st.sampled_from((1, -1, 2**32)))
        off[1:] = steps.cumsum(0)
        off += shift  # else every step agrees but the start (INT32_MAX - 1: wrapped in int32)
        if shift == INT32_MAX - 1:
            kw[name] = off.to(torch.int32)
        else:
            kw[name] = off.to(kw["seq_offset"].dtype) if off.abs().max() <= INT32_MAX else off
        return (name,)
    if how == "restated_meta":
        name = data.draw(st.sampled_from(("seq_offset_k", "seq_offset_t")))
        base = torch.zeros(b + 1, dtype=torch.int32)
        kw[name] = data.draw(
            st.sampled_from((base.float(), base.bool(), base.view(1, -1), base[:-1], base[0]))
        )
        return (name,)
    if how == "num_target":
        lq = meta["lq"]
        nt = torch.tensor(meta["nt"] or [0] * b, dtype=torch.int64)
        i = data.draw(st.integers(0, b - 1), label="sequence")
        nt[i] = data.draw(st.sampled_from((-1, lq[i] + 1, lq[i] + 5, -(2**40), 2**32)))
        kw["num_target"] = nt
        kw["target_group_size"] = max(kw["target_group_size"], 1)
        kw.pop("seq_offset_t", None)  # else it disagrees too (named as well: no matter)
        return ("num_target",)
    if how == "counts_meta":
        base = torch.zeros(b, dtype=torch.int32)
        kw["num_target"] = data.draw(
            st.sampled_from((base.float(), base.bool(), base.view(1, -1), torch.zeros(b + 1)))
        )
        kw["target_group_size"] = max(kw["target_group_size"], 1)
        return ("num_target",)
    if how == "group":
        if data.draw(st.booleans(), label="negative"):
            kw["target_group_size"] = -data.draw(st.integers(1, 3))
        else:  # num_target without a group size
            kw.setdefault("num_target", torch.zeros(b, dtype=torch.int64))
            kw["target_group_size"] = 0
        return ("target_group_size",)
    if how == "mask_type":
        kw["mask_type"] = data.draw(st.sampled_from((1, 4, -1)))
        return ("mask_type",)
    if how == "mask":
        kind = data.draw(st.sampled_from(("none", "mask shape", "mask dtype", "bias shape",
                                          "bias dtype")))  # fmt: skip
        name = "mask" if kind.startswith(("mask", "none")) else "attn_bias"
        kw["mask_type"] = 3 if name == "mask" else kw["mask_type"]
        shape = [b, nq, meta["sq"], meta["sk"]]
        if kind == "none":
            kw.pop("mask", None)
            return ("mask",)
        if kind.endswith("dtype"):
            to = data.draw(st.sampled_from([d for d in (*FLOATS, torch.bool) if d != dtype]))
            kw[name] = torch.ones(shape, dtype=to)
        else:
            dim = data.draw(st.integers(0, 4))
            shape = shape[:dim] + [shape[dim] + 1] + shape[dim + 1 :] if dim < 4 else shape[:3]
            kw[name] = torch.ones(shape, dtype=dtype)
        return (name,)
    if how == "sizes":
        name = data.draw(st.sampled_from(("max_seq_len", "max_seq_len_k")))
        longest = (
            max(meta["lq"])
            if name == "max_seq_len"
            else max(c + t for c, t in zip(meta["cache"], meta["nt"] or [0] * b, strict=True))
        )
        small = longest - 1 if longest >= 2 else -1  # (0 reads the longest back: valid)
        kw[name] = data.draw(st.sampled_from((small, -1, -(2**40), 20481, 2**31, 2**40)))
        # a size that changes names the mask / bias, whose shapes follow it
        return (name, "max_seq_len", "max_seq_len_k", "mask", "attn_bias", "cache lengths")
    assert how == "device"
    used = [n for n, t in kw.items() if isinstance(t, torch.Tensor)]
    if kw["mask_type"] != 3 and "mask" in used:
        used.remove("mask")  # an unused mask is not checked
    name = data.draw(st.sampled_from(used), label="argument")
    kw[name] = On(kw[name], data.draw(st.sampled_from(("cpu", "npu:1"))))
    return (name, "q")


@fuzz_test(FAMILY)
def test_fuzz_hstu_paged_invalid(data: Any) -> Case:
    """hstu_paged with one argument broken: a clear error naming the op and the argument."""
    kw, meta = _draw(data, full_targets=False)  # one argument broken, nothing else in doubt
    how = data.draw(st.sampled_from(SPOILS), label="spoil")
    names = _spoil(data, kw, meta, how)
    if names is None:  # nothing to break: the call stays valid
        return _valid_case(kw, meta, "valid (unspoiled)")
    if how != "device":  # the CPU kernel and npu:1 refuse the same way
        kw, _ = _placed(data, kw)
    return Case(OP, (), kw, expect="error", names=names, label=f"invalid {how}")
