"""BFCL as the leaderboard computes it: bfcl-eval's own ``generate`` and ``evaluate`` on a served checkpoint.

    bash scripts/bfcl_setup.sh                     # bfcl-eval with all its dependencies, in its own venv
    vllm serve CK --served-model-name policy --port 8100 &                   # or: bash recipes/eval_bfcl.sh CK
    python -m slca_verl.eval.bfcl_leaderboard --local_model_path CK --port 8100 --out_dir eval/qwen7b_slca

bfcl-eval pins numpy 1.26 and other packages verl 0.9.1 cannot live with, so it runs in its own environment
(``--bfcl_python``); this module, in verl's, drives it through ``slca_verl/eval/bfcl_cli.py`` (bfcl's command line
with the checkpoint registered as the model ``slca-verl/policy-FC``: bfcl-eval's Qwen function-calling handler,
prompting through the checkpoint's own chat template) and reads what bfcl-eval wrote:

* ``<out_dir>/bfcl/result/``, ``<out_dir>/bfcl/score/``: bfcl-eval's own files (``BFCL_PROJECT_ROOT``), untouched;
  ``score/data_overall.csv`` is the leaderboard row.
* ``<out_dir>/bfcl_leaderboard.json`` / ``.md``: every category's accuracy and count from bfcl-eval's score files,
  bfcl-eval's group and overall numbers from its CSV (BFCL v4: non-live 10, live 10, irrelevance 10, multi-turn 30,
  agentic 40; a category not run counts 0 there, as on the leaderboard), the categories left out, and the v3-style
  aggregate :func:`v3_style` (mean of bfcl-eval's non-live, live and multi-turn accuracies), which is the number to
  set beside a paper's BFCL v3 column, and, for a group bfcl-eval shows as N/A because one of its categories was not
  run (Memory Acc offline: memory_vector), its mean over the categories that were (:func:`groups_over_run`).

Categories (:data:`OFFLINE_CATEGORIES`): every one that runs without the internet. ``web_search_*`` needs SerpAPI and
``memory_vector`` downloads a sentence-transformers encoder from the Hugging Face hub: both are left out unless asked
for (``--categories``) and are named in the report. ``format_sensitivity`` does not apply to a function-calling
handler (bfcl-eval skips it for FC models).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import subprocess
import sys
import time
from typing import Sequence

from slca_verl.eval.report import markdown_table, write_report
from slca_verl.progress import cli_logging, progress_line

logger = logging.getLogger(__name__)

MODEL = "slca-verl/policy-FC"  # bfcl_cli.MODEL_NAME (that file runs in bfcl-eval's venv and is not imported here)
CLI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bfcl_cli.py")
NON_LIVE = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
)
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
MEMORY_OFFLINE = ("memory_kv", "memory_rec_sum")
OFFLINE_CATEGORIES = NON_LIVE + LIVE + MULTI_TURN + MEMORY_OFFLINE
NEEDS_INTERNET = {
    "memory_vector": "downloads the all-MiniLM-L6-v2 encoder from the Hugging Face hub",
    "web_search_base": "queries SerpAPI",
    "web_search_no_snippet": "queries SerpAPI",
}
#: bfcl-eval's data_overall.csv columns this report carries (its own names)
GROUP_COLUMNS = (
    "Overall Acc",
    "Non-Live AST Acc",
    "Live Acc",
    "Multi Turn Acc",
    "Memory Acc",
    "Web Search Acc",
    "Irrelevance Detection",
    "Relevance Detection",
)
V3_PARTS = ("Non-Live AST Acc", "Live Acc", "Multi Turn Acc")
#: the groups bfcl-eval shows as N/A when one of their categories was not scored (``display_na_if_category_missing``
#: in its ``eval_runner_helper.generate_leaderboard_csv``), and the categories each one averages, unweighted; a tuple
#: inside is itself such a mean (Non-Live's simple AST: python, java, javascript). Memory Acc is always N/A offline:
#: memory_vector needs the internet. :func:`groups_over_run` gives their mean over the categories that did run.
GROUP_PARTS = {
    "Non-Live AST Acc": (
        ("simple_python", "simple_java", "simple_javascript"),
        "multiple",
        "parallel",
        "parallel_multiple",
    ),
    "Web Search Acc": ("web_search_base", "web_search_no_snippet"),
    "Memory Acc": ("memory_kv", "memory_vector", "memory_rec_sum"),
    "Relevance Detection": ("live_relevance",),
    "Irrelevance Detection": ("irrelevance", "live_irrelevance"),
}
#: the categories bfcl-eval averages into those three (irrelevance and relevance are scored apart from them)
V3_CATEGORIES = NON_LIVE[:-1] + LIVE[:4] + MULTI_TURN
DEFAULT_BFCL_PYTHON = "/tmp/slca-bfcl/venv/bin/python"


def model_dir(model: str = MODEL) -> str:
    """bfcl-eval's folder name for a model (``/`` becomes ``_``)."""
    return model.replace("/", "_")


