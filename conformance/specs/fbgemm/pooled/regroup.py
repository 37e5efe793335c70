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
read or write out of bounds (it can crash), so
``tests/fbgemm/pooled/test_pooled_errors.py`` covers those.

Oracle: upstream on the CPU, except for gradients when a key is omitted from every group: there
upstream's backward leaves those input columns uninitialised, so a float64 reference
(``multi_reference``: plain slicing of the rows) gives the values and zero gradients.
Tolerances: regrouping copies values (forward: exact under any bound below, small-integer
fills).  A repeated key's gradients are summed in the values' dtype, <= 2 additions for a key used
<= 3 times (the strategy caps repeats at 3), ``|g| <= 5`` (standard normal draws).  Against the
float64 reference (the harness gives ours ``grad_output`` rounded to the values' dtype, the
reference the exact one): the rounding of each ``g`` (``3 u 5``) and of each addition (``2 u
15``), ``45 u`` with ``u`` the unit roundoff.  Against upstream, which sums in its own order (ours
by ``index_add`` in row order): each side within ``45 u`` of the exact sum, so ``90 u``: ``atol``
0.18 for bfloat16 (``u = 2**-9``; one ulp at 4.5 is 0.031), 0.044 for float16 (``2**-11``),
5.4e-6 for float32; ``rtol`` 0.

