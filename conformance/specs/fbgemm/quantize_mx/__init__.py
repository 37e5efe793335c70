"""Specs of the quantize_mx family (``fbgemm_npu/native/fbgemm/quantize_mx/``)."""
