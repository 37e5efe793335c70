"""Specs of the quantize_float family (``fbgemm_npu/native/fbgemm/quantize_float/``)."""
