#!/usr/bin/env bash
# SLCA-GRPO on Qwen2.5-7B-Instruct (after SFT) on ONE node of 8 GPUs: training, the simulator and the judge share it.
#
#   bash recipes/run_qwen7b_slca_1node.sh [extra hydra overrides]
#   ADV_ESTIMATOR=grpo bash recipes/run_qwen7b_slca_1node.sh          # the matched baseline, same node layout
#
#   GPUs 0-3  training: verl's FSDP actor + reference and the vLLM rollout (CUDA_VISIBLE_DEVICES=TRAIN_GPUS)
#   GPUs 4-5  SGLS simulator: Qwen/Qwen3-30B-A3B-Instruct-2507, bf16, ~61 GB of weights, tensor-parallel over 2
#   GPUs 6-7  judge: openai/gpt-oss-20b, ~14 GB (MXFP4), two replicas of one GPU each
#
# The servers are started here (recipes/serve_*.sh, DETACH=1: they stay up for the next run; stop them with
# recipes/serve_stop.sh) unless they already run or SERVE=0. The paper's simulator (Qwen3-235B-A22B, ~470 GB) and
# judge (gpt-oss-120b) do not fit beside training on 8 GPUs: the smaller models change the reward the policy sees,
# so results are not the paper's protocol (its README: swapping a judge or simulator moves the numbers). Swap them:
# SGLS_MODEL_PATH / SGLS_MODEL, JUDGE_MODEL_PATH / JUDGE_MODEL, SGLS_GPUS / JUDGE_GPUS, TRAIN_GPUS.
# Every algorithm setting is the 7B recipe's (batch 128 x 16 rollouts, lengths, lr, KL): on 4 GPUs instead of 32 a
# step takes several times longer (not measured here). Sizes above are the weights alone; vLLM adds KV cache.
#
# DRY_RUN=1 composes the training overrides against verl's config (no server is started); DRY_RUN=args prints them.
set -xeuo pipefail
RECIPES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TRAIN_GPUS=${TRAIN_GPUS:-0,1,2,3}
SGLS_GPUS=${SGLS_GPUS:-4,5}
JUDGE_GPUS=${JUDGE_GPUS:-6,7}
export SGLS_MODEL_PATH=${SGLS_MODEL_PATH:-Qwen/Qwen3-30B-A3B-Instruct-2507}
export SGLS_MODEL=${SGLS_MODEL:-Qwen3-30B-A3B-Instruct-2507}
export JUDGE_MODEL_PATH=${JUDGE_MODEL_PATH:-openai/gpt-oss-20b}
export JUDGE_MODEL=${JUDGE_MODEL:-gpt-oss-20b}
export SERVICES_DIR=${SERVICES_DIR:-${HOME}/.cache/slca_verl/services}
n_train=$(awk -F, '{print NF}' <<< "${TRAIN_GPUS}")
n_judge=$(awk -F, '{print NF}' <<< "${JUDGE_GPUS}")

# a service is up when its URL file lists replicas that answer /health
running() {
  local f="${SERVICES_DIR}/$1_urls"
  [[ -f "${f}" ]] && curl -sf "$(cut -d, -f1 "${f}" | sed 's#/v1$##')/health" > /dev/null
}
if [[ "${DRY_RUN:-0}" == 0 && "${SERVE:-1}" == 1 ]]; then
  running sgls || GPUS=${SGLS_GPUS} REPLICAS=1 GPUS_PER_REPLICA=$(awk -F, '{print NF}' <<< "${SGLS_GPUS}") \
    PORT=${SGLS_PORT:-8000} DETACH=1 bash "${RECIPES_DIR}/serve_sgls.sh"
  running judge || GPUS=${JUDGE_GPUS} REPLICAS=${n_judge} GPUS_PER_REPLICA=1 PORT=${JUDGE_PORT:-8016} \
    DETACH=1 bash "${RECIPES_DIR}/serve_judge.sh"
fi

export NNODES=1 N_GPUS_PER_NODE=${n_train}
# 4 training GPUs hold 4x the 32-GPU run's shard of the fp32 weights (7.1 GiB) and AdamW moments (14.2 GiB): beside
# vLLM at 0.82 of the card that is ~90 GiB at step 2's rollout. The plan check's fit: the moments on the host between
# steps and vLLM at 0.75 (~71 GiB at the rollout; docs/gpu.md, "One node")
export OPTIMIZER_OFFLOAD=${OPTIMIZER_OFFLOAD:-true} GPU_MEMORY_UTILIZATION=${GPU_MEMORY_UTILIZATION:-0.75}
export EXPERIMENT_NAME=${EXPERIMENT_NAME:-qwen2_5_7b_${ADV_ESTIMATOR:-slca_grpo}_1node}
# gpt-oss-20b decodes faster than gpt-oss-120b; these are assumptions for the capacity warning, measure and set yours
export JUDGE_PREFILL_TOKS_PER_S=${JUDGE_PREFILL_TOKS_PER_S:-40000} JUDGE_DECODE_TOKS_PER_S=${JUDGE_DECODE_TOKS_PER_S:-8000}
CUDA_VISIBLE_DEVICES=${TRAIN_GPUS} exec bash "${RECIPES_DIR}/run_qwen7b_slca.sh" "$@"
