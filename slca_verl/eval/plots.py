"""Training curves of one or more runs from verl's file logger (``trainer.logger=[...,"file"]``; the recipes set
``VERL_FILE_LOGGER_PATH=<run dir>/metrics.jsonl``): one PNG per figure, and with several runs one PNG comparing them.

    python -m slca_verl.eval.plots --metrics runs/slca/metrics.jsonl runs/grpo/metrics.jsonl --labels slca grpo \
        --out_dir eval/plots

Figures (a figure is skipped, and listed in the log, when no run logged any of its keys). Every figure but
``validation.png`` shows **training batches**: means over the rollouts sampled at each step (noisy; the policy's
sampling temperature, a new batch of prompts each step). Held-out numbers are in ``validation.png`` only.

    reward.png          the training reward (``critic/score/mean``)
    exec_vs_pref.png    execution reward r_tool vs preference reward r_sum (HierR's reward keys, batch means)
    advantages.png      the spread of the advantages per segment: the standard deviation of A^tool and A^sum over
                        the responses that have the segment (``slca/adv_{tool,summary}/std``, logged by the
                        ``slca_sync`` trainer). Their means are not drawn: group normalisation makes them 0 by
                        construction. A run without those keys (verl's grpo) shows verl's
                        ``critic/advantages/{max,min}``
    tool_accuracy.png   tool-name F1, argument-value accuracy and Success@tau of the training rollouts (HierR's
                        ``name_f1``, ``value``, ``success``; ``reward_extra/*/mean``)
    tool_calls.png      tool calls per episode (the agent loop's ``tool_calls`` or HierR's ``num_calls``)
    response_length.png ``response_length/mean``
    validation.png      verl's greedy validation on the held-out prompts, one line per data source
                        (``val-aux/<source>/toolpo_success/mean@N``): "tool accuracy" for a source of tool rows,
                        "abstention" for a source of rows answered without a call (:func:`validation_label`)
    comparison.png      with two runs or more: validation, training Success@tau, training reward and tool calls,
                        one panel each, a line per run

Lines: a colour per series, a line style and marker per run, so two runs at the same value (two 100 % abstention
lines) stay distinguishable.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from dataclasses import dataclass
from typing import Callable, Sequence, Union

from slca_verl.progress import cli_logging

logger = logging.getLogger(__name__)

#: a data source whose rows are answered without a call (the CPU task's chat rows, BFCL-style irrelevance rows):
#: its toolpo_success is abstention. Any other source's is tool accuracy.
NO_CALL_SOURCE = re.compile(r"chat|irrelevan|no_call|abstain", re.IGNORECASE)


def validation_label(match: re.Match) -> str:
    """``val-aux/<source>/toolpo_success/mean@N`` -> "tool accuracy (<source>)" or "abstention (<source>)"."""
    source = match.group("source")
    return f"{'abstention' if NO_CALL_SOURCE.search(source) else 'tool accuracy'} ({source})"


@dataclass(frozen=True)
class Series:
    """One line of a figure: ``label`` for people (or a function of the key's regex match), the patterns tried in
    order (the first logged key matching one is drawn), or with ``every`` one line per matching key."""

    label: Union[str, Callable[[re.Match], str]]
    patterns: tuple[str, ...]
    every: bool = False


@dataclass(frozen=True)
class Figure:
    title: str
    ylabel: str
    series: tuple[Series, ...]
    #: drawn for a run none of whose keys match ``series`` (e.g. verl's own advantage range for a grpo run)
    fallback: tuple[Series, ...] = ()
    note: str = ""
    ylim: tuple[float, float] | None = None


TRAINING_NOTE = "training batches: means over each step's sampled rollouts; held-out prompts: validation.png"
FIGURES = {
    "reward": Figure(
        "Training reward (training batches)",
        "reward (batch mean)",
        (Series("reward", (r"^critic/score/mean$",)),),
        note=TRAINING_NOTE,
    ),
    "exec_vs_pref": Figure(
        "Execution vs preference reward (training batches)",
        "reward (batch mean)",
        (
            Series("execution reward r_tool", (r"(^|/)r_tool(/mean)?$",)),
            Series("preference reward r_sum", (r"(^|/)r_sum(/mean)?$",)),
        ),
        note=TRAINING_NOTE,
    ),
    "advantages": Figure(
        "Advantage spread per segment (training batches)",
        "advantage: std per segment (verl's runs: max, min)",
        (
            Series("tool segment: std of A^tool", (r"adv\w*[/_]tool\w*/std$",)),
            Series("summary segment: std of A^sum", (r"adv\w*[/_]sum\w*/std$",)),
        ),
        fallback=(
            Series("verl: largest advantage", (r"^critic/advantages/max$",)),
            Series("verl: smallest advantage", (r"^critic/advantages/min$",)),
        ),
        note="means are 0 by construction (group normalisation) and not drawn",
    ),
    "tool_accuracy": Figure(
        "Tool accuracy (training batches)",
        "fraction (batch mean)",
        (
            Series("tool-name F1", (r"(^|/)name_f1(/mean)?$",)),
            Series("argument-value accuracy", (r"(^|/)value(/mean)?$",)),
            Series("Success@τ", (r"(^|/)success(/mean)?$",)),
        ),
        note=TRAINING_NOTE,
        ylim=(-0.02, 1.02),
    ),
    "tool_calls": Figure(
        "Tool calls per episode (training batches)",
        "calls (batch mean)",
        (
            Series(
                "tool calls per episode",
                (r"(^|/)agent_tool_calls(/mean)?$", r"(^|/)tool_calls(/mean)?$", r"(^|/)num_calls(/mean)?$"),
            ),
        ),
        note=TRAINING_NOTE,
    ),
    "response_length": Figure(
        "Response length (training batches)",
        "tokens (batch mean)",
        (Series("response length", (r"^response_length/mean$",)),),
        note=TRAINING_NOTE,
    ),
    "validation": Figure(
        "Validation (held-out prompts, greedy)",
        "fraction of the source's rows",
        (Series(validation_label, (r"^val-aux/(?P<source>[^/]+)/toolpo_success/mean@\d+$",), every=True),),
        note="verl's validation: tool accuracy on tool rows, abstention on rows without a call",
        ylim=(-0.02, 1.02),
    ),
}
#: the panels of comparison.png (several runs): figure, and the series labels drawn there (None: all)
COMPARISON = (("validation", None), ("tool_accuracy", ("Success@τ",)), ("reward", None), ("tool_calls", None))
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P")


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


def lines(figure: Figure, series: dict) -> list[tuple[str, str]]:
    """``[(label, key), ...]`` that ``figure`` draws for one run's ``series`` (its fallback when nothing matches)."""

    def of(specs: Sequence[Series]) -> list[tuple[str, str]]:
        out = []
        for spec in specs:
            if spec.every:
                for key in sorted(series):
                    m = next((m for m in (re.search(p, key) for p in spec.patterns) if m), None)
                    if m:
                        out.append((spec.label(m) if callable(spec.label) else spec.label, key))
                continue
            key = pick(series, spec.patterns)
            if key is not None:
                m = next(m for m in (re.search(p, key) for p in spec.patterns) if m)
                out.append((spec.label(m) if callable(spec.label) else spec.label, key))
        return out

    return of(figure.series) or of(figure.fallback)


def draw(
    ax, name: str, runs: dict[str, dict], only: Sequence[str] | None = None, title: str | None = None
) -> list[str]:
    """Draw figure ``name`` of every run into ``ax``; returns the keys drawn (none: ``ax`` is left empty)."""
    figure = FIGURES[name]
    colours: dict[str, str] = {}
    palette = [f"C{i}" for i in range(10)]
    keys = []
    per_run = {
        label: [(s, k) for s, k in lines(figure, series) if only is None or s in only] for label, series in runs.items()
    }
    several_series = len({s for pairs in per_run.values() for s, _ in pairs}) > 1
    for i, (run, pairs) in enumerate(per_run.items()):
        for label, key in pairs:
            colour = colours.setdefault(label, palette[len(colours) % len(palette)])
            steps, values = zip(*runs[run][key])
            legend = label if len(runs) == 1 else (f"{run}: {label}" if several_series else run)
            ax.plot(
                steps,
                values,
                label=legend,
                color=colour,
                linestyle=LINESTYLES[i % len(LINESTYLES)],
                marker=MARKERS[i % len(MARKERS)],
                markersize=4,
                fillstyle="none" if i else "full",
                linewidth=1.2,
            )
            keys.append(key)
    if keys:
        ax.set_title(title or figure.title, fontsize=10)
        ax.set(xlabel="training step", ylabel=figure.ylabel)
        if figure.ylim:
            ax.set_ylim(*figure.ylim)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return keys


def plot(runs: dict[str, dict], out_dir: str) -> dict[str, list[str]]:
    """Draw every figure for which some run has data, and ``comparison.png`` for two runs or more; returns
    {figure: [keys drawn]}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    drawn: dict[str, list[str]] = {}
    for name, figure in FIGURES.items():
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        keys = draw(ax, name, runs)
        if keys:
            if figure.note:
                fig.text(0.5, 0.01, figure.note, ha="center", va="bottom", fontsize=7, color="0.35")
            fig.tight_layout(rect=(0, 0.04, 1, 1))
            fig.savefig(os.path.join(out_dir, f"{name}.png"), dpi=120)
            drawn[name] = sorted(set(keys))
        plt.close(fig)
    if len(runs) > 1:
        fig, axes = plt.subplots(2, 2, figsize=(11, 8))
        keys = []
        for ax, (name, only) in zip(axes.flat, COMPARISON):
            title = FIGURES[name].title if only is None else f"{FIGURES[name].title}: {', '.join(only)}"
            got = draw(ax, name, runs, only=only, title=title)
            if not got:
                ax.set_axis_off()
            keys += got
        if keys:
            fig.suptitle("Runs compared: " + ", ".join(runs))
            fig.tight_layout()
            fig.savefig(os.path.join(out_dir, "comparison.png"), dpi=110)
            drawn["comparison"] = sorted(set(keys))
        plt.close(fig)
    return drawn


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--metrics", nargs="+", required=True, help="verl file-logger JSONL, one per run")
    p.add_argument("--labels", nargs="*", default=None, help="a name per run (default: the file's folder)")
    p.add_argument("--out_dir", required=True)
    args = p.parse_args(argv)
    cli_logging()
    if args.labels and len(args.labels) != len(args.metrics):
        logger.error("%d --labels for %d --metrics files", len(args.labels), len(args.metrics))
        return 2
    labels = args.labels or [_run_name(m) for m in args.metrics]
    labels = [label if labels.count(label) == 1 else f"{label} ({i + 1})" for i, label in enumerate(labels)]
    absent = [m for m in args.metrics if not os.path.isfile(m)]
    if absent:  # e.g. a run whose logger had no "file" entry: say which, no traceback
        logger.error('no metrics file %s (verl\'s file logger: trainer.logger must include "file")', absent)
        return 1
    runs = {label: load_metrics(path) for label, path in zip(labels, args.metrics)}
    drawn = plot(runs, args.out_dir)
    missing = sorted(set(FIGURES) - set(drawn))
    logger.info("plots in %s: %s%s", args.out_dir, sorted(drawn), f"; no data for {missing}" if missing else "")
    return 0


def _run_name(path: str) -> str:
    """A run's default label: its folder (``outputs/cpu_tiny/<experiment>/metrics.jsonl`` -> ``<experiment>``)."""
    stem = os.path.splitext(os.path.basename(path))[0]
    folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return folder if stem == "metrics" and folder else stem


if __name__ == "__main__":
    sys.exit(main())
