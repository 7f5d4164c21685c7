#!/usr/bin/env bash
# bfcl-eval (the Berkeley Function Calling Leaderboard's own package) with all of its dependencies, in its own venv
# (idempotent): `bfcl generate` / `bfcl evaluate` import every vendor SDK bfcl-eval supports, and bfcl-eval pins
# numpy 1.26, which verl 0.9.1 cannot share an environment with.
#
#   scripts/bfcl_setup.sh [VENV_DIR]       default: /tmp/slca-bfcl/venv; writes the venv's python path to .bfcl_python
#
# torch==2.13.0 first: sentence-transformers (a bfcl-eval dependency) would otherwise pull a CUDA build of several GB.
# soundfile: qwen-agent (imported by bfcl-eval's model table) imports it but does not declare it.
set -euo pipefail
VENV=${1:-/tmp/slca-bfcl/venv}
HOST_PY=${HOST_PY:-python3}
source "$(cd "$(dirname "$0")" && pwd)/progress_lib.sh"
t0=$(date +%s)
if [[ ! -f "${VENV}/.slca_ready" ]]; then
  # stage lines with the time left: ~1.5 min on an idle 2-core machine, 3.3-3.5 min measured on a loaded one
  progress_start "bfcl setup" 10 20 50 10
  progress_stage 1 "creating venv ${VENV}"
  "${HOST_PY}" -m venv "${VENV}"
  "${VENV}/bin/pip" install -q --upgrade pip
  progress_stage 2 "torch 2.13.0 (the CPU build)"
  "${VENV}/bin/pip" install -q "torch==2.13.0"
  progress_stage 3 "bfcl-eval 2026.3.23 and its dependencies"
  "${VENV}/bin/pip" install -q "bfcl-eval==2026.3.23" soundfile
  progress_stage 4 "checking that bfcl's command line starts"
  # the CLI imports every vendor SDK at start: listing the categories proves it starts (its own `bfcl version`
  # looks up a distribution named "bfcl", which bfcl-eval 2026.3.23 does not install, and always fails)
  BFCL_PROJECT_ROOT=$(mktemp -d) "${VENV}/bin/bfcl" test-categories > /dev/null
  echo "[bfcl setup] bfcl-eval $("${VENV}/bin/python" -c 'from importlib.metadata import version; print(version("bfcl-eval"))')"
  touch "${VENV}/.slca_ready"
else
  echo "[bfcl setup] venv ready: ${VENV}"
fi
echo "${VENV}/bin/python" > "$(cd "$(dirname "$0")/.." && pwd)/.bfcl_python"
echo "[bfcl setup] done in $(( $(date +%s) - t0 )) s"
