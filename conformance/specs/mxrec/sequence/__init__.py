"""Specs of the sequence family (``fbgemm_npu/native/mxrec/sequence/``)."""
