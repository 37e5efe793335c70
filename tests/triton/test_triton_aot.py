"""Every fused Triton kernel (the glob ``fbgemm_npu/native/**/_triton_*.py``, found at test time)
compiles with Triton's real compiler for sm_90 without a GPU, and stays inside the subset
triton-ascend supports (fbgemm_npu/testing/triton_aot.py: the rules, with their sources).

Two subprocesses: one records each op's real launches under the interpreter (probes of
fbgemm_npu/testing/triton_aot_probes.py), one compiles each recorded specialisation
(TRITON_INTERPRET unset; compiles cached in a temp dir) and dumps its TTIR, which the rules read.
A canary kernel that breaks every rule proves the checker sees what it claims to.  A rule a
module breaks is listed in ``KNOWN`` as a strict xfail with its reason (the kernels are owned by
their families: fixed there, then removed here).  ~35 s from the cache; cold 35-140 s (by
the machine's load: 80 specialisations in 2 worker processes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")

from fbgemm_npu.testing import triton_aot as aot  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODULES = [str(p.relative_to(ROOT)) for p in aot.kernel_files(ROOT)]
RULES = ("atomic64", "inline_asm", "debug", "sort", "make_range", "unsigned", "dot", "f64",
         "trans64", "scan", "ub", "grid", "coredim")  # fmt: skip
# (module, rule) -> why it is broken today; strict: a fix shows XPASS(strict) = FAILED.
KNOWN: dict[tuple[str, str], str] = {}

CANARY = """
import triton
import triton.language as tl


