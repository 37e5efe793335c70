"""The TBE training cases: a representative matrix for CI and a full one for the CLI.

    python -m conformance.specs.fbgemm.tbe.matrix [--full] [--match TEXT] [--report FILE.md]

``CI_CASES`` covers every optimizer fbgemm_gpu 1.8.0's Python builds a pt2 lookup for
(EXACT_SGD, EXACT_ADAGRAD, EXACT_ROWWISE_ADAGRAD with every WeightDecayMode -- NONE, L2, DECOUPLE,
COUNTER, COWCLIP (the ``rowwise_adagrad_with_counter`` lookup), DECOUPLE_GLOBAL --,
EMAINPLACE_ROWWISE_ADAGRAD, ADAM, PARTIAL_ROWWISE_ADAM, LAMB, PARTIAL_ROWWISE_LAMB, LARS_SGD,
NONE), each hyper-parameter that changes the math (eps, weight decay, betas, max_norm, eta,
momentum), pooling SUM / MEAN / NONE, weighted and unweighted, mixed dims and shared tables,
fp32 / fp16 / bf16 weights and outputs, int32 and int64 indices, VBE, every BoundsCheckMode,
``set_learning_rate`` and a ``state_dict`` round trip, in both construction styles; each case is
tiny (T <= 3, E <= 50, D in {4, 8, 16}, B <= 4).  ``rowwise_rmsprop_ar`` has a pt2 op but no
``EmbOptimType``: upstream's Python cannot build it, so no case does.  :func:`full_cases` is the
cartesian product of the main axes, minus what upstream's constructor or forward refuses.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
from pathlib import Path

import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_embedding_configs import SparseType as S
from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode as BC
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode as P
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    CounterBasedRegularizationDefinition,
    CounterWeightDecayMode,
    CowClipDefinition,
    LearningRateMode,
)
from fbgemm_gpu.split_table_batched_embeddings_ops_training import WeightDecayMode as W

from conformance.specs.fbgemm.tbe.cases import TbeCase, TbeResult
from conformance.specs.fbgemm.tbe.training import run_case

__all__ = ["CI_CASES", "full_cases", "main"]

C = TbeCase
_WD = 0.1
_COUNTER = (
    ("weight_decay", _WD),
    ("weight_decay_mode", W.COUNTER),
    (
        "counter_based_regularization",
        CounterBasedRegularizationDefinition(
            counter_weight_decay_mode=CounterWeightDecayMode.DECOUPLE,
            counter_halflife=2,
            learning_rate_mode=LearningRateMode.TAIL_ID_LR_INCREASE,
            adjustment_ub=0.5,
            max_counter_update_freq=1,
        ),
    ),
)
_ADAGRADW = (
    ("weight_decay", _WD),
    ("weight_decay_mode", W.COUNTER),
    (
        "counter_based_regularization",
        CounterBasedRegularizationDefinition(
            counter_weight_decay_mode=CounterWeightDecayMode.ADAGRADW, counter_halflife=-1
        ),
    ),
)
_COWCLIP = (
    ("weight_decay", _WD),
    ("weight_decay_mode", W.COWCLIP),
    (
        "cowclip_regularization",
        CowClipDefinition(
            counter_weight_decay_mode=CounterWeightDecayMode.L2,
            counter_halflife=2,
            weight_norm_coefficient=0.5,
            lower_bound=0.01,
        ),
    ),
)
_ADAM_HP = (("weight_decay", 0.01), ("beta1", 0.8), ("beta2", 0.95), ("eps", 1e-3))
_MIXED = {"rows": (20, 30, 50), "dims": (4, 8, 16), "feature_table_map": (0, 1, 2, 1)}

# A table (fmt: skip): one case per line, or two where they are the same case in both styles.
CI_CASES: list[TbeCase] = [
    # every optimizer, both construction styles where upstream's Python allows them
    C(O.EXACT_SGD, "cpu"), C(O.EXACT_SGD, "cuda"),
    C(O.EXACT_ADAGRAD, "cpu"), C(O.EXACT_ADAGRAD, "cuda", opt=(("eps", 1e-2),)),
    C(O.EXACT_ROWWISE_ADAGRAD, "cpu"), C(O.EXACT_ROWWISE_ADAGRAD, "cuda"),
    C(O.EXACT_ROWWISE_ADAGRAD, "cpu", opt=(("weight_decay", _WD), ("weight_decay_mode", W.L2))),
    C(O.EXACT_ROWWISE_ADAGRAD, "cuda",
      opt=(("weight_decay", _WD), ("weight_decay_mode", W.DECOUPLE), ("eps", 1e-2))),
    C(O.EXACT_ROWWISE_ADAGRAD, "cpu", opt=_COUNTER),
    C(O.EXACT_ROWWISE_ADAGRAD, "cuda", opt=_ADAGRADW),
    C(O.EXACT_ROWWISE_ADAGRAD, "cpu", opt=_COWCLIP),
    C(O.EXACT_ROWWISE_ADAGRAD, "cuda", gwd_start_iter=0, opt=(("weight_decay", _WD),)),
    # start past step 1: a row touched before the start keeps prev_iter 0 (no decay owed)
    C(O.EXACT_ROWWISE_ADAGRAD, "cuda", gwd_start_iter=2, opt=(("weight_decay", _WD),)),
    C(O.EXACT_ROWWISE_ADAGRAD, "cuda", opt=(("max_norm", 0.3),)),
    C(O.EMAINPLACE_ROWWISE_ADAGRAD, "cpu"),
    C(O.ADAM, "cuda"), C(O.ADAM, "cuda", opt=_ADAM_HP),
    C(O.PARTIAL_ROWWISE_ADAM, "cuda", opt=_ADAM_HP),
    C(O.LAMB, "cuda", opt=_ADAM_HP), C(O.PARTIAL_ROWWISE_LAMB, "cuda", opt=_ADAM_HP),
    C(O.LARS_SGD, "cuda", opt=(("weight_decay", 0.01), ("eta", 0.01), ("momentum", 0.5))),
    C(O.NONE, "cuda"), C(O.NONE, "cuda", pooling=P.MEAN, weighted=True),
    # pooling, per-sample weights, mixed dims and shared tables
    C(O.EXACT_SGD, "cpu", pooling=P.MEAN),
    C(O.EXACT_ROWWISE_ADAGRAD, "cuda", pooling=P.NONE),
    C(O.EXACT_ADAGRAD, "cpu", pooling=P.NONE, dims=(4, 4)),
    C(O.EXACT_SGD, "cuda", weighted=True),
    C(O.EXACT_ROWWISE_ADAGRAD, "cpu", pooling=P.MEAN, weighted=True),
    C(O.EXACT_ROWWISE_ADAGRAD, "cpu", **_MIXED),
    C(O.ADAM, "cuda", weighted=True, **_MIXED),
    # dtypes
    C(O.EXACT_ADAGRAD, "cpu", weights_precision=S.FP16),
    C(O.EXACT_ROWWISE_ADAGRAD, "cuda", weights_precision=S.FP16, output_dtype=S.FP16),
    C(O.EXACT_SGD, "cpu", output_dtype=S.FP16),
    C(O.EXACT_SGD, "cuda", output_dtype=S.BF16),
    C(O.EXACT_ROWWISE_ADAGRAD, "cpu", weights_precision=S.BF16, output_dtype=S.BF16),
    C(O.ADAM, "cuda", weights_precision=S.FP16, output_dtype=S.BF16),
    C(O.EXACT_ROWWISE_ADAGRAD, "cuda", weights_precision=S.FP16, output_dtype=S.BF16, **_MIXED),
    C(O.EXACT_SGD, "cpu", index_dtype=torch.int32),
    C(O.EXACT_ROWWISE_ADAGRAD, "cuda", index_dtype=torch.int32, weighted=True),
    # variable batch size per feature (VBE), as torchrec passes it
    C(O.EXACT_ROWWISE_ADAGRAD, "cpu", vbe=True),
    C(O.EXACT_SGD, "cuda", vbe=True, pooling=P.MEAN, **_MIXED),
    C(O.ADAM, "cuda", vbe=True, opt=_ADAM_HP),
    C(O.EXACT_ROWWISE_ADAGRAD, "cpu", vbe=True, index_dtype=torch.int32),
    # bounds checks (FATAL with bad indices is a test of its own: both sides raise)
    C(O.EXACT_SGD, "cpu", bad_indices=True, bounds_check=BC.WARNING),
    C(O.EXACT_ROWWISE_ADAGRAD, "cuda", bad_indices=True, bounds_check=BC.IGNORE),
    C(O.EXACT_SGD, "cpu", bad_indices=True, bounds_check=BC.WARNING, vbe=True),
    C(O.EXACT_SGD, "cuda", bounds_check=BC.NONE),
    C(O.EXACT_SGD, "cpu", bounds_check=BC.FATAL),
    C(O.EXACT_SGD, "cuda", bounds_check=BC.V2_IGNORE, bad_indices=True),
    C(O.EXACT_ROWWISE_ADAGRAD, "cpu", bounds_check=BC.V2_WARNING, bad_indices=True, vbe=True),
    C(O.EXACT_SGD, "cuda", bounds_check=BC.V2_FATAL),
    # learning rate and checkpoints
    C(O.EXACT_ROWWISE_ADAGRAD, "cpu", set_lr=0.5, state_dict_roundtrip=True),
    C(O.ADAM, "cuda", set_lr=0.05, state_dict_roundtrip=True, opt=_ADAM_HP),
    C(O.LAMB, "cuda", state_dict_roundtrip=True),
]  # fmt: skip

_CPU_STYLE = (O.EXACT_SGD, O.EXACT_ADAGRAD, O.EXACT_ROWWISE_ADAGRAD)
_VBE_OK = (O.EXACT_SGD, O.EXACT_ROWWISE_ADAGRAD, O.ADAM, O.NONE)


def full_cases(seeds: int = 2) -> list[TbeCase]:
    """Optimizer x style x pooling x weighted x weights dtype x output dtype x index dtype x
    VBE x mixed dims x seed, minus the combinations upstream refuses."""
    opts = [
        O.EXACT_SGD,
        O.EXACT_ADAGRAD,
        O.EXACT_ROWWISE_ADAGRAD,
        O.ADAM,
        O.PARTIAL_ROWWISE_ADAM,
        O.LAMB,
        O.PARTIAL_ROWWISE_LAMB,
        O.LARS_SGD,
        O.NONE,
    ]
    out = []
    axes = itertools.product(
        opts,
        ("cpu", "cuda"),
        (P.SUM, P.MEAN, P.NONE),
        (False, True),
        (S.FP32, S.FP16, S.BF16),
        (S.FP32, S.FP16, S.BF16),
        (torch.int64, torch.int32),
        (False, True),
        (False, True),
        range(seeds),
    )
    for o, style, pool, weighted, wp, od, it, vbe, mixed, seed in axes:
        if style == "cpu" and o not in _CPU_STYLE:
            continue  # upstream: "Optimizer ... is not supported in CPU mode"
        if style == "cuda" and wp == S.BF16:
            continue  # upstream: "cache_precision bf16 not supported!" (CUDA style)
        if o == O.NONE and (style == "cpu" or mixed or vbe):
            continue  # NONE: DEVICE only, one D
        if pool == P.NONE and (mixed or vbe or weighted):
            continue  # sequence TBEs: one D, no VBE; weighted sequences are not a thing upstream
        if vbe and o not in _VBE_OK:
            continue
        extra = dict(_MIXED) if mixed else {}
        out.append(
            C(
                o,
                style,
                pooling=pool,
                weighted=weighted,
                weights_precision=wp,
                output_dtype=od,
                index_dtype=it,
                vbe=vbe,
                seed=seed,
                **extra,
            )
        )
    return out


def _row(r: TbeResult) -> str:
    status = "PASS" if r.ok else f"FAIL: {r.message.splitlines()[0] if r.message else ''}"
    return (
        f"| {r.case.label()} | {r.oracle} | {r.max_abs:.3g} | {r.max_rel:.3g} | "
        f"{status.replace('|', '/')} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.specs.fbgemm.tbe.matrix", description=__doc__
    )
    parser.add_argument("--full", action="store_true", help="the full matrix (slow)")
    parser.add_argument("--match", default="", help="only cases whose label contains this")
    parser.add_argument("--report", type=Path, help="write the table as Markdown here")
    args = parser.parse_args(argv)

    import fbgemm_npu.testing

    kind = fbgemm_npu.testing.simulate()
    cases = full_cases() if args.full else CI_CASES
    cases = [c for c in cases if args.match in c.label()]
    lines = ["| case | oracle | max abs err | max rel err | status |", "|---|---|---|---|---|"]
    failed = 0
    for i, case in enumerate(cases, 1):
        r = run_case(case)
        failed += not r.ok
        lines.append(_row(r))
        print(f"[{i}/{len(cases)}] {lines[-1]}", file=sys.stderr, flush=True)
    text = (
        f"# TBE training conformance\n\nfbgemm_npu on the {kind} npu device against upstream "
        f"fbgemm-gpu on CPU or the float64 reference; {len(cases)} cases, {failed} failed.\n\n"
        + "\n".join(lines)
        + "\n"
    )
    print(text)
    if args.report:
        args.report.write_text(text, encoding="utf-8")
    return 1 if failed else 0


def replace(case: TbeCase, **changes: object) -> TbeCase:
    """``dataclasses.replace`` for cases (tests derive variants from the matrix)."""
    return dataclasses.replace(case, **changes)


if __name__ == "__main__":
    sys.exit(main())
