"""Kernels for the ``mxrec::`` ops of Rec SDK Torch, one package per family (none yet)."""
