"""Specs of the disentangle family (``fbgemm_npu/native/mxrec/disentangle/``)."""
