"""Specs of the norm family (``fbgemm_npu/native/mxrec/norm/``)."""
