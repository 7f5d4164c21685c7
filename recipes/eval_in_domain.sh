#!/usr/bin/env bash
# In-domain evaluation of a checkpoint on the eval parquet (4,000 rows in the paper): Success@tau, tool accuracy,
# abstention, Name-F1, ArgMatch, Process, per data source. verl generates the multi-turn rollouts itself (validation
# only: same agent loop, SGLS simulator and HierR judge as training, greedy), then slca_verl.eval.in_domain aggregates
# verl's validation dump and sets verl's own validation numbers beside it.
#
#   bash recipes/eval_in_domain.sh CHECKPOINT [extra hydra overrides]   # HF dir or verl's …/global_step_N
#   -> ${OUT_DIR}/in_domain.json, in_domain.md, summary.md
#   DEVICE=cpu bash recipes/eval_in_domain.sh CHECKPOINT   # a checkpoint of recipes/run_cpu_tiny_slca.sh
#
# The held-out rows (and the training rows verl loads beside them): VAL_FILES / TRAIN_FILES when given, else the
# run's own (data.val_files / data.train_files of the config verl saved for the run that wrote CHECKPOINT:
# recipes/run_context.py), else on DEVICE=cpu the cached task data of SEED (with CACHE_DIR) when it exists, else the
# 7B recipe's DATA_DIR. A file that does not exist stops the command before anything starts (nothing is built);
# DRY_RUN names the files it would use.
# OUT_DIR: default eval/<experiment name>_step<N>. LABEL: the summary's method column, default "<experiment> step <N>".
# The layout: the run's own (trainer.nnodes / n_gpus_per_node of its saved config), else the recipe's (4 x 8);
# NNODES / N_GPUS_PER_NODE override it. Several nodes: run it where the training ran, with RAY_ADDRESS=auto; one
# node: NNODES=1 (N_GPUS_PER_NODE=8). A checkpoint of run_qwen7b_slca_1node.sh: EVAL_RECIPE=run_qwen7b_slca_1node.sh
# (its GPU split and servers). docs/gpu.md, "6. Evaluation".
set -xeuo pipefail
RECIPES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "${RECIPES_DIR}")
CHECKPOINT=${1:?usage: eval_in_domain.sh CHECKPOINT [overrides]}
shift
source "${RECIPES_DIR}/eval_lib.sh"
run_context "${CHECKPOINT}"

# ---------------------------------------------------------------- the held-out rows
# EVAL_RECIPE: the training recipe whose settings the validation runs with (recipes/rehearse_cpu.sh: the 7B recipe
# with DEVICE=cpu and its own sizes); DEVICE=cpu: the CPU recipe's settings (its platform, rollout, sizes and offline
# SGLS / judge)
TRAIN_RECIPE=${EVAL_RECIPE:-$([[ "${DEVICE}" == cpu ]] && echo run_cpu_tiny_slca.sh || echo run_qwen7b_slca.sh)}
if [[ -n "${VAL_FILES:-}" ]]; then
  DATA_FROM="VAL_FILES"
elif [[ -n "${RUN_VAL_FILES}" ]]; then
  VAL_FILES=${RUN_VAL_FILES}; TRAIN_FILES=${TRAIN_FILES:-${RUN_TRAIN_FILES}}; DATA_FROM="the run's config ${RUN_CONFIG}"
elif [[ "${TRAIN_RECIPE}" == run_cpu_tiny_slca.sh ]]; then
  if [[ -z "${SEED:-}" ]]; then
    echo "eval_in_domain: no config of the run that wrote ${CHECKPOINT} (looked in ${RUN_DIR:-its run dir}/hydra/*/" \
         "and outputs/*/*/ of . and ${REPO_ROOT}), so its held-out rows are unknown: pass VAL_FILES=… TRAIN_FILES=…," \
         "or SEED=<the run's seed> (and CACHE_DIR, if the run had one) for the CPU task's cached data" >&2
    exit 2
  fi
  # the seed's cached task data: where run_cpu_tiny_slca.sh keeps it (found, never built: BUILD_ONLY + DRY_RUN)
  TINY_DIR=$(DRY_RUN=1 BUILD_ONLY=1 bash "${RECIPES_DIR}/run_cpu_tiny_slca.sh" 2>/dev/null)
  VAL_FILES=${TINY_DIR}/data/cpu_task_val.parquet; TRAIN_FILES=${TRAIN_FILES:-${TINY_DIR}/data/cpu_task_train.parquet}
  DATA_FROM="the cached CPU task data of SEED=${SEED}"
