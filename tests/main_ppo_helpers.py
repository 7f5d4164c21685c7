"""Running the CPU main job (``recipes/run_cpu_tiny_slca.sh``) from tests and reading what it wrote."""

import json
import os
import subprocess

import subproc

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(REPO, "recipes", "run_cpu_tiny_slca.sh")
STEPS = 2


def run_recipe(
    out_root: str,
    timeout: int = 1500,
    args: tuple[str, ...] = (),
    **env,
) -> tuple[subprocess.CompletedProcess, str]:
    """Run the CPU recipe for STEPS steps into ``out_root`` (``args``: hydra overrides after the recipe's own);
    returns (process, output dir)."""
    env = {
        **{k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"},
        "TOTAL_TRAINING_STEPS": str(STEPS),
        "RUN_ROOT": out_root,
        "EXPERIMENT_NAME": "test_run",
        **env,
    }
    proc = subproc.run(["bash", RECIPE, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    return proc, os.path.join(out_root, env["EXPERIMENT_NAME"])


def read_metrics(out_dir: str) -> dict[int, dict]:
    """``{step: metrics}`` from verl's file logger; lines of one step are merged, and step 0 (validation before
    training, when the recipe asks for it) is kept as it is."""
    steps: dict[int, dict] = {}
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            steps.setdefault(rec["step"], {}).update(rec["data"])
    return steps


def tiny_model_dir(log: str) -> str:
    """The model the run trained, as the recipe passed it to verl (actor_rollout_ref.model.path=...)."""
    for token in log.split():
        if token.startswith("actor_rollout_ref.model.path="):
            return token.split("=", 1)[1]
    raise AssertionError("the recipe did not pass actor_rollout_ref.model.path")
