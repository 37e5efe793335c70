"""Specs of the zch family (``fbgemm_npu/native/fbgemm/zch/``)."""
