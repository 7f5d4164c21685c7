#!/usr/bin/env bash
# The main job on a CPU: verl's own trainer (python -m verl.trainer.main_ppo) trains a tiny Qwen3 with SLCA-GRPO,
# end to end (rollout with slca_tool_agent -> SGLS -> HierR -> TransferQueue -> slca_grpo -> FSDP2 update -> weight
# sync into the rollout), on a 2-core machine, in minutes. No GPU, no server, nothing downloaded.
#
#   bash recipes/run_cpu_tiny_slca.sh                        # SLCA-GRPO, 20 steps: validation 4 % -> 44 %
#   ADV_ESTIMATOR=grpo bash recipes/run_cpu_tiny_slca.sh     # the same budget with verl's GRPO
#   TOTAL_TRAINING_STEPS=20 SEED=1 bash recipes/run_cpu_tiny_slca.sh [extra hydra overrides]
#   OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_MODEL=tiny bash recipes/run_cpu_tiny_slca.sh
#                                                            # SGLS and the judge on an OpenAI-compatible server
#   DRY_RUN=1 bash recipes/run_cpu_tiny_slca.sh              # compose + validate only; writes nothing
#   WARMUP_UNDECIDED=0 bash recipes/run_cpu_tiny_slca.sh     # warm-up on the gold calls only (nothing left to learn)
#   BUILD_ONLY=1 SEED=3 bash recipes/run_cpu_tiny_slca.sh    # build (or find) the seed's data and model, then stop
#   TOOL_FORMAT=qwen3_coder bash recipes/run_cpu_tiny_slca.sh   # another of verl's tool-call formats: the warm-up
#                                                            # writes calls in it, multi_turn.format reads them
#   VAL_PROMPTS=123 VAL_N=4 VAL_TEMPERATURE=1 bash recipes/run_cpu_tiny_slca.sh   # validation on 123 held-out tool
#                                                            # prompts, 4 samples each (verl's mean@4; the main runs')
#
# It is recipes/run_qwen7b_slca.sh with another model, smaller sizes, DEVICE=cpu (verl's CPU platform and the hf_cpu
# rollout of slca_verl/cpu) and offline SGLS / judge: the 7B recipe's own overrides run in verl's trainer.
# The tiny model is built on first use and cached in TINY_DIR (keyed by SEED, TASK and the builder's code): a random
# Qwen3 (hidden 64, 2 layers) with Qwen3's tokenizer retrained to the task's small vocabulary, warmed up on gold
# episodes of the training rows (slca_verl/cpu/tiny_model.py). TASK=cpu_task (default): the generated task of
# data_prep/cpu_task.py, validation held out by argument combination; TASK=xlam: the bundled xLAM-style sample with
# the full Qwen3 vocabulary (what the pipeline was first proven on).
# Output in OUTPUT_DIR: metrics.jsonl (verl's file logger), plots/, and the FSDP checkpoint of the last step.
set -xeuo pipefail

RECIPES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "${RECIPES_DIR}")

export ADV_ESTIMATOR=${ADV_ESTIMATOR:-slca_grpo}
SEED=${SEED:-0}
TASK=${TASK:-cpu_task}                           # cpu_task | cpu_chain | xlam
CACHE_DIR=${CACHE_DIR:-${HOME}/.cache/slca_verl}
JUDGE_NOISE=${JUDGE_NOISE:-0}                    # σ of the judge's noise (NoisyJudge, in r_sum units)
# TASK=cpu_task's validation: 0 (default) the task's own split (27 tool + 4 chat prompts with the defaults); N:
# N held-out tool prompts (up to 123) from data_prep.cpu_task_val, the training rows and the model unchanged, written
# to OUTPUT_DIR/val_data. VAL_N samples a prompt at VAL_TEMPERATURE (the 7B recipe's knobs; verl logs mean@VAL_N)
VAL_PROMPTS=${VAL_PROMPTS:-0}
# TASK=cpu_chain's size (data_prep/cpu_chain.py): cities (12..26), phrasings a kind (1..4), the share of cities held
# out per kind, the phrasings of held-out airport and chat prompts. The defaults hold out 12 chains; the wide task,
# CHAIN_CITIES=26 CHAIN_PHRASINGS=4 CHAIN_VAL_SHARE=0.5 CHAIN_VAL_OTHER=1, 104 (each city trained as one chain kind)
CHAIN_DEFAULT=(12 2 0.25 4)
CHAIN_SIZE=("${CHAIN_CITIES:-${CHAIN_DEFAULT[0]}}" "${CHAIN_PHRASINGS:-${CHAIN_DEFAULT[1]}}"
            "${CHAIN_VAL_SHARE:-${CHAIN_DEFAULT[2]}}" "${CHAIN_VAL_OTHER:-${CHAIN_DEFAULT[3]}}")
