"""The conformance suite: fbgemm_npu on npu against upstream fbgemm on CPU (docs/design.md rule 4).

``conformance.harness`` runs one example, ``conformance.specs`` holds one spec module per op
family, ``python -m conformance`` runs the suite with a report and pytest runs
``conformance/test_conformance.py``.  See ``conformance/README.md``.
"""
