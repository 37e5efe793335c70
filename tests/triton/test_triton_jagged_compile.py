"""The jagged Triton kernels compile for a GPU (sm_90, to PTX) without one: Triton's compiler
runs here (no driver needed for ``triton.compile`` with an explicit target), and it refuses what
the interpreter lets through (loop-carried types that change, tensor shapes that disagree,
scalar / block mix-ups).  A subprocess: the test process decorates kernels for the interpreter
(TRITON_INTERPRET=1), this one for the compiler.
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
from fbgemm_npu.native.fbgemm.jagged import _triton_dense as m

target = GPUTarget("cuda", 90, 32)
common = {"stride_o": "i32", "flags": "*i32", "B": "i32", "L": "i32", "D": "i32"}
for wide, dt, pad in [(True, "fp32", "fp32"), (False, "fp16", "fp32"), (False, "bf16", "fp32"),
                      (True, "i64", "i64"), (False, "i32", "i32")]:
    off = "*i64" if wide else "*i32"
    for check in (True, False):
        meta = {"BLOCK_L": 32, "BLOCK_D": 128, "WIDE": wide, "CHECK": check}
        consts = {k: "constexpr" for k in meta}
        sig = {"values": f"*{dt}", "offsets": off, "out": f"*{dt}", "N": "i32", "stride_n": "i32",
               "stride_d": "i32", "pad_value": pad, **common, **consts}
        names = m._to_dense_kernel.arg_names
        src = ASTSource(fn=m._to_dense_kernel, signature={n: sig[n] for n in names},
                        constexprs=meta)
        assert "ld.global" in triton.compile(src, target=target).asm["ptx"]
        sig = {"dense": f"*{dt}", "offsets": off, "out": f"*{dt}", "total": "i32",
               "stride_b": "i32", "stride_l": "i32", "stride_d": "i32", **common, **consts}
        names = m._to_jagged_kernel.arg_names
        src = ASTSource(fn=m._to_jagged_kernel, signature={n: sig[n] for n in names},
                        constexprs=meta)
        assert "st.global" in triton.compile(src, target=target).asm["ptx"]
print("COMPILED")
"""


def test_kernels_compile_for_sm90() -> None:
    try:
        from triton.backends import backends
    except Exception as e:  # pragma: no cover - a broken install
        pytest.skip(f"triton's backends do not load here: {e}")
    if "nvidia" not in backends:
        pytest.skip("triton's nvidia backend (ptxas) is not installed here")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"  # (silences 3.9's notice; the kernels do no FP math)
    env["TRITON_CACHE_DIR"] = str(ROOT / ".pytest_cache" / "triton_aot")
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(ROOT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "COMPILED" in done.stdout, done.stderr[-4000:]
