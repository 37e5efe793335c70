"""Specs of the pooled family: the permutes (``permute.py``), the KeyedTensor regrouping
(``regroup.py``) and the cross-device ops (``cross_device.py``)."""
