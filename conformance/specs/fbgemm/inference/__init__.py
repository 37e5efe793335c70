"""Specs of the inference family (``fbgemm_npu/native/fbgemm/inference/``)."""
