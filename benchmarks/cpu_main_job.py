"""SLCA-GRPO against verl's own stock path, through verl's trainer on this CPU: per-step time and training curves.

    python benchmarks/cpu_main_job.py                    # 20 steps each, seed 0 (~45 min on 2 cores)
    python benchmarks/cpu_main_job.py --steps 5          # the timing comparison alone (~14 min)
    python benchmarks/cpu_main_job.py --steps 5 --same_prompts   # both paths see identical prompts
    python benchmarks/cpu_main_job.py --steps 5 --same_prompts --stock_format slca_hermes   # ... and parse alike

Both runs go through ``bash recipes/run_cpu_tiny_slca.sh`` (verl's ``main_ppo``, the tiny Qwen3, same data, seed,
batch, rollout and budget) and differ only in what the method needs:

- **slca**: ``slca_tool_agent`` (per-row SGLS tools, segment ids, HierR laid out per segment) + ``slca_sync``
  (the extra TransferQueue fetch of segment ids and reward metrics) + ``slca_grpo``;
- **stock**: verl's ``tool_agent`` (the row's tools as SGLSTool entries of a verl tool YAML) + verl's ``sync``
  trainer + verl's ``grpo``, rewarded by the same HierR ``compute_score`` on the decoded response.

``--same_prompts`` makes the prompts identical: verl's ``tool_agent`` lists every tool of its tool YAML (it has no
per-row tools) through the chat template, on top of the data's own hermes system prompt. With the option both runs
read rows whose system prompt no longer lists tools and whose tools are the union the stock YAML holds, so both
loops render the same tool list once, through the chat template, and the policy sees the same tokens.

Prints the machine, the median per-step time of each (steps 2.., step 1 pays one-off warm-ups) with verl's own
phase timers (``timing_s/*``), their ratio, and the plugin's import cost per process measured here
(``import verl`` with and without ``VERL_USE_EXTERNAL_PLUGINS=none``, times the processes the run started). Writes
``--out`` (JSON) and ``--plot`` (reward and tool curves).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from machine import describe  # noqa: E402

RECIPE = os.path.join(REPO, "recipes", "run_cpu_tiny_slca.sh")
PHASES = ("gen", "old_log_prob", "ref", "adv", "update_actor", "update_weights", "step")


def tool_union(df) -> dict[str, dict]:
    """Every tool of the rows, by name (the first schema seen for a name)."""
    tools = {}
    for schemas in df["tools"]:
        for t in json.loads(schemas):
            tools.setdefault(t["function"]["name"], t)
    return tools


def stock_inputs(train_parquet: str, work: str) -> tuple[str, str]:
    """(train parquet whose rows ask for verl's tool_agent, verl tool YAML with every tool of the data as SGLSTool)."""
    import pandas as pd
    import yaml

    df = pd.read_parquet(train_parquet)
    df["agent_name"] = "tool_agent"
    tools = tool_union(df)
    path = os.path.join(work, "stock_train.parquet")
    df.to_parquet(path)
    yaml_path = os.path.join(work, "stock_tools.yaml")
    with open(yaml_path, "w") as f:
        yaml.safe_dump(
            {
                "tools": [
                    {
                        "class_name": "slca_verl.sgls.tool.SGLSTool",
                        "config": {"type": "native", "backend": "offline", "cache_scope": "run"},
                        "tool_schema": t,
                    }
                    for t in tools.values()
                ]
            },
            f,
        )
    return path, yaml_path


def same_prompt_rows(train_parquet: str, work: str) -> str:
    """The rows with the tool listing cut from the system prompt and every row offering the union of the tools (what
    verl's tool_agent renders from its YAML), so both loops render identical prompts. Gold and reward are unchanged."""
    import pandas as pd

    df = pd.read_parquet(train_parquet)
    tools = json.dumps(list(tool_union(df).values()))

    def cut(prompt):
        messages = [dict(m) for m in prompt]
        for m in messages:
            if m["role"] == "system" and "<tools>" in m["content"]:
                m["content"] = m["content"].split("\n\n# Tools", 1)[0]
        return messages

    df["prompt"] = df["prompt"].map(cut)
    df["tools"] = tools
    df["extra_info"] = df["extra_info"].map(lambda e: {**e, "tool_schemas": tools})
    path = os.path.join(work, "same_prompt_train.parquet")
    df.to_parquet(path)
    return path


def run(name: str, steps: int, seed: int, root: str, extra_env: dict, overrides: list[str]) -> dict:
    env = {
        **{k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"},
        "TOTAL_TRAINING_STEPS": str(steps),
        "SEED": str(seed),
        "RUN_ROOT": root,
        "EXPERIMENT_NAME": name,
        "SAVE_FREQ": "-1",
        **extra_env,
    }
    t0 = time.time()
    proc = subprocess.run(["bash", RECIPE, *overrides], cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.time() - t0
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed (exit {proc.returncode}):\n{log[-5000:]}")
    pids = set(re.findall(r"pid=(\d+)", log))
    return {**load_run(root, name), "wall_s": wall, "ray_processes": len(pids)}


def recipe_output(seed: int, work: str, **flags: str) -> str:
    """Run the CPU recipe in one of its no-training modes (BUILD_ONLY=1, DRY_RUN=args) for a seed; its stdout, or
    an exit that shows the recipe's own error."""
    env = {**os.environ, "SEED": str(seed), "RUN_ROOT": work, **flags}
    proc = subprocess.run(["bash", RECIPE], cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the recipe with {flags} failed (exit {proc.returncode}):\n{proc.stderr[-5000:]}")
    return proc.stdout


def build_tiny(seed: int, work: str) -> str:
    """Build (or find in the cache) the seed's tiny data and model, as the recipe's first run would; its dir."""
    return recipe_output(seed, work, BUILD_ONLY="1").strip().splitlines()[-1]


def recipe_arg(key: str, seed: int, work: str) -> str:
    """The value the CPU recipe passes for one hydra key (DRY_RUN=args composes nothing and writes only to work)."""
    out = recipe_output(seed, work, DRY_RUN="args")
    return next(a.split("=", 1)[1] for a in out.split("\0") if a.startswith(key + "="))


def import_cost(repeats: int = 3) -> dict:
    def once(extra):
        env = {**os.environ, "VERL_PLATFORM": "cpu", **extra}
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import verl"], env=env, check=True, capture_output=True)
        return time.perf_counter() - t0

    with_plugin = statistics.median(once({}) for _ in range(repeats))
    without = statistics.median(once({"VERL_USE_EXTERNAL_PLUGINS": "none"}) for _ in range(repeats))
    return {"import_verl_s": with_plugin, "import_verl_without_plugins_s": without, "plugin_s": with_plugin - without}


def phase_medians(metrics: dict, per_ktoken: bool = False) -> dict:
    """Median over steps 2.. of each phase's seconds, or of its seconds per 1,000 tokens of the batch (prompt +
    response tokens per sample; both runs have the same batch size), which compares runs whose policies wrote
    different amounts."""
    steps = [s for s in sorted(metrics) if s >= 2] or sorted(metrics)

    def scale(m):
        return 1000.0 / (m["prompt_length/mean"] + m["response_length/mean"]) if per_ktoken else 1.0

    return {
        p: statistics.median(metrics[s].get(f"timing_s/{p}", 0.0) * scale(metrics[s]) for s in steps) for p in PHASES
    }


def load_run(root: str, name: str) -> dict:
    metrics = {}
    with open(os.path.join(root, name, "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            metrics[rec["step"]] = rec["data"]
    return {"metrics": metrics, "wall_s": float("nan"), "ray_processes": 0}


def plot(runs: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    panels = [
        ("critic/score/mean", "training reward (HierR total)"),
        ("reward_extra/name_f1/mean", "tool-name F1 (HierR)"),
        ("reward_extra/r_sum/mean", "preference reward r_sum (offline proxy judge)"),
    ]
    colors = {name: f"C{i}" for i, name in enumerate(runs)}  # one color per run in every panel
    for ax, (key, title) in zip(axes, panels):
        for name, r in runs.items():
            pts = [(s, m[key]) for s, m in sorted(r["metrics"].items()) if key in m]
            if pts:
                ax.plot(*zip(*pts), marker=".", label=name, color=colors[name])
        ax.set(title=title, xlabel="step")
        ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work_dir", default=None, help="where the runs go (default: a temp dir)")
    p.add_argument("--out", default=os.path.join(REPO, "docs", "results", "cpu_main_job.json"))
    p.add_argument("--plot", default=os.path.join(REPO, "docs", "img", "cpu_main_job.png"))
    p.add_argument("--reuse", action="store_true", help="report on the runs already in --work_dir, run nothing")
    p.add_argument("--ray_processes", type=int, default=0, help="with --reuse: the count the original run printed")
    p.add_argument(
        "--stock_format",
        default="hermes",
        help="the stock run's tool-call parser: hermes (verl's) or slca_hermes (this plugin's, registered "
        "in verl's ToolParser registry: malformed calls are answered instead of ending the episode)",
    )
    p.add_argument(
        "--same_prompts",
        action="store_true",
        help="both paths read rows with the same tools, rendered once by the chat template (like for like)",
    )
    args = p.parse_args(argv)
    work = args.work_dir or tempfile.mkdtemp(prefix="slca_cpu_bench_")
    print(describe())

    if args.reuse:  # also picks up a "grpo" run (ADV_ESTIMATOR=grpo through the same recipe) for the curves
        names = [n for n in ("slca", "stock", "grpo") if os.path.exists(os.path.join(work, n, "metrics.jsonl"))]
        runs = {name: load_run(work, name) for name in names}
        return report(args, runs, import_cost())
    slca_env = {"ADV_ESTIMATOR": "slca_grpo"}
    if args.same_prompts:  # the tiny data must exist first: the recipe builds it (and the model) on first use
        os.makedirs(work, exist_ok=True)
        build_tiny(args.seed, work)
        slca_env["TRAIN_FILES"] = same_prompt_rows(recipe_arg("data.train_files", args.seed, work), work)
    runs = {"slca": run("slca", args.steps, args.seed, work, slca_env, [])}
    tiny_data = slca_env.get("TRAIN_FILES") or recipe_arg("data.train_files", args.seed, work)
    train, tools_yaml = stock_inputs(tiny_data, work)
    runs["stock"] = run(
        "stock",
        args.steps,
        args.seed,
        work,
        {"ADV_ESTIMATOR": "grpo", "TRAIN_FILES": train},
        [
            "trainer.v1.trainer_mode=sync",
            "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
            f"actor_rollout_ref.rollout.multi_turn.format={args.stock_format}",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tools_yaml}",
        ],
    )
    return report(args, runs, import_cost())


def report(args, runs: dict, cost: dict) -> int:
    phases = {name: phase_medians(r["metrics"]) for name, r in runs.items()}
    per_k = {name: phase_medians(r["metrics"], per_ktoken=True) for name, r in runs.items()}
    ratio = phases["slca"]["step"] / phases["stock"]["step"]
    ratio_k = per_k["slca"]["step"] / per_k["stock"]["step"]
    tokens = {
        name: statistics.median(
            m["prompt_length/mean"] + m["response_length/mean"] for s, m in r["metrics"].items() if s >= 2
        )
        for name, r in runs.items()
    }

    print(f"\nmedian over steps 2..{args.steps} of verl's timing_s/*: seconds per step | seconds per 1k tokens")
    print(f"{'phase':>16} {'slca':>8} {'stock':>8} | {'slca':>8} {'stock':>8} {'ratio':>7}")
    for ph in PHASES:
        a, b, ka, kb = phases["slca"][ph], phases["stock"][ph], per_k["slca"][ph], per_k["stock"][ph]
        print(f"{ph:>16} {a:>8.2f} {b:>8.2f} | {ka:>8.2f} {kb:>8.2f} {ka / kb if kb else float('nan'):>6.2f}x")
    print(f"tokens per sample (prompt + response, median): slca {tokens['slca']:.0f}, stock {tokens['stock']:.0f}")
    print(f"slca / stock: {ratio:.3f}x per step, {ratio_k:.3f}x per token")
    if "grpo" in runs:  # verl's grpo through the same loop and trainer: the same work, only the estimator differs
        print(
            f"slca / grpo (same loop): {phases['slca']['step'] / phases['grpo']['step']:.3f}x per step "
            f"(grpo: gen {phases['grpo']['gen']:.2f} s, adv {phases['grpo']['adv']:.2f} s, "
            f"step {phases['grpo']['step']:.2f} s; {tokens['grpo']:.0f} tokens per sample)"
        )
    n = runs["slca"]["ray_processes"] or args.ray_processes
    print(
        f"plugin import cost: {cost['plugin_s']:.2f} s per process (import verl {cost['import_verl_s']:.2f} s vs "
        f"{cost['import_verl_without_plugins_s']:.2f} s without plugins) x {n} Ray processes in the slca run "
        f"= {cost['plugin_s'] * n:.0f} s of start-up CPU time, spread over the processes"
    )
    for name, r in runs.items():
        last = r["metrics"][max(r["metrics"])]
        first = r["metrics"][min(r["metrics"])]
        print(
            f"{name}: reward step 1 {first['critic/score/mean']:.3f} -> step {max(r['metrics'])} "
            f"{last['critic/score/mean']:.3f}; wall {r['wall_s']:.0f} s"
        )

    result = {
        "machine": describe(),
        "steps": args.steps,
        "seed": args.seed,
        "phases_median_s": phases,
        "phases_median_s_per_ktoken": per_k,
        "tokens_per_sample": tokens,
        "slca_over_stock": ratio,
        "slca_over_stock_per_token": ratio_k,
        "import": cost,
        "ray_processes": n,
        "curves": {
            name: {
                str(s): {
                    k: m.get(k)
                    for k in (
                        "critic/score/mean",
                        "reward_extra/name_f1/mean",
                        "reward_extra/r_tool/mean",
                        "reward_extra/r_sum/mean",
                        "slca/adv_tool/std",
                        "slca/adv_summary/std",
                        "timing_s/step",
                    )
                }
                for s, m in r["metrics"].items()
            }
            for name, r in runs.items()
        },
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    plot(runs, args.plot)
    print(f"wrote {args.out} and {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
