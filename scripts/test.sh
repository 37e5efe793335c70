#!/usr/bin/env bash
# Lint and format check, then the unit tests and the conformance suite.  Arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$FBGEMM_NPU_ROOT"

# Lint and format check over the whole repository (.venv excluded in pyproject.toml): Python
# files and the Python blocks of the Markdown files.
ruff check .
ruff format --check .

# Without torch_npu there is no real npu device: use the simulated one.
if ! python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch_npu") is None)'
then
    export FBGEMM_NPU_SIMULATE=1
fi
python -m pytest -q tests conformance "$@"
