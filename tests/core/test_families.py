"""The family tree the registrar walks, and the tables each family exports (docs/design.md, rule 7).

Every op family is a package ``fbgemm_npu/native/<namespace>/<family>/`` exporting ``KERNELS``
(built with :func:`~fbgemm_npu.native.family.merge_kernels`), ``SCHEMAS`` and ``BUDGETS`` (one
:class:`~fbgemm_npu.native.family.Budget` per op).  These tests walk the folders themselves, so a
family the registrar misses, an op in two families, an op without a budget, or a budget without an
op fails here; and they hold :class:`Budget` and :func:`merge_kernels` to their contracts.
"""

from __future__ import annotations

import importlib
from collections import Counter
from pathlib import Path

import pytest
import torch

import fbgemm_npu  # noqa: F401  - imports upstream and registers our kernels
from fbgemm_npu._registry import REGISTRY, Registry, family_modules
from fbgemm_npu.native.family import Budget, merge_kernels

NATIVE = Path(fbgemm_npu.__file__).resolve().parent / "native"
OP = "fbgemm::asynchronous_complete_cumsum"


def _never_called(*args: object, **kwargs: object) -> torch.Tensor:
    raise AssertionError("this kernel must not be reached")


def _public_packages(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_dir() and not p.name.startswith("_") and (p / "__init__.py").is_file()
    )


def _families_on_disk() -> list[str]:
    return sorted(
        f"fbgemm_npu.native.{ns.name}.{family.name}"
        for ns in _public_packages(NATIVE)
        for family in _public_packages(ns)
    )


# --- the tree -------------------------------------------------------------------------------------


def test_family_modules_lists_every_family_package_and_nothing_else() -> None:
    on_disk = _families_on_disk()
    assert "fbgemm_npu.native.fbgemm.cumsum" in on_disk, f"the walk found {on_disk}"
    assert family_modules() == on_disk


@pytest.mark.parametrize("family", _families_on_disk())
def test_every_family_exports_its_three_tables(family: str) -> None:
    mod = importlib.import_module(family)
    for table in ("KERNELS", "SCHEMAS", "BUDGETS"):
        assert isinstance(getattr(mod, table, None), dict), f"{family} exports no {table} dict"
    bad = sorted(op for op, b in mod.BUDGETS.items() if not isinstance(b, Budget))
    assert not bad, f"{family}.BUDGETS: entries that are not a Budget: {bad}"


def test_every_registered_op_has_exactly_one_family() -> None:
    owners = Counter(
        op for family in family_modules() for op in importlib.import_module(family).KERNELS
    )
    twice = sorted(op for op, n in owners.items() if n > 1)
    assert not twice, f"ops in more than one family's KERNELS: {twice}"
    assert set(REGISTRY.families) == set(REGISTRY.kernels), (
        f"registered ops without a family: {sorted(set(REGISTRY.kernels) - set(REGISTRY.families))}"
    )
    for op, family in REGISTRY.families.items():
        assert family in family_modules(), f"{op}: family {family} is not in the tree"
        assert op in importlib.import_module(family).KERNELS, f"{op}: not in {family}.KERNELS"


def test_every_registered_op_has_a_budget() -> None:
    """Each family's ``budgets.py`` holds one entry per op it registers (the one place)."""
    missing: dict[str, list[str]] = {}
    for op in sorted(set(REGISTRY.kernels) - set(REGISTRY.budgets)):
        missing.setdefault(REGISTRY.families.get(op, "?"), []).append(op)
    assert not missing, "ops without a BUDGETS entry, by family:\n" + "\n".join(
        f"  {family}: {', '.join(ops)}" for family, ops in sorted(missing.items())
    )
    for op, budget in REGISTRY.budgets.items():
        family = importlib.import_module(REGISTRY.families[op])
        assert family.BUDGETS[op] is budget, f"{op}: the registry's budget is not its family's"


# --- the registrar's checks -----------------------------------------------------------------------


def test_budget_for_an_op_without_a_kernel_is_refused() -> None:
    registry = Registry()
    with pytest.raises(ValueError, match=rf"budget for {OP}, which has no kernel"):
        registry.add({}, budgets={OP: Budget(launches=1)})
    assert registry.budgets == {}
    registry.add({OP: {"PrivateUse1": _never_called}}, budgets={OP: Budget(launches=1)})
    assert registry.budgets == {OP: Budget(launches=1)}


def test_two_budgets_for_one_op_are_refused() -> None:
    registry = Registry()
    registry.add({OP: {"PrivateUse1": _never_called}}, budgets={OP: Budget(launches=1)})
    registry.add({}, budgets={OP: Budget(launches=1)})  # the same budget again is no conflict
    with pytest.raises(ValueError, match=rf"two budgets for {OP}"):
        registry.add({}, budgets={OP: Budget(launches=2)})


