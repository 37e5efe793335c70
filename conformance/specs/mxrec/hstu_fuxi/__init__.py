"""Specs of the FuXi HSTU family (``fbgemm_npu/native/mxrec/hstu_fuxi/``)."""
