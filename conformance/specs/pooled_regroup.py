"""Specs for the KeyedTensor regrouping ops: ``permute_multi_embedding`` (and its internal
``permute_multi_embedding_function``, forward and reverse), ``regroup_keyed_tensor``,
``kt_regroup_arguments``, and torchrec's call sequence ``kt_regroup_arguments`` +
``permute_multi_embedding`` on one device (``[kt_regroup_arguments]``).

Drawn inputs: 1..3 KeyedTensors of 0..4 keys with lengths 0..5 (zero-length keys often), 1..3
groups that repeat keys (across and within groups) and omit some, batch 0..4 (empty batch),
float32 / float16 / bfloat16 values, contiguous / transposed / sliced (non-contiguous) inputs,
inputs wider than their keys' lengths (upstream's CPU kernel reads the actual width), later inputs
with more rows than the first (upstream reads the first rows).  ``permutes`` and friends come
from upstream's ``kt_regroup_arguments`` on the CPU.  One example in ten is invalid in a way
upstream rejects (float64 values, int64 permutes, a key not in ``keys``, fewer rows than the
first input): ours must raise too.  Permutes that copy out of bounds or leave gaps make upstream
read or write out of bounds (it can crash), so ``tests/test_pooled.py`` covers those.

Oracle: upstream on the CPU, except for gradients when a key is omitted from every group: there
upstream's backward leaves those input columns uninitialised, so a float64 reference
(``multi_reference``: plain slicing of the rows) gives the values and zero gradients.
Tolerances: regrouping copies values, and ours sums a repeated key's gradients in row order in the
values' dtype, as upstream does: against upstream everything is exact.  Against the reference
(gradients only differ): the harness gives ours the random float64 ``grad_output`` rounded to the
values' dtype, the reference the exact one, and ours rounds each of the <= 2 additions of a key
used <= 3 times (the strategy caps repeats at 3): ``|err| <= 3 u sum|g|`` with ``u`` the unit
roundoff and ``|g| <= 5`` (standard normal draws): 15 u, hence ``atol`` 0.03 for bfloat16
(``u = 2**-9``), 8e-3 for float16 (``2**-11``), 1e-6 for float32; ``rtol`` 0.  Forward values are
copies and compare exactly under any of these bounds (small-integer fills).

Budgets (OPS.md: 6 launches, 0 syncs): ``kt_regroup_arguments`` 3 (one upload per tensor),
``regroup_keyed_tensor`` 4 (upload the plan, cat, gather, split), the torchrec sequence 7 (3 + 4:
two ops).  ``permute_multi_embedding`` with ``permutes`` it has not seen (a fresh tensor from the
host, as here) derives its plan on the device: 9 launches + 8 for the data check + 3 for the
gather = 20 (12 with ``FBGEMM_NPU_VALIDATE=0``); the same ``permutes`` again, or one from our
``kt_regroup_arguments``, costs 3 (4 on its first use).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import Budget, Compare, OpSpec, Tol
from conformance.strategies import with_layout
from fbgemm_npu.native._checks import validation_enabled

F = torch.ops.fbgemm
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
EXACT = Compare({d: Tol(rtol=0.0, atol=0.0) for d in (*FLOATS, torch.float64)})
# Specs with a float64 reference for gradients: see the module docstring.
GRAD_SUM = Compare({torch.float32: Tol(0.0, 1e-6), torch.float16: Tol(0.0, 8e-3),
                    torch.bfloat16: Tol(0.0, 3e-2), torch.float64: Tol(0.0, 0.0)})  # fmt: skip
MAX_REPEATS = 3
EMBS = ("emb0", "emb1", "emb2")
PERMUTE_ARGS = ("permutes", "in_shapes", "out_shapes", "out_lengths")


@st.composite
def _keyed(draw: st.DrawFn, extra_rows: bool = False) -> dict:
    """KeyedTensors (as ``emb0..emb2``, the first ``n`` used), keys, lengths and groups.

    ``extra_rows``: later inputs may have a row more than the first (forward only: upstream's
    backward then returns a gradient of the wrong shape).
    """
    n_in = draw(st.integers(1, 3))
    names = iter(f"f{k}" for k in range(12))
    keys = [[next(names) for _ in range(draw(st.integers(0, 4)))] for _ in range(n_in)]
    if not any(keys):
        keys[0] = [next(names)]
    lengths = [[draw(st.sampled_from([0, 1, 2, 3, 5])) for _ in ks] for ks in keys]
    flat = [k for ks in keys for k in ks]
    drawn = [draw(st.lists(st.sampled_from(flat), min_size=0, max_size=4))
             for _ in range(draw(st.integers(1, 3)))]  # fmt: skip
    seen: dict[str, int] = {}
    groups = []
    for group in drawn:  # a key may repeat, within and across groups, MAX_REPEATS times
        groups.append([k for k in group if seen.setdefault(k, 0) < MAX_REPEATS and
                       not seen.update({k: seen[k] + 1})])  # fmt: skip
    if draw(st.booleans()):  # half the time every key is used: upstream's gradients are valid
        used = {k for g in groups for k in g}
        for k in flat:
            if k not in used:
                groups[draw(st.integers(0, len(groups) - 1))].append(k)
    batch = draw(st.integers(0, 4))
    dtype = draw(st.sampled_from(FLOATS))
    embs = {}
    for k, name in enumerate(EMBS):
        width = sum(lengths[k]) + draw(st.sampled_from([0, 0, 0, 0, 0, 2])) if k < n_in else 0
        rows = batch + (draw(st.sampled_from([0, 0, 0, 1])) if k and extra_rows else 0)
        layout = draw(st.sampled_from(["contiguous", "contiguous", "transposed", "sliced"]))
        embs[name] = with_layout((rows, width), dtype, "small_ints", k + 7 * batch, layout)
    return {**embs, "n": n_in, "keys": keys, "lengths": lengths, "groups": groups}


def _with_permutes(inputs: dict) -> dict:
    """Replace keys/lengths/groups by upstream's kt_regroup_arguments (on CPU)."""
    args = F.kt_regroup_arguments(torch.zeros(1), inputs["keys"], inputs["lengths"],
                                  inputs["groups"])  # fmt: skip
    out = {k: inputs[k] for k in (*EMBS, "n")}
    return {**out, **dict(zip(PERMUTE_ARGS, args, strict=True))}


