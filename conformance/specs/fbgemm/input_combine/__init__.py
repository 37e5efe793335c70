"""Specs of the input_combine family (``fbgemm_npu/native/fbgemm/input_combine/``)."""
