"""Specs of the reorder family (``fbgemm_npu/native/fbgemm/reorder/``)."""
