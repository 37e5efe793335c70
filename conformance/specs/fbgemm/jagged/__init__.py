"""Specs of the jagged family (``fbgemm_npu/native/fbgemm/jagged/``), one module per kernel
module there; :mod:`.inputs` holds the strategies they share."""