else
  VAL_FILES=${DATA_DIR:-${REPO_ROOT}/data}/toucan/toucan_test.parquet; DATA_FROM="the 7B recipe's default"
fi
MISSING=()
for _f in ${VAL_FILES//[\[\],]/ } ${TRAIN_FILES:+${TRAIN_FILES//[\[\],]/ }}; do [[ -f "${_f}" ]] || MISSING+=("${_f}"); done
echo "eval_in_domain: held-out rows ${VAL_FILES}, training rows ${TRAIN_FILES:-(the default of the recipe)}; from" \
     "${DATA_FROM}${MISSING[*]:+; MISSING: ${MISSING[*]}}" >&2
if [[ ${#MISSING[@]} -gt 0 && "${DRY_RUN:-0}" == 0 ]]; then
  echo "eval_in_domain: stopping before anything starts: ${MISSING[*]} not found (set VAL_FILES / TRAIN_FILES)" >&2
  exit 2
fi
export VAL_FILES
[[ -z "${TRAIN_FILES:-}" ]] || export TRAIN_FILES
if [[ "${TRAIN_RECIPE}" != run_cpu_tiny_slca.sh ]]; then   # the GPU recipes: the run's layout unless given
  [[ -z "${RUN_NNODES}" || -n "${NNODES:-}" ]] || export NNODES=${RUN_NNODES}
  [[ -z "${RUN_GPUS_PER_NODE}" || -n "${N_GPUS_PER_NODE:-}" ]] || export N_GPUS_PER_NODE=${RUN_GPUS_PER_NODE}
  if [[ "${NNODES:-4}" -gt 1 && -z "${RAY_ADDRESS:-}" && "${DRY_RUN:-0}" == 0 ]]; then   # before any merge
    _from="the recipe's default"; [[ -z "${RUN_NNODES}" ]] || _from="the run's layout"
    echo "eval_in_domain: NNODES=${NNODES:-4} (${_from})" \
         "needs its Ray cluster: RAY_ADDRESS=auto bash $0 ... on a node of it, or NNODES=1 [N_GPUS_PER_NODE=8] on" \
         "one node" >&2
    exit 2
  fi
fi

mkdir -p "${OUT_DIR}"
if [[ "${DRY_RUN:-0}" == 0 ]]; then MODEL_PATH=$(hf_checkpoint "${CHECKPOINT}"); else MODEL_PATH=${CHECKPOINT}; fi
# the reward layout is irrelevant for validation; grpo's scalar layout keeps the run free of segment requirements
MODEL_PATH=${MODEL_PATH} ADV_ESTIMATOR=grpo OUTPUT_DIR=${OUT_DIR}/run LOGGER='["console","file"]' VAL_ONLY=1 \
  VERL_FILE_LOGGER_PATH=${OUT_DIR}/run/metrics.jsonl \
  bash "${RECIPES_DIR}/${TRAIN_RECIPE}" trainer.validation_data_dir="${OUT_DIR}/val_generations" "$@"
[[ "${DRY_RUN:-0}" == 0 ]] || exit 0
PARQUET_ARGS=()   # each dumped row's data source, from its parquet row (one file; a list of files: no breakdown)
[[ "${VAL_FILES}" == \[* ]] || PARQUET_ARGS=(--eval_parquet "${VAL_FILES}")
"${VERL_PY[@]}" slca_verl.eval.in_domain --predictions "$(ls "${OUT_DIR}"/val_generations/*.jsonl | sort -V | tail -n1)" \
  "${PARQUET_ARGS[@]}" --metrics "${OUT_DIR}/run/metrics.jsonl" --out_dir "${OUT_DIR}"
"${VERL_PY[@]}" slca_verl.eval.summary --out_dir "${OUT_DIR}" --label "${LABEL}"   # summary.md: every column so far
