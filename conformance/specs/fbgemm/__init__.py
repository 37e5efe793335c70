"""Specs of the ``fbgemm::`` ops, one folder per op family of ``fbgemm_npu/native/fbgemm/``."""
