"""``import fbgemm_npu`` must not change anything upstream owns (docs/design.md, rule 1), must
be idempotent, and must be cheap.

Each check runs in a fresh interpreter so that nothing this pytest process imported earlier (the
other test files import fbgemm_npu) hides a change.  The simulator stays off: these are properties
of the plain import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_IMPORT_OVERHEAD_S = 0.5

# Keys we may register at; every other line of an fbgemm op's dispatch table must stay as upstream
# left it.  Meta too, wherever upstream had a Meta kernel already.
OUR_KEYS = ("PrivateUse1", "AutogradPrivateUse1", "Meta")

# Run in the child interpreter: snapshot, import, snapshot, re-register, snapshot; print JSON.
_DISPATCH_SCRIPT = textwrap.dedent(
    """
    import importlib, json
    import torch
    import fbgemm_gpu

    F = torch.ops.fbgemm
    OUR_KEYS = {our_keys!r}

    def fbgemm_ops():
        return sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("fbgemm::"))

    def table(op):
        # {{dispatch key or header field: line}}; "Autograd[alias]" and friends keep their suffix
        rows = {{}}
        for line in torch._C._dispatch_dump(op).splitlines():
            if line.strip():
                rows[line.split(":", 1)[0]] = line
        return rows

    def snapshot():
        return {{op: table(op) for op in fbgemm_ops()}}

    def run_ops():
        lengths = torch.tensor([[1, 2, 0], [3, 1, 2]], dtype=torch.int32)
        values = torch.arange(9, dtype=torch.float32)
        weights = torch.rand(9, generator=torch.Generator().manual_seed(0))
        offsets = torch.tensor([0, 2, 2, 5], dtype=torch.int64)
        jagged = torch.arange(10, dtype=torch.float32).view(5, 2)
        out = {{}}
        for dt in (torch.int32, torch.int64, torch.float32):
            x = torch.tensor([3, 0, 2, 7, 1], dtype=dt)
            out[f"complete_{{dt}}"] = F.asynchronous_complete_cumsum(x)
            out[f"complete2d_{{dt}}"] = F.asynchronous_complete_cumsum(x[:4].view(2, 2))
            out[f"exclusive_{{dt}}"] = F.asynchronous_exclusive_cumsum(x)
            out[f"inclusive_{{dt}}"] = F.asynchronous_inclusive_cumsum(x)
        out["jagged_to_padded_dense"] = F.jagged_to_padded_dense(jagged, [offsets], [4], -1.0)
        permute = torch.tensor([1, 0], dtype=torch.int32)
        out["permute_2D_sparse_data"] = F.permute_2D_sparse_data(
            permute, lengths, values, weights, None
        )
        return out

    def as_bits(value):
        if value is None:
            return None
        if isinstance(value, (tuple, list)):
            return [as_bits(v) for v in value]
        t = value.contiguous()
        return [str(t.dtype), list(t.shape), t.view(torch.uint8).tolist()]

    def diff_tables(before, after, allow_ours):
        lines = []
        for op, rows in before.items():
            now = after.get(op, {{}})
            for key in sorted(set(rows) | set(now)):
                if allow_ours and key in OUR_KEYS and key not in rows:
                    continue  # a key we added where upstream had nothing
                if rows.get(key) != now.get(key):
                    lines.append(f"{{op}}: before {{rows.get(key)!r}} / after {{now.get(key)!r}}")
        return lines

    bits_before = {{k: as_bits(v) for k, v in run_ops().items()}}
    before = snapshot()

    import fbgemm_npu
    from fbgemm_npu import _registry

    after = snapshot()
    bits_after = {{k: as_bits(v) for k, v in run_ops().items()}}
    registered = {{op: list(keys) for op, keys in _registry.REGISTRY.registered.items()}}
    libraries = len(_registry.REGISTRY.libraries)

    _registry.register_all()
    importlib.reload(fbgemm_npu)
    again = snapshot()

    print(json.dumps({{
        "ops": len(before),
        "changed": diff_tables(before, after, allow_ours=True),
        "results_changed": sorted(k for k in bits_before if bits_before[k] != bits_after[k]),
        "reregister_changed": diff_tables(after, again, allow_ours=False)
            + [f"new op {{op}}" for op in sorted(set(again) - set(after))],
        "registry_changed": registered != {{
            op: list(keys) for op, keys in _registry.REGISTRY.registered.items()
        }} or libraries != len(_registry.REGISTRY.libraries),
        "privateuse1": sorted(
            op for op in after
            if "PrivateUse1" in after[op] and "PrivateUse1" not in before.get(op, {{}})
        ),
    }}))
    """
).format(our_keys=OUR_KEYS)

_TIMING_SCRIPT = textwrap.dedent(
    """
    import json, time
    import torch
    t0 = time.perf_counter()
    import fbgemm_gpu
    t1 = time.perf_counter()
    import fbgemm_npu
    t2 = time.perf_counter()
    print(json.dumps({"fbgemm_gpu": t1 - t0, "fbgemm_npu": t2 - t1}))
    """
)


def _run_child(script: str, bytecode: bool = False) -> dict:
    """Run ``script`` in a fresh interpreter without the simulator; return its last JSON line.
    ``bytecode``: let the child write and use ``.pyc`` files even where the environment says
    PYTHONDONTWRITEBYTECODE, as an installed package has them."""
    drop = {"FBGEMM_NPU_SIMULATE", *(("PYTHONDONTWRITEBYTECODE",) if bytecode else ())}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"child failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def dispatch_report() -> dict:
    """One child answers every dispatch-table question: each child costs seconds of imports."""
    return _run_child(_DISPATCH_SCRIPT)


def test_upstream_dispatch_entries_unchanged(dispatch_report: dict) -> None:
    """CPU, CUDA, Autograd, CompositeImplicitAutograd (and upstream's Meta) lines stay the same."""
    report = dispatch_report
    assert report["ops"] > 100, "fbgemm_gpu defined suspiciously few fbgemm:: ops"
    assert not report["changed"], "import fbgemm_npu changed upstream dispatch entries:\n" + (
        "\n".join(report["changed"])
    )


def test_our_kernels_landed_on_privateuse1(dispatch_report: dict) -> None:
    """The import did register something: at least the three cumsum ops on PrivateUse1."""
    ops = set(dispatch_report["privateuse1"])
    for name in ("complete", "exclusive", "inclusive"):
        assert f"fbgemm::asynchronous_{name}_cumsum" in ops


def test_cpu_results_bit_identical(dispatch_report: dict) -> None:
    """Upstream CPU ops give the same bits before and after ``import fbgemm_npu``."""
    assert dispatch_report["results_changed"] == []


def test_registering_twice_adds_nothing(dispatch_report: dict) -> None:
    """``register_all()`` and ``importlib.reload(fbgemm_npu)`` again leave every table as it was."""
    report = dispatch_report
    assert not report["reregister_changed"], "\n".join(report["reregister_changed"])
    assert not report["registry_changed"]


def test_import_overhead() -> None:
    """``import fbgemm_npu`` on top of ``import fbgemm_gpu`` costs < 0.5 s (best of 3 children).

    With bytecode, as a user's install has it (pip compiles on install): without it, every
    child compiles our ~200 modules' sources again, which measures CPython's compiler (0.2 s
    here), not what importing fbgemm_npu costs.  The first child writes the ``.pyc`` files."""
    runs = [_run_child(_TIMING_SCRIPT, bytecode=True) for _ in range(4)][1:]
    extra = min(r["fbgemm_npu"] for r in runs)
    upstream = min(r["fbgemm_gpu"] for r in runs)
    print(
        f"import fbgemm_gpu: {upstream:.3f} s; import fbgemm_npu on top: {extra:.3f} s (best of 3)"
    )
    assert extra < MAX_IMPORT_OVERHEAD_S, (
        f"import fbgemm_npu adds {extra:.3f} s over fbgemm_gpu ({upstream:.3f} s); "
        f"budget {MAX_IMPORT_OVERHEAD_S} s"
    )