# the offline judge of the reply (without OPENAI_BASE_URL): offline_proxy rates how much of the tool response the
# reply repeats (a right call can change it); offline_length the reply's length against 10 words, which no call decides
OFFLINE_JUDGE=${OFFLINE_JUDGE:-offline_proxy}
VAL_FILES_GIVEN=${VAL_FILES:-}
export TOOL_FORMAT=${TOOL_FORMAT:-hermes}        # verl's multi_turn.format, and the warm-up's call format
KEY_FILES=()
case "${TASK}" in
  # cpu_task: the warm-up sees every training row, and every version of its tool choice (weather or population) and
  # currency order, the wrong ones 3 times to the gold's once (WARMUP_ALT_REPEATS): it learns the format and to copy
  # the arguments, and a prompt-dependent mistake RL has to unlearn. Measured with seed 0 by verl's validation:
  # greedy tool accuracy 4 % at step 0, 26 / 37 / 41 / 44 % at steps 5 / 10 / 15 / 20, chat prompts 100 % abstained
  cpu_task) WARMUP_STEPS=${WARMUP_STEPS:-800}; WARMUP_LR=${WARMUP_LR:-1e-2}; VOCAB_SIZE=${VOCAB_SIZE:-1024}
            WARMUP_SHARE=${WARMUP_SHARE:-1}; WARMUP_UNDECIDED=${WARMUP_UNDECIDED:-1}; WARMUP_BATCH=${WARMUP_BATCH:-32}
            WARMUP_ALT_REPEATS=${WARMUP_ALT_REPEATS:-3}; SAMPLE=${REPO_ROOT}/data_prep/cpu_task.py; DATA_NAME=cpu_task
            BATCH_DEFAULTS=(8 4 2 8 16); TEST_FREQ_DEFAULT=5; VAL_BEFORE_TRAIN_DEFAULT=true; LR_DEFAULT=3e-4
            STEPS_DEFAULT=20; ABSTENTION_FIX_DEFAULT=1 ;;
  # cpu_chain: two dependent calls (data_prep/cpu_chain.py), the same warm-up with every version of each step written
  # once (find_airport or find_station, departures or arrivals: a uniform choice to learn; with the one-call task's
  # 3 : 1 against the gold at two decisions, no method moved verl's greedy validation in 20 steps, seed 0)
  cpu_chain) WARMUP_STEPS=${WARMUP_STEPS:-800}; WARMUP_LR=${WARMUP_LR:-1e-2}; VOCAB_SIZE=${VOCAB_SIZE:-1024}
            WARMUP_SHARE=${WARMUP_SHARE:-1}; WARMUP_UNDECIDED=${WARMUP_UNDECIDED:-1}; WARMUP_BATCH=${WARMUP_BATCH:-32}
            WARMUP_ALT_REPEATS=${WARMUP_ALT_REPEATS:-1}; SAMPLE=${REPO_ROOT}/data_prep/cpu_chain.py; DATA_NAME=cpu_chain
            KEY_FILES=("${REPO_ROOT}/data_prep/cpu_task.py")   # its cities
            BATCH_DEFAULTS=(8 4 2 8 16); TEST_FREQ_DEFAULT=5; VAL_BEFORE_TRAIN_DEFAULT=true; LR_DEFAULT=3e-4
            STEPS_DEFAULT=20; ABSTENTION_FIX_DEFAULT=1 ;;
  xlam)     WARMUP_STEPS=${WARMUP_STEPS:-100}; WARMUP_LR=${WARMUP_LR:-1e-2}; VOCAB_SIZE=${VOCAB_SIZE:-0}
            WARMUP_SHARE=${WARMUP_SHARE:-1}; SAMPLE=${SAMPLE:-${REPO_ROOT}/examples/data/quickstart_xlam.json}
            DATA_NAME=xlam; BATCH_DEFAULTS=(2 4 2 2 2); TEST_FREQ_DEFAULT=-1; VAL_BEFORE_TRAIN_DEFAULT=false
            LR_DEFAULT=1e-4; STEPS_DEFAULT=5; ABSTENTION_FIX_DEFAULT=0 ;;
  *) echo "unknown TASK=${TASK} (cpu_task | cpu_chain | xlam)" >&2; exit 2 ;;
