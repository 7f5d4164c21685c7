#!/usr/bin/env bash
# SLCA-GRPO on Qwen2.5-3B-Instruct (after SFT): the 7B recipe's hyperparameters on one 8-GPU node.
# Baselines at 3B change one variable, as at 7B:  ADV_ESTIMATOR=grpo bash recipes/run_qwen3b_slca.sh
# SFT first:  BASE_MODEL=Qwen/Qwen2.5-3B-Instruct EXPERIMENT_NAME=qwen2_5_3b_sft bash recipes/run_qwen7b_sft.sh
set -xeuo pipefail
RECIPES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "${RECIPES_DIR}")
SFT_DIR=${SFT_DIR:-${REPO_ROOT}/checkpoints/sft/qwen2_5_3b_sft}
export ADV_ESTIMATOR=${ADV_ESTIMATOR:-slca_grpo}
export MODEL_PATH=${MODEL_PATH:-$(ls -d "${SFT_DIR}"/global_step_*/huggingface 2>/dev/null | sort -V | tail -n1 || true)}
export MODEL_PATH=${MODEL_PATH:-${SFT_DIR}/global_step_LAST/huggingface}
export EXPERIMENT_NAME=${EXPERIMENT_NAME:-qwen2_5_3b_${ADV_ESTIMATOR}}
export PLAN_MODEL=${PLAN_MODEL:-Qwen/Qwen2.5-3B-Instruct}   # the plan check's shape until the SFT checkpoint exists
export NNODES=${NNODES:-1}
export N_GPUS_PER_NODE=${N_GPUS_PER_NODE:-8}
exec bash "${RECIPES_DIR}/run_qwen7b_slca.sh" "$@"
