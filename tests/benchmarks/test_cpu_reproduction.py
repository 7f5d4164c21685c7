"""benchmarks/cpu_reproduction.py's bookkeeping on hand-written verl metrics: what a run reports, the spread over seeds,
and --resume keeping finished runs of other cells (the grid is run in pieces on a 2-core machine)."""

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

import cpu_reproduction as cr  # noqa: E402
import pytest
import subproc

TOOL, CHAT, REPLY = (cr.VAL_KEYS[k] for k in ("tool_acc", "abstention_acc", "reply_quality"))


def write_metrics(path, records):
    with open(path, "w") as f:
        for step, data in records:
            f.write(json.dumps({"step": step, "data": data}) + "\n")


def test_run_summary_reads_verls_validation_and_the_noise_leak(tmp_path):
    path = tmp_path / "metrics.jsonl"
    write_metrics(
        path,
        [
            (0, {TOOL: 0.04, CHAT: 1.0, REPLY: 0.5}),
            (1, {cr.LEAK_KEY: 0.2}),
            (2, {cr.LEAK_KEY: 0.4}),
            (5, {TOOL: 0.25, CHAT: 1.0, REPLY: 0.6, cr.LEAK_KEY: 0.6}),  # a step's training and validation records
            (10, {TOOL: 0.40, CHAT: 0.75, REPLY: 0.7}),
        ],
    )
    with open(path, "a") as f:
        f.write("not json\n")  # a truncated last line of a killed run is skipped
    s = cr.run_summary(cr.read_metrics(str(path)), threshold=0.3)
    assert s["start_tool_acc"] == 0.04 and s["final_tool_acc"] == 0.40
    assert s["steps_to_threshold"] == 10  # 0.25 at step 5 is below 0.3
    assert s["final_abstention_acc"] == 0.75 and s["final_reply_quality"] == 0.7
    assert abs(s["noise_leak"] - 0.4) < 1e-12  # mean of 0.2, 0.4, 0.6
    assert cr.run_summary(cr.read_metrics(str(path)), threshold=0.9)["steps_to_threshold"] is None


def test_summary_gives_median_and_range_and_counts_never_as_steps_plus_one():
    runs = [
        {
            "method": "grpo",
            "sigma": 1.0,
            "seed": s,
            "failed": False,
            "steps_to_threshold": t,
            "start_tool_acc": 0.0,
            "final_tool_acc": a,
            "final_abstention_acc": 1.0,
            "final_reply_quality": 0.5,
            "noise_leak": 0.6,
        }
        for s, t, a in ((1, 5, 0.4), (2, None, 0.2), (3, 10, 0.35))
    ]
    runs.append({**runs[0], "seed": 4, "failed": True})
    cell = cr.summarise(runs, steps=10)["grpo|1"]
    assert cell["runs"] == 4 and cell["failed"] == 1 and cell["reached"] == 2
    # quartiles interpolated between order statistics: 5, 10, 11 -> 7.5 and 10.5
    assert cell["steps_to_threshold"] == {"median": 10, "q1": 7.5, "q3": 10.5, "min": 5, "max": 11, "n": 3}
    acc = cell["final_tool_acc"]  # 0.2, 0.35, 0.4 -> 0.275 and 0.375
    assert (acc["median"], acc["min"], acc["max"], acc["n"]) == (0.35, 0.2, 0.4, 3)
    assert abs(acc["q1"] - 0.275) < 1e-12 and abs(acc["q3"] - 0.375) < 1e-12
    assert cr.fmt(acc, pct=True, iqr=True) == "35 [28, 38]" and cr.spread([0.5])["q1"] == 0.5
    row = cr.table({"grpo|1": cell}, steps=10, threshold=0.3).splitlines()[-1]
    assert row.startswith("| grpo | 1 | 2/3 | 10 [5, >10] | 0 [0, 0] → 35 [20, 40] |")


