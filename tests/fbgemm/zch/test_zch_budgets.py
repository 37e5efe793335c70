"""The zch family held to its BUDGETS table (``native/fbgemm/zch/budgets.py``).

Each op is measured at two sizes, with the data checks off and on: the count must be the
table's exactly whatever the size, the AI-CPU count too (0).  ``zero_collision_hash``: int64 ids
and identities (the main path), and each argument path that costs more or less: int32 ids and
identities (``int32``: the widening cast), int64 ids against int32 identities
(``int32_identities``: upstream's ``% (2**31 - 1)``), ``local_sizes`` / ``offsets``
(``chunked``: per-id moduli and the data checks), ``opt_in_prob`` (``opt_in``),
``disable_fallback`` (``no_fallback``) and ``max_probe = 0`` (``no_probe``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

F = torch.ops.fbgemm
NPU = "npu"
SIZES = (5, 3000)  # ids: the counts must not depend on them
MURMUR = "fbgemm::murmur_hash3"
ZCH = "fbgemm::zero_collision_hash"
# (op, path, the call's configuration): each path measured where it costs the most, its ceiling
CASES = [
    (MURMUR, None, ()),
    (ZCH, None, ()),
    (ZCH, None, ("no_fallback",)),
    (ZCH, "int32", ("int32",)),
    (ZCH, "int32_identities", ("int32_identities",)),
    (ZCH, "opt_in", ("int32_identities", "opt_in")),
    (ZCH, "chunked", ("int32_identities", "opt_in", "chunked")),
    (ZCH, "no_probe", ("int32", "opt_in", "no_probe")),
]


def _call(qualname: str, config: tuple[str, ...], n: int) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(n)
    if qualname == MURMUR:
        x = torch.randint(-(2**40), 2**40, (1,), generator=g).to(NPU)
        return lambda: F.murmur_hash3(x, 3, 7)
    rows = 64
    ids = torch.randint(-(2**40), 2**40, (n,), generator=g)
    table = torch.full((rows, 1), -1)
    table[::3, 0] = ids.repeat(22)[:22]  # some ids found, the rest fall back
    kw: dict[str, Any] = {"circular_probe": True, "readonly": True}
    if "int32" in config:
        ids, table = ids.int(), table.int()
    if "int32_identities" in config:
        table = table.int()
    if "chunked" in config:
        kw["local_sizes"] = torch.full((n,), 16).to(NPU)
        kw["offsets"] = (torch.randint(0, 4, (n,), generator=g) * 16).to(NPU)
    if "opt_in" in config:
        kw.update(opt_in_prob=100, num_reserved_slots=4)
    if "no_fallback" in config:
        kw["disable_fallback"] = True
    probes = 0 if "no_probe" in config else 8
    ids, table = ids.to(NPU), table.to(NPU)
    return lambda: F.zero_collision_hash(ids, table, probes, **kw)


def _measure(qualname: str, path: str | None, config: tuple[str, ...]) -> None:
    for n in SIZES:
        call = _call(qualname, config, n)
        call()  # warm the cached aranges (native/_index.py) at this size
        c = assert_op_budget(call, qualname, path=path, exact=True)
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("zch", [(q, p) for q, p, _ in CASES])
