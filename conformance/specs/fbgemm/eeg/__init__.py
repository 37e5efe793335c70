"""Specs of the eeg family (``fbgemm_npu/native/fbgemm/eeg/``)."""