def read_category_scores(score_root: str, model: str = MODEL) -> dict[str, dict]:
    """``{category: {accuracy, correct_count, total_count}}`` from the first line of each of bfcl-eval's score files
    (``score/<model>/<group>/.../BFCL_v4_<category>_score.json``)."""
    scores = {}
    base = os.path.join(score_root, model_dir(model))
    for folder, _, files in os.walk(base):
        for name in files:
            if not (name.startswith("BFCL_") and name.endswith("_score.json")):
                continue
            category = name.split("_", 2)[2][: -len("_score.json")]
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                head = json.loads(f.readline())
            scores[category] = {k: head[k] for k in ("accuracy", "correct_count", "total_count")}
    return scores


def _percent(cell: str) -> float | None:
    cell = cell.strip()
    return None if cell in ("N/A", "") else float(cell.rstrip("%")) / 100.0


def read_overall(score_root: str, model: str = MODEL) -> dict[str, float | None]:
    """bfcl-eval's leaderboard row for ``model`` (``score/data_overall.csv``), as fractions; None where it says N/A.

    Raises:
        FileNotFoundError: bfcl-eval wrote no ``data_overall.csv`` (evaluate did not run).
        ValueError: the CSV has no row for ``model`` or lacks one of :data:`GROUP_COLUMNS`.
    """
    path = os.path.join(score_root, "data_overall.csv")
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    display = "slca-verl policy (FC)"
    row = next((r for r in rows if r.get("Model") == display), None)
    if row is None:
        raise ValueError(f"bfcl: {path} has no row for {display!r} (rows: {[r.get('Model') for r in rows]})")
    missing = [c for c in GROUP_COLUMNS if c not in row]
    if missing:
        raise ValueError(f"bfcl: {path} lacks the columns {missing}; is bfcl-eval 2026.3.23 installed?")
    return {c: _percent(row[c]) for c in GROUP_COLUMNS}


def v3_style(overall: dict[str, float | None], scores: dict[str, dict]) -> dict:
    """The v3-style aggregate: ``(non-live + live + multi-turn) / 3`` of bfcl-eval's own group accuracies
    (``Non-Live AST Acc``, ``Live Acc``, ``Multi Turn Acc``), given only when every category those three average was
    scored (bfcl-eval counts a missing one 0, which would make a partial run look like a bad model)."""
    missing = [c for c in V3_CATEGORIES if c not in scores]
    value = None if missing else sum(overall[c] for c in V3_PARTS) / len(V3_PARTS)
    return {"value": value, "missing_categories": missing}


def _mean_over_run(parts: Sequence, scores: dict[str, dict]) -> float | None:
    """bfcl-eval's unweighted mean of ``parts`` (a nested tuple is a mean of its own), over the scored ones only."""
    values = []
    for part in parts:
        value = _mean_over_run(part, scores) if isinstance(part, tuple) else scores.get(part, {}).get("accuracy")
        if value is not None:
            values.append(value)
    return sum(values) / len(values) if values else None


def _flat(parts: Sequence) -> list[str]:
    return [c for part in parts for c in (_flat(part) if isinstance(part, tuple) else [part])]


def groups_over_run(overall: dict[str, float | None], scores: dict[str, dict]) -> dict[str, dict]:
    """For each group of :data:`GROUP_PARTS` that bfcl-eval shows as N/A although some of its categories ran (Memory
    Acc after memory_kv and memory_rec_sum, memory_vector left out): ``{"accuracy", "categories", "not_run"}``, its
    mean over the categories that ran, computed as bfcl-eval computes the full group. bfcl-eval's overall still counts
    the missing ones 0; this is the number to read for what was run."""
    out = {}
    for group, parts in GROUP_PARTS.items():
        if overall.get(group) is not None:
            continue
        value = _mean_over_run(parts, scores)
        if value is None:
            continue
        names = _flat(parts)
        out[group] = {
            "accuracy": value,
            "categories": [c for c in names if c in scores],
            "not_run": [c for c in names if c not in scores],
        }
    return out


