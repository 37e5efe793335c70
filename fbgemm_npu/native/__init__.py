"""Kernels: one module per op family, each exporting ``KERNELS`` for the registrar."""
