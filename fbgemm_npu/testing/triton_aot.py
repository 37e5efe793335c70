"""Every fused Triton kernel compiled ahead of time for a real backend, and held to the subset
triton-ascend supports.

Why: the interpreter (``TRITON_INTERPRET=1``, how the rest of the suite runs the kernels) runs
NumPy per program and lets through what a compiler refuses (loop-carried types that change,
scalar / block mix-ups) and what Ascend's backend lacks (64-bit atomics, unsigned arithmetic).
Triton 3.9's nvidia backend and ptxas need no GPU for ``triton.compile(ASTSource(...),
target=GPUTarget("cuda", 90, 32))``, and the TTIR it writes on the way is the IR triton-ascend
lowers (TTIR -> Linalg -> AscendNPU IR), so one compile proves both.

Three steps, each its own process (the interpreter decorates kernels when their module is
imported, so one process cannot both interpret and compile):

1. ``record`` (``TRITON_INTERPRET=1``): the probes of :mod:`.triton_aot_probes` run every op's
   Triton path once on small inputs under ``kernel_mode("triton")``, with
   :func:`fbgemm_npu.native._triton.launch` wrapped: each launch is written down as
   ``(kernel, grid, signature, constexprs, aligned)`` as Triton's JIT specialises it (its own
   ``native_specialize_impl``: pointers by element dtype, ints ``i32`` / ``i64`` by value, an
   int 1 and ``None`` as constexprs, 16-divisible ints / pointers as ``tt.divisibility``
   attributes, ``tl.constexpr`` parameters by value) -- and then runs.  Then two dry passes
   (launches recorded, not run): the probes with ``interpreting()`` false in the kernel modules
   and the data checks off (what a device specialises), and production-size calls (the grids
   the host computes there).
2. ``compile`` (no interpreter): each distinct recorded (kernel, signature, constexprs) is
   compiled for sm_90; its TTIR is written to a file.
3. The checks: :func:`kernel_ids` lists the launchable kernels of the glob :data:`KERNEL_GLOB`
   (the ``@triton.jit`` functions no other jit function calls; the rest are helpers, inlined);
   every one must be compiled; :func:`ttir_findings`, :func:`source_findings` and
   :func:`grid_findings` apply the rules below and name ``file:line`` (TTIR locations).

The rules (triton-ascend 3.2, Atlas A2 / A3; the documents read):

========== ================================================================= =================
rule       what is refused                                                   source
========== ================================================================= =================
atomic64   ``tt.atomic_rmw`` / ``tt.atomic_cas`` on i64 / f64 / i1 ("Ascend  [atomic]
           lacks int64, fp64 compared to GPU (hardware limit)")
inline_asm ``tt.elementwise_inline_asm`` (``tl.inline_asm_elementwise``)     [outline]
debug      ``tt.print`` / ``tt.assert``; ``tl.device_print`` /               [outline]
           ``tl.device_assert`` / ``print`` in a jit function's source
sort       ``tl.sort`` / ``tl.topk`` / ``tl.histogram`` (Scan/Sort support    [readme]
           still being completed), ``tt.histogram``; libdevice externs
           (``tt.extern_elementwise``); ``tt.dot_scaled``; ``tt.gather`` of
           a type other than fp16 / bf16 / fp32 (the table's gather row)
scan       ``tt.scan`` with ``reverse = true`` (cumsum / associative_scan:   [scan]
           reverse needs unmasked aligned loads on Ascend; forward scans of
           int8-int64 / fp16 / fp32 / bf16 / bool are supported)
make_range ``tt.make_range`` of any element type but i32 (arange: int32 only) [outline]
unsigned   unsigned integer arithmetic on 32 / 64-bit values (``arith.*ui``,  [outline]
           ``cmpi u*``, ``uitofp``, ``fptoui``, ``extui`` from i32); ``tl.uint32`` /
           ``tl.uint64`` in the source (the uint32 column is "x" for every op)
dot        ``tt.dot`` operands other than f16 / bf16 / f32 / i8               [outline]
f64        any f64 value (no fp64 column in the op table; fp64 atomics absent) [outline]
trans64    ``tt.trans`` of an i64 tensor (permute / trans: int64 "x")         [outline]
ub         one tensor value over 64 KB (a third of the 192 KB unified buffer  [guide]
           per core: "ub overflow"; at the production sizes' blocks too)
grid       a launch whose grid has a dimension over 65535                    [grid]
coredim    a launch whose grid's product (coreDim) is over 65535 (at the     [coredim] [grid]
           recorded sizes and at production sizes, dry launches)
========== ================================================================= =================

[atomic] https://gitcode.com/Ascend/triton-ascend/blob/main/docs/zh/triton_api/Atomic_Ops/atomic_add.md
[outline] https://gitcode.com/wutianyao/triton-ascend/blob/master/docs/sources/python-api/outline.md
(the "triton op support overview" table of triton-ascend's docs)
[readme] https://gitcode.com/Ascend/triton-ascend/blob/master/README.md (roadmap: Scan/Sort)
[scan] https://triton-ascend-test.readthedocs.io/zh-cn/latest/_sources/triton_api/Scan_Sort_Ops/associative_scan.md.txt
[guide] https://gitcode.com/Ascend/triton-ascend/blob/main/docs/en/programming_guide/index.md
[grid] https://github.com/triton-lang/triton-ascend/issues/16 (grid size >= 65536 unsupported)
[coredim] https://github.com/vllm-project/vllm-ascend/pull/10138 (rtKernelLaunch: the product
of the grid's dimensions, coreDim, <= 65535)

``python -m fbgemm_npu.testing.triton_aot record OUT.json`` / ``compile IN.json DIR`` (the test
tests/triton/test_triton_aot.py runs both, TRITON_CACHE_DIR in a temp dir).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import io
import json
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "KERNEL_GLOB", "Finding", "compile_all", "grid_findings", "kernel_files", "kernel_ids",
    "module_of", "source_findings", "ttir_findings",
]  # fmt: skip

ROOT = Path(__file__).resolve().parents[2]
KERNEL_GLOB = "fbgemm_npu/native/**/_triton_*.py"
GRID_MAX = 65535
UB_TILE = 64 * 1024  # bytes of one tensor value: a third of the 192 KB unified buffer
_BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8}
_TENSOR = re.compile(r"tensor<((?:\d+x)+)(i1|i8|i16|i32|i64|f16|bf16|f32|f64)>")


@dataclass(frozen=True)
class Finding:
    """A rule broken at ``file:line`` (relative to the repository)."""

    file: str
    line: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: [{self.rule}] {self.detail}"


def kernel_files(root: Path = ROOT) -> list[Path]:
    """The Triton kernel modules, found by :data:`KERNEL_GLOB` (never a fixed list)."""
    return sorted(root.glob(KERNEL_GLOB))


def module_of(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


# ---------------------------------------------------------------- 2. compile (no interpreter)
def _jit_functions(module: Any) -> dict[str, Any]:
    from triton.runtime.jit import JITFunction

    return {
        f"{v.fn.__module__}:{v.fn.__name__}": v
        for v in vars(module).values()
        if isinstance(v, JITFunction) and v.fn.__module__ == module.__name__
    }


def _callees(jit: Any) -> set[str]:
    """Ids of the jit functions ``jit``'s body calls (by name or ``module.name``)."""
    from triton.runtime.jit import JITFunction

    out = set()
    for node in ast.walk(ast.parse(inspect.getsource(jit.fn).lstrip())):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            target = jit.fn.__globals__.get(name)
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                owner = jit.fn.__globals__.get(node.func.value.id)
                target = getattr(owner, name, None) if inspect.ismodule(owner) else None
            if isinstance(target, JITFunction):
                out.add(f"{target.fn.__module__}:{target.fn.__name__}")
    return out