def summarize(score_root: str, categories: Sequence[str], limit: int | None = None, version: str | None = None) -> dict:
    """The report: per category, bfcl-eval's groups and overall, the v3-style aggregate, what was left out."""
    scores = read_category_scores(score_root)
    overall = read_overall(score_root)
    not_scored = [c for c in categories if c not in scores]
    if not_scored:
        raise ValueError(f"bfcl: no score file for {not_scored} under {score_root}; did generate or evaluate fail?")
    left_out = {
        c: NEEDS_INTERNET.get(c, "not requested") for c in OFFLINE_CATEGORIES + tuple(NEEDS_INTERNET) if c not in scores
    }
    return {
        "model": MODEL,
        "bfcl_eval_version": version,
        "limit_per_category": limit,
        "categories": scores,
        "groups": overall,
        "overall_v4": overall["Overall Acc"],
        "groups_over_run": groups_over_run(overall, scores),
        "v3_style": v3_style(overall, scores),
        "left_out": left_out,
    }


def table(result: dict) -> str:
    rows = [[c, v["total_count"], 100.0 * v["accuracy"]] for c, v in sorted(result["categories"].items())]
    over_run = result.get("groups_over_run", {})
    for group, value in result["groups"].items():
        if value is None and group in over_run:
            part = over_run[group]
            rows.append(
                [
                    f"**{group}** over the categories run ({', '.join(part['categories'])}; not run: "
                    f"{', '.join(part['not_run'])}; bfcl-eval: N/A)",
                    "",
                    100.0 * part["accuracy"],
                ]
            )
        else:
            rows.append([f"**{group}** (bfcl-eval)", "", "N/A" if value is None else 100.0 * value])
    v3 = result["v3_style"]["value"]
    rows.append(["**v3-style: (non-live + live + multi-turn) / 3**", "", "N/A" if v3 is None else 100.0 * v3])
    text = markdown_table(["category", "entries", "accuracy (%)"], rows)
    if result["left_out"]:
        text += (
            "\nLeft out (counted 0 in bfcl-eval's overall): "
            + ", ".join(f"{c} ({why})" for c, why in result["left_out"].items())
            + "\n"
        )
    if result["limit_per_category"]:
        text += f"\nThe first {result['limit_per_category']} entries of each category only: not a leaderboard score.\n"
    return text


def count_results(result_root: str, expected: dict[str, int], since: float = 0.0) -> int:
    """Entries bfcl generate has written so far: the lines of each ``BFCL_v4_<category>_result.json`` under
    ``result_root`` modified at or after ``since`` (a file left by an earlier run does not count), at most the
    category's expected count; memory's prerequisite files (``*_prereq_result.json``) are not test entries."""
    done = {}
    for folder, _, files in os.walk(result_root):
        for name in files:
            if not (name.startswith("BFCL_") and name.endswith("_result.json")):
                continue
            category = name.split("_", 2)[2][: -len("_result.json")]
            path = os.path.join(folder, name)
            if category not in expected or os.path.getmtime(path) < since:
                continue
            with open(path, "rb") as f:
                done[category] = min(expected[category], sum(1 for line in f if line.strip()))
    return sum(done.values())


