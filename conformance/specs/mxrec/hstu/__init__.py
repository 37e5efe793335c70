"""Specs of the HSTU family (``fbgemm_npu/native/mxrec/hstu/``)."""