def kernel_ids(root: Path = ROOT) -> tuple[set[str], set[str]]:
    """``(kernels, helpers)`` of the glob's modules: a kernel is a jit function no jit function
    calls (launched from the host), a helper one that is called (inlined into kernels)."""
    jits: dict[str, Any] = {}
    for path in kernel_files(root):
        jits.update(_jit_functions(importlib.import_module(module_of(path, root))))
    called = set().union(*(_callees(j) for j in jits.values())) if jits else set()
    return set(jits) - called, set(jits) & called


def _constexprs(raw: dict[str, Any]) -> dict[str, Any]:
    import triton.language as tl

    def value(v: Any) -> Any:
        if isinstance(v, dict) and "tl.dtype" in v:
            return getattr(tl, {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}.get(
                v["tl.dtype"], v["tl.dtype"]))  # fmt: skip
        return v

    return {k: value(v) for k, v in raw.items()}


def _compile_one(job: tuple[int, str, Path, int]) -> dict[str, Any]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    n, key, out_dir, arch = job
    kernel, signature, constexprs, aligned = json.loads(key)
    mod, name = kernel.split(":")
    row: dict[str, Any] = {"kernel": kernel, "key": key}
    try:
        fn = getattr(importlib.import_module(mod), name)
        attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in aligned}
        src = ASTSource(fn, signature, _constexprs(constexprs), attrs)
        ttir = triton.compile(src, target=GPUTarget("cuda", arch, 32)).asm["ttir"]
        path = out_dir / f"{name}_{n}.ttir"
        path.write_text(ttir)
        row.update(ok=True, ttir=str(path))
    except Exception as e:  # the finding this step looks for
        row.update(ok=False, error=" ".join(f"{type(e).__name__}: {e}".split())[:2000])
    return row


