#!/usr/bin/env bash
# GRPO (the matched baseline): the scalar HierR total on the last trained token, verl's own grpo estimator.
# Same data, model, budget, rollout, reward and evaluation as run_qwen7b_slca.sh; only ADV_ESTIMATOR differs.
#   bash recipes/run_qwen7b_grpo.sh [extra hydra overrides]     (DRY_RUN=1 checks the config on CPU)
set -xeuo pipefail
ADV_ESTIMATOR=grpo exec bash "$(dirname "${BASH_SOURCE[0]}")/run_qwen7b_slca.sh" "$@"
