"""The main job on the fused Triton kernels: torchrec's DLRM with ``--kernel triton``.

``python -m fbgemm_npu.examples.dlrm``'s own code (as tests/integrations/test_dlrm.py drives it)
trains a tiny Criteo-shaped DLRM in 1 process (26 tables x 100 rows x 8, batch 8, 3 steps,
row-wise adagrad fused into the TBE backward) table-wise and row-wise sharded, with
``FBGEMM_NPU_KERNEL=triton`` (the example's ``--kernel triton`` sets it for every rank) and
``TRITON_INTERPRET=1`` (tests/conftest.py): every op with a Triton path runs its Triton kernel in
the interpreter on the simulated npu.  Checked: the npu losses equal the same run on the CPU with
upstream fbgemm within the example's tolerance (``ATOL + RTOL * |loss|``); the trace of step 0
shows every ``fbgemm::`` op on our npu kernels; the example prints the kernel mode; and each
counted step (1 and 2: the example's step counters, ``fbgemm_npu.testing.trace.count_step``,
wrapped here to keep the launch names) launched the TBE forward and backward Triton kernels.
"""

from __future__ import annotations

import contextlib
import io
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch.distributed as dist

from fbgemm_npu.examples import dlrm
from fbgemm_npu.testing import counters
from fbgemm_npu.testing import trace as trace_mod

SHARDING_TYPES = ("table_wise", "row_wise")
ARGS = (
    "--model dlrm --sharding-type {} --steps 3 --num-embeddings 100 --embedding-dim 8 "
    "--batch-size 8 --processes 1 --kernel triton --timeout 600"
)
TBE_KERNELS = ("triton.tbe_forward", "triton.tbe_backward_keys", "triton.tbe_backward_step")


def _run(
    sharding_type: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[dlrm.RankReport], str, bool, list[Counter[str]]]:
    """One run as the CLI would; (reports, printed text, passed, Triton launches per counted
    step)."""
    monkeypatch.setenv("FBGEMM_NPU_KERNEL", "triton")  # restored after the test (launch sets it)
    steps: list[Counter[str]] = []
    count_step = trace_mod.count_step

    def counted(fn: Callable[[], Any], device_type: str = "npu") -> Any:
        with counters.count(device_type) as c:  # sees the launches of the step's own counter
            out = count_step(fn, device_type)
        steps.append(Counter(n for n in c.launch_ops if n.startswith("triton.")))
        return out

    monkeypatch.setattr(trace_mod, "count_step", counted)
    args = dlrm.parse_args(ARGS.format(sharding_type).split())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        reports = dlrm.launch(args)
        passed = dlrm.report(args, reports)
    return reports, out.getvalue(), passed, steps


@pytest.mark.parametrize("sharding_type", SHARDING_TYPES)
def test_dlrm_on_triton_kernels(sharding_type: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not dist.is_initialized(), "a test left a default process group behind"
    reports, text, passed, steps = _run(sharding_type, monkeypatch)
    assert not dist.is_initialized()
    assert passed, text
    assert "kernels triton" in text, text
    (r,) = reports
    assert len(r.npu_losses) == len(r.cpu_losses) == 3
    assert dlrm.within_tolerance(r.npu_losses, r.cpu_losses), (
        f"{sharding_type}: npu losses {r.npu_losses} vs cpu {r.cpu_losses} "
        f"(tolerance {dlrm.ATOL} + {dlrm.RTOL}*|loss|)"
    )
    assert r.trace_ok, r.trace_summary
    assert r.steps == [0, 1, 2] and len(steps) == 2, (r.steps, steps)  # step 0 is traced
    for step, fused in zip((1, 2), steps, strict=True):
        print(f"{sharding_type} step {step}: {dict(fused)}")
        for name in TBE_KERNELS:
            assert fused[name] >= 1, f"{sharding_type} step {step}: no {name}: {dict(fused)}"
