#!/usr/bin/env bash
# BFCL (AST categories) of a checkpoint: serve it with `vllm serve`, generate at temperature 0 through the
# OpenAI-compatible API, score with bfcl-eval's ast_checker (pip install --no-deps -r requirements-bfcl.txt).
#
#   bash recipes/eval_bfcl.sh CHECKPOINT        # -> ${OUT_DIR}/bfcl.json, bfcl.md
#   DEVICE=cpu CATEGORIES=simple_python LIMIT=5 MAX_TOKENS=128 bash recipes/eval_bfcl.sh CHECKPOINT   # the CPU chain
set -xeuo pipefail
RECIPES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "${RECIPES_DIR}")
CHECKPOINT=${1:?usage: eval_bfcl.sh CHECKPOINT}
OUT_DIR=${OUT_DIR:-${REPO_ROOT}/eval/$(basename "$(dirname "${CHECKPOINT}")")_$(basename "${CHECKPOINT}")}
PORT=${PORT:-8100}
CATEGORIES=${CATEGORIES:-simple_python,multiple,parallel,parallel_multiple,irrelevance,live_simple,live_multiple,live_parallel,live_parallel_multiple,live_irrelevance}
mkdir -p "${OUT_DIR}"
source "${RECIPES_DIR}/eval_lib.sh"
serve_policy "$(servable_checkpoint "${CHECKPOINT}")" "${PORT}"
python3 -m slca_verl.eval.bfcl --base_url "http://127.0.0.1:${PORT}/v1" --model policy --categories "${CATEGORIES}" \
  --out_dir "${OUT_DIR}" --bfcl_root "${OUT_DIR}/bfcl_root" ${LIMIT:+--limit "${LIMIT}"} ${MAX_TOKENS:+--max_tokens "${MAX_TOKENS}"}
