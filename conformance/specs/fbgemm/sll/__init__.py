"""Specs of the sll family (``fbgemm_npu/native/fbgemm/sll/``)."""
