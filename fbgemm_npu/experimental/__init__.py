"""fbgemm_npu's counterparts of ``fbgemm_gpu.experimental``: packages upstream ships beside its
wheel (built for CUDA only), here on npu.  ``hstu``: FBGEMM's HSTU attention."""
