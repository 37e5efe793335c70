"""Kernels, one package per op family, grouped by namespace.

``native/<namespace>/<family>/`` (``fbgemm/jagged``, ``fbgemm/tbe``, later ``mxrec/hstu``, ...) is
a package whose ``__init__`` exports three tables, the only things the rest of fbgemm_npu reads:

* ``KERNELS``: qualified op name -> ``{dispatch key: kernel}`` (the registrar registers them);
* ``SCHEMAS``: qualified op name -> schema string, for ops nobody else defines (``mxrec::``);
* ``BUDGETS``: qualified op name -> :class:`fbgemm_npu.native.family.Budget`, the op's launch,
  AI-CPU and sync budget, written once and read by the budget tests, the conformance suite,
  ``docs/ops.md`` and ``python -m fbgemm_npu info``.

Modules shared by every family (argument and data checks, the table types) sit here with a
leading ``_`` or in :mod:`fbgemm_npu.native.family`; the registrar does not walk them.
"""