def test_resume_keeps_finished_runs_of_other_cells_and_reruns_failed_ones(tmp_path):
    out = tmp_path / "grid.json"
    run = {
        "steps_to_threshold": 5,
        "start_tool_acc": 0.0,
        "final_tool_acc": 0.4,
        "final_abstention_acc": 1.0,
        "final_reply_quality": 0.5,
        "noise_leak": 0.6,
    }
    done = [
        {"method": "grpo", "sigma": 1.0, "seed": 11, "failed": False, **run},
        {"method": "gdpo", "sigma": 1.0, "seed": 11, "failed": True, **run},
    ]
    json.dump({"args": {"steps": 10}, "runs": done}, open(out, "w"))
    prev = cr.previous_runs(str(out), steps=10)
    assert set(prev) == {("grpo", 1.0, 11)}  # the failed run is not kept: it runs again
    assert cr.previous_runs(str(out), steps=20) == {}  # another budget is another experiment
    assert cr.previous_runs(str(tmp_path / "none.json"), steps=10) == {}
    args = argparse.Namespace(
        out=str(out), steps=10, threshold=0.3, plot_only=None, resume=True, seeds=[42], methods=["gdpo"], sigmas=[0.0]
    )
    cr.write_result(args, {"cpus": 2}, 1.0, list(prev.values()))
    written = json.load(open(out))
    # a record from before fingerprints, its log gone: kept, its model unknown
    assert written["runs"] == [{**done[0], "model_sha256": None}] and "resume" not in written["args"]
    # the grid the file describes is that of its runs, not of the last invocation's arguments
    assert (written["args"]["methods"], written["args"]["sigmas"], written["args"]["seeds"]) == (["grpo"], [1.0], [11])


def test_the_multi_step_task_reads_its_own_sources_and_the_last_training_steps(tmp_path):
    keys = cr.TASK_KEYS["cpu_chain"]
    path = tmp_path / "metrics.jsonl"
    train = [
        (s, {cr.TRAIN_KEYS["train_success"]: s / 10, cr.TRAIN_KEYS["assistant_turns"]: 2.0 + s}) for s in range(1, 8)
    ]
    write_metrics(path, [(0, {keys["tool_acc"]: 0.0, keys["single_acc"]: 0.5, TOOL: 0.9}), *train])
    with open(path, "a") as f:
        f.write(json.dumps({"step": 7, "data": {keys["tool_acc"]: 0.25, keys["single_acc"]: 1.0}}) + "\n")
    s = cr.run_summary(cr.read_metrics(str(path)), threshold=0.2, task="cpu_chain")
    assert s["start_tool_acc"] == 0.0 and s["final_tool_acc"] == 0.25  # the chain rows', not the one-call task's
    assert s["final_single_acc"] == 1.0 and s["steps_to_threshold"] == 7
    assert abs(s["last_train_success"] - (0.3 + 0.4 + 0.5 + 0.6 + 0.7) / 5) < 1e-12  # steps 3..7
    assert s["last_assistant_turns"] == 7.0
    # per-turn credit runs with its one override; the others with their estimator alone
    assert cr.METHOD_OVERRIDES == {"slca_grpo_turn": ["+algorithm.slca.credit=turn"]}
    assert cr.METHODS["gigpo"] == {"ADV_ESTIMATOR": "slca_gigpo"}


def test_sampled_validation_reads_mean_at_n_and_the_endpoint_is_the_mean_after_its_step(tmp_path):
    keys = cr.task_keys("cpu_task", 4)
    assert keys["tool_acc"] == "val-aux/cpu_task/toolpo_success/mean@4" and cr.task_keys("cpu_task") == cr.VAL_KEYS
    path = tmp_path / "metrics.jsonl"
    write_metrics(path, [(s, {keys["tool_acc"]: a, TOOL: 0.9}) for s, a in ((0, 0.2), (5, 0.3), (10, 0.5), (15, 0.4))])
    s = cr.run_summary(cr.read_metrics(str(path)), threshold=0.3, val_n=4, endpoint_from=5)
    assert s["start_tool_acc"] == 0.2 and s["final_tool_acc"] == 0.4  # mean@4, not the greedy key
    assert abs(s["endpoint"] - 0.4) < 1e-12  # steps 5, 10, 15; step 0 is not in it
    assert cr.run_summary(cr.read_metrics(str(path)), 0.3, val_n=4, endpoint_from=20)["endpoint"] is None
    # a run validated every 5 steps compares with runs validated every 10 on the steps they share
    every10 = cr.run_summary(cr.read_metrics(str(path)), 0.3, val_n=4, endpoint_from=5, endpoint_every=10)
    assert every10["endpoint"] == 0.5