def compile_all(
    launches: list[dict[str, Any]], out_dir: Path, arch: int = 90, workers: int = 2
) -> list[dict]:
    """Compile each distinct recorded (kernel, signature, constexprs) for ``sm_<arch>`` (in
    ``workers`` forked processes); write its TTIR to ``out_dir``.  One row per specialisation:
    kernel, key, ok, and the TTIR file or the error."""
    import multiprocessing

    out_dir.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(
        json.dumps([x["kernel"], x["signature"], x["constexprs"], x.get("aligned", [])])
        for x in launches
    ))  # fmt: skip
    jobs = [(n, key, out_dir, arch) for n, key in enumerate(keys)]
    if workers <= 1:
        return [_compile_one(job) for job in jobs]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(_compile_one, jobs, chunksize=1)


# ---------------------------------------------------------------- 3. the rules
_LOC_FILE = re.compile(r'^#(loc\d*) = loc\("([^"]+)":(\d+):\d+\)', re.M)
_LOC_REF = re.compile(r'^#(loc\d*) = loc\((?:"[^"]*")?\(?(?:callsite\()?#(loc\d*)', re.M)
_OP_LOC = re.compile(r"loc\(#(loc\d*)\)\s*$")
_UNSIGNED = re.compile(
    r"arith\.(divui|remui|shrui|ceildivui|floordivui|maxui|minui|uitofp|fptoui)\b"
)


def _locations(ttir: str) -> dict[str, tuple[str, int]]:
    files = {m[1]: (m[2], int(m[3])) for m in _LOC_FILE.finditer(ttir)}
    refs = {m[1]: m[2] for m in _LOC_REF.finditer(ttir) if m[1] not in files}
    out = dict(files)
    for name in refs:
        seen, cur = set(), name
        while cur in refs and cur not in seen:
            seen.add(cur)
            cur = refs[cur]
        if cur in files:
            out[name] = files[cur]
    return out


def _rel(path: str) -> str:
    with contextlib.suppress(ValueError):
        return str(Path(path).resolve().relative_to(ROOT))
    return path


def _types(text: str) -> list[str]:
    """Element types of the operand / result types after ``:`` in one TTIR line."""
    tail = text.rsplit(" : ", 1)[-1] if " : " in text else ""
    return re.findall(r"(?:x|<|\s|\(|^)(i1|i8|i16|i32|i64|f16|bf16|f32|f64)\b", tail)


def ttir_findings(ttir: str, kernel: str) -> list[Finding]:
    """The rules of the module docstring on one kernel's TTIR."""
    locs, found = _locations(ttir), []
    for line in ttir.splitlines():
        body = line.split(" loc(", 1)[0]
        m = _OP_LOC.search(line)
        file, lineno = locs.get(m[1], (kernel, 0)) if m else (kernel, 0)

        def add(rule: str, detail: str, file: str = file, lineno: int = lineno) -> None:
            found.append(Finding(_rel(file), lineno, rule, f"{kernel}: {detail}"))

        types = _types(body)
        if "tt.atomic_rmw" in body or "tt.atomic_cas" in body:
            if {"i64", "f64", "i1"} & set(types[-1:]):
                add("atomic64", f"{body.strip()[:160]}")
        if "tt.elementwise_inline_asm" in body:
            add("inline_asm", "inline assembly")
        if re.search(r"\btt\.(print|assert)\b", body):
            add("debug", "device print / assert")
        if re.search(r"\btt\.(histogram|extern_elementwise|dot_scaled)\b", body):
            add("sort", body.strip()[:120])
        if re.search(r"\btt\.gather\b", body) and not set(types) <= {"f16", "bf16", "f32", "i32"}:
            add("sort", body.strip()[:120])
        if re.search(r"\btt\.scan\b", body) and "reverse = true" in body:
            add("scan", "a reverse scan (Ascend: only on unmasked, aligned loads)")
        if "tt.make_range" in body and types[-1:] != ["i32"]:
            add("make_range", body.strip()[:120])
        if _UNSIGNED.search(body) and {"i32", "i64"} & set(types):
            add("unsigned", body.strip()[:160])
        if re.search(r"arith\.cmpi u(lt|le|gt|ge)\b", body) and {"i32", "i64"} & set(types):
            add("unsigned", body.strip()[:160])
        if re.search(r"arith\.extui .*: (tensor<(\d+x)*)?i32", body):
            add("unsigned", body.strip()[:160])
        if re.search(r"\btt\.dot\b", body) and not set(types[:2]) <= {"f16", "bf16", "f32", "i8"}:
            add("dot", body.strip()[:160])
        if "f64" in types:
            add("f64", body.strip()[:120])
        if re.search(r"\btt\.trans\b", body) and "i64" in types:
            add("trans64", body.strip()[:120])
        for dims, ty in _TENSOR.findall(body):
            size = _BYTES[ty]
            for n in dims.rstrip("x").split("x"):
                size *= int(n)
            if size > UB_TILE:
                add("ub", f"a {size // 1024} KB tensor<{dims}{ty}> (one program's tiles <= 64 KB)")
                break
    return sorted(set(found), key=lambda f: (f.file, f.line, f.rule))