esac
TASK_ARGS=() TASK_TAG=
if [[ "${CHAIN_SIZE[*]}" != "${CHAIN_DEFAULT[*]}" ]]; then   # a wider chain task: its own rows, so its own model
  [[ "${TASK}" == cpu_chain ]] || { echo "CHAIN_CITIES/CHAIN_PHRASINGS/CHAIN_VAL_SHARE/CHAIN_VAL_OTHER need TASK=cpu_chain" >&2; exit 2; }
  TASK_ARGS=(--cities "${CHAIN_SIZE[0]}" --phrasings "${CHAIN_SIZE[1]}" --val_share "${CHAIN_SIZE[2]}"
             --val_other_phrasings "${CHAIN_SIZE[3]}")
  TASK_TAG=_c${CHAIN_SIZE[0]}p${CHAIN_SIZE[1]}v${CHAIN_SIZE[2]}o${CHAIN_SIZE[3]}
fi
# the warm-up's headroom for RL (slca_verl/cpu/tiny_model.py undecided_steps; what each setting measured:
# docs/results/cpu_task_development.md):
# share of the rows written once per version of their tool choice and slot order, how many times each wrong version
# is written, and the episodes per warm-up step (0: all)
WARMUP_UNDECIDED=${WARMUP_UNDECIDED:-0}
WARMUP_ALT_REPEATS=${WARMUP_ALT_REPEATS:-1}
WARMUP_BATCH=${WARMUP_BATCH:-0}
export ABSTENTION_FIX=${ABSTENTION_FIX:-${ABSTENTION_FIX_DEFAULT}}  # the CPU task has chat prompts: answer them
# the cache key: seed, task, warm-up budget, share, undecided share and repeats, batch, vocabulary, tool-call format, and the builder's and
# the data's code (a change rebuilds)
BUILD_KEY=$(cat "${REPO_ROOT}/slca_verl/cpu/tiny_model.py" "${SAMPLE}" ${KEY_FILES[@]+"${KEY_FILES[@]}"} | sha1sum | cut -c1-10)
FORMAT_TAG=$([[ "${TOOL_FORMAT}" == hermes ]] || echo "_${TOOL_FORMAT}")
TINY_DIR=${TINY_DIR:-${CACHE_DIR}/tiny_qwen3_${TASK}${TASK_TAG}_seed${SEED}_warm${WARMUP_STEPS}x${WARMUP_LR}s${WARMUP_SHARE}_u${WARMUP_UNDECIDED}r${WARMUP_ALT_REPEATS}_b${WARMUP_BATCH}_v${VOCAB_SIZE}${FORMAT_TAG}_${BUILD_KEY}}
RUN_ROOT=${RUN_ROOT:-${REPO_ROOT}/outputs/cpu_tiny}

