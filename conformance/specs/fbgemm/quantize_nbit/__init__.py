"""Specs of the quantize_nbit family (``fbgemm_npu/native/fbgemm/quantize_nbit/``)."""
