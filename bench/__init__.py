"""Benchmarks of fbgemm_npu: ``python -m bench ops`` (section-1 op families) and later ``tbe``."""
