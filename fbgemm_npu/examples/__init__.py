"""Runnable examples; ``python -m fbgemm_npu.examples.dlrm`` is the main job (see its docstring)."""
