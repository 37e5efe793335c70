"""Specs of the cumsum family (``fbgemm_npu/native/fbgemm/cumsum/``)."""