def test_an_op_in_two_families_is_refused() -> None:
    registry = Registry()
    registry.add({OP: {"PrivateUse1": _never_called}}, family="fbgemm_npu.native.fbgemm.a")
    with pytest.raises(ValueError, match=rf"{OP} is in two families"):
        registry.add({OP: {"Meta": _never_called}}, family="fbgemm_npu.native.fbgemm.b")
    assert registry.families == {OP: "fbgemm_npu.native.fbgemm.a"}


# --- Budget and merge_kernels ---------------------------------------------------------------------


@pytest.mark.parametrize("target", [3, 4])
def test_budget_refuses_a_target_the_launches_meet(target: int) -> None:
    with pytest.raises(ValueError, match="meet it"):
        Budget(launches=3, target=target, note="why it is over")


def test_budget_refuses_a_target_without_a_note() -> None:
    with pytest.raises(ValueError, match="needs a note"):
        Budget(launches=5, target=3)
    over = Budget(launches=5, target=3, note="two casts that a fused kernel would drop")
    assert (over.launches, over.target) == (5, 3)


def test_launch_limit_adds_checks_only_when_validating() -> None:
    budget = Budget(launches=4, checks=3, paths={"total_num_blocks": 7})
    assert budget.launch_limit(validating=False) == 4
    assert budget.launch_limit(validating=True) == 4 + 3
    assert budget.launch_limit(validating=False, units=3) == 4 * 3
    assert budget.launch_limit(validating=True, units=3) == 4 * 3 + 3
    assert budget.launch_limit(validating=False, path="total_num_blocks") == 7
    assert budget.launch_limit(validating=True, units=2, path="total_num_blocks") == 7 * 2 + 3


def test_launch_limit_takes_a_paths_own_check_cost() -> None:
    budget = Budget(
        launches=4, checks=3, paths={"dims_2": 6, "weights": 5}, path_checks={"dims_2": 8}
    )
    assert budget.launch_limit(validating=True, path="dims_2") == 6 + 8
    assert budget.launch_limit(validating=False, path="dims_2") == 6
    assert budget.launch_limit(validating=True, path="weights") == 5 + 3  # the common cost
    assert budget.launch_limit(validating=True) == 4 + 3
    with pytest.raises(ValueError, match="path_checks for unknown paths"):
        Budget(launches=4, paths={"weights": 5}, path_checks={"dims_2": 8})


def test_launch_limit_refuses_an_unknown_path() -> None:
    budget = Budget(launches=4, paths={"total_num_blocks": 7})
    with pytest.raises(KeyError, match=r"no path 'weights'.*total_num_blocks"):
        budget.launch_limit(validating=False, path="weights")
    with pytest.raises(KeyError, match="no path 'weights'"):
        Budget(launches=4).launch_limit(validating=True, path="weights")


def test_sync_limit_reads_back_only_where_a_size_is_omitted() -> None:
    assert Budget(launches=1, syncs_unsized=1).sync_limit(sized=True) == 0
    assert Budget(launches=1, syncs_unsized=1).sync_limit(sized=False) == 1
    assert Budget(launches=1, syncs=2).sync_limit(sized=False) == 2


def test_merge_kernels_refuses_an_op_given_twice() -> None:
    with pytest.raises(ValueError, match=rf"{OP} has kernels in two modules"):
        merge_kernels({OP: {"PrivateUse1": _never_called}}, {OP: {"Meta": _never_called}})


def test_merge_kernels_joins_the_tables_and_copies_them() -> None:
    first = {OP: {"PrivateUse1": _never_called}}
    other = "fbgemm::asynchronous_inclusive_cumsum"
    merged = merge_kernels(first, {other: {"AutogradPrivateUse1": _never_called}})
    assert merged == {OP: first[OP], other: {"AutogradPrivateUse1": _never_called}}
    merged[OP]["Meta"] = _never_called
    assert "Meta" not in first[OP], "merge_kernels must not alias its inputs"


def test_specs_and_tests_of_real_ops_write_no_budget_numbers() -> None:
    """A budget is written once: no spec or family test builds a ``Budget`` of its own (only the
    harness's tests do, for made-up ops); every conformance spec's op has a registered budget."""
    from conformance.harness import BudgetUse
    from conformance.specs import SPECS

    root = Path(__file__).resolve().parents[2]
    places = [
        *(root / "conformance" / "specs").rglob("*.py"),
        *(root / "tests" / "fbgemm").rglob("*.py"),
    ]
    offenders = [str(p.relative_to(root)) for p in places if "Budget(" in p.read_text()]
    assert offenders == [], f"budgets written outside budgets.py: {offenders}"
    for spec in SPECS:
        if isinstance(spec.budget, BudgetUse):
            assert spec.budget.budget is None, spec.name
            op = spec.budget.op or f"fbgemm::{spec.name.split('.')[0].split('[')[0]}"
            assert op in REGISTRY.budgets, f"{spec.name}: {op} has no budget"
