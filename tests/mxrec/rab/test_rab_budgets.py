"""The rab family's launch, AI-CPU and sync budgets, read from its ``budgets.py``.

Every op at two sizes (the count must not depend on them), with the data checks off and on,
in float32 and float16 (and int32 / int64 timestamps): 0 AI-CPU launches, 0 syncs.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

NPU = "npu"
M = torch.ops.mxrec
SIZES = ((1, 3, 1), (4, 40, 3))  # (b, s, L)


def _pos(b: int, s: int, dtype: torch.dtype) -> Callable[[], object]:
    bias = torch.randn(2 * s, 2 * s, device=NPU).to(dtype)
    ident = torch.eye(2 * s, device=NPU).to(dtype)
    lens = [(7 * i) % (2 * s + 2) for i in range(b)]
    return lambda: M.relative_attn_bias_pos(bias, ident, lens)


def _time(b: int, s: int, n: int, dtype: torch.dtype, tdt: torch.dtype, index: bool):
    t = torch.randint(0, 2**30, (b, s), device=NPU, dtype=tdt)
    w = torch.randn(n, 129, device=NPU).to(dtype)
    op = M.relative_attn_bias_time_with_index if index else M.relative_attn_bias_time
    return lambda: op(t, w, 0.301)


def _backward(b: int, s: int, n: int, dtype: torch.dtype, tdt: torch.dtype, strided: bool = False):
    g = torch.randn(n, b, 2 * s, 2 * s, device=NPU).to(dtype)
    k = torch.randint(0, 129, (b, s, s), device=NPU, dtype=tdt)
    k = k.transpose(1, 2) if strided else k
    return lambda: M.relative_attn_bias_time_backward(g, k, 129)


Build = Callable[[int, int, int], Callable[[], object]]
CASES: list[tuple[str, str | None, str, Build]] = []
for dt in (torch.float32, torch.float16):
    CASES.append(
        ("mxrec::relative_attn_bias_pos", None, f"pos-{dt}", lambda b, s, n, d=dt: _pos(b, s, d))
    )
    for tdt in (torch.int32, torch.int64):
        for index in (False, True):
            name = "mxrec::relative_attn_bias_time" + ("_with_index" if index else "")
            path = "int64" if tdt == torch.int64 else None
            build = lambda b, s, n, d=dt, t=tdt, i=index: _time(b, s, n, d, t, i)  # noqa: E731
            CASES.append((name, path, f"{name}-{dt}-{tdt}", build))
        build = lambda b, s, n, d=dt, t=tdt: _backward(b, s, n, d, t)  # noqa: E731
        CASES.append(
            ("mxrec::relative_attn_bias_time_backward", None, f"backward-{dt}-{tdt}", build)
        )
CASES.append(
    (
        "mxrec::relative_attn_bias_time_backward",
        "strided",
        "backward-strided",
        lambda b, s, n: _backward(b, s, n, torch.float32, torch.int32, strided=True),
    )
)
IDS = [c[2] for c in CASES]


def _measure(qualname: str, path: str | None, build: Build) -> None:
    for b, s, n in SIZES:
        fn = build(b, s, n)  # built before the count
        fn()  # warm: the cached arange is built once per device
        c = assert_op_budget(fn, qualname, path=path, exact=True)
        assert c.ai_cpu == 0 and c.syncs == 0, (c.launch_ops, c.sync_ops)


@pytest.mark.parametrize(("qualname", "path", "label", "build"), CASES, ids=IDS)
def test_budget_with_the_checks_off(
    qualname: str, path: str | None, label: str, build: Build, no_validation: None
) -> None:
    _measure(qualname, path, build)


@pytest.mark.parametrize(("qualname", "path", "label", "build"), CASES, ids=IDS)
def test_budget_with_the_checks_on(
    qualname: str, path: str | None, label: str, build: Build
) -> None:
    _measure(qualname, path, build)


def test_every_op_of_the_family_is_measured() -> None:
    assert_every_path_measured("rab", [(q, p) for q, p, _, _ in CASES])
