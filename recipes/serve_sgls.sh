#!/usr/bin/env bash
# Serve the SGLS tool simulator (paper: Qwen3-235B-A22B-Instruct-2507, T=0.6 set by the client) with `vllm serve`,
# wait until every replica is healthy, and publish the URLs for training:
#
#   bash recipes/serve_sgls.sh &                 # foreground job: Ctrl-C / kill stops the replicas
#   bash recipes/run_qwen7b_slca.sh              # reads SERVICES_DIR/sgls_urls when SGLS_URLS is unset
#
# GPUs: REPLICAS x GPUS_PER_REPLICA (default 1 x 8: GPUs 0-7, a whole 8-GPU node; the bf16 model is ~470 GB).
# GPUS=<ids> or FIRST_GPU choose them; by default the first GPUs no running server of SERVICES_DIR holds here, and
# a set that overlaps a running server's fails at once (docs/recipes.md, "Placement"). Several replicas on one node:
# REPLICAS=2 GPUS_PER_REPLICA=4 (ports PORT, PORT+1, ...; the FP8 checkpoint fits 4 x 80 GB); the client
# load-balances and fails over between them. Replicas on other nodes: run this there with ADVERTISE_HOST=<its
# address> and join the URL files (comma-separated) into SGLS_URLS. DETACH=1 returns once healthy, leaving the
# servers running. The model is fetched first with `hf download` (PREFETCH=0: let vLLM do it); the health wait
# then lasts as long as the server keeps logging (HEALTH_STALL_S of silence = stuck; HEALTH_TIMEOUT_S: a hard limit).
# Every replica demands the key in API_KEY_FILE (default SERVICES_DIR/api_key, generated once, mode 0600).
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
