"""Specs of the jagged2d family (``fbgemm_npu/native/mxrec/jagged2d/``)."""
