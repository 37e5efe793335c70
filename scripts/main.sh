#!/usr/bin/env bash
# The main job: for now the conformance suite (fbgemm_npu on npu vs upstream fbgemm on CPU); the
# DLRM example will take its place.  Arguments go to `python -m conformance`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$FBGEMM_NPU_ROOT"

# Without torch_npu there is no real npu device: use the simulated one.
if ! python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch_npu") is None)'
then
    export FBGEMM_NPU_SIMULATE=1
fi
python -m conformance "$@"
