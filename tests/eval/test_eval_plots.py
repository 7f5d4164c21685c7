"""The training plots as people read them (slca_verl.eval.plots, matplotlib's Agg backend): titles that say which
figures show training batches and which the held-out validation, legends with readable names instead of metric keys,
two runs at the same value told apart, the advantage figure without the means that are 0 by construction, and the
comparison figure of several runs."""

import json
import os
import re

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from slca_verl.eval import plots  # noqa: E402


def run_records(tool_acc: float = 0.4, slca: bool = True) -> list[dict]:
    recs = []
    for s in range(1, 5):
        data = {
            "critic/score/mean": 0.1 * s,
            "reward/r_tool/mean": 0.5,
            "reward/r_sum/mean": 0.2,
            "critic/advantages/mean": 0.0,
            "critic/advantages/max": 1.0,
            "critic/advantages/min": -1.0,
            "reward_extra/name_f1/mean": 0.2 * s,
            "reward_extra/value/mean": 0.1 * s,
            "reward_extra/success/mean": 0.05 * s,
            "agent_tool_calls/mean": 1.0,
            "response_length/mean": 90.0,
        }
        if slca:
            data |= {
                "slca/adv_tool/mean": 0.0,
                "slca/adv_tool/std": 0.8,
                "slca/adv_summary/mean": 0.0,
                "slca/adv_summary/std": 0.5,
            }
        recs.append({"step": s, "data": data})
    recs += [
        {
            "step": s,
            "data": {
                "val-aux/cpu_task/toolpo_success/mean@1": tool_acc * s / 4,
                "val-aux/cpu_task_chat/toolpo_success/mean@1": 1.0,
            },
        }
        for s in (0, 2, 4)
    ]
    return recs


def write_run(folder, **kw) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "metrics.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(r) for r in run_records(**kw)))
    return path


def drawn(name, runs, **kw):
    fig, ax = plt.subplots()
    try:
        keys = plots.draw(ax, name, runs, **kw)
        legend = ax.get_legend()
        return (
            keys,
            ax.get_title(),
            ax.get_ylabel(),
            [t.get_text() for t in legend.get_texts()] if legend else [],
            [(line.get_linestyle(), line.get_marker()) for line in ax.get_lines()],
        )
    finally:
        plt.close(fig)


def test_training_batch_figures_say_so_and_validation_says_held_out(tmp_path):
    runs = {"slca": plots.load_metrics(write_run(tmp_path / "a"))}
    _, title, ylabel, legend, _ = drawn("tool_accuracy", runs)
    assert title == "Tool accuracy (training batches)"
    assert legend == ["tool-name F1", "argument-value accuracy", "Success@τ"]
    for name in ("reward", "exec_vs_pref", "tool_calls", "response_length", "advantages"):
        assert "(training batches)" in drawn(name, runs)[1], name
    keys, title, ylabel, legend, _ = drawn("validation", runs)
    assert title == "Validation (held-out prompts, greedy)" and "training" not in title
    # readable names, not val-aux/<source>/toolpo_success/mean@1
    assert legend == ["tool accuracy (cpu_task)", "abstention (cpu_task_chat)"]
    assert keys == ["val-aux/cpu_task/toolpo_success/mean@1", "val-aux/cpu_task_chat/toolpo_success/mean@1"]


def test_the_advantage_figure_draws_spreads_not_means_and_verls_range_for_a_run_without_segments(tmp_path):
    runs = {
        "slca": plots.load_metrics(write_run(tmp_path / "a")),
        "grpo": plots.load_metrics(write_run(tmp_path / "b", slca=False)),
    }
    keys, title, ylabel, legend, _ = drawn("advantages", runs)
    assert not any(k.endswith("/mean") for k in keys)
    assert ylabel == "advantage: std per segment (verl's runs: max, min)"
    assert legend == [
        "slca: tool segment: std of A^tool",
        "slca: summary segment: std of A^sum",
        "grpo: verl: largest advantage",
        "grpo: verl: smallest advantage",
    ]


def test_two_runs_at_the_same_value_are_told_apart_by_line_style_and_marker(tmp_path):
    runs = {
        "slca": plots.load_metrics(write_run(tmp_path / "a", tool_acc=0.4)),
        "grpo": plots.load_metrics(write_run(tmp_path / "b", tool_acc=0.3)),
    }
    _, _, _, legend, styles = drawn("validation", runs)
    assert legend == [
        "slca: tool accuracy (cpu_task)",
        "slca: abstention (cpu_task_chat)",
        "grpo: tool accuracy (cpu_task)",
        "grpo: abstention (cpu_task_chat)",
    ]
    slca_abstention, grpo_abstention = styles[1], styles[3]  # both at 100 %
    assert slca_abstention[0] != grpo_abstention[0] and slca_abstention[1] != grpo_abstention[1]


def test_several_runs_get_a_comparison_figure_and_default_labels_from_their_folders(tmp_path):
    a, b = write_run(tmp_path / "cpu_tiny_slca_grpo_seed5"), write_run(tmp_path / "cpu_tiny_grpo_seed5")
    assert plots.main(["--metrics", a, b, "--out_dir", str(tmp_path / "p")]) == 0
    for name in [*plots.FIGURES, "comparison"]:
        assert os.path.getsize(tmp_path / "p" / f"{name}.png") > 1000, name
    runs = {os.path.basename(os.path.dirname(p)): plots.load_metrics(p) for p in (a, b)}
    assert plots.plot(runs, str(tmp_path / "q"))["comparison"] == sorted(
        {
            "val-aux/cpu_task/toolpo_success/mean@1",
            "val-aux/cpu_task_chat/toolpo_success/mean@1",
            "reward_extra/success/mean",
            "critic/score/mean",
            "agent_tool_calls/mean",
        }
    )
    _, title, _, legend, _ = drawn("tool_accuracy", runs, only=("Success@τ",))
    assert legend == ["cpu_tiny_slca_grpo_seed5", "cpu_tiny_grpo_seed5"]  # one series: the run names only
    assert plots.main(["--metrics", a, "--labels", "x", "y", "--out_dir", str(tmp_path / "r")]) == 2


@pytest.mark.parametrize(
    "source,label",
    [
        ("cpu_task", "tool accuracy"),
        ("cpu_task_chat", "abstention"),
        ("bfcl_irrelevance", "abstention"),
        ("xlam", "tool accuracy"),
    ],
)
def test_validation_labels_name_what_a_source_measures(source, label):
    m = plots.FIGURES["validation"].series[0].patterns[0]
    assert plots.validation_label(re.search(m, f"val-aux/{source}/toolpo_success/mean@1")) == f"{label} ({source})"
