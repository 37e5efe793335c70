"""Specs of the HSTU v2 family (``fbgemm_npu/native/mxrec/hstu_v2/``)."""
