"""Kernels for upstream's ``fbgemm::`` ops, one package per family (docs/design.md, layout)."""