Budgets: the op's ``BUDGETS`` entry (``fbgemm_npu/native/fbgemm/pooled/budgets.py``), on the
path of the call's shape (one input: no ``cat``; one output: no ``split``).  The permutes here
are fresh tensors from the host, so ``permute_multi_embedding`` derives and checks its plan on the
device every call; the torchrec sequence takes the ``"after kt_regroup_arguments"`` paths (both
ops' launches).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.strategies import with_layout

F = torch.ops.fbgemm
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
EXACT = Compare({d: Tol(rtol=0.0, atol=0.0) for d in (*FLOATS, torch.float64)})
# Specs with a float64 reference for gradients: see the module docstring.
GRAD_SUM = Compare(
    {
        torch.float32: Tol(0.0, 5.4e-6),
        torch.float16: Tol(0.0, 4.4e-2),
        torch.bfloat16: Tol(0.0, 1.8e-1),
        torch.float64: Tol(0.0, 0.0),
    }
)
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
    drawn = [
        draw(st.lists(st.sampled_from(flat), min_size=0, max_size=4))
        for _ in range(draw(st.integers(1, 3)))
    ]
    seen: dict[str, int] = {}
    groups = []
    for group in drawn:  # a key may repeat, within and across groups, MAX_REPEATS times
        groups.append(
            [
                k
                for k in group
                if seen.setdefault(k, 0) < MAX_REPEATS and not seen.update({k: seen[k] + 1})
            ]
        )
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
    args = F.kt_regroup_arguments(
        torch.zeros(1), inputs["keys"], inputs["lengths"], inputs["groups"]
    )
    out = {k: inputs[k] for k in (*EMBS, "n")}
    return {**out, **dict(zip(PERMUTE_ARGS, args, strict=True))}


@st.composite
def _bad(draw: st.DrawFn, with_permutes: bool) -> dict:
    """Inputs upstream rejects with an error (before it reads anything out of bounds)."""
    kinds = ["float64", "int64", "rows"] if with_permutes else ["float64", "key", "rows"]
    kind = draw(st.sampled_from(kinds))
    inputs = draw(_keyed())
    if kind == "rows":  # the second input has fewer rows than the first
        inputs.update(
            emb0=torch.zeros(2, 9),
            emb1=torch.zeros(1, 3),
            n=2,
            keys=[["a"], ["b"]],
            lengths=[[9], [3]],
            groups=[["b", "a"]],
        )
    elif kind == "float64":
        inputs["emb0"] = (
            inputs["emb0"].double()
            if isinstance(inputs["emb0"], torch.Tensor)
            else torch.zeros(2, 9, dtype=torch.float64)
        )
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


def _shape_path(n_inputs: int, n_outputs: int, first: str = "") -> str | None:
    """The budget path of a regroup of ``n_inputs`` into ``n_outputs``: one input needs no
    ``cat``, one output no ``split``."""
    parts = [first] if first else []
    parts += ["one input"] if n_inputs == 1 else []
    parts += ["one output"] if n_outputs == 1 else []
    return " + ".join(parts) or None


def _pme_budget(**kw: Any) -> BudgetUse:
    return BudgetUse(path=_shape_path(kw["n"], len(kw["out_lengths"])))


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
    grads = {
        name: with_layout(
            (batch, widths[k] if k < len(widths) else 0),
            torch.float32,
            "small_ints",
            k + 5 * batch,
            "contiguous",
        )
        for k, name in enumerate(EMBS)
    }
    return {
        **grads,
        "n": len(widths),
        **{a: fwd[a] for a in PERMUTE_ARGS},
        "in_lengths": fwd["in_shapes"].tolist(),
        "reverse": True,
    }


def _kt_flow(**kw: Any) -> list[torch.Tensor]:
    embs = _embs(kw)
    args = F.kt_regroup_arguments(embs[0], kw["keys"], kw["lengths"], kw["groups"])
    return F.permute_multi_embedding(embs, *args)


def _rkt(**kw: Any) -> list[torch.Tensor]:
    return F.regroup_keyed_tensor(_embs(kw), kw["keys"], kw["lengths"], kw["groups"])


def _kt_omits(**kw: Any) -> bool:
    return _omits(**_with_permutes(kw))


def _regroup_budget(op: str, first: str = "") -> Any:
    """``op``'s path for the inputs and groups of a call (``first``: the path's leading part)."""

    def budget(**kw: Any) -> BudgetUse:
        return BudgetUse(op=op, path=_shape_path(kw["n"], len(kw["groups"]), first))

    return budget


def _examples(with_permutes: bool) -> tuple[dict, ...]:
    """torchrec's shape: 26 features of dim 128 in two KeyedTensors, batch 64, three groups."""
    keys = [[f"f{k}" for k in range(13)], [f"f{k}" for k in range(13, 26)]]
    lengths = [[128] * 13, [128] * 13]
    groups = [[f"f{k}" for k in range(0, 26, 2)], [f"f{k}" for k in range(1, 26, 2)], ["f3", "f20"]]
    gen = torch.Generator().manual_seed(0)
    embs = {
        "emb0": torch.randn(64, 13 * 128, generator=gen),
        "emb1": torch.randn(64, 13 * 128, generator=gen),
        "emb2": torch.zeros(64, 0),
    }
    inputs = {**embs, "n": 2, "keys": keys, "lengths": lengths, "groups": groups}
    empty = {
        **{n: torch.zeros(0, 3) for n in EMBS},
        "n": 1,
        "keys": [["a", "b"]],
        "lengths": [[1, 2]],
        "groups": [["b"], []],
    }
    out = [inputs, empty]
    return tuple(_with_permutes(x) for x in out) if with_permutes else tuple(out)


def _multi_spec() -> OpSpec:
    valid = st.builds(_with_permutes, _keyed())
    return OpSpec(
        name="permute_multi_embedding",
        op=_pme,
        inputs=_mostly(valid, _bad(with_permutes=True)),
        compare=GRAD_SUM,
        budget=_pme_budget,
        reference=multi_reference,
        use_reference=_omits,
        backward=True,
        grad_inputs=EMBS,
        examples=_examples(True),
    )


def _function_spec() -> OpSpec:
    fwd = st.builds(lambda x: {**_with_permutes(x), "reverse": False}, _keyed(extra_rows=True))
    return OpSpec(
        name="permute_multi_embedding_function",
        op=lambda reverse, **kw: _pmef(reverse, **kw),
        inputs=st.one_of(fwd, _reverse_inputs()),
        compare=EXACT,
        budget=lambda reverse, **kw: BudgetUse(path="reverse" if reverse else None),
        reference=lambda reverse, **kw: multi_reference(reverse, **kw),
        use_reference=lambda reverse, **kw: reverse or _omits(**kw),
        notes="reverse: against the reference (upstream leaves unread columns uninitialised)",
    )


def _keyed_spec(name: str, op: Any, budget: Any) -> OpSpec:
    return OpSpec(
        name=name,
        op=op,
        inputs=_mostly(_keyed(), _bad(with_permutes=False)),
        compare=GRAD_SUM,
        budget=budget,
        reference=lambda **kw: multi_reference(**_with_permutes(kw)),
        use_reference=_kt_omits,
        backward=True,
        grad_inputs=EMBS,
        examples=_examples(False),
    )


def _kt_spec() -> OpSpec:
    def op(**kw: Any) -> Any:
        return F.kt_regroup_arguments(kw["emb0"], kw["keys"], kw["lengths"], kw["groups"])

    return OpSpec(
        name="kt_regroup_arguments",
        op=op,
        inputs=_mostly(_keyed(extra_rows=True), _bad(with_permutes=False)),
        compare=EXACT,
        examples=_examples(False),
    )


SPECS = [
    _multi_spec(),
    _function_spec(),
    _keyed_spec(
        "permute_multi_embedding[kt_regroup_arguments]",
        _kt_flow,
        _regroup_budget("fbgemm::permute_multi_embedding", "after kt_regroup_arguments"),
    ),
    _keyed_spec("regroup_keyed_tensor", _rkt, _regroup_budget("fbgemm::regroup_keyed_tensor")),
    _kt_spec(),
]