@st.composite
def _bad(draw: st.DrawFn, with_permutes: bool) -> dict:
    """Inputs upstream rejects with an error (before it reads anything out of bounds)."""
    kinds = ["float64", "int64", "rows"] if with_permutes else ["float64", "key", "rows"]
    kind = draw(st.sampled_from(kinds))
    inputs = draw(_keyed())
    if kind == "rows":  # the second input has fewer rows than the first
        inputs.update(emb0=torch.zeros(2, 9), emb1=torch.zeros(1, 3), n=2, keys=[["a"], ["b"]],
                      lengths=[[9], [3]], groups=[["b", "a"]])  # fmt: skip
    elif kind == "float64":
        inputs["emb0"] = inputs["emb0"].double() if isinstance(inputs["emb0"], torch.Tensor) \
            else torch.zeros(2, 9, dtype=torch.float64)  # fmt: skip
    elif kind == "key":
        inputs["groups"] = [*inputs["groups"], ["no_such_key"]]
    if not with_permutes:
        return inputs
    out = _with_permutes(inputs)
    if kind == "int64":
        out["permutes"] = out["permutes"].long()
    return out


def _mostly(valid: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    """``valid`` nine times in ten, else ``bad``; shrinks towards valid inputs."""
    return st.integers(0, 9).flatmap(lambda k: bad if k == 9 else valid)


def _embs(kw: dict) -> list[torch.Tensor]:
    return [kw[name] for name in EMBS[: kw["n"]]]


def _omits(**kw: Any) -> bool:
    """Some input column is read by no output: upstream's gradient there is garbage."""
    starts = [0]
    for e in _embs(kw):
        starts.append(starts[-1] + e.shape[1])
    used = torch.zeros(starts[-1], dtype=torch.bool)
    for row in kw["permutes"].tolist():
        used[starts[row[0]] + row[2] : starts[row[0]] + row[2] + row[4]] = True
    return not bool(used.all())


def multi_reference(reverse: bool = False, **kw: Any) -> list[torch.Tensor]:
    """float64: ``out[o][:, oo:oo+len] = in[i][:, io:io+len]`` for each row of ``permutes``."""
    embs = _embs(kw)
    batch = embs[0].shape[0]
    flat = [e[:batch].to(torch.float64) for e in embs]  # the spec's inputs are 2-D
    rows = kw["permutes"].tolist()
    if reverse:  # the adjoint: every row adds its output block back into its input block
        outs = [torch.zeros(batch, w, dtype=torch.float64) for w in kw["in_lengths"]]
        for it, ot, io, oo, ln, _ in rows:
            block = outs[it][:, io : io + ln] + flat[ot][:, oo : oo + ln]
            outs[it] = torch.cat([outs[it][:, :io], block, outs[it][:, io + ln :]], 1)
        return outs
    cols: list[list[torch.Tensor]] = [[] for _ in kw["out_lengths"]]
    for it, ot, io, _, ln, _ in rows:
        cols[ot].append(flat[it][:, io : io + ln])
    # + 0 read from every input: inputs no row reads get a zero gradient (ours), not None
    link = sum(f[:, :0].sum() for f in flat)
    return [(torch.cat(c, 1) if c else flat[0][:, :0]) + link for c in cols]


def _pme(**kw: Any) -> list[torch.Tensor]:
    return F.permute_multi_embedding(_embs(kw), *(kw[a] for a in PERMUTE_ARGS))


def _pme_budget(**kw: Any) -> Budget:
    gather = (kw["n"] > 1) + 1 + (len(kw["out_lengths"]) > 1)
    return Budget(launches=9 + (8 if validation_enabled() else 0) + gather, syncs=0)


def _pmef(reverse: bool, **kw: Any) -> list[torch.Tensor]:
    args = [kw[a] for a in PERMUTE_ARGS]
    if reverse:  # the inputs are the outputs' gradients; out_lengths the inputs' widths
        args = [args[0], args[2], args[1], kw["in_lengths"]]
    return F.permute_multi_embedding_function(_embs(kw), *args, reverse)


@st.composite
def _reverse_inputs(draw: st.DrawFn) -> dict:
    """Gradients of the forward outputs as inputs; ``in_lengths`` the forward inputs' widths."""
    fwd = _with_permutes(draw(_keyed()))
    batch = draw(st.integers(0, 3))
    widths = fwd["out_lengths"]  # 1..3 outputs
    grads = {name: with_layout((batch, widths[k] if k < len(widths) else 0), torch.float32,
                               "small_ints", k + 5 * batch, "contiguous")
             for k, name in enumerate(EMBS)}  # fmt: skip
    return {**grads, "n": len(widths), **{a: fwd[a] for a in PERMUTE_ARGS},
            "in_lengths": fwd["in_shapes"].tolist(), "reverse": True}  # fmt: skip


def _kt_flow(**kw: Any) -> list[torch.Tensor]:
    embs = _embs(kw)
    args = F.kt_regroup_arguments(embs[0], kw["keys"], kw["lengths"], kw["groups"])
    return F.permute_multi_embedding(embs, *args)


def _rkt(**kw: Any) -> list[torch.Tensor]:
    return F.regroup_keyed_tensor(_embs(kw), kw["keys"], kw["lengths"], kw["groups"])


def _kt_omits(**kw: Any) -> bool:
    return _omits(**_with_permutes(kw))


def _regroup_budget(launches: int) -> Any:
    def budget(**kw: Any) -> Budget:
        fewer = (kw["n"] == 1) + (len(kw["groups"]) == 1)
        return Budget(launches=launches - fewer, syncs=0)

    return budget


def _examples(with_permutes: bool) -> tuple[dict, ...]:
    """torchrec's shape: 26 features of dim 128 in two KeyedTensors, batch 64, three groups."""
    keys = [[f"f{k}" for k in range(13)], [f"f{k}" for k in range(13, 26)]]
    lengths = [[128] * 13, [128] * 13]
    groups = [[f"f{k}" for k in range(0, 26, 2)], [f"f{k}" for k in range(1, 26, 2)], ["f3", "f20"]]
    gen = torch.Generator().manual_seed(0)
    embs = {"emb0": torch.randn(64, 13 * 128, generator=gen),
            "emb1": torch.randn(64, 13 * 128, generator=gen),
            "emb2": torch.zeros(64, 0)}  # fmt: skip
    inputs = {**embs, "n": 2, "keys": keys, "lengths": lengths, "groups": groups}
    empty = {**{n: torch.zeros(0, 3) for n in EMBS}, "n": 1, "keys": [["a", "b"]],
             "lengths": [[1, 2]], "groups": [["b"], []]}  # fmt: skip
    out = [inputs, empty]
    return tuple(_with_permutes(x) for x in out) if with_permutes else tuple(out)


def _multi_spec() -> OpSpec:
    valid = st.builds(_with_permutes, _keyed())
    return OpSpec(name="permute_multi_embedding", op=_pme,
                  inputs=_mostly(valid, _bad(with_permutes=True)), compare=GRAD_SUM,
                  budget=_pme_budget, reference=multi_reference, use_reference=_omits,
                  backward=True, grad_inputs=EMBS, examples=_examples(True))  # fmt: skip


def _function_spec() -> OpSpec:
    fwd = st.builds(lambda x: {**_with_permutes(x), "reverse": False}, _keyed(extra_rows=True))
    return OpSpec(
        name="permute_multi_embedding_function",
        op=lambda reverse, **kw: _pmef(reverse, **kw),
        inputs=st.one_of(fwd, _reverse_inputs()),
        compare=EXACT,
        budget=lambda reverse, **kw: Budget(9 + 8 * validation_enabled() + 3 + reverse, 0),
        reference=lambda reverse, **kw: multi_reference(reverse, **kw),
        use_reference=lambda reverse, **kw: reverse or _omits(**kw),
        notes="reverse: against the reference (upstream leaves unread columns uninitialised)",
    )


def _keyed_spec(name: str, op: Any, launches: int) -> OpSpec:
    return OpSpec(name=name, op=op, inputs=_mostly(_keyed(), _bad(with_permutes=False)),
                  compare=GRAD_SUM, budget=_regroup_budget(launches),
                  reference=lambda **kw: multi_reference(**_with_permutes(kw)),
                  use_reference=_kt_omits, backward=True, grad_inputs=EMBS,
                  examples=_examples(False))  # fmt: skip


def _kt_spec() -> OpSpec:
    def op(**kw: Any) -> Any:
        return F.kt_regroup_arguments(kw["emb0"], kw["keys"], kw["lengths"], kw["groups"])

    return OpSpec(name="kt_regroup_arguments", op=op,
                  inputs=_mostly(_keyed(extra_rows=True), _bad(with_permutes=False)),
                  compare=EXACT,
                  budget=Budget(3, 0), examples=_examples(False))  # fmt: skip


SPECS = [
    _multi_spec(),
    _function_spec(),
    _keyed_spec("permute_multi_embedding[kt_regroup_arguments]", _kt_flow, 7),
    _keyed_spec("regroup_keyed_tensor", _rkt, 4),
    _kt_spec(),
]
