"""TBE training conformance, a harness of its own (not OpSpecs): a TBE trained for a few steps on
npu against upstream's on CPU or the float64 reference (:mod:`.reference`).  :mod:`.cases`
describes a case and its oracle, :mod:`.training` runs one, :mod:`.matrix` lists the CI and the
full matrices (``python -m conformance.specs.fbgemm.tbe.matrix [--full]``)."""
