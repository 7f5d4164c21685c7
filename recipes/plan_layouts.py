"""The layout table of docs/gpu.md: the plan check of the 7B recipe on 4 x 8, 2 x 8 and 1 x 8 GPUs of 80 GB and of
the smoke recipe on one, each as the recipe composes it (``DRY_RUN=args`` / ``plan_args``).

    python recipes/plan_layouts.py          # prints the markdown table docs/gpu.md carries (a test compares them)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

RECIPES = os.path.dirname(os.path.abspath(__file__))

#: (layout, recipe, its environment): the rows of the table
LAYOUTS = (
    ("4 × 8 (the paper's)", "run_qwen7b_slca.sh", {"NNODES": "4", "RAY_ADDRESS": "auto"}),
    ("2 × 8", "run_qwen7b_slca.sh", {"NNODES": "2", "RAY_ADDRESS": "auto"}),
    ("1 × 8", "run_qwen7b_slca.sh", {"NNODES": "1"}),
    ("1 × 8, `OPTIMIZER_OFFLOAD=true`", "run_qwen7b_slca.sh", {"NNODES": "1", "OPTIMIZER_OFFLOAD": "true"}),
    ("1 × 4 (`run_qwen7b_slca_1node.sh`)", "run_qwen7b_slca_1node.sh", {}),
    (
        "1 × 1, 7B",
        "run_qwen7b_slca.sh",
        {"NNODES": "1", "N_GPUS_PER_NODE": "1", "OPTIMIZER_OFFLOAD": "true", "ROLLOUT_TP": "1"},
    ),
    ("1 × 1 (`run_smoke_1gpu.sh`, 0.5B)", "run_smoke_1gpu.sh", {}),
)
#: what the table is computed without: the caller's layout and services
CLEARED = (
    "NNODES",
    "N_GPUS_PER_NODE",
    "RAY_ADDRESS",
    "OPTIMIZER_OFFLOAD",
    "PARAM_OFFLOAD",
    "GPU_MEMORY_UTILIZATION",
    "ROLLOUT_TP",
    "MODEL_PATH",
    "PLAN_MODEL",
    "GPU_MEM_GIB",
)


def recipe_output(recipe: str, env: dict, what: str, out_dir: str) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k not in CLEARED}
    proc = subprocess.run(
        ["bash", os.path.join(RECIPES, recipe)],
        env={**base, "DRY_RUN": what, "OUTPUT_DIR": out_dir, "SERVICES_DIR": out_dir, **env},
        capture_output=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{recipe} DRY_RUN={what}: {proc.stderr.decode(errors='replace')[-800:]}")
    return [a.decode() for a in proc.stdout.split(b"\0") if a]


def table() -> str:
    sys.path.insert(0, RECIPES)
    import compose_check

    rows = ["| GPUs | rollout, step 2+ | log-probs | update | plan check |", "|---|---:|---:|---:|---|"]
    for name, recipe, env in LAYOUTS:
        with tempfile.TemporaryDirectory() as tmp:
            overrides = recipe_output(recipe, env, "args", tmp)
            plan_args = recipe_output(recipe, env, "plan_args", tmp)
            cfg = compose_check.compose(compose_check.PPO, overrides)
            plan = compose_check.plan_from_args(compose_check.PPO, cfg, plan_args)
        gib = {p.name: p.total for p in plan.phases}
        stops = [f for f in plan.findings if f.stop]
        verdict = "fits" if not stops else "STOP: " + "; ".join(f"{f.message}" for f in stops)
        rows.append(
            f"| {name} | {gib['rollout, step 2+']:.1f} | {gib['old / ref log-probs']:.1f} | {gib['actor update']:.1f}"
            f" | {verdict} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.stdout.write(table() + "\n")
