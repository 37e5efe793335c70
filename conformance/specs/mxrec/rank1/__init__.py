"""Specs of the rank1 family (``fbgemm_npu/native/mxrec/rank1/``)."""
