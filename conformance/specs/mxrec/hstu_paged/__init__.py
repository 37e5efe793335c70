"""Specs of the paged HSTU family (``fbgemm_npu/native/mxrec/hstu_paged/``)."""
