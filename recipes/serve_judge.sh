#!/usr/bin/env bash
# Serve the HierR preference judge (paper: gpt-oss-120b, temperature 0 set by the client) with `vllm serve`, wait
# until every replica is healthy, and publish the URLs for training (SERVICES_DIR/judge_urls, read by the RL recipes
# when JUDGE_URLS is unset). Same knobs as serve_sgls.sh: REPLICAS, GPUS_PER_REPLICA, PORT, ADVERTISE_HOST, DETACH.
set -xeuo pipefail
RECIPES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
JUDGE_MODEL_PATH=${JUDGE_MODEL_PATH:-openai/gpt-oss-120b}
JUDGE_MODEL=${JUDGE_MODEL:-gpt-oss-120b}
PORT=${PORT:-8016}
REPLICAS=${REPLICAS:-1}
GPUS_PER_REPLICA=${GPUS_PER_REPLICA:-2}
MAX_MODEL_LEN=${MAX_MODEL_LEN:-32768}
source "${RECIPES_DIR}/serve_lib.sh"

start_replicas judge "${JUDGE_MODEL_PATH}" "${JUDGE_MODEL}" "${PORT}" "${REPLICAS}" "${GPUS_PER_REPLICA}" \
  --max-model-len "${MAX_MODEL_LEN}" --enable-prefix-caching "$@"
wait_healthy "${HEALTH_TIMEOUT_S}"
publish judge
serve_until_stopped
