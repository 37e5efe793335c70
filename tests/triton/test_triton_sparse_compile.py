"""The permute and bucketize Triton kernels compile for a GPU (sm_90, to PTX) without one:
Triton's compiler runs here (``triton.compile`` with an explicit target needs no driver) and
refuses what the interpreter lets through (loop-carried types that change, scalar / block
mix-ups, unsupported masks).  Specialisations: int32 / int64 lengths, permute and indices, the
value / weight widths the copy kernels move (as same-width ints), the float gradients, every
option flag of the bucketize kernels.  A subprocess: the test process decorates kernels for the
interpreter (TRITON_INTERPRET=1), this one for the compiler.  ~30 s cold, less from the cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from bench.device_check import import_kernels

import_kernels()  # only the leaf modules: no fbgemm_gpu needed
from fbgemm_npu.native.fbgemm.permute import _triton_permute as tp
from fbgemm_npu.native.fbgemm.bucketize import _triton_block as tb

target = GPUTarget("cuda", 90, 32)

def comp(fn, sig, meta):
    consts = {k: "constexpr" for k in meta}
    sig = {**sig, **consts}
    names = fn.arg_names
    missing = [n for n in names if n not in sig]
    assert not missing, missing
    src = ASTSource(fn=fn, signature={n: sig[n] for n in names}, constexprs=meta)
    return triton.compile(src, target=target).asm["ptx"]

i32 = "i32"
for ldt, pdt in (("i64", "i32"), ("i32", "i64")):
    sig = {"perm": f"*{pdt}", "perm_s": i32, "lengths": f"*{ldt}", "len_s0": i32, "len_s1": i32,
           "plen": f"*{ldt}", "plen_s0": i32, "plen_s1": i32, "starts": "*i32", "ends": "*i32",
           "stats": "*i32", "flag": "*u8", "t_in": i32, "t_out": i32, "b": i32, "n_avail": i32,
           "given": i32}
    comp(tp._offsets_kernel, sig, {"BLOCK": 128})
    for vdt, wdt, has_w in (("i64", "i32", True), ("i16", "i64", True), ("i32", "i32", False)):
        sig = {"perm": f"*{pdt}", "perm_s": i32, "starts": "*i32", "ends": "*i32",
               "values": f"*{vdt}", "val_s": i32, "out": f"*{vdt}", "out_s": i32,
               "weights": f"*{wdt}", "w_s0": i32, "w_s1": i32, "wout": f"*{wdt}", "wo_s0": i32,
               "wo_s1": i32, "t_in": i32, "n_seg": i32, "b": i32, "n_avail": i32, "total": i32,
               "cols": i32}
        comp(tp._copy_kernel, sig, {"HAS_W": has_w, "BLOCK": 128})
    for gdt in ("fp32", "fp16", "bf16"):
        sig = {"perm": f"*{pdt}", "perm_s": i32, "starts": "*i32", "ends": "*i32",
               "grad": f"*{gdt}", "g_s0": i32, "g_s1": i32, "gx": f"*{gdt}", "n_seg": i32,
               "t_out": i32, "b": i32, "n_x": i32, "cols": i32}
        comp(tp._grad_kernel, sig, {"BLOCK": 128})
print("PERMUTE COMPILED")
for idt, ldt in (("i64", "i32"), ("i32", "i64")):
    top = "i64" if idt == "i64" else "i32"
    for has_total, has_vbe in ((False, False), (True, True)):
        base = {"lengths": f"*{ldt}", "len_s": i32, "x_ptr": f"*{idt}", "x_s": i32,
                "blocks": f"*{idt}", "blk_s": i32, "total": f"*{idt}", "tot_s": i32,
                "batch": f"*{ldt}", "b_s": i32, "flat": f"*{idt}", "table": "*i32"}
        sig = {**base, "counts": f"*{ldt}", "starts": "*i32", "pflags": "*i32", "n_rows": i32,
               "n_idx": i32, "n_feat": i32, "rows_per_feature": i32, "rows_per": i32, "p": i32,
               "top": top}
        var = has_total == (idt == "i64")  # variable blocks on two of the four
        meta = {"HAS_TOTAL": has_total, "HAS_VBE": has_vbe, "VAR": var, "STEPS": 3,
                "BLOCK_L": 128, "BLOCK_P": 8, "BLOCK_R": 128}
        comp(tb._count_kernel, sig, meta)
        sig = {"counts": f"*{ldt}", "offs": "*i32", "pflags": "*i32", "n_prog": i32,
               "blocks": f"*{idt}", "blk_s": i32, "total": f"*{idt}", "tot_s": i32,
               "batch": f"*{ldt}", "b_s": i32, "flat": f"*{idt}", "table": "*i32",
               "flag": "*u8", "n_cnt": i32, "n_rows": i32,
               "n_feat": i32, "p": i32, "top": top}
        comp(tb._scan_kernel, sig, {"HAS_TOTAL": has_total, "HAS_VBE": has_vbe, "VAR": var,
                                    "BLOCK": 128})
        every, none = (True, False, True, True, True, True, 4), (False, True, *[False] * 4, 1)
        for flags in (every, none):
            keep, keep_all, has_w, pos, unb, mp, bc = flags
            sig = {**base, "keep": "*u8", "keep_s": i32, "starts": "*i32", "offs": "*i32",
                   "new_idx": f"*{idt}", "w": "*i32", "w_s0": i32, "w_s1": i32, "new_w": "*i32",
                   "pos_out": f"*{idt}", "unb": f"*{idt}", "mapping": f"*{idt}", "n_rows": i32,
                   "n_idx": i32, "n_feat": i32, "rows_per_feature": i32, "rows_per": i32,
                   "p": i32, "top": top, "cols": i32}
            meta = {"HAS_TOTAL": has_total, "HAS_VBE": has_vbe, "HAS_KEEP": keep,
                    "KEEP_ALL": keep_all, "HAS_W": has_w, "HAS_POS": pos, "HAS_UNB": unb,
                    "HAS_MAP": mp, "VAR": var, "STEPS": 3, "BLOCK_L": 128, "BLOCK_P": 8,
                    "BLOCK_R": 128, "BLOCK_C": bc}
            comp(tb._scatter_kernel, sig, meta)
print("BUCKETIZE COMPILED")
"""


def test_sparse_kernels_compile_for_sm90() -> None:
    try:
        from triton.backends import backends
    except Exception as e:  # pragma: no cover - a broken install
        pytest.skip(f"triton's backends do not load here: {e}")
    if "nvidia" not in backends:
        pytest.skip("triton's nvidia backend (ptxas) is not installed here")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"  # (silences 3.9's notice)
    env["TRITON_CACHE_DIR"] = str(ROOT / ".pytest_cache" / "triton_aot")
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(ROOT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "PERMUTE COMPILED" in done.stdout, done.stderr[-4000:]
    assert "BUCKETIZE COMPILED" in done.stdout, done.stderr[-4000:]
