"""Specs of the bucketize family: the block ops (``block.py``) and the cyclic op (``cyclic.py``);
their drawn inputs (``inputs.py``) and edge cases (``examples.py``)."""
