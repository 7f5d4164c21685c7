"""Progress on long work: the time-left estimate (slca_verl.progress), bfcl generate's progress lines from the
result files it writes (a stand-in for the bfcl-eval venv's python, no bfcl-eval), the shell stages of the
recipes and setups (scripts/progress_lib.sh), and the INFO lines of a command-line entry point, which
``import verl`` used to swallow."""

import json
import os
import subprocess
import sys
import time

import pytest
import subproc
from bfcl_helpers import write_scores

from slca_verl import progress
from slca_verl.eval import bfcl_leaderboard as bl

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_time_left_is_the_pace_so_far_applied_to_what_is_left():
    assert progress.time_left_s(200, 800, 60.0) == pytest.approx(180.0)
    assert progress.time_left_s(0, 800, 60.0) is None and progress.time_left_s(900, 800, 60.0) == 0.0
    assert [progress.duration(s) for s in (None, 0.2, 45, 89, 240, 5400, 9000)] == [
        "unknown",
        "~1 s",
        "~45 s",
        "~89 s",
        "~4 min",
        "~1.5 h",
        "~2.5 h",
    ]
    assert progress.progress_line("warm-up: step", 240, 800, 120.0, "loss 1.210") == (
        "warm-up: step 240/800 (30 %), loss 1.210, ~5 min left"
    )
    assert progress.progress_line("bfcl generate: entries", 0, 40, 30.0).endswith("(0 %), time left unknown yet")
    assert progress.progress_line("bfcl generate: entries", 7, None, 30.0) == (
        "bfcl generate: entries 7 so far (~30 s spent)"
    )


@pytest.mark.slow  # a fresh process importing verl (~11 s)
def test_an_entry_points_info_lines_survive_verls_logging_setup():
    """verl's import calls logging.basicConfig at WARNING; the entry point's own basicConfig(INFO) was then a no-op
    and the warm-up's report and the eval commands' '-> file' lines never showed."""
    code = (
        "import logging, slca_verl\nfrom slca_verl.progress import cli_logging\ncli_logging()\n"
        "logging.getLogger('__main__').info('main says')\nlogging.getLogger('slca_verl.x').info('lib says')\n"
        "logging.getLogger('verl.y').info('verl stays quiet')\n"
    )
    out = subproc.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "main says" in out.stderr and "lib says" in out.stderr and "verl stays quiet" not in out.stderr


# ---------------------------------------------------------------------------------------------------------------
# bfcl generate

STAND_IN = """#!{python}
import json, os, sys, time
if sys.argv[1] == "-c":  # bfcl_leaderboard._expand: names, version, entries per category
    print(json.dumps([["multi_turn_base", "memory_kv"], "2026.3.23", {{"multi_turn_base": 4, "memory_kv": 2}}]))
    sys.exit(0)
command = sys.argv[sys.argv.index("--") + 1]
print("bfcl", command, "started", flush=True)
if command == "generate":
    if {fail}:
        print("Traceback: the endpoint refused", flush=True)
        sys.exit(3)
    root = os.path.join(os.environ["BFCL_PROJECT_ROOT"], "result", "slca-verl_policy-FC")
    files = [os.path.join(root, "multi_turn", "BFCL_v4_multi_turn_base_result.json")] * 4 + [
        os.path.join(root, "agentic", "memory", "kv", "BFCL_v4_memory_kv_result.json")] * 2
    os.makedirs(os.path.dirname(files[0]), exist_ok=True)
    os.makedirs(os.path.dirname(files[-1]), exist_ok=True)
    with open(os.path.join(os.path.dirname(files[-1]), "BFCL_v4_memory_kv_prereq_result.json"), "w") as f:
        f.write("{{}}\\n" * 50)  # prerequisites: not test entries
    for i, path in enumerate(files):
        time.sleep({pause})
        with open(path, "a") as f:
            f.write(json.dumps({{"id": i}}) + "\\n")
"""


