#!/usr/bin/env bash
# Serve the SGLS tool simulator (paper: Qwen3-235B-A22B-Instruct-2507, T=0.6 set by the client) with `vllm serve`,
# wait until every replica is healthy, and publish the URLs for training:
#
#   bash recipes/serve_sgls.sh &                 # foreground job: Ctrl-C / kill stops the replicas
#   bash recipes/run_qwen7b_slca.sh              # reads SERVICES_DIR/sgls_urls when SGLS_URLS is unset
#
# Several replicas on one node: REPLICAS=2 GPUS_PER_REPLICA=4 (ports PORT, PORT+1, ...); the client load-balances
# and fails over between them. Replicas on other nodes: run this there with ADVERTISE_HOST=<its address> and join
# the URL files (comma-separated) into SGLS_URLS. DETACH=1 returns once healthy, leaving the servers running.
set -xeuo pipefail
RECIPES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SGLS_MODEL_PATH=${SGLS_MODEL_PATH:-Qwen/Qwen3-235B-A22B-Instruct-2507}
SGLS_MODEL=${SGLS_MODEL:-Qwen3-235B-A22B-Instruct-2507}
PORT=${PORT:-8000}
REPLICAS=${REPLICAS:-1}
GPUS_PER_REPLICA=${GPUS_PER_REPLICA:-8}
MAX_MODEL_LEN=${MAX_MODEL_LEN:-32768}
source "${RECIPES_DIR}/serve_lib.sh"

start_replicas sgls "${SGLS_MODEL_PATH}" "${SGLS_MODEL}" "${PORT}" "${REPLICAS}" "${GPUS_PER_REPLICA}" \
  --max-model-len "${MAX_MODEL_LEN}" --enable-prefix-caching --gpu-memory-utilization 0.9 "$@"
wait_healthy "${HEALTH_TIMEOUT_S}"
publish sgls
serve_until_stopped
