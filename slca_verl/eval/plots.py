"""Training curves of one or more runs from verl's file logger (``trainer.logger=[...,"file"]``; the recipes set
``VERL_FILE_LOGGER_PATH=<run dir>/metrics.jsonl``): one PNG per figure.

    python -m slca_verl.eval.plots --metrics runs/slca/metrics.jsonl runs/grpo/metrics.jsonl --labels slca grpo \
        --out_dir eval/plots

Figures (a figure is skipped, and listed in the log, when no run logged any of its keys):
    reward.png          the training reward (``critic/score/mean``)
    exec_vs_pref.png    execution reward r_tool vs preference reward r_sum (HierR's reward keys, batch means)
    advantages.png      per-segment advantage statistics (``*adv*tool*`` / ``*adv*sum*`` keys), else verl's overall
                        ``critic/advantages/{mean,max,min}``
    tool_accuracy.png   tool-name F1, argument-value accuracy and Success@tau (HierR's ``name_f1``, ``value``,
                        ``success``; logged as ``reward_extra/*/mean`` by the slca_sync trainer)
    tool_calls.png      tool calls per episode (the agent loop's ``tool_calls`` or HierR's ``num_calls``)
    response_length.png ``response_length/mean``
    validation.png      verl's greedy validation: tool accuracy and abstention accuracy per data source
                        (``val-aux/<source>/toolpo_success/mean@1``)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from typing import Sequence

logger = logging.getLogger(__name__)

# figure -> (title, y label, list of series; a series is a list of regexes, the first one matching a logged key wins)
FIGURES = {
    "reward": ("Training reward", "score", [[r"^critic/score/mean$"]]),
    "exec_vs_pref": ("Execution vs preference reward", "reward",
                     [[r"(^|/)r_tool(/mean)?$"], [r"(^|/)r_sum(/mean)?$"]]),
    "advantages": ("Advantages", "advantage",
                   [[r"adv\w*[/_]tool\w*/mean$", r"^critic/advantages/mean$"],
                    [r"adv\w*[/_]sum\w*/mean$", r"^critic/advantages/max$"],
                    [r"^critic/advantages/min$"]]),
    "tool_accuracy": ("Tool accuracy", "fraction",
                      [[r"(^|/)name_f1(/mean)?$"], [r"(^|/)value(/mean)?$"], [r"(^|/)success(/mean)?$"]]),
    "tool_calls": ("Tool calls per episode", "calls",
                   [[r"(^|/)agent_tool_calls(/mean)?$", r"(^|/)tool_calls(/mean)?$", r"(^|/)num_calls(/mean)?$"]]),
    "response_length": ("Response length", "tokens", [[r"^response_length/mean$"]]),
    "validation": ("verl's validation (greedy, held-out prompts)", "accuracy",
                   [[r"^val-aux/cpu_task/toolpo_success/mean@\d+$", r"^val-aux/[^/]+/toolpo_success/mean@\d+$"],
                    [r"^val-aux/cpu_task_chat/toolpo_success/mean@\d+$"]]),
}  # fmt: skip


def load_metrics(path: str) -> dict[str, list[tuple[int, float]]]:
    """verl FileLogger JSONL (``{"step": s, "data": {key: value}}`` per line) -> {key: [(step, value), ...]}."""
    series: dict[str, list[tuple[int, float]]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            rec = json.loads(line)
            step, data = int(rec["step"]), rec.get("data", {})
            for k, v in data.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    series.setdefault(k, []).append((step, float(v)))
    return series


def pick(series: dict, patterns: Sequence[str]) -> str | None:
    """The first logged key matching a pattern, trying patterns in order."""
    for pat in patterns:
        for key in sorted(series):
            if re.search(pat, key):
                return key
    return None


def plot(runs: dict[str, dict], out_dir: str) -> dict[str, list[str]]:
    """Draw every figure for which some run has data; returns {figure: [keys drawn]}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    drawn: dict[str, list[str]] = {}
    for name, (title, ylabel, spec) in FIGURES.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        keys = []
        for label, series in runs.items():
            for patterns in spec:
                key = pick(series, patterns)
                if key is None:
                    continue
                steps, values = zip(*series[key])
                ax.plot(steps, values, label=f"{label}: {key}" if len(runs) > 1 or len(spec) > 1 else label)
                keys.append(key)
        if keys:
            ax.set(title=title, xlabel="step", ylabel=ylabel)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            fig.tight_layout()
            fig.savefig(os.path.join(out_dir, f"{name}.png"), dpi=120)
            drawn[name] = sorted(set(keys))
        plt.close(fig)
    return drawn


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--metrics", nargs="+", required=True, help="verl file-logger JSONL, one per run")
    p.add_argument("--labels", nargs="*", default=None)
    p.add_argument("--out_dir", required=True)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    labels = args.labels or [os.path.splitext(os.path.basename(m))[0] for m in args.metrics]
    absent = [m for m in args.metrics if not os.path.isfile(m)]
    if absent:  # e.g. a run whose logger had no "file" entry: say which, no traceback
        logger.error("no metrics file %s (verl's file logger: trainer.logger must include \"file\")", absent)
        return 1
    runs = {label: load_metrics(path) for label, path in zip(labels, args.metrics)}
    drawn = plot(runs, args.out_dir)
    missing = sorted(set(FIGURES) - set(drawn))
    logger.info("plots in %s: %s%s", args.out_dir, sorted(drawn), f"; no data for {missing}" if missing else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
