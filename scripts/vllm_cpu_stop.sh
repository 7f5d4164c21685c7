#!/usr/bin/env bash
# Stop the server started by scripts/vllm_cpu_serve.sh with the same VENV_DIR / MODEL_DIR (or STATE_DIR,
# VLLM_CPU_PYTHON): its process and the processes it started, by the pid file in its state dir, waited for; then
# remove URL_FILE (default .vllm_cpu_url at the repo root) when it still names this server.
#
#   scripts/vllm_cpu_stop.sh [VENV_DIR] [MODEL_DIR]
#   DRY_RUN=1 scripts/vllm_cpu_stop.sh ...    # prints the state dir and URL file; stops nothing
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
source "${REPO}/scripts/vllm_cpu_lib.sh"
vllm_cpu_paths "${1:-}" "${2:-}"
echo "[vllm-cpu stop] state $STATE_DIR, URL file $URL_FILE" >&2
[[ "${DRY_RUN:-0}" == 0 ]] || exit 0
if [[ -f "$STATE_DIR/server.pid" ]]; then
  PID=$(cat "$STATE_DIR/server.pid")
  pkill -TERM -P "$PID" 2>/dev/null   # the engine processes the API server started
  kill "$PID" 2>/dev/null && for _ in $(seq 30); do kill -0 "$PID" 2>/dev/null || break; sleep 1; done
  kill -9 "$PID" 2>/dev/null || true
  rm -f "$STATE_DIR/server.pid"
fi
# URL_FILE may name another server by now (a later serve.sh of other paths): removed only when it is this one's
if [[ ! -f "$STATE_DIR/server.url" ]] || cmp -s "$STATE_DIR/server.url" "$URL_FILE"; then rm -f "$URL_FILE"; fi
rm -f "$STATE_DIR/server.url"
