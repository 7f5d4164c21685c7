"""The paper's comparison in miniature, inside verl's own trainer on a CPU: GRPO, GDPO, SLCA-GRPO (and SLCA-GRPO with
the abstention fix) under judge noise, on the generated CPU task, scored by verl's validation on held-out prompts.

    python benchmarks/cpu_reproduction.py                        # the documented grid (docs/reproduction_cpu.md)
    python benchmarks/cpu_reproduction.py --methods grpo slca_grpo --sigmas 1 --seeds 11 42 7 --steps 30
    python benchmarks/cpu_reproduction.py --plot-only docs/results/cpu_reproduction.json
    python benchmarks/cpu_reproduction.py --task cpu_chain --methods slca_grpo_fix slca_grpo_turn gigpo --sigmas 0 \
        --lr 1e-3 --steps 20 --out docs/results/cpu_chain.json --plot docs/img/cpu_chain.png   # per-turn credit

``--task cpu_chain`` runs the multi-step task of data_prep/cpu_chain.py (two dependent calls) instead; its tool
accuracy is the chain rows' (both calls right, nothing extra), ``single_acc`` its one-call rows', and the methods
include per-turn credit (``slca_grpo_turn``: ``slca_grpo`` with ``+algorithm.slca.credit=turn``) and its registered
comparators ``gigpo`` and ``mt_grpo`` (estimators ``slca_gigpo``, ``slca_mt_grpo``). ``--lr`` sets the actor's
learning rate (the recipe's ``ACTOR_LR``). ``--chain_cities 26 --chain_phrasings 4 --chain_val_share 0.5
--chain_val_other 1`` widens the chain task to 104 held-out chains (the recipe's ``CHAIN_*``; its own models).

Every run is ``bash recipes/run_cpu_tiny_slca.sh`` (verl's ``main_ppo``: slca_tool_agent → offline SGLS → HierR with
a NoisyJudge of σ = ``--sigmas`` → TransferQueue → the method's advantages → FSDP2 update), with ``SEED`` the seed of
the task's split, the tiny model's initialisation and warm-up, the rollout and the data order; ``JUDGE_NOISE`` the
judge's σ (in r_sum units); ``TEST_FREQ`` how often verl validates greedily on the held-out prompts. What is read
back from verl's own metrics.jsonl, per run:

    tool accuracy        val-aux/cpu_task/toolpo_success/mean@1       every gold call right, nothing extra
    abstention accuracy  val-aux/cpu_task_chat/toolpo_success/mean@1  chat prompts answered without a call
    reply quality        val-aux/cpu_task/r_sum_clean/mean@1          the judge's rating before its noise
    steps to threshold   first validation step with tool accuracy >= --threshold (None: never)
    noise leak           mean over training steps of slca/corr_adv_tool_judge_noise (tool advantage vs judge noise)

and the summary gives, per (method, σ), the median and the range over seeds; the paired tables each method's endpoint
minus GRPO's on the same seed (``paired``, and ``paired_macro`` with every kind weighted alike), and ``learning`` each
method's endpoint minus the seed's start (its step-0 validation averaged over the seed's runs). Seeds are arbitrary
integers; the models are built once per seed and cached (CACHE_DIR), and each run records the SHA-256 of the model
it trained (``model_sha256``; a pair of runs on other models is marked * in the paired table). The machine and the
wall time are printed and stored.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(REPO, "recipes", "run_cpu_tiny_slca.sh")

#: method -> the recipe's environment
METHODS = {
    "grpo": {"ADV_ESTIMATOR": "grpo"},
    "gdpo": {"ADV_ESTIMATOR": "gdpo"},
    "slca_grpo": {"ADV_ESTIMATOR": "slca_grpo", "ABSTENTION_FIX": "0"},  # faithful (the CPU recipe's default is 1)
    "slca_grpo_fix": {"ADV_ESTIMATOR": "slca_grpo", "ABSTENTION_FIX": "1"},
    # per-turn credit and its comparators (for the multi-step task, --task cpu_chain)
    "slca_grpo_turn": {"ADV_ESTIMATOR": "slca_grpo", "ABSTENTION_FIX": "1"},
    "gigpo": {"ADV_ESTIMATOR": "slca_gigpo"},
    "mt_grpo": {"ADV_ESTIMATOR": "slca_mt_grpo"},
}
#: method -> hydra overrides it adds to the run's own
METHOD_OVERRIDES = {"slca_grpo_turn": ["+algorithm.slca.credit=turn"]}
#: task -> what a run reports -> the key of verl's validation metrics it is read from. cpu_chain's tool accuracy is
#: the chain rows' (both calls right, nothing extra); single_acc its one-call airport rows'
TASK_KEYS = {
    "cpu_task": {
        "tool_acc": "val-aux/cpu_task/toolpo_success/mean@1",
        "abstention_acc": "val-aux/cpu_task_chat/toolpo_success/mean@1",
        "reply_quality": "val-aux/cpu_task/r_sum_clean/mean@1",
    },
    "cpu_chain": {
        "tool_acc": "val-aux/cpu_chain/toolpo_success/mean@1",
        "single_acc": "val-aux/cpu_chain_single/toolpo_success/mean@1",
        "abstention_acc": "val-aux/cpu_chain_chat/toolpo_success/mean@1",
        "reply_quality": "val-aux/cpu_chain/r_sum_clean/mean@1",
    },
}
VAL_KEYS = TASK_KEYS["cpu_task"]


def task_keys(task: str, val_n: int = 1) -> dict[str, str]:
    """:data:`TASK_KEYS` of ``task`` for validation with ``val_n`` samples a prompt (verl names the mean over a
    prompt's samples ``mean@<n>``)."""
    return {k: v.replace("/mean@1", f"/mean@{val_n}") for k, v in TASK_KEYS[task].items()}


#: training-step means read back as well (absent where the estimator does not log them)
TRAIN_KEYS = {
    "train_success": "reward_extra/toolpo_success/mean",  # sampled rollouts, every kind of row
    "assistant_turns": "reward_extra/agent_turns/mean",  # calls + the reply, per rollout
}
LAST = 5  # training metrics are reported as the mean over the last LAST steps
LEAK_KEY = "slca/corr_adv_tool_judge_noise"


def read_metrics(path: str) -> dict[int, dict]:
    """verl's file logger output: ``{step: {metric: value}}`` (lines of one step merged)."""
    steps: dict[int, dict] = {}
    if not os.path.exists(path):
        return steps
    with open(path) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            steps.setdefault(int(rec["step"]), {}).update(rec.get("data", {}))
    return steps


def run_summary(
    metrics: dict[int, dict],
    threshold: float,
    task: str = "cpu_task",
    val_n: int = 1,
    endpoint_from: int = 5,
    endpoint_every: int = 1,
) -> dict:
    """The per-run numbers (module docstring) from a run's metrics; ``endpoint`` is the mean validation tool accuracy
    over the validations at steps >= ``endpoint_from`` that are multiples of ``endpoint_every`` (None without one:
    runs validated at different frequencies compare on the steps they share)."""
    keys = task_keys(task, val_n)
    curve = {name: {s: m[key] for s, m in sorted(metrics.items()) if key in m} for name, key in keys.items()}
    curve.update(
        {name: {s: m[key] for s, m in sorted(metrics.items()) if key in m} for name, key in TRAIN_KEYS.items()}
    )
    tool = curve["tool_acc"]
    reached = [s for s, v in tool.items() if v >= threshold]
    leaks = [m[LEAK_KEY] for m in metrics.values() if LEAK_KEY in m]
    last = max(tool) if tool else None
    after = [v for s, v in tool.items() if s >= endpoint_from and s % endpoint_every == 0]
    return {
        "curve": {k: {str(s): v for s, v in c.items()} for k, c in curve.items()},
        "start_tool_acc": tool.get(min(tool)) if tool else None,
        "endpoint": statistics.fmean(after) if after else None,
        "steps_to_threshold": reached[0] if reached else None,
        **{f"final_{k}": (curve[k].get(last) if last is not None else None) for k in keys},
        "noise_leak": statistics.fmean(leaks) if leaks else None,
        **{f"last_{k}": statistics.fmean(list(curve[k].values())[-LAST:]) if curve[k] else None for k in TRAIN_KEYS},
    }


#: the folder of a run's validation dumps (verl's trainer.validation_data_dir), one JSONL per validation step
VAL_DUMP = "val_generations"


def pearson(x: list[float], y: list[float]) -> float | None:
    """Pearson's r (None with fewer than 3 pairs or a constant side)."""
    if len(x) < 3:
        return None
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / math.sqrt(sxx * syy)


def _within(groups: list[list[tuple[float, float]]]) -> tuple[list[float], list[float]]:
    """The pairs of each group minus the group's means (what a group-normalised advantage sees)."""
    xs, ys = [], []
    for g in groups:
        mx, my = statistics.fmean(a for a, _ in g), statistics.fmean(b for _, b in g)
        xs += [a - mx for a, _ in g]
        ys += [b - my for _, b in g]
    return xs, ys


def dump_summary(run_dir: str) -> dict:
    """From a run's validation dumps (:data:`VAL_DUMP`): tool accuracy per kind of prompt at each validation step
    (``kind_acc``: {step: {subset: mean toolpo_success}}), and how the judge's noise-free rating of the reply goes
    with the execution reward on the tool prompts, pooled over the validations, within each prompt's samples:
    ``reply_exec_r`` r(r_tool, r_sum_clean) over every sample, ``reply_exec_r_called`` over the samples that wrote a
    call that parsed (the no-call penalty sets both parts at once, so this is the part of the reply's reward that a
    call's correctness could explain). Empty without dumps."""
    folder = os.path.join(run_dir, VAL_DUMP)
    if not os.path.isdir(folder):
        return {}
    kind_acc: dict[str, dict[str, float]] = {}
    every: dict[tuple, list] = {}
    called: dict[tuple, list] = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".jsonl") or not name[:-6].isdigit():
            continue
        step = int(name[:-6])
        sessions: dict[str, dict] = {}
        with open(os.path.join(folder, name)) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                parts = str(rec.get("uid", "")).rsplit("_", 2)
                sessions["_".join(parts[:2])] = {**rec, "_prompt": parts[0]}  # one row per (prompt, sample)
        kinds: dict[str, list[float]] = {}
        for rec in sessions.values():
            gt = rec.get("gts") if isinstance(rec.get("gts"), dict) else {}
            kind = gt.get("subset_name") or "unknown"
            if rec.get("toolpo_success") is not None:
                kinds.setdefault(kind, []).append(float(rec["toolpo_success"]))
            if kind == "irrelevant" or rec.get("r_tool") is None or rec.get("r_sum_clean") is None:
                continue
            pair = (float(rec["r_tool"]), float(rec["r_sum_clean"]))
            every.setdefault((step, rec["_prompt"]), []).append(pair)
            if not rec.get("no_call"):
                called.setdefault((step, rec["_prompt"]), []).append(pair)
        kind_acc[str(step)] = {k: statistics.fmean(v) for k, v in sorted(kinds.items())}
    return {
        "kind_acc": kind_acc,
        "reply_exec_r": pearson(*_within(list(every.values()))),
        "reply_exec_r_called": pearson(*_within([g for g in called.values() if len(g) > 1])),
    }


