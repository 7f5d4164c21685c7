# Shared by the eval_*.sh scripts (sourced): an HF checkpoint directory from what training wrote, and a policy server.

# hf_checkpoint PATH: PATH itself when it holds config.json; for a verl actor checkpoint
# (…/global_step_N or …/global_step_N/actor) the merged HF model, merging it once with verl's model_merger.
hf_checkpoint() {
  local path=$1
  [[ -f "${path}/config.json" ]] && { echo "${path}"; return; }
  [[ -d "${path}/actor" ]] && path="${path}/actor"
  [[ -f "${path}/huggingface/config.json" && -n "$(ls "${path}"/huggingface/*.safetensors 2>/dev/null)" ]] && {
    echo "${path}/huggingface"; return; }
  local target="${path}/merged_hf"
  [[ -f "${target}/config.json" ]] || python3 -m verl.model_merger merge --backend fsdp --local_dir "${path}" \
    --target_dir "${target}" >&2
  echo "${target}"
}

# serve_policy HF_DIR PORT: `vllm serve` the checkpoint as "policy" in the background, wait for /health
serve_policy() {
  "${VLLM_BIN:-vllm}" serve "$1" --served-model-name policy --port "$2" --tensor-parallel-size "${POLICY_TP:-1}" \
    --max-model-len "${POLICY_MAX_MODEL_LEN:-32768}" > "${OUT_DIR}/policy_server.log" 2>&1 &
  POLICY_PID=$!
  trap 'kill "${POLICY_PID}" 2>/dev/null || true' EXIT INT TERM
  local deadline=$((SECONDS + ${HEALTH_TIMEOUT_S:-1800}))
  until curl -sf "http://127.0.0.1:$2/health" > /dev/null; do
    kill -0 "${POLICY_PID}" 2>/dev/null || { echo "policy server exited; see ${OUT_DIR}/policy_server.log" >&2; return 1; }
    ((SECONDS < deadline)) || { echo "policy server not healthy in time" >&2; return 1; }
    sleep 5
  done
}
