"""Specs of the quantize_8bit family (``fbgemm_npu/native/fbgemm/quantize_8bit/``)."""
