#!/usr/bin/env bash
# Serve the HierR preference judge (paper: gpt-oss-120b, temperature 0 set by the client) with `vllm serve`, wait
# until every replica is healthy, and publish the URLs for training (SERVICES_DIR/judge_urls, read by the RL recipes
# when JUDGE_URLS is unset). Same knobs as serve_sgls.sh: REPLICAS, GPUS_PER_REPLICA, GPUS / FIRST_GPU, PORT,
# ADVERTISE_HOST, DETACH, PREFETCH, HEALTH_STALL_S, API_KEY_FILE. Default 1 x 2 GPUs, after those serve_sgls.sh holds
# on this node (so on an 8-GPU node that already serves the 8-GPU simulator it stops and says so). One 2-GPU replica
# is short of the 2,048 judgments a paper-sized step asks for (docs/recipes.md, "Judge throughput"): REPLICAS=3+.
set -xeuo pipefail
RECIPES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
JUDGE_MODEL_PATH=${JUDGE_MODEL_PATH:-openai/gpt-oss-120b}
JUDGE_MODEL=${JUDGE_MODEL:-gpt-oss-120b}
PORT=${PORT:-8016}
REPLICAS=${REPLICAS:-1}
GPUS_PER_REPLICA=${GPUS_PER_REPLICA:-2}
MAX_MODEL_LEN=${MAX_MODEL_LEN:-32768}
# the repository's original/ and metal/ folders are other copies of the weights, which vLLM does not read
[[ "${JUDGE_MODEL_PATH}" == openai/gpt-oss-* ]] && PREFETCH_EXCLUDE=${PREFETCH_EXCLUDE-'original/* metal/*'}
source "${RECIPES_DIR}/serve_lib.sh"

start_replicas judge "${JUDGE_MODEL_PATH}" "${JUDGE_MODEL}" "${PORT}" "${REPLICAS}" "${GPUS_PER_REPLICA}" \
  --max-model-len "${MAX_MODEL_LEN}" --enable-prefix-caching "$@"
wait_healthy "${HEALTH_TIMEOUT_S}"
publish judge
serve_until_stopped
