#!/usr/bin/env bash
# In-domain evaluation of a checkpoint on the eval parquet (4,000 rows in the paper): Name-F1, ArgMatch, Process,
# Success@tau. verl generates the multi-turn rollouts itself (validation only: same agent loop, SGLS simulator and
# HierR judge as training, greedy), then slca_verl.eval.in_domain aggregates verl's validation dump.
#
#   bash recipes/eval_in_domain.sh CHECKPOINT [extra hydra overrides]   # HF dir or verl's …/global_step_N
#   -> ${OUT_DIR}/in_domain.json, in_domain.md
#   DEVICE=cpu SEED=S bash recipes/eval_in_domain.sh CHECKPOINT   # a checkpoint of recipes/run_cpu_tiny_slca.sh (seed S)
set -xeuo pipefail
RECIPES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "${RECIPES_DIR}")
CHECKPOINT=${1:?usage: eval_in_domain.sh CHECKPOINT [overrides]}
shift
OUT_DIR=${OUT_DIR:-${REPO_ROOT}/eval/$(basename "$(dirname "${CHECKPOINT}")")_$(basename "${CHECKPOINT}")}
mkdir -p "${OUT_DIR}"
source "${RECIPES_DIR}/eval_lib.sh"
if [[ "${DRY_RUN:-0}" == 0 ]]; then MODEL_PATH=$(hf_checkpoint "${CHECKPOINT}"); else MODEL_PATH=${CHECKPOINT}; fi

# the reward layout is irrelevant for validation; grpo's scalar layout keeps the run free of segment requirements
# DEVICE=cpu: the CPU recipe's settings (its platform, rollout, sizes and offline SGLS / judge; SEED or VAL_FILES
# name the held-out prompts of the run that trained CHECKPOINT)
# EVAL_RECIPE: the training recipe whose settings the validation runs with (recipes/rehearse_cpu.sh: the 7B recipe
# with DEVICE=cpu and its own sizes)
TRAIN_RECIPE=${EVAL_RECIPE:-$([[ "${DEVICE}" == cpu ]] && echo run_cpu_tiny_slca.sh || echo run_qwen7b_slca.sh)}
MODEL_PATH=${MODEL_PATH} ADV_ESTIMATOR=grpo OUTPUT_DIR=${OUT_DIR}/run LOGGER='["console","file"]' VAL_ONLY=1 \
  bash "${RECIPES_DIR}/${TRAIN_RECIPE}" trainer.validation_data_dir="${OUT_DIR}/val_generations" "$@"
[[ "${DRY_RUN:-0}" == 0 ]] || exit 0
python3 -m slca_verl.eval.in_domain --predictions "$(ls "${OUT_DIR}"/val_generations/*.jsonl | sort -V | tail -n1)" \
  --out_dir "${OUT_DIR}"
python3 -m slca_verl.eval.summary --out_dir "${OUT_DIR}" ${LABEL:+--label "${LABEL}"}   # summary.md: every column so far
