"""verl's v1 trainer modes with the SLCA hand-over, through verl's trainer on this CPU: wall time per step, sync vs
colocate_async, same work.

    python benchmarks/trainer_modes.py --seed 5 --steps 10                     # ~25 min on 2 cores, model cached
    python benchmarks/trainer_modes.py --seed 5 --steps 10 --credit turn      # per-turn credit in both modes

Both runs go through ``bash recipes/run_cpu_tiny_slca.sh`` (verl's ``main_ppo``, the seed's tiny Qwen3, the same
data, batch, rollouts and budget, SLCA-GRPO) and differ only in ``trainer.v1.trainer_mode``: ``slca_sync`` or
``slca_colocate_async`` (verl's default ``num_warmup_batches: 1``: one batch of prompts is submitted ahead, so the
next batch's rollouts run while the current one trains). Validation is off (``TEST_FREQ=-1``,
``VAL_BEFORE_TRAIN=false``): it runs in both modes the same way and would dilute the difference. ``separate_async``
needs GPUs (docs/trainer_modes.md).

Prints the machine and, per mode: the training loop's wall time per step (from the moment verl's file logger wrote
step 1's metrics to the moment it wrote the last step's, polled; this counts generation that overlaps the update,
which verl's ``timing_s/step`` does not see in the async mode), the median ``timing_s/step`` over steps 2.. and
verl's phase timers, the staleness verl reports, and the async / sync ratios. Writes ``--out`` (JSON).

Machine load matters: the runs are sequential, so another job on the machine can favour either; ``--repeats 2``
interleaves the modes (sync, async, sync, async) and reports every run.
"""

from __future__ import annotations

import argparse
import json
import os
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
MODES = ("sync", "colocate_async")
PHASES = ("gen", "old_log_prob", "ref", "adv", "update_actor", "update_weights", "step")


def run_mode(mode: str, seed: int, steps: int, credit: str, work: str, tiny_dir: str | None) -> dict:
    """One CPU main-job run in ``mode``; returns its per-step metrics and wall time."""
    name = f"{mode}_seed{seed}_{credit}_{int(time.time())}"
    env = {
        **{k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"},
        "SEED": str(seed),
        "TOTAL_TRAINING_STEPS": str(steps),
        "SAVE_FREQ": "-1",
        "TEST_FREQ": "-1",
        "VAL_BEFORE_TRAIN": "false",
        "RUN_ROOT": work,
        "EXPERIMENT_NAME": name,
    }
    if tiny_dir:
        env["TINY_DIR"] = tiny_dir
    args = [f"trainer.v1.trainer_mode=slca_{mode}"]
    if credit == "turn":
        args.append("+algorithm.slca.credit=turn")
    path = os.path.join(work, name, "metrics.jsonl")
    log_path = os.path.join(work, f"{name}.log")
    seen: dict[int, float] = {}  # step -> when verl's file logger wrote its line (polled every 0.2 s)
    t0 = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            ["bash", RECIPE, *args], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        while proc.poll() is None:
            for step in _logged_steps(path):
                seen.setdefault(step, time.time())
            time.sleep(0.2)
    wall = time.time() - t0
    if proc.returncode != 0:
        with open(log_path) as f:
            raise RuntimeError(f"{mode} run failed (exit {proc.returncode}):\n{f.read()[-4000:]}")
    steps_metrics: dict[int, dict] = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            steps_metrics.setdefault(rec["step"], {}).update(rec["data"])
    steps_metrics.pop(0, None)
    return {"mode": mode, "process_wall_s": wall, "steps": steps_metrics, "logged_at": seen}


def _logged_steps(path: str) -> list[int]:
    try:
        with open(path) as f:
            return [json.loads(line)["step"] for line in f if line.endswith("\n")]
    except (OSError, ValueError):
        return []


def summarise(run: dict) -> dict:
    steps = run["steps"]
    later = [s for s in sorted(steps) if s >= 2] or sorted(steps)
    at = run["logged_at"]
    first, last = min(s for s in at if s >= 1), max(at)
    out = {
        "mode": run["mode"],
        "process_wall_s": round(run["process_wall_s"], 1),
        # the training loop's own wall clock: from step 1's line to the last step's, per step (no start-up, no
        # step 1 warm-ups; whatever runs between verl's step timers is in it)
        "loop_s_per_step": round((at[last] - at[first]) / max(last - first, 1), 2),
        "steps_wall_s": round(sum(steps[s]["timing_s/step"] for s in steps), 1),
        "median_step_s": round(statistics.median(steps[s]["timing_s/step"] for s in later), 2),
    }
    for phase in PHASES:
        key = f"timing_s/{phase}"
        values = [steps[s][key] for s in later if key in steps[s]]
        if values:
            out[f"median_{phase}_s"] = round(statistics.median(values), 2)
    stale = [steps[s].get("training/off_policy/trajectory_staleness/max") for s in sorted(steps)]
    out["staleness_max_per_step"] = stale
    out["reward_mean_per_step"] = [round(steps[s].get("critic/score/mean", float("nan")), 3) for s in sorted(steps)]
    out["tool_tokens_mean"] = round(statistics.mean(steps[s]["slca/tool_tokens/mean"] for s in steps), 2)
    out["agent_tool_calls_mean"] = round(
        statistics.mean(steps[s].get("reward_extra/agent_tool_calls/mean", float("nan")) for s in steps), 3
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=5, help="the tiny model's and the run's seed (any integer)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--credit", choices=("segment", "turn"), default="segment")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved repeats of the pair of runs")
    parser.add_argument("--tiny_dir", default=None, help="a built tiny model folder (TINY_DIR) to reuse")
    parser.add_argument("--out", default=None, help="write the summary JSON here")
    args = parser.parse_args()

    print(describe(), flush=True)
    runs = []
    with tempfile.TemporaryDirectory(prefix="slca_modes_") as work:
        for _ in range(args.repeats):
            for mode in MODES:
                run = summarise(run_mode(mode, args.seed, args.steps, args.credit, work, args.tiny_dir))
                print(json.dumps(run), flush=True)
                runs.append(run)
    by_mode = {m: [r for r in runs if r["mode"] == m] for m in MODES}
    med = {m: statistics.median(r["median_step_s"] for r in rs) for m, rs in by_mode.items()}
    total = {m: statistics.median(r["steps_wall_s"] for r in rs) for m, rs in by_mode.items()}
    loop = {m: statistics.median(r["loop_s_per_step"] for r in rs) for m, rs in by_mode.items()}
    summary = {
        "machine": describe(),
        "seed": args.seed,
        "steps": args.steps,
        "credit": args.credit,
        "runs": runs,
        "ratio_loop_s_per_step_async_over_sync": round(loop["colocate_async"] / loop["sync"], 3),
        "ratio_median_step_async_over_sync": round(med["colocate_async"] / med["sync"], 3),
        "ratio_steps_wall_async_over_sync": round(total["colocate_async"] / total["sync"], 3),
    }
    print(
        f"training loop per step: sync {loop['sync']:.1f} s, colocate_async {loop['colocate_async']:.1f} s "
        f"(ratio {summary['ratio_loop_s_per_step_async_over_sync']}); "
        f"median step: sync {med['sync']:.1f} s, colocate_async {med['colocate_async']:.1f} s "
        f"(ratio {summary['ratio_median_step_async_over_sync']}); sum of steps: sync {total['sync']:.0f} s, "
        f"colocate_async {total['colocate_async']:.0f} s (ratio {summary['ratio_steps_wall_async_over_sync']})"
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
