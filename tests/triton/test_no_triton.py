"""A machine without Triton: ``auto`` runs the tensor programs and ``triton`` says why it cannot.

Each case runs in a fresh interpreter where ``import triton`` fails (``sys.modules["triton"] =
None``), as on a host where it is not installed; TRITON_INTERPRET is unset there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

_PRELUDE = """
import sys
sys.modules["triton"] = None  # as if not installed: `import triton` raises ImportError
import torch
import fbgemm_npu
from fbgemm_npu.native import _triton
assert _triton.backend_for(torch.device("npu")) is None
"""


def _run(body: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", _ENV)}
    environ.update(FBGEMM_NPU_SIMULATE="1", **env)
    code = _PRELUDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=300
    )


_ENV = "FBGEMM_NPU_KERNEL"


def test_auto_runs_every_fused_op_without_triton() -> None:
    body = """
    from fbgemm_npu.testing.counters import count
    values = torch.randn(5, 4)
    offsets = torch.tensor([0, 2, 2, 5])
    lengths = torch.tensor([1, 2, 0, 3, 1, 1], dtype=torch.int32)
    idx = torch.arange(8, dtype=torch.int32)
    order = torch.tensor([1, 0], dtype=torch.int32)
    with count("npu") as c:
        dense = torch.ops.fbgemm.jagged_to_padded_dense(values.npu(), [offsets.npu()], [3])
        back = torch.ops.fbgemm.dense_to_jagged(dense, [offsets.npu()])[0]
        perm = torch.ops.fbgemm.permute_2D_sparse_data(
            order.npu(), lengths.view(2, 3).npu(), idx.npu(), None, 8)
    ref = torch.ops.fbgemm.jagged_to_padded_dense(values, [offsets], [3])
    assert torch.equal(dense.cpu(), ref) and torch.equal(back.cpu(), values)
    ref_perm = torch.ops.fbgemm.permute_2D_sparse_data(
        order, lengths.view(2, 3), idx, None, 8)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(perm[:2], ref_perm[:2]))
    assert not [n for n in c.launch_ops if n.startswith("triton.")], c.launch_ops
    assert "triton" not in [m.split(".")[0] for m in sys.modules if sys.modules[m] is not None]
    print("ok")
    """
    for mode in ("auto", ""):
        proc = _run(body, **({_ENV: mode} if mode else {}))
        assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_triton_mode_without_triton_names_the_op_and_the_way_out() -> None:
    body = """
    values, offsets = torch.randn(6, 4).npu(), torch.tensor([0, 2, 2, 6]).npu()
    with fbgemm_npu.kernel_mode("triton"):
        try:
            torch.ops.fbgemm.jagged_to_padded_dense(values, [offsets], [3])
        except RuntimeError as e:
            print(e)
        else:
            raise SystemExit("no error")
    """
    proc = _run(body)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FBGEMM_NPU_KERNEL=triton but no Triton backend" in proc.stdout
    assert "jagged_to_padded_dense" in proc.stdout and "triton not importable" in proc.stdout