source "${REPO_ROOT}/scripts/progress_lib.sh"
# the python steps start through recipes/verl_startup.py: verl's start-up notices that carry nothing on a CPU (engines
# not installed, no accelerator) become one summary line per process; QUIET_VERL=0 shows them as they come
PY=(python3 "${RECIPES_DIR}/verl_startup.py")
[[ "${QUIET_VERL:-1}" == 0 ]] && PY=(python3 -m)
build_tiny() {  # data + model, once per TINY_DIR
  local tmp="${TINY_DIR}.partial"
  rm -rf "${tmp}" && mkdir -p "${tmp}"
  # a stage line each, with the time left (expected on an idle 2-core machine: ~10 s for each of the first three,
  # ~0.5 s a warm-up step; a loaded machine's pace scales the rest); the warm-up logs its own steps and time left
  progress_start "tiny model build" 10 10 15 $((10 + WARMUP_STEPS / 2))
  progress_stage 1 "the task's rows (${TASK}, seed ${SEED}) -> ${TINY_DIR}"
  if [[ "${TASK}" == cpu_task || "${TASK}" == cpu_chain ]]; then
    "${PY[@]}" "data_prep.${TASK}" --output_dir "${tmp}/data" --seed "${SEED}" --no_progress ${TASK_ARGS[@]+"${TASK_ARGS[@]}"}
  else
    "${PY[@]}" data_prep.xlam --input "${SAMPLE}" --output_dir "${tmp}/data" --val_ratio 0.25 --seed "${SEED}" --no_progress
  fi
  progress_stage 2 "gold episodes of the training rows"
  "${PY[@]}" slca_verl.cpu.tiny_model gold --rl "${tmp}/data/${DATA_NAME}_train.parquet" --out "${tmp}/sft" \
    --seed "${SEED}" --share "${WARMUP_SHARE}" --undecided "${WARMUP_UNDECIDED}" --alt_repeats "${WARMUP_ALT_REPEATS}" \
    --format "${TOOL_FORMAT}"
  local vocab=()
  [[ "${VOCAB_SIZE}" != 0 ]] && vocab=(--vocab_from "${tmp}/sft/sft_train.parquet" --vocab_size "${VOCAB_SIZE}")
  progress_stage 3 "a tokenizer of the task's vocabulary and a random tiny Qwen3"
  "${PY[@]}" slca_verl.cpu.tiny_model init --out "${tmp}/init" --seed "${SEED}" "${vocab[@]}"
  progress_stage 4 "the supervised warm-up, ${WARMUP_STEPS} steps"
  "${PY[@]}" slca_verl.cpu.tiny_model warmup --model "${tmp}/init" --sft "${tmp}/sft/sft_train.parquet" \
    --out "${tmp}/model" --steps "${WARMUP_STEPS}" --lr "${WARMUP_LR}" --seed "${SEED}" --batch_size "${WARMUP_BATCH}"
  rm -rf "${TINY_DIR}" && mv "${tmp}" "${TINY_DIR}"
  progress_done
}
# a given model and given data files use nothing of TINY_DIR (recipes/eval_in_domain.sh: a checkpoint and its run's
# rows): nothing is built for them
USES_TINY=1
[[ -n "${MODEL_PATH:-}" && -n "${TRAIN_FILES:-}" && -n "${VAL_FILES:-}" && "${BUILD_ONLY:-0}" == 0 ]] && USES_TINY=0
case "${DRY_RUN:-0}" in
  0|false) [[ "${USES_TINY}" == 0 || -f "${TINY_DIR}/model/config.json" ]] || build_tiny ;;
esac
if [[ "${BUILD_ONLY:-0}" != 0 ]]; then echo "${TINY_DIR}"; exit 0; fi

# ---------------------------------------------------------------- what differs from the 7B recipe
export DEVICE=cpu
export MODEL_PATH=${MODEL_PATH:-${TINY_DIR}/model}
export TRAIN_FILES=${TRAIN_FILES:-${TINY_DIR}/data/${DATA_NAME}_train.parquet}
export VAL_FILES=${VAL_FILES:-${TINY_DIR}/data/${DATA_NAME}_val.parquet}
export EXPERIMENT_NAME=${EXPERIMENT_NAME:-cpu_tiny_${ADV_ESTIMATOR}_seed${SEED}}
export OUTPUT_DIR=${OUTPUT_DIR:-${RUN_ROOT}/${EXPERIMENT_NAME}}
if [[ "${VAL_PROMPTS}" != 0 && -z "${VAL_FILES_GIVEN}" ]]; then   # the wider validation set (VAL_PROMPTS above)
  [[ "${TASK}" == cpu_task ]] || { echo "VAL_PROMPTS=${VAL_PROMPTS} needs TASK=cpu_task" >&2; exit 2; }
  export VAL_FILES=${OUTPUT_DIR}/val_data/${DATA_NAME}_val.parquet
  case "${DRY_RUN:-0}" in
    0|false) "${PY[@]}" data_prep.cpu_task_val --output_dir "${OUTPUT_DIR}/val_data" --seed "${SEED}" \
               --val_prompts "${VAL_PROMPTS}" --no_progress ;;
  esac
