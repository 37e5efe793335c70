"""The fused TBE forward kernel (fbgemm_npu/native/fbgemm/tbe/_triton_forward.py) compiled by
Triton's real compiler for a GPU target (sm_90, an H100 / H200), without a GPU: the front end,
TTIR / TTGIR, LLVM and ptxas see what the interpreter cannot (loop-carried types, constexpr
branches, pointer and mask dtypes), for each specialisation the host wrapper launches.

In a subprocess: this process set ``TRITON_INTERPRET=1`` before the kernel module was imported
(tests/conftest.py), and Triton then decorates kernels for its interpreter only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = textwrap.dedent(
    """
    import json
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from fbgemm_npu.native.fbgemm.tbe import _triton_forward as m

    PTRS = {"weights": "*fp32", "indices": "*i64", "offsets": "*i32", "psw": "*fp16",
            "out": "*bf16", "feat": "*i64", "cls_tab": "*i64", "n_members": "*i64",
            "bag_out": "*i32", "t_out": "*i64", "mats": "*i64", "flags": "*i8",
            "row_starts": "*i64", "vbe_b": "*i32", "vbe_r": "*i32", "vbe_o": "*i64"}
    FLAGS = ("MEAN", "NONE", "WEIGHTED", "STATE", "GRAD_ROWS", "VBE", "CHECK")
    done = []
    for combo in json.loads(COMBOS):
        consts = {f: f in combo for f in FLAGS}
        consts.update(SEQ_D=8 if "NONE" in combo else 0, BLOCK_L=32, BLOCK_D=128)
        fn = m._tbe_forward_kernel
        sig = {n: "constexpr" if n in consts else PTRS.get(n, "i32") for n in fn.arg_names}
        k = triton.compile(ASTSource(fn, sig, consts), target=GPUTarget("cuda", 90, 32))
        done.append(bool(k.asm.get("cubin")))
    print(json.dumps(done))
    """
)
COMBOS = [
    ["WEIGHTED", "STATE", "GRAD_ROWS", "CHECK"],  # a weighted training forward
    ["MEAN"],  # inference, the checks off
    ["NONE", "STATE", "CHECK"],  # sequence
    ["MEAN", "WEIGHTED", "STATE", "VBE", "CHECK"],  # VBE
]


def test_compiles_for_sm90() -> None:
    try:
        import triton.backends.nvidia  # noqa: F401
    except ImportError:
        pytest.skip("this Triton install has no nvidia backend to compile with")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = SCRIPT.replace("json.loads(COMBOS)", repr(COMBOS))
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == [True] * len(COMBOS)