def test_validation_dumps_give_accuracy_per_kind_and_the_reply_execution_correlation_within_prompts(tmp_path):
    folder = tmp_path / cr.VAL_DUMP
    folder.mkdir()
    rows = []
    # prompt a (weather): the reply's clean rating rises with r_tool; prompt b (parallel): it falls; c: chat
    for i, (r_tool, r_sum, ok, no_call) in enumerate([(1.0, 1.0, 1, 0), (0.5, 0.5, 0, 0), (0.0, -0.5, 0, 1)]):
        rows.append(("a", i, "weather", r_tool, r_sum, ok, no_call))
    for i, (r_tool, r_sum, ok) in enumerate([(1.0, 0.25, 1), (0.6, 0.75, 0), (0.6, 0.75, 0)]):
        rows.append(("b", i, "parallel", r_tool, r_sum, ok, 0))
    rows.append(("c", 0, "irrelevant", 0.0, 1.0, 1, 0))
    with open(folder / "0.jsonl", "w") as f:
        for uid, i, kind, r_tool, r_sum, ok, no_call in rows:
            rec = {"uid": f"{uid}_{i}_0", "gts": {"subset_name": kind}, "r_tool": r_tool, "r_sum_clean": r_sum}
            f.write(json.dumps({**rec, "toolpo_success": ok, "no_call": no_call}) + "\n")
    (folder / "notes.txt").write_text("not a dump")
    d = cr.dump_summary(str(tmp_path))
    assert d["kind_acc"] == {"0": {"irrelevant": 1.0, "parallel": 1 / 3, "weather": 1 / 3}}
    xs, ys = cr._within([[(1.0, 1.0), (0.5, 0.5), (0.0, -0.5)], [(1.0, 0.25), (0.6, 0.75), (0.6, 0.75)]])
    assert abs(d["reply_exec_r"] - cr.pearson(xs, ys)) < 1e-12
    # with a call only: a's no-call sample is out, which leaves (1, 1), (0.5, 0.5) and b: r of the demeaned pairs
    xs, ys = cr._within([[(1.0, 1.0), (0.5, 0.5)], [(1.0, 0.25), (0.6, 0.75), (0.6, 0.75)]])
    assert abs(d["reply_exec_r_called"] - cr.pearson(xs, ys)) < 1e-12
    assert cr.dump_summary(str(tmp_path / "none")) == {} and cr.pearson([1, 2], [1, 2]) is None
    # every kind weighs alike in the macro endpoint; chat prompts are out of it
    kinds = {"0": {"weather": 0.0, "parallel": 0.0}, "10": {"weather": 1.0, "parallel": 0.5, "irrelevant": 0.0}}
    kinds["20"] = {"weather": 1.0, "parallel": 1.0, "population": 0.0, "exchange": 0.2, "irrelevant": 1.0}
    assert abs(cr.macro_endpoint(kinds, start=10, every=10) - (0.75 + 0.55) / 2) < 1e-12
    assert cr.macro_endpoint(kinds, start=30) is None


