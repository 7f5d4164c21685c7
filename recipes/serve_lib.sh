# Shared by serve_sgls.sh and serve_judge.sh (sourced, not run): fetch the model, claim GPUs that no other server
# of this SERVICES_DIR holds on this node, start `vllm serve` replicas behind an API key, wait for /health, and
# publish their base URLs in one comma-separated file the training recipes read (docs/recipes.md, "Serving").

# Settings shared by both services (each script sets its own model, port and GPUs before sourcing this file).
HOST=${HOST:-0.0.0.0}
ADVERTISE_HOST=${ADVERTISE_HOST:-$(hostname -I 2>/dev/null | awk '{print $1}')}
ADVERTISE_HOST=${ADVERTISE_HOST:-127.0.0.1}
SERVICES_DIR=${SERVICES_DIR:-${HOME}/.cache/slca_verl/services}
# Health wait. A replica still writing to its log is loading (or downloading), and is waited for; one whose log has
# been silent for HEALTH_STALL_S while unhealthy is declared stuck. HEALTH_TIMEOUT_S > 0 adds an overall limit
# (0: none - the first start of the simulator loads ~470 GB).
HEALTH_TIMEOUT_S=${HEALTH_TIMEOUT_S:-0}
HEALTH_STALL_S=${HEALTH_STALL_S:-1800}
# 1: `hf download MODEL` into the Hugging Face cache before `vllm serve` (resumable, its own progress, no health
# clock running); 0: let vLLM download it. A local directory is never downloaded.
PREFETCH=${PREFETCH:-1}
# The key every replica demands (vLLM's --api-key, handed over as VLLM_API_KEY so it stays out of `ps` and of vLLM's
# logged arguments). Generated once per SERVICES_DIR unless the file exists; "none" serves without a key.
API_KEY_FILE=${API_KEY_FILE:-${SERVICES_DIR}/api_key}
for _var in HEALTH_TIMEOUT_S HEALTH_STALL_S; do
  if ! [[ "${!_var}" =~ ^[0-9]+$ ]]; then echo "${_var}=${!_var}: expected whole seconds" >&2; exit 2; fi
done

_xtrace_off() { case $- in *x*) _SLCA_XTRACE=1; set +x ;; *) _SLCA_XTRACE=0 ;; esac; }
_xtrace_restore() { if [[ "${_SLCA_XTRACE:-0}" == 1 ]]; then set -x; fi; }

# ensure_api_key: create API_KEY_FILE (mode 0600) if absent, refuse one others can read, export VLLM_API_KEY
ensure_api_key() {
  { _xtrace_off; } 2> /dev/null                       # the key must not reach the `set -x` trace
  mkdir -p "${SERVICES_DIR}"
  if [[ "${API_KEY_FILE}" == none ]]; then
    unset VLLM_API_KEY
    echo "WARNING: API_KEY_FILE=none: the servers answer anyone who can reach ${HOST}" >&2
    _xtrace_restore; return 0
  fi
  if [[ ! -e "${API_KEY_FILE}" ]]; then
    local tmp
    tmp=$(umask 077 && mktemp "${API_KEY_FILE}.XXXXXX")
    python3 -c 'import secrets; print("sk-slca-" + secrets.token_urlsafe(32))' > "${tmp}"
    ln "${tmp}" "${API_KEY_FILE}" 2> /dev/null || true   # atomic: a concurrent serve script keeps the first key
    rm -f "${tmp}"
    echo "generated an API key in ${API_KEY_FILE} (mode 0600); training reads it from there" >&2
  fi
  local mode
  mode=$(stat -c %a "${API_KEY_FILE}")
  if [[ "${mode}" != 600 && "${mode}" != 400 ]]; then
    echo "${API_KEY_FILE} has mode ${mode}: others can read the key. chmod 600 ${API_KEY_FILE}" >&2
    _xtrace_restore; return 1
  fi
  VLLM_API_KEY=$(tr -d '[:space:]' < "${API_KEY_FILE}")
  if [[ -z "${VLLM_API_KEY}" ]]; then echo "${API_KEY_FILE} holds no key" >&2; _xtrace_restore; return 1; fi
  export VLLM_API_KEY
  _xtrace_restore
}

