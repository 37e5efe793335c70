#!/usr/bin/env bash
# Lint, then the unit tests and the conformance suite.  Arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$FBGEMM_NPU_ROOT"

# Lint the source folders that exist (bench/ arrives with the section-1 ops).
lint=()
for d in fbgemm_npu tests conformance bench; do
    [[ -d "$d" ]] && lint+=("$d")
done
ruff check "${lint[@]}"

# Without torch_npu there is no real npu device: use the simulated one.
if ! python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch_npu") is None)'
then
    export FBGEMM_NPU_SIMULATE=1
fi
python -m pytest -q tests conformance "$@"