def stand_in(tmp_path, fail=False, pause=0.25):
    python = tmp_path / "bfcl_python"
    python.write_text(STAND_IN.format(python=sys.executable, fail=fail, pause=pause))
    python.chmod(0o755)
    return str(python)


def leaderboard(tmp_path, python, *extra):
    out = tmp_path / "ev"
    write_scores(
        out / "bfcl" / "score",
        {"multi_turn_base": (1, 4), "memory_kv": (0, 2)},
        {"Overall Acc": "3.00%", "Multi Turn Acc": "6.25%", "Live Acc": "0.00%"},
    )
    return out, bl.main(
        [
            "--local_model_path",
            str(tmp_path),
            "--bfcl_python",
            python,
            "--categories",
            "multi_turn_base,memory_kv",
            "--out_dir",
            str(out),
            "--progress_s",
            "0.3",
            *extra,
        ]
    )


def test_bfcl_generate_logs_entries_written_and_time_left_while_it_runs(tmp_path, caplog):
    with caplog.at_level("INFO", logger="slca_verl.eval.bfcl_leaderboard"):
        out, code = leaderboard(tmp_path, stand_in(tmp_path))
    assert code == 0, caplog.text[-2000:]
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("bfcl generate: entries")]
    assert "bfcl generate: 6 entries in 2 categories (progress every 0.3 s)" in caplog.text
    assert len(lines) >= 2, caplog.text
    counts = [int(line.split()[3].split("/")[0]) for line in lines]
    assert counts == sorted(counts) and all(line.split()[3].endswith("/6") for line in lines)  # prereqs not counted
    assert any(line.endswith(" left") and "~" in line for line in lines)
    assert "bfcl generate started" in (out / "bfcl_generate.log").read_text()
    assert json.loads((out / "bfcl_leaderboard.json").read_text())["categories"]["multi_turn_base"]["total_count"] == 4


def test_a_limit_caps_the_expected_entries_and_old_result_files_do_not_count(tmp_path):
    root = tmp_path / "result"
    (root / "m").mkdir(parents=True)
    old = root / "m" / "BFCL_v4_multi_turn_base_result.json"
    old.write_text("{}\n" * 3)
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    (root / "m" / "BFCL_v4_memory_kv_result.json").write_text("{}\n" * 5)
    (root / "m" / "BFCL_v4_memory_kv_prereq_result.json").write_text("{}\n" * 9)
    expected = {"multi_turn_base": 2, "memory_kv": 2}
    assert bl.count_results(str(root), expected, since=time.time() - 60) == 2  # memory_kv capped, old file skipped
    assert bl.count_results(str(root), expected) == 4


def test_a_failed_or_overlong_generate_names_its_log_and_leaves_no_process(tmp_path):
    (tmp_path / "a").mkdir()
    with pytest.raises(RuntimeError, match="bfcl generate failed \\(3\\)"):
        leaderboard(tmp_path / "a", stand_in(tmp_path, fail=True))
    assert "the endpoint refused" in (tmp_path / "a" / "ev" / "bfcl_generate.log").read_text()
    slow = stand_in(tmp_path, pause=30)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="ran past --timeout_s 1 s"):
        leaderboard(tmp_path, slow, "--timeout_s", "1")
    assert time.monotonic() - t0 < 20
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert slow not in ps


# ---------------------------------------------------------------------------------------------------------------
# shell stages (scripts/progress_lib.sh)

STAGES = """source "$1/scripts/progress_lib.sh"
set -x   # the recipes trace their commands: the stage lines must not drag the function's body into the trace
progress_start build 10 10 10 460
progress_stage 1 "the task's data"
SECONDS=60   # three stages done in 60 s instead of the 30 expected: the rest takes twice as long as expected
progress_stage 4 "the warm-up"
"""


def test_shell_stages_say_what_is_left_scaled_by_the_pace_of_the_stages_done():
    out = subproc.run(["bash", "-c", STAGES, "_", REPO], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("[build")]
    assert lines == ["[build 1/4] the task's data (~8 min left)", "[build 4/4] the warm-up (~15 min left)"]
    assert "_PROGRESS" not in out.stderr  # no traced internals
