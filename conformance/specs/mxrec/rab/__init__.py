"""Specs of the rab family (``fbgemm_npu/native/mxrec/rab/``)."""