@triton.jit
def canary(x, out, f, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < n
    v = tl.load(x + i, mask=m, other=0)
    u = (v.to(tl.uint32) // 3).to(tl.int32)
    tl.atomic_add(out + i, u.to(tl.int64), mask=m)
    tl.store(f + i, v.to(tl.float64) * 2.5, mask=m)
    tl.device_print("v", v)
    a = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [v], dtype=tl.int32, is_pure=True,
                                  pack=1)
    w = tl.reshape(tl.trans(tl.reshape(v.to(tl.int64), (8, BLOCK // 8))), (BLOCK,))
    h = tl.histogram(v & 7, 8)
    tl.store(out + i, w + a, mask=m)
    tl.store(out + tl.arange(0, 8), h.to(tl.int64))
    tl.store(x + i, tl.cumsum(v, axis=0, reverse=True), mask=m)
    big = tl.load(f + tl.arange(0, 16384))
    tl.store(f + tl.arange(0, 16384), big + 1.0)
"""
CANARY_LAUNCH = {
    "name": "canary", "kernel": "aot_canary:canary", "grid": [70000, 1],
    "signature": {"x": "*i32", "out": "*i64", "f": "*fp64", "n": "i32", "BLOCK": "constexpr"},
    "constexprs": {"BLOCK": 64},
}  # fmt: skip


def _run(args: list[str], env: dict[str, str], what: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fbgemm_npu.testing.triton_aot", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"{what} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Record (interpreter), then compile (sm_90) in subprocesses; the findings of every rule."""
    try:
        from triton.backends import backends
    except Exception as e:  # pragma: no cover - a broken install
        pytest.skip(f"triton's backends do not load here: {e}")
    if "nvidia" not in backends:
        pytest.skip("triton's nvidia backend (ptxas) is not installed here")
    # FBGEMM_NPU_TRITON_AOT_OUT: keep the launches, TTIR files and compiled.json there
    out = os.environ.get("FBGEMM_NPU_TRITON_AOT_OUT")
    tmp = Path(out) if out else tmp_path_factory.mktemp("triton_aot")
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "aot_canary.py").write_text(CANARY)
    base = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp), base.get("PYTHONPATH", "")])
    _run(["record", str(tmp / "launches.json")],
         {**base, "TRITON_INTERPRET": "1", "FBGEMM_NPU_SIMULATE": "1"}, "record")  # fmt: skip
    recorded = json.loads((tmp / "launches.json").read_text())
    every = [*recorded["launches"], *recorded["native"], *recorded["scale"]]
    with_canary = {"launches": [*every, CANARY_LAUNCH]}
    (tmp / "to_compile.json").write_text(json.dumps(with_canary))
    cache = Path(tempfile.gettempdir()) / "fbgemm_npu_triton_aot_cache"
    env = {**base, "TRITON_CACHE_DIR": str(cache), "TRITON_DEFAULT_FP_FUSION": "1"}
    _run(["compile", str(tmp / "to_compile.json"), str(tmp / "ttir")], env, "compile")
    compiled = json.loads((tmp / "ttir" / "compiled.json").read_text())
    findings: list[aot.Finding] = []
    canary: list[aot.Finding] = []
    for row in compiled["rows"]:
        if row["ok"]:
            got = aot.ttir_findings(Path(row["ttir"]).read_text(), row["kernel"].split(":")[1])
            (canary if row["kernel"] == CANARY_LAUNCH["kernel"] else findings).extend(got)
    for path in aot.kernel_files(ROOT):
        findings += aot.source_findings(path)
    findings += aot.grid_findings(every)
    canary += aot.source_findings(tmp / "aot_canary.py")
    canary += aot.grid_findings([CANARY_LAUNCH])
    return {**recorded, **compiled, "findings": findings, "canary": canary}


def test_probes_run(result: dict[str, Any]) -> None:
    """Every probe ran its op's Triton path (a probe that fails records nothing)."""
    assert not result["failed"], result["failed"]
    assert result["launches"] and result["scale"]


def test_every_kernel_compiles_for_sm90(result: dict[str, Any]) -> None:
    """Each recorded specialisation compiles; every launchable kernel of the glob is compiled at
    least once; every module of the glob holds a compiled kernel or a helper one inlines."""
    rows = [r for r in result["rows"] if r["kernel"] != CANARY_LAUNCH["kernel"]]
    errors = [f"{r['kernel']}: {r['error']}" for r in rows if not r["ok"]]
    assert not errors, "\n".join(errors)
    compiled = {r["kernel"] for r in rows if r["ok"]}
    kernels = set(result["kernels"])
    assert kernels, "the glob found no @triton.jit kernel"
    assert kernels <= compiled, f"never launched by a probe: {sorted(kernels - compiled)}"
    owners = {k.split(":")[0] for k in kernels | set(result["helpers"])}
    jit_modules = {
        aot.module_of(ROOT / m, ROOT) for m in MODULES if "@triton.jit" in (ROOT / m).read_text()
    }
    assert jit_modules <= owners, sorted(jit_modules - owners)


def test_the_canary_breaks_every_rule(result: dict[str, Any]) -> None:
    """The checker sees each rule it claims (on a kernel written to break them), at its line."""
    (row,) = [r for r in result["rows"] if r["kernel"] == CANARY_LAUNCH["kernel"]]
    assert row["ok"], row.get("error")
    rules = {f.rule for f in result["canary"]}
    want = set(RULES) - {"make_range", "dot"}  # Triton itself refuses those (non-i32 / i16 dots)
    assert want <= rules, sorted(want - rules)
    lines = CANARY.splitlines()
    atomic = [f for f in result["canary"] if f.rule == "atomic64" and "atomic_rmw" in f.detail]
    assert atomic and "tl.atomic_add" in lines[atomic[0].line - 1], atomic


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("module", MODULES)
def test_triton_ascend_subset(
    result: dict[str, Any], module: str, rule: str, request: pytest.FixtureRequest
) -> None:
    """No finding of ``rule`` in ``module`` (its kernels' TTIR, its jit sources, its grids)."""
    if (module, rule) in KNOWN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN[module, rule]))
    found = [str(f) for f in result["findings"] if f.file == module and f.rule == rule]
    assert not found, "\n".join(found)
