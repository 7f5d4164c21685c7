#!/usr/bin/env bash
# Start vLLM's OpenAI server on the CPU in the background (after scripts/vllm_cpu_setup.sh), wait until healthy.
#
#   scripts/vllm_cpu_serve.sh [VENV_DIR] [MODEL_DIR] [PORT] [TIMEOUT_S]
#
# Prints the base URL and writes it to .vllm_cpu_url at the repo root (gitignore it): the one place the vLLM test
# tier (tests/integration/) and other tiers (e.g. the HierR judge's) look for the server. Served model name:
# "tiny-qwen3" (tests read it from /v1/models). Log: $ROOT/server.log; pid: $ROOT/server.pid.
# Stop with scripts/vllm_cpu_stop.sh (which also removes .vllm_cpu_url).
set -euo pipefail

ROOT=/tmp/slca-vllm-cpu
VENV=${1:-$ROOT/venv}
MODEL=${2:-$ROOT/tiny-qwen3}
PORT=${3:-8765}
TIMEOUT=${4:-600}
REPO=$(cd "$(dirname "$0")/.." && pwd)
URL="http://127.0.0.1:$PORT/v1"
mkdir -p "$ROOT"

if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then
  echo "[vllm-cpu serve] already healthy on port $PORT" >&2
  echo "$URL" > "$REPO/.vllm_cpu_url"
  echo "$URL"
  exit 0
fi

t0=$(date +%s)
VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 \
  nohup "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
    --model "$MODEL" --served-model-name tiny-qwen3 --dtype float32 --max-model-len 2048 \
    --host 127.0.0.1 --port "$PORT" > "$ROOT/server.log" 2>&1 &
PID=$!
echo "$PID" > "$ROOT/server.pid"

while true; do
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "[vllm-cpu serve] server exited early; last log lines:" >&2; tail -n 40 "$ROOT/server.log" >&2; exit 1
  fi
  if (( $(date +%s) - t0 > TIMEOUT )); then
    echo "[vllm-cpu serve] not healthy after ${TIMEOUT}s; stopping it. Last log lines:" >&2
    tail -n 40 "$ROOT/server.log" >&2; kill "$PID" 2>/dev/null || true; exit 1
  fi
  sleep 2
done
echo "[vllm-cpu serve] healthy after $(( $(date +%s) - t0 )) s (pid $PID)" >&2
echo "$URL" > "$REPO/.vllm_cpu_url"
echo "$URL"
