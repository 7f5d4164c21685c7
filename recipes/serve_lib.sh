# Shared by serve_sgls.sh and serve_judge.sh (sourced, not run): start `vllm serve` replicas, wait for /health,
# publish their base URLs in one comma-separated file the training recipes read.

# Settings shared by both services (each script sets its own model, port and GPUs before sourcing this file).
HOST=${HOST:-0.0.0.0}
ADVERTISE_HOST=${ADVERTISE_HOST:-$(hostname -I 2>/dev/null | awk '{print $1}')}
ADVERTISE_HOST=${ADVERTISE_HOST:-127.0.0.1}
SERVICES_DIR=${SERVICES_DIR:-${HOME}/.cache/slca_verl/services}
HEALTH_TIMEOUT_S=${HEALTH_TIMEOUT_S:-1800}

# start_replicas NAME MODEL SERVED_NAME PORT REPLICAS GPUS_PER_REPLICA [extra vllm args...]
# Replica i listens on PORT+i and gets GPUs [i*GPUS_PER_REPLICA, (i+1)*GPUS_PER_REPLICA) of this node.
start_replicas() {
  local name=$1 model=$2 served=$3 port=$4 replicas=$5 gpus=$6
  shift 6
  PIDS=() URLS=()
  mkdir -p "${SERVICES_DIR}"
  for ((i = 0; i < replicas; i++)); do
    local first=$((i * gpus)) devices
    devices=$(seq -s, "${first}" $((first + gpus - 1)))
    CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES_OVERRIDE:-${devices}} "${VLLM_BIN:-vllm}" serve "${model}" \
      --served-model-name "${served}" --host "${HOST}" --port $((port + i)) --tensor-parallel-size "${gpus}" "$@" \
      > "${SERVICES_DIR}/${name}_${i}.log" 2>&1 &
    PIDS+=($!)
    URLS+=("http://${ADVERTISE_HOST}:$((port + i))/v1")
  done
  trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT INT TERM
}

# wait_healthy TIMEOUT_S: every replica answers GET /health with 200, or exit 1 naming the one that did not
wait_healthy() {
  local deadline=$((SECONDS + $1)) i
  for i in "${!URLS[@]}"; do
    until curl -sf "${URLS[$i]%/v1}/health" > /dev/null; do
      if ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
        echo "replica ${i} (${URLS[$i]}) exited; see ${SERVICES_DIR}" >&2; return 1
      fi
      if ((SECONDS > deadline)); then echo "replica ${i} (${URLS[$i]}) not healthy after $1 s" >&2; return 1; fi
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