def run_bfcl(args: argparse.Namespace, command: list[str], expected: dict[str, int] | None = None) -> None:
    """``bfcl_cli.py [ours] -- <bfcl command>`` with the bfcl-eval venv's Python, bfcl-eval's env for the endpoint;
    its output in ``<out_dir>/bfcl_<command>.log``. With ``expected`` ({category: entries}) a progress line every
    ``--progress_s`` seconds: entries written of those expected, and the time left at the pace so far."""
    ours = ["--served_model", args.served_model]
    if args.max_tokens:
        ours += ["--max_tokens", str(args.max_tokens)]
    if args.limit and command[0] == "generate":
        ours += ["--limit", str(args.limit)]
    env = {
        **os.environ,
        "BFCL_PROJECT_ROOT": args.bfcl_root,
        "LOCAL_SERVER_ENDPOINT": args.host,
        "LOCAL_SERVER_PORT": str(args.port),
    }
    cmd = [args.bfcl_python, CLI, *ours, "--", *command]
    logger.info("bfcl: %s", " ".join(cmd))
    log_path = os.path.join(args.out_dir, f"bfcl_{command[0]}.log")
    total = sum(expected.values()) if expected else None
    start_wall, start = time.time() - 1.0, time.monotonic()  # (1 s: file times are coarser than the clock)
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            while True:
                try:
                    proc.wait(timeout=args.progress_s)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() - start > args.timeout_s:
                        raise RuntimeError(
                            f"bfcl {command[0]} ran past --timeout_s {args.timeout_s:g} s; see {log_path}"
                        ) from None
                    if expected:
                        done = count_results(os.path.join(args.bfcl_root, "result"), expected, start_wall)
                        logger.info(progress_line(f"bfcl {command[0]}: entries", done, total, time.monotonic() - start))
        finally:
            if proc.poll() is None:  # a timeout or an interrupt: the bfcl process does not outlive this one
                proc.kill()
                proc.wait()
    if proc.returncode != 0:
        with open(log_path, encoding="utf-8") as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"bfcl {command[0]} failed ({proc.returncode}): {tail}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--local_model_path", default=None, help="the served checkpoint's HF folder (its tokenizer)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8100)
    p.add_argument("--served_model", default="policy")
    p.add_argument(
        "--categories",
        default=",".join(OFFLINE_CATEGORIES),
        help="bfcl-eval categories or groups (default: every offline category)",
    )
    p.add_argument("--limit", type=int, default=None, help="only the first N entries of each category (a smoke run)")
    p.add_argument("--max_tokens", type=int, default=None, help="cap on each completion (default: bfcl-eval's)")
    p.add_argument("--bfcl_python", default=DEFAULT_BFCL_PYTHON, help="Python of the bfcl-eval venv")
    p.add_argument("--skip_generate", action="store_true", help="evaluate results already under --out_dir")
    p.add_argument("--timeout_s", type=float, default=12 * 3600)
    p.add_argument("--progress_s", type=float, default=30.0, help="seconds between progress lines of bfcl generate")
    p.add_argument("--out_dir", required=True)
    args = p.parse_args(argv)
    cli_logging()
    if not os.access(args.bfcl_python, os.X_OK):
        logger.error("bfcl: --bfcl_python %s is not an executable; run scripts/bfcl_setup.sh", args.bfcl_python)
        return 2
    if not args.skip_generate and not args.local_model_path:
        logger.error("bfcl: --local_model_path is required to generate (the checkpoint's tokenizer and template)")
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    args.bfcl_root = os.path.abspath(os.path.join(args.out_dir, "bfcl"))
    os.makedirs(args.bfcl_root, exist_ok=True)
    categories = [c for c in args.categories.split(",") if c]
    common = ["--model", MODEL, "--test-category", ",".join(categories)]
    expanded, version, sizes = _expand(args, categories)
    if not args.skip_generate:
        expected = {c: min(n, args.limit) if args.limit else n for c, n in sizes.items()}
        logger.info(
            "bfcl generate: %d entries in %d categories (progress every %g s)",
            sum(expected.values()),
            len(expected),
            args.progress_s,
        )
        run_bfcl(
            args,
            [
                "generate",
                *common,
                "--skip-server-setup",
                "--local-model-path",
                os.path.abspath(args.local_model_path),
                "--allow-overwrite",
            ],
            expected,
        )
    run_bfcl(args, ["evaluate", *common, *(["--partial-eval"] if args.limit or args.skip_generate else [])])
    result = summarize(os.path.join(args.bfcl_root, "score"), expanded, args.limit, version)
    json_path, md_path = write_report(args.out_dir, "bfcl_leaderboard", result, table(result))
    logger.info(
        "bfcl: overall (v4) %s, v3-style %s -> %s, %s",
        result["overall_v4"],
        result["v3_style"]["value"],
        json_path,
        md_path,
    )
    return 0


def _expand(args: argparse.Namespace, categories: list[str]) -> tuple[list[str], str, dict[str, int]]:
    """bfcl-eval's expansion of group names (``multi_turn`` -> its four categories), its version, and the number of
    test entries of each category (its ``load_dataset_entry``, memory's prerequisites left out; {} if that fails),
    asked of the bfcl venv (the one that generates and scores)."""
    code = (
        "import json,sys\nfrom importlib.metadata import version\n"
        "from bfcl_eval.utils import parse_test_category_argument\n"
        "names = parse_test_category_argument(sys.argv[1].split(','))\n"
        "try:\n    from bfcl_eval.utils import load_dataset_entry\n"
        "    sizes = {c: len(load_dataset_entry(c, include_prereq=False, include_language_specific_hint=False))"
        " for c in names}\n"
        "except Exception:\n    sizes = {}\n"
        "print(json.dumps([names, version('bfcl-eval'), sizes]))"
    )
    env = {**os.environ, "BFCL_PROJECT_ROOT": args.bfcl_root}
    proc = subprocess.run(
        [args.bfcl_python, "-c", code, ",".join(categories)], env=env, capture_output=True, text=True, timeout=300
    )
    if proc.returncode != 0:
        raise ValueError(f"bfcl: categories {categories} not understood by bfcl-eval: {proc.stderr[-1500:]}")
    expanded, version, sizes = json.loads(proc.stdout.strip().splitlines()[-1])
    return expanded, version, sizes


if __name__ == "__main__":
    sys.exit(main())
