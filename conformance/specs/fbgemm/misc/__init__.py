"""Specs of the misc family (``fbgemm_npu/native/fbgemm/misc/``)."""