_SOURCE_RULES = [
    ("debug", re.compile(r"\btl\.device_(print|assert)\b|(?<![\w.])print\(")),
    ("inline_asm", re.compile(r"\binline_asm_elementwise\b")),
    ("sort", re.compile(r"\btl\.(sort|topk|histogram)\b|\blibdevice\b|\btl\.extra\b")),
    ("unsigned", re.compile(r"\btl\.uint(32|64)\b")),
    ("atomic64", re.compile(r"\btl\.atomic_cas\b")),
]


def _code_only(text: str) -> list[str]:
    """``text``'s lines with every string literal and comment blanked (kept: the code)."""
    lines = [list(line) for line in text.splitlines()]
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in (tokenize.STRING, tokenize.COMMENT):
            continue
        (r0, c0), (r1, c1) = tok.start, tok.end
        for r in range(r0, r1 + 1):
            lo, hi = (c0 if r == r0 else 0), (c1 if r == r1 else len(lines[r - 1]))
            lines[r - 1][lo:hi] = " " * (hi - lo)
    return ["".join(line) for line in lines]


def source_findings(path: Path) -> list[Finding]:
    """The source rules inside the module's ``@triton.jit`` functions (comments and string
    constants, docstrings included, skipped)."""
    text = path.read_text()
    code_lines = _code_only(text)
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.FunctionDef):
            continue
        if not any("jit" in ast.unparse(d) for d in node.decorator_list):
            continue
        for i in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            code = code_lines[i - 1]
            for rule, pattern in _SOURCE_RULES:
                if pattern.search(code):
                    found.append(Finding(_rel(str(path)), i, rule, code.strip()[:120]))
    return found


def grid_findings(launches: list[dict[str, Any]]) -> list[Finding]:
    """Recorded grids with a dimension (``grid``) or a product (``coredim``, Ascend's coreDim)
    over 65535, at the host wrapper's launch line."""
    found = set()
    for launch in launches:
        grid, size = launch["grid"], 1
        for g in grid:
            size *= g
        file, _, line = launch.get("site", launch["kernel"].split(":")[0] + ":0").rpartition(":")
        for rule, bad in (("grid", max(grid) > GRID_MAX), ("coredim", size > GRID_MAX)):
            if bad:
                detail = f"{launch['kernel']}: grid {grid} (product {size}) > {GRID_MAX}"
                found.add(Finding(_rel(file), int(line), rule, detail))
    return sorted(found, key=str)


def main(argv: list[str]) -> int:
    """``record OUT.json`` (needs TRITON_INTERPRET=1) or ``compile IN.json DIR`` (needs it
    unset): see the module docstring."""
    if argv[:1] == ["record"]:
        from fbgemm_npu.testing import triton_aot_probes as probes

        launches, failed = probes.run_probes()
        scale, scale_failed = probes.run_scale_probes()
        native = probes.run_native_probes()
        out = {"launches": launches, "failed": {**failed, **scale_failed}, "scale": scale,
               "native": native}  # fmt: skip
        Path(argv[1]).write_text(json.dumps(out))
        return 0
    if argv[:1] == ["compile"]:
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        from bench.device_check import import_kernels

        import_kernels()  # the leaf modules without fbgemm_npu/__init__ (no fbgemm_gpu needed)
        launches = json.loads(Path(argv[1]).read_text())["launches"]
        kernels, helpers = kernel_ids()
        rows = compile_all(launches, Path(argv[2]))
        result = {"rows": rows, "kernels": sorted(kernels), "helpers": sorted(helpers)}
        (Path(argv[2]) / "compiled.json").write_text(json.dumps(result))
        return 0
    print(main.__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
