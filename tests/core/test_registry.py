"""The one registrar enforces docs/design.md rules 1 and 2 before anything reaches the dispatcher.

Tests that register for real use a fresh ``Registry()`` and a throwaway namespace, so they neither
touch ``fbgemm_npu._registry.REGISTRY`` nor collide with one another.
"""

from __future__ import annotations

import uuid

import pytest
import torch

import fbgemm_npu  # noqa: F401  - imports upstream and registers our kernels
from fbgemm_npu._registry import REGISTRY, Registry

CUMSUM_OPS = tuple(
    f"fbgemm::asynchronous_{name}_cumsum" for name in ("complete", "exclusive", "inclusive")
)


def _never_called(*args: object, **kwargs: object) -> torch.Tensor:
    raise AssertionError("this kernel must not be reached")


@pytest.mark.parametrize(
    "key", ["CPU", "CUDA", "Autograd", "AutogradCPU", "CompositeImplicitAutograd"]
)
def test_refuses_upstream_keys(key: str) -> None:
    registry = Registry()
    with pytest.raises(ValueError, match=rf"fbgemm::asynchronous_complete_cumsum.*{key}.*rule 1"):
        registry.add({"fbgemm::asynchronous_complete_cumsum": {key: _never_called}})
    assert registry.kernels == {}, "a refused table must leave nothing behind"


def test_an_op_we_define_may_have_a_cpu_kernel() -> None:
    """mxrec:: ops (our own schemas, no upstream CPU kernel) get CPU kernels; an op of
    someone else's schema still gets none (test_refuses_upstream_keys), nor a CUDA one."""
    ns = f"fbgemm_npu_test_{uuid.uuid4().hex[:8]}"
    registry = Registry()

    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    registry.add(
        {f"{ns}::double": {"CPU": double}}, schemas={f"{ns}::double": "double(Tensor x) -> Tensor"}
    )
    registry.register()
    x = torch.ones(2, requires_grad=True)
    assert getattr(torch.ops, ns).double(x).tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match=r"CUDA.*rule 1"):
        Registry().add(
            {f"{ns}::double": {"CUDA": double}},
            schemas={f"{ns}::double": "double(Tensor x) -> Tensor"},
        )


@pytest.mark.parametrize("qualname", ["asynchronous_complete_cumsum", "twice"])
def test_refuses_op_name_without_namespace(qualname: str) -> None:
    with pytest.raises(ValueError, match="namespace::name"):
        Registry().add({qualname: {"PrivateUse1": _never_called}})


def test_refuses_two_kernels_for_one_key() -> None:
    registry = Registry()
    registry.add({"fbgemm::asynchronous_complete_cumsum": {"PrivateUse1": _never_called}})
    with pytest.raises(ValueError, match="two PrivateUse1 kernels"):
        registry.add({"fbgemm::asynchronous_complete_cumsum": {"PrivateUse1": lambda t: t}})


def test_meta_kernel_skipped_where_upstream_has_one() -> None:
    op = "fbgemm::asynchronous_complete_cumsum"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "Meta")
    registry = Registry()
    registry.add({op: {"Meta": _never_called}})
    registry.register()
    assert (op, "Meta") in registry.skipped
    assert "Meta" not in registry.registered.get(op, [])
    # upstream's Meta kernel still answers (ours would raise)
    out = torch.ops.fbgemm.asynchronous_complete_cumsum(torch.empty(5, device="meta"))
    assert out.device.type == "meta" and out.shape == (6,)


def test_defines_new_namespace_op() -> None:
    """An ``mxrec::``-style op: schema defined by us, kernels registered, idempotently."""
    ns = f"mxrec_test_{uuid.uuid4().hex[:8]}"
    qualname = f"{ns}::twice"

    def twice_meta(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    registry = Registry()
    registry.add(
        {qualname: {"PrivateUse1": _never_called, "Meta": twice_meta}},
        {qualname: "twice(Tensor x) -> Tensor"},
    )
    registry.register()
    registry.register()  # idempotent: a second impl at the same key would raise
    assert registry.registered[qualname] == ["PrivateUse1", "Meta"]
    assert qualname in registry.defined
    op = getattr(torch.ops, ns).twice
    assert str(op.default._schema) == f"{qualname}(Tensor x) -> Tensor"
    out = op(torch.empty(3, 2, device="meta"))
    assert out.device.type == "meta" and out.shape == (3, 2)
    assert torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "PrivateUse1")
    assert not torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "CPU")


def test_kernel_without_schema_is_an_error() -> None:
    registry = Registry()
    registry.add({f"mxrec_test_{uuid.uuid4().hex[:8]}::nothing": {"PrivateUse1": _never_called}})
    with pytest.raises(RuntimeError, match="has no schema"):
        registry.register()


def test_coverage_lists_cumsum_ops_on_privateuse1() -> None:
    coverage = dict(REGISTRY.coverage())
    for op in CUMSUM_OPS:
        assert coverage.get(op) == ["PrivateUse1"], f"{op}: {coverage.get(op)}"
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1")
    assert [op for op, _ in REGISTRY.coverage()] == sorted(coverage), "rows sorted by op name"
