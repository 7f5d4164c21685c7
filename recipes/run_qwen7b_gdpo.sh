#!/usr/bin/env bash
# GDPO: verl's own gdpo over HierR's r_tool and r_sum (z-score each per group, sum, whiten). verl 0.9.1 passes
# reward components to gdpo only on its legacy trainer, so this run sets trainer.use_v1=false.
# Same data, model, budget, rollout, reward and evaluation as run_qwen7b_slca.sh; only ADV_ESTIMATOR differs.
#   bash recipes/run_qwen7b_gdpo.sh [extra hydra overrides]     (DRY_RUN=1 checks the config on CPU)
set -xeuo pipefail
ADV_ESTIMATOR=gdpo exec bash "$(dirname "${BASH_SOURCE[0]}")/run_qwen7b_slca.sh" "$@"
