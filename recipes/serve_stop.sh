#!/usr/bin/env bash
# Stop the servers recipes/serve_sgls.sh and recipes/serve_judge.sh started on this node (DETACH=1 leaves them
# running), by the process ids they recorded in SERVICES_DIR/<name>_gpus, and free their GPU claims.
#
#   bash recipes/serve_stop.sh              # every service of SERVICES_DIR on this node
#   bash recipes/serve_stop.sh judge        # one of them (sgls | judge)
set -uo pipefail
SERVICES_DIR=${SERVICES_DIR:-${HOME}/.cache/slca_verl/services}
NAMES=("$@")
[[ ${#NAMES[@]} -gt 0 ]] || NAMES=(sgls judge)
host=$(hostname)
for name in "${NAMES[@]}"; do
  claim="${SERVICES_DIR}/${name}_gpus"
  [[ -f "${claim}" ]] || continue
  read -r claim_host _ claim_pids < "${claim}" || true
  if [[ "${claim_host}" != "${host}" ]]; then
    echo "${name}: started on ${claim_host}, not here (${host}): run this there" >&2; continue
  fi
  pids=(${claim_pids//,/ })
  kill "${pids[@]}" 2> /dev/null
  for _ in $(seq 60); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "${pid}" 2> /dev/null && alive=1; done
    ((alive)) || break
    sleep 1
  done
  kill -9 "${pids[@]}" 2> /dev/null
  rm -f "${claim}" "${SERVICES_DIR}/${name}_urls"
  echo "${name}: stopped (pids ${claim_pids})"
done
