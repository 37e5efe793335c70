"""Benchmarks of fbgemm_npu, one module per op family under ``bench/<namespace>/``, run by
``python -m bench ops`` and ``python -m bench tbe`` (bench/__main__.py)."""
