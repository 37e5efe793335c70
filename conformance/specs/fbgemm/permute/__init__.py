"""Specs of the permute family: judged by upstream's CPU kernels (``sparse.py``) and by the loop
references (``references.py``) where upstream cannot judge (``cuda_forms.py``); the drawn inputs
and each call's budget path (``inputs.py``)."""
