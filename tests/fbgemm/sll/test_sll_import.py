"""``import fbgemm_npu`` leaves upstream's SLL ops as ``fbgemm_gpu.sll`` made them (docs/design.md,
rule 1): the sll family imports ``fbgemm_gpu.sll`` for the schemas, and must change neither their
dispatch entries (CPU, AutogradCPU, upstream's Meta / AutogradMeta) nor a CPU result or gradient.
One fresh interpreter, without the simulator: snapshot, import, snapshot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

_SCRIPT = textwrap.dedent(
    """
    import json
    import torch
    import fbgemm_gpu, fbgemm_gpu.sll
    from fbgemm_npu.testing.sll_inputs import OPS, sll_args

    OURS = ("PrivateUse1", "AutogradPrivateUse1", "Meta")

    def tables():
        out = {}
        for op in OPS:
            rows = {}
            for line in torch._C._dispatch_dump("fbgemm::" + op).splitlines():
                if line.strip():
                    rows[line.split(":", 1)[0]] = line
            out[op] = rows
        return out

    def results():
        out = {}
        for op in OPS:
            args = [a.clone() if isinstance(a, torch.Tensor) else a for a in sll_args(op, 5, 4, 3)]
            for a in args[:2]:
                if isinstance(a, torch.Tensor) and a.is_floating_point():
                    a.requires_grad_()
            res = getattr(torch.ops.fbgemm, op)(*args)
            first = res[0] if isinstance(res, tuple) else res
            bits = [t.detach().contiguous().view(torch.uint8).tolist()
                    for t in (res if isinstance(res, tuple) else (res,))]
            if first.requires_grad:
                first.sum().backward()
                bits += [a.grad.view(torch.uint8).tolist() for a in args[:2]
                         if isinstance(a, torch.Tensor) and a.grad is not None]
            out[op] = bits
        return out

    before_t, before_r = tables(), results()
    import fbgemm_npu  # noqa: F401
    after_t, after_r = tables(), results()
    changed = [f"{op}: {k}" for op in OPS for k in set(before_t[op]) | set(after_t[op])
               if before_t[op].get(k) != after_t[op].get(k)
               and not (k in OURS and k not in before_t[op])]
    print(json.dumps({"changed": changed,
                      "results": sorted(op for op in OPS if before_r[op] != after_r[op])}))
    """
)


def test_import_leaves_upstream_sll_ops_unchanged() -> None:
    env = {k: v for k, v in os.environ.items() if k != "FBGEMM_NPU_SIMULATE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"changed": [], "results": []}
