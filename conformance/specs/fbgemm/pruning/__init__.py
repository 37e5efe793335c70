"""Specs of the pruning family (``fbgemm_npu/native/fbgemm/pruning/``)."""