fi
export NNODES=1 N_GPUS_PER_NODE=${N_GPUS_PER_NODE:-1}   # FSDP ranks (gloo); logical GPUs for Ray's scheduling
# batch, rollouts per prompt, PPO mini-batch, micro-batch, log-prob micro-batch: with the full Qwen3 vocabulary (xlam)
# logits cost ~1 GB per 1k tokens, so micro-batches of 2; the cpu_task's 1,024-token vocabulary affords 16 rollouts
export TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-${BATCH_DEFAULTS[0]}} ROLLOUT_N=${ROLLOUT_N:-${BATCH_DEFAULTS[1]}}
export PPO_MINI_BATCH_SIZE=${PPO_MINI_BATCH_SIZE:-${BATCH_DEFAULTS[2]}}
export PPO_MICRO_BATCH_SIZE_PER_GPU=${PPO_MICRO_BATCH_SIZE_PER_GPU:-${BATCH_DEFAULTS[3]}}
export LOG_PROB_MICRO_BATCH_SIZE_PER_GPU=${LOG_PROB_MICRO_BATCH_SIZE_PER_GPU:-${BATCH_DEFAULTS[4]}}
export ACTOR_LR=${ACTOR_LR:-${LR_DEFAULT}}        # a tiny model needs a larger step than the 7B's 1e-6 to move
export MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-1024} MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-192}
export MAX_MODEL_LEN=${MAX_MODEL_LEN:-1280} MAX_NUM_SEQS=${MAX_NUM_SEQS:-8} AGENT_NUM_WORKERS=${AGENT_NUM_WORKERS:-1}
export REWARD_NUM_WORKERS=${REWARD_NUM_WORKERS:-2}
export MAX_ASSISTANT_TURNS=${MAX_ASSISTANT_TURNS:-3} MAX_USER_TURNS=${MAX_USER_TURNS:-2}
export MAX_PARALLEL_CALLS=${MAX_PARALLEL_CALLS:-4}
export MODEL_DTYPE=float32
export TOTAL_EPOCHS=${TOTAL_EPOCHS:-1000} TOTAL_TRAINING_STEPS=${TOTAL_TRAINING_STEPS:-${STEPS_DEFAULT}}
export SAVE_FREQ=${SAVE_FREQ:-${TOTAL_TRAINING_STEPS}} TEST_FREQ=${TEST_FREQ:-${TEST_FREQ_DEFAULT}}
export VAL_BEFORE_TRAIN=${VAL_BEFORE_TRAIN:-${VAL_BEFORE_TRAIN_DEFAULT}}
export RESUME_MODE=${RESUME_MODE:-disable}
export LOGGER=${LOGGER:-'["console","file"]'}
if [[ -n "${OPENAI_BASE_URL:-}" ]]; then            # one switch: SGLS and the judge on an OpenAI-compatible server
  export SGLS_BACKEND=openai SGLS_URLS=${OPENAI_BASE_URL} SGLS_MODEL=${OPENAI_MODEL:?set OPENAI_MODEL}
  export JUDGE=llm JUDGE_URLS=${OPENAI_BASE_URL} JUDGE_MODEL=${OPENAI_MODEL} JUDGE_TIMEOUT_S=${JUDGE_TIMEOUT_S:-60}
  export JUDGE_MAX_TOKENS=${JUDGE_MAX_TOKENS:-256}
else
  export SGLS_BACKEND=offline SGLS_URLS= JUDGE=${OFFLINE_JUDGE}
fi

NOISE_ARGS=()
[[ "${JUDGE_NOISE}" != 0 ]] && NOISE_ARGS=(+reward.custom_reward_function.reward_kwargs.judge_noise_sigma="${JUDGE_NOISE}"
                                          +reward.custom_reward_function.reward_kwargs.judge_noise_seed="${SEED}")
SEED_ARGS=(actor_rollout_ref.rollout.seed="${SEED}" +data.seed="${SEED}" actor_rollout_ref.actor.data_loader_seed="${SEED}")
bash "${RECIPES_DIR}/run_qwen7b_slca.sh" "${SEED_ARGS[@]}" "${NOISE_ARGS[@]}" "$@"
# the training curves; not after a validation-only run (recipes/eval_in_domain.sh, VAL_ONLY=1): one validation point and
# no training batches made a one-point figure and "no data for [...]" at the end of every in-domain eval
case "${DRY_RUN:-0}:${VAL_ONLY:-0}" in
  0:0|false:0) "${PY[@]}" slca_verl.eval.plots --metrics "${OUTPUT_DIR}/metrics.jsonl" --labels "${ADV_ESTIMATOR}" \
                 --out_dir "${OUTPUT_DIR}/plots" ;;
esac
