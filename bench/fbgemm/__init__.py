"""Benchmarks of the ``fbgemm::`` ops, one module per op family of ``fbgemm_npu/native/fbgemm/``;
each exports ``CASES``."""