def launch(method: str, sigma: float, seed: int, args, out_root: str) -> dict:
    """One training run through the CPU recipe; returns its summary (``failed`` set when the run failed)."""
    name = f"{method}_sigma{sigma:g}_seed{seed}"
    env = {k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"}
    env.update(METHODS[method])
    env.update(
        {
            "SEED": str(seed),
            "JUDGE_NOISE": f"{sigma:g}",
            "TOTAL_TRAINING_STEPS": str(args.steps),
            "TEST_FREQ": str(args.test_freq),
            "VAL_BEFORE_TRAIN": "true",
            "SAVE_FREQ": str(args.steps),
            "RUN_ROOT": out_root,
            "EXPERIMENT_NAME": name,
            "TASK": args.task,
            "VAL_PROMPTS": str(args.val_prompts),
            "VAL_N": str(args.val_n),
            "VAL_TEMPERATURE": f"{args.val_temperature:g}",
            "OFFLINE_JUDGE": args.judge,
        }
    )
    if args.task == "cpu_chain":
        env.update({name: f"{getattr(args, key):g}" for key, (name, _) in CHAIN_SIZE.items()})
    if args.lr is not None:
        env["ACTOR_LR"] = f"{args.lr:g}"
    t0 = time.perf_counter()
    log_path = os.path.join(out_root, f"{name}.log")
    os.makedirs(out_root, exist_ok=True)
    cmd = [
        "bash",
        RECIPE,
        f"trainer.validation_data_dir={os.path.join(out_root, name, VAL_DUMP)}",
        *METHOD_OVERRIDES.get(method, []),
        *args.overrides,
    ]
    with open(log_path, "w") as log:
        returncode, timed_out = run_group(cmd, env, log, args.run_timeout)
    seconds = time.perf_counter() - t0
    summary = read_run(os.path.join(out_root, name), args)
    return {
        "method": method,
        "sigma": sigma,
        "seed": seed,
        "seconds": seconds,
        "returncode": returncode,
        "timed_out": timed_out,
        "failed": returncode != 0,
        "log": log_path,
        "model_sha256": model_fingerprint(log_path),
        **summary,
    }


def model_fingerprint(log_path: str) -> str | None:
    """The first 16 hex digits of the SHA-256 of the model a run trained (``model.safetensors`` under the last
    ``MODEL_PATH=`` the recipe's trace wrote in the run's log); None when the log or the file is missing.

    A seed fixes the tiny model's build, so runs of one seed pair on the same start only where the fingerprints agree:
    the cache lives on the machine that built it, and a model rebuilt elsewhere (another processor's float rounding
    over the 800 warm-up steps) may differ."""
    try:
        with open(log_path, errors="replace") as f:
            paths = re.findall(r"MODEL_PATH=(\S+)", f.read())
    except OSError:
        return None
    weights = os.path.join(paths[-1], "model.safetensors") if paths else None
    if weights is None or not os.path.isfile(weights):
        return None
    digest = hashlib.sha256()
    with open(weights, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def run_group(cmd: list[str], env: dict, log, timeout: float, grace: float = 30.0) -> tuple[int, bool]:
    """Run ``cmd`` in a process group of its own; past ``timeout`` seconds the whole group is stopped (SIGTERM, then
    SIGKILL after ``grace`` seconds), so a recipe's warm-up, Ray workers and servers go with it, and the run is a
    failed run of the grid rather than the end of the grid. When the grid itself is stopped (Ctrl-C, or SIGTERM, which
    the script turns into :class:`KeyboardInterrupt`) the group is stopped the same way before the
    interrupt goes on: the run's children do not outlive the grid. Returns (exit status, timed out)."""
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        return proc.wait(timeout=timeout), False
    except subprocess.TimeoutExpired:
        _stop_group(proc, grace)
        log.write(f"\ncpu_reproduction: stopped after --run_timeout {timeout:g} s\n")
        return proc.returncode if proc.returncode not in (None, 0) else -9, True
    except BaseException:
        _stop_group(proc, grace)
        log.write("\ncpu_reproduction: stopped with the grid\n")
        raise


def _stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM to ``proc``'s group, SIGKILL to whatever of it is left ``grace`` seconds later; ``proc`` reaped."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(proc.pid, signal.SIGKILL)  # whatever of the group is left, the leader gone or not
    proc.wait()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _interrupt(signum, frame):
    """SIGTERM as Ctrl-C: :func:`run_group` then stops the run in progress with its whole group."""
    raise KeyboardInterrupt(f"signal {signum}")


def macro_endpoint(kind_acc: dict, start: int, every: int = 1) -> float | None:
    """The endpoint with every kind of tool prompt weighted alike: the mean over the validation steps >= ``start``
    (multiples of ``every``) of the mean over the kinds of their tool accuracy (chat prompts, ``irrelevant``, out).
    On the wide validation set (103 of 123 prompts parallel) a policy that always calls get_weather scores 87 % on
    the endpoint and 50 % plus a quarter of its exchange accuracy on this one."""
    per_step = [
        statistics.fmean(v for k, v in kinds.items() if k != "irrelevant")
        for s, kinds in kind_acc.items()
        if int(s) >= start and int(s) % every == 0 and any(k != "irrelevant" for k in kinds)
    ]
    return statistics.fmean(per_step) if per_step else None


def read_run(run_dir: str, args) -> dict:
    """A run's numbers: :func:`run_summary` of its metrics, :func:`dump_summary` of its validation dumps and the
    :func:`macro_endpoint` of those."""
    metrics = read_metrics(os.path.join(run_dir, "metrics.jsonl"))
    every = getattr(args, "endpoint_every", 1)
    dumps = dump_summary(run_dir)
    return {
        **run_summary(metrics, args.threshold, args.task, args.val_n, args.endpoint_from, every),
        **dumps,
        "endpoint_macro": macro_endpoint(dumps.get("kind_acc", {}), args.endpoint_from, every),
    }


def spread(values: list) -> dict | None:
    """median, quartiles (``q1``, ``q3``: linear interpolation between order statistics, numpy's default; with one
    value both are it), min, max of the values that exist (None: a threshold never reached counts as the run's
    steps + 1)."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else (values[0],) * 3
    return {
        "median": statistics.median(values),
        "q1": q1,
        "q3": q3,
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def summarise(runs: list[dict], steps: int) -> dict:
    cells: dict[str, dict] = {}
    for r in runs:
        key = f"{r['method']}|{r['sigma']:g}"
        cells.setdefault(key, []).append(r)
    out = {}
    for key, rs in cells.items():
        ok = [r for r in rs if not r["failed"]]
        out[key] = {
            "runs": len(rs),
            "failed": len(rs) - len(ok),
            "reached": sum(r["steps_to_threshold"] is not None for r in ok),
            "steps_to_threshold": spread(
                [r["steps_to_threshold"] if r["steps_to_threshold"] is not None else steps + 1 for r in ok]
            ),
            **{
                k: spread([r.get(k) for r in ok])
                for k in (
                    "start_tool_acc",
                    "endpoint",
                    "endpoint_macro",
                    "final_tool_acc",
                    "final_single_acc",
                    "final_abstention_acc",
                    "final_reply_quality",
                    "noise_leak",
                    "reply_exec_r",
                    "reply_exec_r_called",
                    *(f"last_{k}" for k in TRAIN_KEYS),
                )
            },
        }
    return out


def _chi2_cdf(x: float, k: int) -> float:
    """P(X <= x) for X ~ chi-square with k degrees of freedom (the regularised lower gamma function's series)."""
    if x <= 0:
        return 0.0
    a, z = k / 2.0, x / 2.0
    term = total = 1.0 / a
    n = 0
    while term > 1e-15 * total and n < 10_000:
        n += 1
        term *= z / (a + n)
        total += term
    return min(1.0, math.exp(a * math.log(z) - z - math.lgamma(a)) * total)


def _solve_rising(f, target: float, hi: float) -> float:
    """The x >= 0 with f(x) = ``target`` for a function rising from below it at 0: ``hi`` doubled until f(hi) reaches
    the target, then 200 bisections of [0, hi]."""
    lo = 0.0
    while f(hi) < target:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


def chi2_quantile(p: float, k: int) -> float:
    """The p-quantile of chi-square with k degrees of freedom (bisection on :func:`_chi2_cdf`)."""
    return _solve_rising(lambda x: _chi2_cdf(x, k), p, max(10.0, 10.0 * k))


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b) (Lentz's continued fraction, on the side that converges)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 10_000):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * f


def t_sf2(t: float, df: int) -> float:
    """Two-sided p-value of Student's t with ``df`` degrees of freedom:
    P(|T| >= |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2)."""
    return _betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile2(alpha: float, df: int) -> float:
    """The two-sided critical value of Student's t: the t > 0 with P(|T| >= t) = ``alpha`` (bisection on
    :func:`t_sf2`, which falls from 1 at t = 0)."""
    return _solve_rising(lambda t: -t_sf2(t, df), -alpha, 1.0)


def paired_t(diffs: list[float]) -> dict | None:
    """The paired t-test of mean difference 0 (two-sided): t = mean / (sd / sqrt(n)), df = n - 1, and its p-value
    (None with fewer than 2 differences; with SD 0, t is infinite and p is 0 unless the mean is 0 too)."""
    n = len(diffs)
    if n < 2:
        return None
    mean, sd = statistics.fmean(diffs), statistics.stdev(diffs)
    if sd == 0.0:
        return {"t": 0.0 if mean == 0.0 else math.copysign(math.inf, mean), "df": n - 1, "p": float(mean == 0.0)}
    t = mean / (sd / math.sqrt(n))
    return {"t": t, "df": n - 1, "p": t_sf2(t, n - 1)}


def seeds_for_power(sd: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Paired seeds for a two-sided paired test at ``alpha`` to detect a mean difference ``delta`` with ``power``
    when the paired differences have SD ``sd`` (normal approximation: ((z_{1-alpha/2} + z_power) sd / delta)^2)."""
    z = statistics.NormalDist()
    return max(2, math.ceil(((z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * sd / delta) ** 2))


def bootstrap_mean_ci(values: list[float], n_boot: int = 10_000, seed: int = 0) -> list[float] | None:
    """95 % percentile bootstrap interval of the mean of ``values`` over resampled seeds (None with fewer than 2)."""
    if len(values) < 2:
        return None
    import random

    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(n_boot))
    return [means[int(0.025 * n_boot)], means[int(0.975 * n_boot) - 1]]


def diff_stats(diffs: dict[int, float], deltas=(0.05, 0.10)) -> dict:
    """Differences keyed by seed: their mean with a bootstrap 95 % interval over seeds and Student's t 95 % interval
    (mean ± t_{0.975, n−1} sd / sqrt n: on few seeds the percentile bootstrap is too narrow, its resamples never
    spread wider than the seeds did), their SD and its 95 % interval (chi-square, n − 1 degrees of freedom), the
    t-test of a zero mean (two-sided, :func:`paired_t`), and the seeds 80 % power needs for each effect in ``deltas``
    at the SD and at the ends of its interval."""
    d = list(diffs.values())
    entry = {
        "diffs": {str(k): v for k, v in diffs.items()},
        "n": len(d),
        "mean": statistics.fmean(d),
        "mean_95_bootstrap": bootstrap_mean_ci(d),
    }
    if len(d) > 1:
        sd, df = statistics.stdev(d), len(d) - 1
        lo, hi = sd * math.sqrt(df / chi2_quantile(0.975, df)), sd * math.sqrt(df / chi2_quantile(0.025, df))
        half = t_quantile2(0.05, df) * sd / math.sqrt(len(d))
        entry.update(
            sd=sd,
            mean_95_t=[entry["mean"] - half, entry["mean"] + half],
            sd_95=[lo, hi],
            t_test=paired_t(d),
            seeds_80pct={
                f"{delta:g}": [seeds_for_power(x, delta) for x in (lo, sd, hi)] if sd > 0 else None for delta in deltas
            },
        )
    return entry


def paired(runs: list[dict], base: str = "grpo", key: str = "endpoint", deltas=(0.05, 0.10)) -> dict:
    """Per (method other than ``base``, σ): :func:`diff_stats` of the differences method − base of ``key`` on the
    seeds both ran, with ``model_differs`` the seeds whose two runs trained models of different
    :func:`model_fingerprint` (seeds where either is unknown are not listed) and, where some seed's two runs are not
    known to share a model, ``same_model``: :func:`diff_stats` over the seeds whose two runs have the same known
    fingerprint (a pair on the model as well as the split, the data and the initialisation)."""
    ok = {(r["method"], r["sigma"], r["seed"]): r for r in runs if not r["failed"] and r.get(key) is not None}
    cells: dict[str, dict[int, float]] = {}
    same: dict[str, dict[int, float]] = {}
    differs: dict[str, list[int]] = {}
    for (method, sigma, seed), r in ok.items():
        b = ok.get((base, sigma, seed))
        if method != base and b is not None:
            cell, diff = f"{method}-{base}|{sigma:g}", r[key] - b[key]
            cells.setdefault(cell, {})[seed] = diff
            mine, theirs = r.get("model_sha256"), b.get("model_sha256")
            if mine and theirs and mine != theirs:
                differs.setdefault(cell, []).append(seed)
            elif mine and mine == theirs:
                same.setdefault(cell, {})[seed] = diff
    out = {}
    for cell, d in cells.items():
        out[cell] = {**diff_stats(d, deltas), "model_differs": differs.get(cell, [])}
        if len(same.get(cell, {})) < len(d):
            out[cell]["same_model"] = diff_stats(same[cell], deltas) if same.get(cell) else None
    return out


def learning(runs: list[dict], key: str = "endpoint", deltas=(0.05, 0.10)) -> dict:
    """Per (method, σ): :func:`diff_stats` of each seed's gain ``key`` − start, where the start is that seed's step-0
    validation (``start_tool_acc``) averaged over the runs of every method at that seed and σ.

    Every run of a seed starts from the same model, so its step-0 validations are independent samplings of one number
    (mean@k); their mean is the start, with less sampling noise than the run's own. A gain whose interval holds 0
    is no measurable learning; its upper end is the bound on what the method learned in the run's steps."""
    ok = [r for r in runs if not r["failed"] and r.get(key) is not None and r.get("start_tool_acc") is not None]
    starts: dict[tuple, list[float]] = {}
    for r in ok:
        starts.setdefault((r["sigma"], r["seed"]), []).append(r["start_tool_acc"])
    cells: dict[str, dict[int, float]] = {}
    for r in ok:
        start = statistics.fmean(starts[r["sigma"], r["seed"]])
        cells.setdefault(f"{r['method']}-start|{r['sigma']:g}", {})[r["seed"]] = r[key] - start
    return {cell: diff_stats(diffs, deltas) for cell, diffs in cells.items()}


def _paired_row(name: str, sigma: str, e: dict | None) -> str:
    """One row of :func:`paired_table` for a :func:`diff_stats` entry (None: no seed, a row of dashes)."""
    if e is None:
        return f"| {name} | {sigma} | 0 | — | — | — | — | — | — |"
    other = {str(seed) for seed in e.get("model_differs", [])}  # diffs' seeds are strings (JSON keys)
    per = ", ".join(f"{k}: {100 * v:+.1f}{'*' * (k in other)}" for k, v in e["diffs"].items())
    sd = f"{100 * e['sd']:.1f} [{100 * e['sd_95'][0]:.1f}, {100 * e['sd_95'][1]:.1f}]" if "sd" in e else "—"
    boot = e.get("mean_95_bootstrap")
    mean = f"{100 * e['mean']:+.1f}" + (f" [{100 * boot[0]:+.1f}, {100 * boot[1]:+.1f}]" if boot else "")
    ti = f"[{100 * e['mean_95_t'][0]:+.1f}, {100 * e['mean_95_t'][1]:+.1f}]" if "mean_95_t" in e else "—"
    tt = e.get("t_test")
    test = f"{tt['t']:.2f} ({tt['df']}), p = {tt['p']:.3f}" if tt else "—"
    need = "—"
    if e.get("seeds_80pct") and all(e["seeds_80pct"].values()):
        need = " / ".join(f"{v[1]} [{v[0]}, {v[2]}]" for v in e["seeds_80pct"].values())
    return f"| {name} | {sigma} | {e['n']} | {per} | {mean} | {ti} | {sd} | {test} | {need} |"


def paired_table(pairs: dict) -> str:
    """:func:`paired` as a markdown table; a seed marked * had its two runs train different models, and a cell with
    ``same_model`` gets a second row, the comparison on the seeds known to share a model."""
    lines = [
        "| difference | σ | seeds | per seed | mean [95 % bootstrap] | 95 % t interval | SD [95 %] "
        "| paired t (df), two-sided p | seeds for 80 % power at 5 / 10 points [SD's interval] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for cell, e in sorted(pairs.items()):
        name, sigma = cell.split("|")
        lines.append(_paired_row(name, sigma, e))
        if "same_model" in e:
            lines.append(_paired_row(f"{name}, same model", sigma, e["same_model"]))
    return "\n".join(lines)


def fmt(cell: dict | None, pct: bool = False, iqr: bool = False) -> str:
    """A :func:`spread` as ``median [min, max]`` (``iqr``: ``median [q1, q3]``), in percent with ``pct``."""
    if not cell:
        return "—"
    f = (lambda v: f"{100 * v:.0f}") if pct else (lambda v: f"{v:.2f}" if isinstance(v, float) else str(v))
    lo, hi = ("q1", "q3") if iqr else ("min", "max")
    return f"{f(cell['median'])} [{f(cell[lo])}, {f(cell[hi])}]"


def table(summary: dict, steps: int, threshold: float) -> str:
    single = any(c.get("final_single_acc") for c in summary.values())  # the multi-step task's one-call rows
    wide = any(c.get("endpoint") for c in summary.values())  # runs with the endpoint and the validation dumps
    lines = [
        f"| method | σ | runs reaching {100 * threshold:.0f} % | steps to threshold | tool acc % start → final "
        + (
            f"| one-call acc % | training success % (last {LAST} steps) | assistant turns (last {LAST}) "
            if single
            else ""
        )
        + "| abstention % | reply quality | noise leak r |"
        + (" endpoint % [range] | endpoint % [IQR] | reply–execution r (with a call) |" if wide else ""),
        "|---|---|---|---|---|" + ("---|---|---|" if single else "") + "---|---|---|" + ("---|" * 3 if wide else ""),
    ]
    for key in sorted(summary, key=lambda k: (float(k.split("|")[1]), list(METHODS).index(k.split("|")[0]))):
        method, sigma = key.split("|")
        c = summary[key]
        stt = fmt(c["steps_to_threshold"]).replace(str(steps + 1), f">{steps}")
        lines.append(
            f"| {method} | {sigma} | {c['reached']}/{c['runs'] - c['failed']} | {stt} | "
            f"{fmt(c['start_tool_acc'], True)} → {fmt(c['final_tool_acc'], True)} | "
            + (
                f"{fmt(c.get('final_single_acc'), True)} | {fmt(c.get('last_train_success'), True)} | "
                f"{fmt(c.get('last_assistant_turns'))} | "
                if single
                else ""
            )
            + f"{fmt(c['final_abstention_acc'], True)} | {fmt(c['final_reply_quality'])} | "
            f"{fmt(c['noise_leak'])} |"
            + (
                f" {fmt(c.get('endpoint'), True)} | {fmt(c.get('endpoint'), True, iqr=True)} | "
                f"{fmt(c.get('reply_exec_r'))} "
                f"({fmt(c.get('reply_exec_r_called'))}) |"
                if wide
                else ""
            )
        )
    return "\n".join(lines)


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sigmas = sorted({r["sigma"] for r in result["runs"]})
    fig, axes = plt.subplots(1, len(sigmas), figsize=(5 * len(sigmas), 3.6), squeeze=False)
    for ax, sigma in zip(axes[0], sigmas):
        for method in METHODS:
            rs = [r for r in result["runs"] if r["method"] == method and r["sigma"] == sigma and not r["failed"]]
            if not rs:
                continue
            steps = sorted({int(s) for r in rs for s in r["curve"]["tool_acc"]})
            med, lo, hi = [], [], []
            for s in steps:
                vals = [r["curve"]["tool_acc"][str(s)] for r in rs if str(s) in r["curve"]["tool_acc"]]
                med.append(statistics.median(vals))
                lo.append(min(vals))
                hi.append(max(vals))  # noqa: E702
            color = f"C{list(METHODS).index(method)}"  # one colour per method in every panel
            ax.plot(steps, med, marker="o", label=method, color=color)
            ax.fill_between(steps, lo, hi, alpha=0.15, color=color)
        ax.axhline(result["args"]["threshold"], color="grey", ls=":", lw=1)
        ax.set_title(f"judge noise σ = {sigma:g} ({len(result['args']['seeds'])} seeds: median, range)")
        ax.set_xlabel("training step (verl)")
        ax.set_ylabel("validation tool accuracy (held-out)")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)


#: --task cpu_chain's size (data_prep/cpu_chain.py's options): argument -> (the recipe's variable, what it sets); the
#: default and type are :data:`VAL_SETTINGS`'
CHAIN_SIZE = {
    "chain_cities": ("CHAIN_CITIES", "cities (12..26)"),
    "chain_phrasings": ("CHAIN_PHRASINGS", "phrasings a kind (1..4)"),
    "chain_val_share": ("CHAIN_VAL_SHARE", "share of cities held out a kind"),
    "chain_val_other": ("CHAIN_VAL_OTHER", "phrasings of held-out airport/chat prompts"),
}
#: the validation, judge and task settings a resumed grid must share (an older JSON without them ran the defaults)
VAL_SETTINGS = {
    "val_prompts": 0,
    "val_n": 1,
    "val_temperature": 0.0,
    "judge": "offline_proxy",
    "chain_cities": 12,
    "chain_phrasings": 2,
    "chain_val_share": 0.25,
    "chain_val_other": 4,
}


def previous_runs(path: str, steps: int, val: dict | None = None) -> dict[tuple, dict]:
    """The finished runs of an earlier (possibly interrupted) grid at the same number of steps and validation
    settings (``val``: :data:`VAL_SETTINGS`' keys; None: the defaults), by (method, σ, seed). A run recorded before
    runs had a ``model_sha256`` gets the :func:`model_fingerprint` of its log's model where both are still on this
    machine (the cache is built once per key and never rewritten), else None."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        old = json.load(f)
    if old.get("args", {}).get("steps") != steps:
        return {}
    want = {**VAL_SETTINGS, **(val or {})}
    if any(old["args"].get(k, d) != want[k] for k, d in VAL_SETTINGS.items()):
        return {}
    runs = [r for r in old.get("runs", []) if not r["failed"]]
    for r in runs:
        if "model_sha256" not in r:
            r["model_sha256"] = model_fingerprint(r["log"]) if r.get("log") else None
    return {(r["method"], r["sigma"], r["seed"]): r for r in runs}


def write_result(args, machine: dict, wall: float, runs: list[dict]) -> dict:
    """The grid's JSON; its methods, σs and seeds are those of the runs it holds (a resumed grid spans invocations),
    ``run_seconds`` their summed wall time (model builds included, in each seed's first run)."""
    grid = {
        "methods": [m for m in METHODS if any(r["method"] == m for r in runs)],
        "sigmas": sorted({r["sigma"] for r in runs}),
        "seeds": list(dict.fromkeys(r["seed"] for r in runs)),
    }
    result = {
        "args": {**{k: v for k, v in vars(args).items() if k not in ("plot_only", "resume")}, **grid},
        "machine": machine,
        "wall_seconds": wall,
        "run_seconds": sum(r.get("seconds", 0.0) for r in runs),
        "runs": runs,
        "summary": summarise(runs, args.steps),
        "paired": paired(runs),
        "paired_macro": paired(runs, key="endpoint_macro"),
        "learning": learning(runs),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return result


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (a bad combination exits 2 naming the options)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", choices=list(TASK_KEYS), default="cpu_task", help="the recipe's TASK")
    ap.add_argument(
        "--methods", nargs="+", choices=list(METHODS), default=["grpo", "gdpo", "slca_grpo", "slca_grpo_fix"]
    )
    ap.add_argument("--sigmas", nargs="+", type=float, default=[0.0, 1.0])
    ap.add_argument("--seeds", nargs="+", type=int, default=[11, 42, 7], help="arbitrary integers (>= 3 for a claim)")
    ap.add_argument("--steps", type=int, default=10, help="training steps per run")
    ap.add_argument("--test_freq", type=int, default=5, help="validate every N steps (and before training)")
    ap.add_argument("--lr", type=float, default=None, help="the actor's learning rate (default: the recipe's)")
    ap.add_argument("--threshold", type=float, default=0.3, help="validation tool accuracy to reach")
    ap.add_argument(
        "--val_prompts",
        type=int,
        default=0,
        help="held-out tool prompts (the recipe's VAL_PROMPTS; 0: the task's split, 27; up to 123)",
    )
    ap.add_argument("--val_n", type=int, default=1, help="validation samples a prompt (VAL_N; verl logs mean@N)")
    ap.add_argument("--val_temperature", type=float, default=0.0, help="validation temperature (0: greedy)")
    ap.add_argument(
        "--judge",
        choices=["offline_proxy", "offline_length"],
        default="offline_proxy",
        help="the recipe's OFFLINE_JUDGE: the reply's rater (offline_length: its length, which no call decides)",
    )
    for key, (_, what) in CHAIN_SIZE.items():
        default = VAL_SETTINGS[key]
        ap.add_argument(f"--{key}", type=type(default), default=default, help=f"--task cpu_chain: {what}")
    ap.add_argument(
        "--endpoint_from",
        type=int,
        default=5,
        help="the endpoint: mean validation tool accuracy over the validations at steps >= this",
    )
    ap.add_argument(
        "--endpoint_every", type=int, default=1, help="... at steps that are multiples of this (default: every one)"
    )
    ap.add_argument(
        "--run_timeout", type=int, default=3600, help="seconds a run (its model build included) may take; then failed"
    )
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results", "cpu_reproduction.json"))
    ap.add_argument(
        "--plot",
        default=None,
        help="the figure (default: docs/img/cpu_reproduction.png; with --plot-only DIR/results/NAME.json, "
        "DIR/img/NAME.png, so re-tabulating one grid never overwrites another's figure)",
    )
    ap.add_argument("--runs_dir", default=os.path.join(REPO, "outputs", "cpu_reproduction"))
    ap.add_argument("--plot-only", dest="plot_only", default=None, help="re-plot and re-tabulate an existing JSON")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="keep the finished runs of --out that match (method, σ, seed, steps) and run only the rest",
    )
    ap.add_argument("overrides", nargs="*", help="extra hydra overrides for every run")
    args = ap.parse_args(argv)
    if args.plot is None and args.plot_only:
        results_dir, name = os.path.split(os.path.splitext(args.plot_only)[0])
        args.plot = os.path.join(os.path.dirname(results_dir), "img", name + ".png")
    elif args.plot is None:
        args.plot = os.path.join(REPO, "docs", "img", "cpu_reproduction.png")
    moved = [k for k in CHAIN_SIZE if getattr(args, k) != VAL_SETTINGS[k]]
    if moved and args.task != "cpu_chain":
        ap.error(f"{', '.join('--' + k for k in moved)} need --task cpu_chain")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.plot_only:
        result = json.load(open(args.plot_only))
        # the tables from the runs with this code's analysis (an older file's summary may lack fields); nothing written
        # but the plot
        steps = result["args"]["steps"]
        result.update(
            summary=summarise(result["runs"], steps),
            paired=paired(result["runs"]),
            paired_macro=paired(result["runs"], key="endpoint_macro"),
            learning=learning(result["runs"]),
        )
        plot(result, args.plot)
        print(table(result["summary"], steps, result["args"]["threshold"]))
        if result["paired"]:
            print(paired_table(result["paired"]))
            print(paired_table(result["paired_macro"]))
            print(paired_table(result["learning"]))
        return 0
    if len(args.seeds) < 3:
        print(f"note: {len(args.seeds)} seed(s): too few for a claim about learning", file=sys.stderr)
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    print(f"machine: {machine}", flush=True)
    t0 = time.perf_counter()
    val = {k: getattr(args, k) for k in VAL_SETTINGS}
    done = previous_runs(args.out, args.steps, val) if args.resume else {}
    grid = {(m, s, seed) for seed in args.seeds for s in args.sigmas for m in args.methods}
    runs = [r for key, r in done.items() if key not in grid]  # other cells of the earlier grid stay in the file
    for seed in args.seeds:  # seed-major: each seed's model is built once, by its first run
        for sigma in args.sigmas:
            for method in args.methods:
                r = done.get((method, sigma, seed))
                metrics_path = os.path.join(args.runs_dir, f"{method}_sigma{sigma:g}_seed{seed}", "metrics.jsonl")
                if r is None:
                    r = launch(method, sigma, seed, args, args.runs_dir)
                elif os.path.exists(metrics_path):  # a resumed run: its numbers read again (this code's summary)
                    r.update(read_run(os.path.dirname(metrics_path), args))
                runs.append(r)
                print(
                    f"{method:>14} σ={sigma:g} seed={seed}: {'FAILED ' if r['failed'] else ''}tool acc "
                    f"{r['start_tool_acc']} -> {r['final_tool_acc']}, threshold at {r['steps_to_threshold']}, "
                    f"leak {r['noise_leak']}, {r['seconds']:.0f} s",
                    flush=True,
                )
                # after every run: a stop keeps them
                result = write_result(args, machine, time.perf_counter() - t0, runs)
    wall = time.perf_counter() - t0
    plot(result, args.plot)
    print(table(result["summary"], args.steps, args.threshold))
    if result["paired"]:
        print(paired_table(result["paired"]))
        print(paired_table(result["paired_macro"]))
        print(paired_table(result["learning"]))
    print(f"wall time {wall / 60:.1f} min on {machine['cpus']} CPUs; {args.out}, {args.plot}")
    return 1 if any(r["failed"] for r in runs) else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)  # a stopped grid stops its run's whole group too (run_group)
    sys.exit(main())