def test_paired_differences_their_sd_interval_and_the_seeds_80_percent_power_needs():
    runs = [
        {"method": m, "sigma": 1.0, "seed": seed, "failed": False, "endpoint": e}
        for m, seed, e in (
            ("grpo", 1, 0.30),
            ("slca_grpo", 1, 0.40),
            ("grpo", 2, 0.30),
            ("slca_grpo", 2, 0.30),
            ("grpo", 3, 0.50),
            ("slca_grpo", 3, 0.55),
            ("slca_grpo", 4, 0.9),  # no GRPO run on seed 4: not paired
        )
    ]
    cell = cr.paired(runs)["slca_grpo-grpo|1"]
    assert cell["n"] == 3 and abs(cell["mean"] - 0.05) < 1e-12
    lo_m, hi_m = cell["mean_95_bootstrap"]  # resampled seeds: within the smallest and largest difference
    assert 0.0 <= lo_m <= 0.05 <= hi_m <= 0.10 + 1e-12 and cr.bootstrap_mean_ci([0.1]) is None
    assert abs(cell["sd"] - 0.05) < 1e-12  # differences 0.10, 0.00, 0.05
    lo, hi = cell["sd_95"]  # chi-square with 2 degrees of freedom: sd * sqrt(2 / 7.378), sd * sqrt(2 / 0.0506)
    assert abs(lo - 0.05 * (2 / 7.3778) ** 0.5) < 1e-4 and abs(hi - 0.05 * (2 / 0.050636) ** 0.5) < 1e-3
    # ((1.96 + 0.8416) * 0.05 / 0.05)^2 = 7.85 -> 8 seeds for a 5-point effect; the doc's 0.13 SD: 14 and 54
    assert cell["seeds_80pct"]["0.05"][1] == 8 and cell["seeds_80pct"]["0.1"][1] == 2
    assert (cr.seeds_for_power(0.13, 0.10), cr.seeds_for_power(0.13, 0.05)) == (14, 54)
    # t = 0.05 / (0.05 / sqrt 3) = sqrt 3 with 2 df; two-sided p = 1 - sqrt 3 / sqrt(2 + 3) (t_2's closed-form CDF)
    t = cell["t_test"]
    assert t["df"] == 2 and abs(t["t"] - 3**0.5) < 1e-12 and abs(t["p"] - (1 - (3 / 5) ** 0.5)) < 1e-12
    # Student's interval: 0.05 ± t_{0.975, 2} 0.05 / sqrt 3, t_{0.975, 2} = 4.302653 (printed tables); wider than
    # the bootstrap's, which stays within the differences
    half = 4.302653 * 0.05 / 3**0.5
    assert max(abs(a - b) for a, b in zip(cell["mean_95_t"], (0.05 - half, 0.05 + half))) < 1e-6
    assert cell["mean_95_t"][0] < lo_m and cell["mean_95_t"][1] > hi_m
    row = [line for line in cr.paired_table(cr.paired(runs)).splitlines() if line.startswith("| slca_grpo-grpo")][0]
    assert row.startswith("| slca_grpo-grpo | 1 | 3 | 1: +10.0, 2: +0.0, 3: +5.0 | +5.0 [")
    assert f"] | [{100 * (0.05 - half):+.1f}, {100 * (0.05 + half):+.1f}] | 5.0 [" in row
    assert "| 1.73 (2), p = 0.225 |" in row


def test_learning_is_the_gain_over_the_seeds_start_averaged_over_its_runs():
    runs = [
        {"method": m, "sigma": 0.0, "seed": seed, "failed": False, "start_tool_acc": s0, "endpoint": e}
        for m, seed, s0, e in (
            ("grpo", 1, 0.20, 0.30),
            ("slca_grpo", 1, 0.24, 0.26),
            ("grpo", 2, 0.10, 0.16),
            ("slca_grpo", 2, 0.14, 0.12),
        )
    ]
    runs.append({"method": "grpo", "sigma": 0.0, "seed": 3, "failed": True, "start_tool_acc": 0.9, "endpoint": 0.0})
    cells = cr.learning(runs)
    assert set(cells) == {"grpo-start|0", "slca_grpo-start|0"}  # the failed run is in neither cell nor any start
    # starts: seed 1 (0.20 + 0.24) / 2 = 0.22, seed 2 0.12; not each run's own step 0
    g, s = cells["grpo-start|0"], cells["slca_grpo-start|0"]
    assert g["n"] == 2 and abs(g["diffs"]["1"] - 0.08) < 1e-12 and abs(g["diffs"]["2"] - 0.04) < 1e-12
    assert abs(s["diffs"]["1"] - 0.04) < 1e-12 and abs(s["diffs"]["2"] - 0.00) < 1e-12
    # gains 0.08, 0.04: mean 0.06, sd 0.04 / sqrt 2, t = 0.06 / (sd / sqrt 2) = 3 with 1 df (Cauchy)
    assert abs(g["mean"] - 0.06) < 1e-12 and abs(g["sd"] - 0.04 / 2**0.5) < 1e-12
    assert g["t_test"]["df"] == 1 and abs(g["t_test"]["t"] - 3.0) < 1e-9
    assert abs(g["t_test"]["p"] - (1 - 2 * math.atan(3.0) / math.pi)) < 1e-12
    assert "| grpo-start | 0 | 2 | 1: +8.0, 2: +4.0 | +6.0 [" in cr.paired_table(cells)


