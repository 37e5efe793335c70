"""Specs of the index-select family: the jagged selects (``jagged_select.py``), the keyed select
(``keyed.py``), the batch and group selects (``batch.py``, ``group.py``), the ranges and segment
sums (``ranges.py``) and the unique indices (``unique.py``); ``common.py`` holds what they share."""
