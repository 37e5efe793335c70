"""Specs of the ``mxrec::`` families (Rec SDK Torch ops)."""