def test_paired_t_matches_closed_forms_and_table_values():
    # two-sided p of Student's t: df 1 (Cauchy) 1 - 2 atan|t| / pi; df 2: 1 - |t| / sqrt(2 + t^2)
    for t in (0.1, 0.7, 1.0, 2.5, 12.0, -3.0):
        assert abs(cr.t_sf2(t, 1) - (1 - 2 * math.atan(abs(t)) / math.pi)) < 1e-12
        assert abs(cr.t_sf2(t, 2) - (1 - abs(t) / math.sqrt(2 + t * t))) < 1e-12
    # the 97.5 % quantiles of printed t tables (df 5, 9, 29) give p = 0.05; the normal's 1.96 at df 10^6
    for t, df in ((2.570582, 5), (2.262157, 9), (2.045230, 29)):
        assert abs(cr.t_sf2(t, df) - 0.05) < 1e-6
    assert abs(cr.t_sf2(1.959964, 10**6) - 0.05) < 1e-5 and cr.t_sf2(0.0, 7) == 1.0
    for q, df in ((12.706205, 1), (4.302653, 2), (2.776445, 4), (2.570582, 5), (2.045230, 29)):  # its inverse
        assert abs(cr.t_quantile2(0.05, df) - q) < 1e-5
    # a constant difference: t infinite, p 0 (or 1 when it is zero); one seed: no test
    assert cr.paired_t([0.1, 0.1])["p"] == 0.0 and cr.paired_t([0.0, 0.0])["p"] == 1.0 and cr.paired_t([0.1]) is None
    # the t of a sample by hand: diffs 1, 2, 6 -> mean 3, sd sqrt 7, t = 3 / (sqrt 7 / sqrt 3)
    assert abs(cr.paired_t([1.0, 2.0, 6.0])["t"] - 3 / math.sqrt(7 / 3)) < 1e-12


def test_resume_keeps_only_runs_of_the_same_validation_settings(tmp_path):
    out = tmp_path / "grid.json"
    run = {"method": "grpo", "sigma": 1.0, "seed": 11, "failed": False}
    json.dump({"args": {"steps": 20}, "runs": [run]}, open(out, "w"))  # an older file: greedy, the task's split
    assert set(cr.previous_runs(str(out), 20)) == {("grpo", 1.0, 11)}
    assert cr.previous_runs(str(out), 20, {"val_prompts": 123, "val_n": 4, "val_temperature": 1.0}) == {}
    json.dump(
        {"args": {"steps": 20, "val_prompts": 123, "val_n": 4, "val_temperature": 1.0}, "runs": [run]}, open(out, "w")
    )
    assert set(cr.previous_runs(str(out), 20, {"val_prompts": 123, "val_n": 4, "val_temperature": 1.0})) == {
        ("grpo", 1.0, 11)
    }


def test_the_chain_tasks_size_reaches_the_recipe_and_keeps_resumed_grids_apart(tmp_path, monkeypatch, capsys):
    """--chain_* -> the recipe's CHAIN_* (a dry run of the real recipe, DRY_RUN=args: the model it would build is the
    wide task's); the size is a setting a resumed grid must share; on the one-call task the options fail at start."""
    monkeypatch.setenv("DRY_RUN", "args")
    monkeypatch.setenv("CACHE_DIR", str(tmp_path / "cache"))
    argv = ["--task", "cpu_chain", "--chain_cities", "26", "--chain_phrasings", "4", "--chain_val_share", "0.5"]
    args = cr.parse_args(argv + ["--chain_val_other", "1", "--run_timeout", "60"])
    cr.launch("grpo", 0.0, 5, args, str(tmp_path / "runs"))
    log = (tmp_path / "runs" / "grpo_sigma0_seed5.log").read_text()
    assert "/tiny_qwen3_cpu_chain_c26p4v0.5o1_seed5_" in log
    out = tmp_path / "grid.json"
    run = {"method": "grpo", "sigma": 0.0, "seed": 5, "failed": False}
    json.dump({"args": {"steps": 20, "chain_cities": 26}, "runs": [run]}, open(out, "w"))
    assert cr.previous_runs(str(out), 20, {"chain_cities": 12}) == {}
    assert set(cr.previous_runs(str(out), 20, {"chain_cities": 26})) == {("grpo", 0.0, 5)}
    with pytest.raises(SystemExit) as e:
        cr.parse_args(["--chain_cities", "26"])
    assert e.value.code == 2 and "--chain_cities need --task cpu_chain" in capsys.readouterr().err


