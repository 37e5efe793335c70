#!/usr/bin/env bash
# The main job: torchrec's DLRM sharded with DistributedModelParallel, trained on npu and checked
# against the same run on CPU with upstream fbgemm.  Arguments go to
# `python -m fbgemm_npu.examples.dlrm` (--processes, --sharding-type, --model, --batch-size,
# --steps, --num-embeddings, --embedding-dim; --help lists them); without any, 2 ranks train
# with every table sharded row-wise.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$FBGEMM_NPU_ROOT"

# Without torch_npu there is no real npu device: use the simulated one.
if ! python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch_npu") is None)'
then
    export FBGEMM_NPU_SIMULATE=1
fi
if [[ $# -eq 0 ]]; then
    set -- --processes 2 --sharding-type row_wise
fi
python -m fbgemm_npu.examples.dlrm "$@"
