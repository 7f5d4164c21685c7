#!/usr/bin/env bash
# BFCL of a checkpoint as the leaderboard computes it: the checkpoint served with `vllm serve`, bfcl-eval's own
# `bfcl generate` (its Qwen function-calling handler, prompting through the checkpoint's chat template) and
# `bfcl evaluate`, every category that runs offline (slca_verl/eval/bfcl_leaderboard.py; docs/eval.md). bfcl-eval
# lives in its own venv: bash scripts/bfcl_setup.sh (once).
#
#   bash recipes/eval_bfcl.sh CHECKPOINT        # -> ${OUT_DIR}/bfcl_leaderboard.{json,md}, ${OUT_DIR}/bfcl/{result,score}
#   CATEGORIES=multi_turn LIMIT=5 bash recipes/eval_bfcl.sh CHECKPOINT                    # a smoke run, not a score
#   DEVICE=cpu LIMIT=2 MAX_TOKENS=64 bash recipes/eval_bfcl.sh CHECKPOINT                 # the CPU chain
#   AST_ONLY=1 bash recipes/eval_bfcl.sh CHECKPOINT   # the in-house single-turn AST check (bfcl.json; not BFCL's score)
set -xeuo pipefail
RECIPES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "${RECIPES_DIR}")
CHECKPOINT=${1:?usage: eval_bfcl.sh CHECKPOINT}
source "${RECIPES_DIR}/eval_lib.sh"
run_context "${CHECKPOINT}"   # OUT_DIR: eval/<experiment name>_step<N>; LABEL: "<experiment name> step <N>"
PORT=${PORT:-8100}
mkdir -p "${OUT_DIR}"
SERVED=$(servable_checkpoint "${CHECKPOINT}")
serve_policy "${SERVED}" "${PORT}"
if [[ "${AST_ONLY:-0}" != 0 ]]; then
  "${VERL_PY[@]}" slca_verl.eval.bfcl_ast --base_url "http://127.0.0.1:${PORT}/v1" --model policy \
    ${CATEGORIES:+--categories "${CATEGORIES}"} --out_dir "${OUT_DIR}" --bfcl_root "${OUT_DIR}/bfcl_ast_root" \
    ${LIMIT:+--limit "${LIMIT}"} ${MAX_TOKENS:+--max_tokens "${MAX_TOKENS}"}
else
  BFCL_PYTHON=${BFCL_PYTHON:-$(cat "${REPO_ROOT}/.bfcl_python" 2>/dev/null || echo /tmp/slca-bfcl/venv/bin/python)}
  "${VERL_PY[@]}" slca_verl.eval.bfcl_leaderboard --local_model_path "${SERVED}" --port "${PORT}" --served_model policy \
    --bfcl_python "${BFCL_PYTHON}" ${CATEGORIES:+--categories "${CATEGORIES}"} ${LIMIT:+--limit "${LIMIT}"} \
    ${MAX_TOKENS:+--max_tokens "${MAX_TOKENS}"} --out_dir "${OUT_DIR}"
fi
"${VERL_PY[@]}" slca_verl.eval.summary --out_dir "${OUT_DIR}" --label "${LABEL}"   # summary.md: every column so far