def test_plot_only_retabulates_an_older_file_and_draws_beside_it_not_over_another_grid(tmp_path, capsys):
    """--plot-only on the committed two-seed pilot (written before the t-test existed): the paired t-test from its
    runs, and the figure at DIR/img/NAME.png rather than the default grid's docs/img/cpu_reproduction.png."""
    (tmp_path / "results").mkdir()
    src = os.path.join(cr.REPO, "docs", "results", "cpu_main_pilot.json")
    shutil.copy(src, tmp_path / "results" / "pilot.json")
    old = json.load(open(src))
    assert "t_test" not in old["paired"]["slca_grpo-grpo|1"]
    args = cr.parse_args(["--plot-only", str(tmp_path / "results" / "pilot.json")])
    assert args.plot == str(tmp_path / "img" / "pilot.png")
    assert cr.parse_args([]).plot == os.path.join(cr.REPO, "docs", "img", "cpu_reproduction.png")
    assert cr.main(["--plot-only", str(tmp_path / "results" / "pilot.json")]) == 0
    assert (tmp_path / "img" / "pilot.png").stat().st_size > 0
    ends = {(r["method"], r["seed"]): r["endpoint"] for r in old["runs"]}
    d = [ends["slca_grpo", k] - ends["grpo", k] for k in (0, 1)]
    t = statistics.fmean(d) / (statistics.stdev(d) / math.sqrt(2))
    p = 1 - 2 * math.atan(abs(t)) / math.pi  # one degree of freedom: Cauchy
    assert f"| {t:.2f} (1), p = {p:.3f} |" in capsys.readouterr().out


def test_a_run_past_its_timeout_is_stopped_with_its_whole_group_and_counted_as_failed(tmp_path):
    """The recipe's warm-up outlived a timed-out bash before (subprocess.run kills only its child): the whole group
    goes, the log says why, and the caller gets a failed run instead of an exception that ends the grid."""
    pidfile = tmp_path / "child.pid"
    script = f"trap '' TERM; sleep 120 & echo $! > {pidfile}; wait"  # a child that outlives a plain kill of bash
    with open(tmp_path / "log", "w") as log:
        t0 = time.perf_counter()
        code, timed_out = cr.run_group(["bash", "-c", script], dict(os.environ), log, timeout=2, grace=1)
    assert timed_out and code != 0 and time.perf_counter() - t0 < 30  # SIGTERM ignored: SIGKILL after the grace
    assert subproc.gone(subproc.read_pid(pidfile))
    assert "stopped after --run_timeout 2 s" in (tmp_path / "log").read_text()
    with open(tmp_path / "log2", "w") as log:
        assert cr.run_group(["bash", "-c", "exit 3"], dict(os.environ), log, timeout=30) == (3, False)


def test_a_stopped_grid_stops_its_run_in_progress_with_the_whole_group(tmp_path):
    """SIGTERM to the grid (as `kill`, or a queue stopping it) used to leave the run's recipe running: its group was
    its own, and only a timeout stopped it. A grid process started as the script is (SIGTERM -> KeyboardInterrupt),
    inside run_group, is stopped; the run's child that ignores SIGTERM goes too, and the log says why."""
    pidfile, log = tmp_path / "child.pid", tmp_path / "log"
    script = f"trap '' TERM; sleep 120 & echo $! > {pidfile}; wait"
    grid = (
        "import os, signal, sys; sys.path.insert(0, sys.argv[1]); import cpu_reproduction as cr\n"
        "signal.signal(signal.SIGTERM, cr._interrupt)\n"
        "with open(sys.argv[2], 'w') as log:\n"
        "    cr.run_group(['bash', '-c', sys.argv[3]], dict(os.environ), log, timeout=300, grace=1)\n"
    )
    bench = os.path.join(cr.REPO, "benchmarks")
    proc = subprocess.Popen([sys.executable, "-c", grid, bench, str(log), script], start_new_session=True)
    try:
        child = subproc.read_pid(pidfile)
        assert subproc.alive(child)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) != 0  # the interrupt goes on: the grid ends
        assert subproc.gone(child)
        assert "stopped with the grid" in log.read_text()
    finally:
        subproc.kill_group(proc)


