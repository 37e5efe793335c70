#!/usr/bin/env bash
# The hostile-input fuzz suite (tests/fuzz/): the CI size, or with --long 10,000 cases per family.
# Prints, per family, the cases run and the crashes / hangs / wrong results (all must be 0).
# Further arguments go to pytest (e.g. -k jagged).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$FBGEMM_NPU_ROOT"
if [ "${1:-}" = "--long" ]; then
    shift
    export FBGEMM_NPU_FUZZ_CASES=10000
fi
if ! python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch_npu") is None)'
then
    export FBGEMM_NPU_SIMULATE=1
fi
export FBGEMM_NPU_FUZZ_REPORT="${FBGEMM_NPU_FUZZ_REPORT:-$FBGEMM_NPU_ROOT/fuzz-report.json}"
python -m pytest -q -p no:cacheprovider tests/fuzz "$@"
python - "$FBGEMM_NPU_FUZZ_REPORT" "${FBGEMM_NPU_FUZZ_CASES:-0}" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
want = int(sys.argv[2])
bad = 0
for family, r in sorted(report.items()):
    o = r["outcomes"]
    cases = sum(o.values())
    wrong = o["wrong"] + o["rejected"] + o["bad_case"]
    print(f"{family:14s} {cases:6d} cases   crashes {o['crash']}  hangs {o['hang']}  wrong {wrong}"
          f"  unclear errors {o['unclear']}  memory-unsafe {o.get('unsafe', 0)}")
    bad += o["crash"] + o["hang"] + wrong + o["unclear"] + o.get("unsafe", 0) + (cases < want)
sys.exit(1 if bad else 0)
PY