# prefetch MODEL: with PREFETCH=1, download a Hub model before serving (`hf`, huggingface_hub's CLI; the old
# `huggingface-cli` now refuses in its favour)
prefetch() {
  [[ "${PREFETCH}" == 1 && ! -d "$1" ]] || return 0
  local hf=${HF_BIN:-hf}
  if ! command -v "${hf}" > /dev/null; then
    echo "PREFETCH=1 needs \`hf\` (pip install -U 'huggingface_hub>=0.34'), or PREFETCH=0 to let vLLM download" >&2
    return 1
  fi
  echo "downloading $1 into the Hugging Face cache (${HF_HOME:-~/.cache/huggingface}; resumable)" >&2
  # PREFETCH_EXCLUDE: patterns of the repository not to fetch (gpt-oss ships original/ and metal/ copies of its
  # weights that vLLM never reads: ~65 GB instead of ~196 GB)
  local exclude=()
  local patterns=() pattern
  read -ra patterns <<< "${PREFETCH_EXCLUDE:-}"   # (read: no glob expansion of the patterns)
  for pattern in ${patterns[@]+"${patterns[@]}"}; do exclude+=(--exclude "${pattern}"); done
  "${hf}" download "$1" ${exclude[@]+"${exclude[@]}"}
}

# claim_gpus NAME COUNT: set GPU_LIST to COUNT GPUs of this node and record them in SERVICES_DIR/NAME_gpus.
# GPUS=<i,j,...> takes exactly those; else FIRST_GPU, else the first GPU after those the live servers of this
# SERVICES_DIR hold on this node. Fails, naming the holder, when the set overlaps a live server's, and when the node
# has fewer GPUs (NUM_GPUS, default: nvidia-smi's count) than the set needs.
claim_gpus() {
  local name=$1 count=$2 host held=() holders=() f claim_host claim_gpus claim_pids pid alive g next=0
  host=$(hostname)
  mkdir -p "${SERVICES_DIR}"
  if command -v flock > /dev/null; then exec 9> "${SERVICES_DIR}/.gpus.lock"; flock 9; fi
  for f in "${SERVICES_DIR}"/*_gpus; do
    [[ -f "${f}" ]] || continue
    read -r claim_host claim_gpus claim_pids < "${f}" || true
    [[ "${claim_host}" == "${host}" ]] || continue
    alive=0
    for pid in ${claim_pids//,/ }; do if kill -0 "${pid}" 2> /dev/null; then alive=1; fi; done
    ((alive)) || continue
    for g in ${claim_gpus//,/ }; do held+=("${g}"); holders+=("$(basename "${f}" _gpus) (pids ${claim_pids})"); done
  done
  if [[ -n "${GPUS:-}" ]]; then
    GPU_LIST=${GPUS}
  else
    for g in "${held[@]}"; do ((g + 1 > next)) && next=$((g + 1)); done
    local first=${FIRST_GPU:-${next}}
    GPU_LIST=$(seq -s, "${first}" $((first + count - 1)))
  fi
  local wanted=(${GPU_LIST//,/ }) i
  if ((${#wanted[@]} != count)); then
    echo "${name}: GPUS=${GPU_LIST} names ${#wanted[@]} GPUs, REPLICAS x GPUS_PER_REPLICA needs ${count}" >&2
    return 1
  fi
  for g in "${wanted[@]}"; do
    for i in "${!held[@]}"; do
      if [[ "${held[$i]}" == "${g}" ]]; then
        echo "${name}: GPU ${g} is already taken by ${holders[$i]} on ${host} (${SERVICES_DIR}); set GPUS=<free ids>" \
             "or FIRST_GPU, or serve on another node (docs/recipes.md, \"Placement\")" >&2
        return 1
      fi
    done
  done
  local num=${NUM_GPUS:-$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)}
  if ((num > 0)); then
    for g in "${wanted[@]}"; do
      if ((g >= num)); then
        echo "${name}: needs GPUs ${GPU_LIST} but ${host} has ${num} (0..$((num - 1)))${held:+; ${held[*]} are held by" \
             "running servers}: serve it on another node, or use fewer GPUs (docs/recipes.md, \"Placement\")" >&2
        return 1
      fi
    done
  fi
  echo "${host} ${GPU_LIST} $$" > "${SERVICES_DIR}/${name}_gpus"   # the replicas' pids are added once started
  if command -v flock > /dev/null; then flock -u 9; fi
}

# start_replicas NAME MODEL SERVED_NAME PORT REPLICAS GPUS_PER_REPLICA [extra vllm args...]
# Replica i listens on PORT+i and gets GPUs [i*GPUS_PER_REPLICA, (i+1)*GPUS_PER_REPLICA) of the claimed set.
start_replicas() {
  local name=$1 model=$2 served=$3 port=$4 replicas=$5 gpus=$6
  shift 6
  PIDS=() URLS=() SERVICE_NAME=${name}
  mkdir -p "${SERVICES_DIR}"
  ensure_api_key
  claim_gpus "${name}" $((replicas * gpus))        # before the download: a clash is found in a second, not hours
  prefetch "${model}"
  local all=(${GPU_LIST//,/ })
  for ((i = 0; i < replicas; i++)); do
    local devices
    devices=$(IFS=,; echo "${all[*]:i*gpus:gpus}")
    CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES_OVERRIDE:-${devices}} "${VLLM_BIN:-vllm}" serve "${model}" \
      --served-model-name "${served}" --host "${HOST}" --port $((port + i)) --tensor-parallel-size "${gpus}" "$@" \
      > "${SERVICES_DIR}/${name}_${i}.log" 2>&1 &
    PIDS+=($!)
    URLS+=("http://${ADVERTISE_HOST}:$((port + i))/v1")
  done
  local IFS=,
  echo "$(hostname) ${GPU_LIST} $$,${PIDS[*]}" > "${SERVICES_DIR}/${name}_gpus"
  trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT INT TERM
}

# wait_healthy [TIMEOUT_S]: every replica answers GET /health with 200, or exit 1 naming the one that did not: it
# exited, its log was silent for HEALTH_STALL_S, or TIMEOUT_S (> 0) passed. /health needs no API key.
wait_healthy() {
  local limit=${1:-0} start=${SECONDS} i size last_size last_change log
  for i in "${!URLS[@]}"; do
    log="${SERVICES_DIR}/${SERVICE_NAME}_${i}.log"
    last_size=-1 last_change=${SECONDS}
    until curl -sf "${URLS[$i]%/v1}/health" > /dev/null; do
      if ! kill -0 "${PIDS[$i]}" 2> /dev/null; then
        echo "replica ${i} (${URLS[$i]}) exited; see ${SERVICES_DIR}" >&2; return 1
      fi
      size=$(stat -c %s "${log}" 2> /dev/null || echo 0)
      if ((size != last_size)); then last_size=${size} last_change=${SECONDS}; fi
      if ((HEALTH_STALL_S > 0 && SECONDS - last_change > HEALTH_STALL_S)); then
        echo "replica ${i} (${URLS[$i]}) not healthy and ${log} silent for ${HEALTH_STALL_S} s (HEALTH_STALL_S):" \
             "stuck; see the log" >&2
        return 1
      fi
      if ((limit > 0 && SECONDS - start > limit)); then
        echo "replica ${i} (${URLS[$i]}) not healthy after ${limit} s (HEALTH_TIMEOUT_S; 0 = no limit)" >&2; return 1
      fi
      sleep "${POLL_S:-5}"
    done
  done
}

# publish NAME: write the URLs (comma-separated) to SERVICES_DIR/NAME_urls and stdout
publish() {
  local IFS=,
  echo "${URLS[*]}" > "${SERVICES_DIR}/$1_urls"
  echo "${URLS[*]}"
}

# serve_until_stopped: with DETACH=1 return now and leave the replicas running, else keep them until killed
serve_until_stopped() {
  if [[ "${DETACH:-0}" == 1 ]]; then trap - EXIT INT TERM; exit 0; fi
  wait
}
