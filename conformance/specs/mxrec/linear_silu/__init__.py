"""Specs of the linear_silu family (``fbgemm_npu/native/mxrec/linear_silu/``)."""
