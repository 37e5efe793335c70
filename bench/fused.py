"""``python -m bench triton``: the launches of both paths of every fused Triton kernel, per op.

Each probe of :mod:`bench.triton_probes` (bench/device_check.py's calls, at its ``--quick``
sizes: a launch count does not depend on them) runs on the npu device (simulated here; the
Triton path in Triton's interpreter) under the counters (fbgemm_npu/testing/counters.py), after
a warm call, in kernel mode ``tensor`` and ``triton``, with the data checks off and on.  The
table lands in ``bench/results/triton.md``: launches (checks off / on), how many of the Triton
path's are Triton kernels, and host syncs.  A probe whose kernel is not there is an ``absent``
row.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["main", "measure"]

COLUMNS = (
    "| op | tensor launches (checks off / on) | triton launches (checks off / on) | Triton "
    "kernels | syncs (tensor / triton) | status |"
)


def _count(built: Any, mode: str, checks: bool) -> Any:
    from fbgemm_npu.native._pending import check
    from fbgemm_npu.native._triton import kernel_mode
    from fbgemm_npu.testing.counters import count

    old = os.environ.get("FBGEMM_NPU_VALIDATE")
    os.environ["FBGEMM_NPU_VALIDATE"] = "1" if checks else "0"
    try:
        with kernel_mode(mode):
            if built.reset:
                built.reset()
            built.run()  # warm: caches filled, kernels compiled
            check()
            if built.reset:
                built.reset()
            with count("npu") as c:
                built.run()
            check()
        return c
    finally:
        if old is None:
            os.environ.pop("FBGEMM_NPU_VALIDATE", None)
        else:
            os.environ["FBGEMM_NPU_VALIDATE"] = old


def measure(probe: Any) -> str:
    """One table row of ``probe`` (a :class:`bench.triton_probes.Probe`)."""
    import torch

    try:
        built = probe.build(torch.device("npu"), True)
    except (ImportError, AttributeError) as e:
        return f"| {probe.op} |  |  |  |  | absent ({type(e).__name__}) |"
    try:
        c = {(m, k): _count(built, m, k) for m in ("tensor", "triton") for k in (False, True)}
    except Exception as e:
        why = str(e).replace("|", "/").splitlines()[0][:80] if str(e) else ""
        return f"| {probe.op} |  |  |  |  | error: {type(e).__name__}: {why} |"
    fused = sum(n.startswith("triton.") for n in c["triton", False].launch_ops)
    cells = [f"{c[m, False].launches} / {c[m, True].launches}" for m in ("tensor", "triton")]
    syncs = f"{c['tensor', True].syncs} / {c['triton', True].syncs}"
    status = "ok" if fused else "fallback (no Triton launch)"
    return f"| {probe.op} | {cells[0]} | {cells[1]} | {fused} | {syncs} | {status} |"


def main(out: Path | None) -> int:
    if os.environ.get("TRITON_INTERPRET") != "1":
        # Triton reads it when it is imported, which the bench's imports did already: run again
        # in a process that has it from the start
        cmd = [sys.executable, "-m", "bench", "triton", *(["--out", str(out)] if out else [])]
        return subprocess.run(cmd, env={**os.environ, "TRITON_INTERPRET": "1"}).returncode
    from bench.triton_probes import PROBES
    from fbgemm_npu.testing import simulate

    kind = simulate()
    rows = [measure(p) for p in PROBES]
    text = (
        f"npu device: {kind}; Triton path in Triton's interpreter.  Launches of one call of "
        "each op (bench/device_check.py's probes at their --quick sizes, after a warm call), "
        "kernel mode tensor vs triton, data checks off / on (FBGEMM_NPU_VALIDATE); 'Triton "
        "kernels': the triton.* launches among the Triton path's (checks off); TBE fwd+bwd rows "
        "count the forward and the backward with its optimizer step.\n\n"
        + COLUMNS
        + "\n|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n"
    )
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return 0
