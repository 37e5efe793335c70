"""Specs of FBGEMM's varlen HSTU attention (``fbgemm_npu/native/fbgemm/hstu_varlen/``)."""
