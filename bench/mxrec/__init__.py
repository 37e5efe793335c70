"""Benchmarks of the ``mxrec::`` ops (Rec SDK's families under ``fbgemm_npu/native/mxrec/``): each
module is a measurement of its own with a ``main``, run by its ``python -m bench`` subcommand
(``bench/__main__.py``), not a table of ``CASES`` (there is no upstream CPU kernel to time)."""