def test_the_model_fingerprint_is_the_trained_models_sha256_and_pairs_on_other_models_are_named(tmp_path):
    old, new = tmp_path / "old" / "model", tmp_path / "new" / "model"
    for d, data in ((old, b"xyz"), (new, b"abc")):
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(data)
    log = tmp_path / "run.log"  # the recipe's trace: the last MODEL_PATH is the one main_ppo got
    log.write_text(f"+ export MODEL_PATH={old}\n+ MODEL_PATH={new}\n+ MODEL=(actor_rollout_ref.model.path=...)\n")
    assert cr.model_fingerprint(str(log)) == "ba7816bf8f01cfea"  # SHA-256("abc"), FIPS 180-2's first example
    (new / "model.safetensors").unlink()
    assert cr.model_fingerprint(str(log)) is None  # a cache since removed
    assert cr.model_fingerprint(str(tmp_path / "missing.log")) is None
    log.write_text("+ SEED=3\n")  # a run that failed before the recipe set its model
    assert cr.model_fingerprint(str(log)) is None

    def run(method, seed, sha, e):
        return {"method": method, "sigma": 1.0, "seed": seed, "failed": False, "endpoint": e, "model_sha256": sha}

    runs = [
        run("grpo", 1, "aa", 0.3),
        run("slca_grpo", 1, "aa", 0.4),
        run("grpo", 2, "bb", 0.3),
        run("slca_grpo", 2, "cc", 0.2),  # the seed's model rebuilt elsewhere and different
        run("grpo", 3, None, 0.5),  # an older record without a fingerprint: not listed
        run("slca_grpo", 3, "dd", 0.5),
    ]
    cell = cr.paired(runs)["slca_grpo-grpo|1"]
    assert cell["model_differs"] == [2] and cell["n"] == 3
    assert "| 1: +10.0, 2: -10.0*, 3: +0.0 |" in cr.paired_table(cr.paired(runs))
    # the comparison again on the seeds known to share a model: seed 1 only (2 differs, 3 is unknown)
    assert cell["same_model"]["diffs"] == {"1": pytest.approx(0.1)} and cell["same_model"]["n"] == 1
    assert "| slca_grpo-grpo, same model | 1 | 1 | 1: +10.0 | +10.0 | — |" in cr.paired_table(cr.paired(runs))
    runs += [run("grpo", 4, "ee", 0.2), run("slca_grpo", 4, "ee", 0.5)]
    assert cr.paired(runs)["slca_grpo-grpo|1"]["same_model"]["mean"] == pytest.approx(0.2)  # (+0.1 + 0.3) / 2
    shared = [r for r in runs if r["seed"] in (1, 4)]  # every seed known to share its model: no second row
    assert "same_model" not in cr.paired(shared)["slca_grpo-grpo|1"]
    assert "same model" not in cr.paired_table(cr.paired(shared))
    unknown = [r for r in runs if r["seed"] == 3]
    assert cr.paired(unknown)["slca_grpo-grpo|1"]["same_model"] is None
    assert "| slca_grpo-grpo, same model | 1 | 0 | — |" in cr.paired_table(cr.paired(unknown))

    # --resume fills in the fingerprint of an older record whose log and model are still here, and keeps a known one
    (new / "model.safetensors").write_bytes(b"abc")
    log.write_text(f"+ MODEL_PATH={new}\n")
    older = {"method": "grpo", "sigma": 1.0, "seed": 7, "failed": False, "log": str(log)}
    known = {**older, "seed": 8, "model_sha256": "kept"}
    out = tmp_path / "grid.json"
    json.dump({"args": {"steps": 10}, "runs": [older, known]}, open(out, "w"))
    prev = cr.previous_runs(str(out), steps=10)
    assert prev["grpo", 1.0, 7]["model_sha256"] == "ba7816bf8f01cfea" and prev["grpo", 1.0, 8]["model_sha256"] == "kept"
