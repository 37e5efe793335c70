#!/usr/bin/env bash
# Create or refresh the project's virtual environment in .venv; idempotent.
#
# Run it (`bash scripts/setup.sh`) or source it (scripts/main.sh and scripts/test.sh do): sourced,
# it leaves .venv activated in the caller.  Installs are skipped while .venv/.fbgemm_npu_stamp
# holds the sha256 of requirements/lock.txt, pyproject.toml and the torchrec pin below.
set -euo pipefail

FBGEMM_NPU_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# torchrec declares the CUDA fbgemm-gpu, so it is installed with --no-deps; its own requirements
# are pinned in requirements/lock.txt (the `torchrec` extra of pyproject.toml lists them).
TORCHREC_VERSION="1.9.2"

_fbgemm_npu_setup() {
    local root="$FBGEMM_NPU_ROOT" venv="$FBGEMM_NPU_ROOT/.venv"
    local stamp="$venv/.fbgemm_npu_stamp" python want
    export PIP_DISABLE_PIP_VERSION_CHECK=1

    if [[ ! -x "$venv/bin/python" ]]; then
        python="$(command -v python3.11 || command -v python3 || true)"
        if [[ -z "$python" ]]; then
            echo "setup.sh: no python3.11 or python3 on PATH" >&2
            return 1
        fi
        echo "setup.sh: creating .venv with $("$python" --version 2>&1)"
        "$python" -m venv "$venv"
    fi

    want="$(cat "$root/requirements/lock.txt" "$root/pyproject.toml" \
        <(echo "torchrec==$TORCHREC_VERSION") | sha256sum | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        return 0
    fi

    echo "setup.sh: installing requirements/lock.txt, torchrec $TORCHREC_VERSION, fbgemm-npu-ops"
    # torch is pinned ==2.13.0 in the lock file; a plain or newer torch would pull a CUDA build.
    "$venv/bin/python" -m pip install -qq -r "$root/requirements/lock.txt"
    "$venv/bin/python" -m pip install -qq --no-deps "torchrec==$TORCHREC_VERSION"
    "$venv/bin/python" -m pip install -qq --no-deps -e "$root"
    if "$venv/bin/python" -c 'import sys, torch; sys.exit(torch.version.cuda is None)'; then
        echo "setup.sh: warning: .venv holds a CUDA build of torch; fbgemm_npu wants the CPU" \
            "build (torch_npu supplies the device)" >&2
    fi
    echo "$want" > "$stamp"
}

_fbgemm_npu_setup
# shellcheck disable=SC1091  # created above
source "$FBGEMM_NPU_ROOT/.venv/bin/activate"
