#!/usr/bin/env bash
# Stop the server started by scripts/vllm_cpu_serve.sh (by its pid file) and remove .vllm_cpu_url.
set -uo pipefail
ROOT=/tmp/slca-vllm-cpu
REPO=$(cd "$(dirname "$0")/.." && pwd)
if [[ -f "$ROOT/server.pid" ]]; then
  PID=$(cat "$ROOT/server.pid")
  kill "$PID" 2>/dev/null && for _ in $(seq 30); do kill -0 "$PID" 2>/dev/null || break; sleep 1; done
  kill -9 "$PID" 2>/dev/null || true
  rm -f "$ROOT/server.pid"
fi
rm -f "$REPO/.vllm_cpu_url"
