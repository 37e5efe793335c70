"""Specs of the sll_attention family (``fbgemm_npu/native/fbgemm/sll_attention/``);
:mod:`.reference` holds the float64 references where upstream's CPU kernel cannot judge."""
