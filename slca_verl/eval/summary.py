"""One summary per checkpoint: ``<out_dir>/summary.md``, the README table's columns and how each was computed.

    python -m slca_verl.eval.summary --out_dir eval/qwen7b_slca_global_step_1240 --label SLCA-GRPO

It reads what the eval commands wrote into the same folder (``in_domain.json``, ``bfcl_leaderboard.json``,
``tau2.json``; the in-house single-turn AST check ``bfcl.json`` is listed apart, as a check, not as BFCL) and writes
one markdown row ready to paste into the README's reproduction table, followed by one line per column naming the
library, its version, the categories or domains and the simulator. A column whose file is absent reads "not run".
The eval recipes call it after they score, so the summary always reflects every result in the folder.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Sequence

from slca_verl.progress import cli_logging

logger = logging.getLogger(__name__)

COLUMNS = ("in-domain Success@0.9", "BFCL (v3-style)", "BFCL v4 overall", "τ²-bench Pass^1")


def _load(out_dir: str, name: str) -> dict | None:
    path = os.path.join(out_dir, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100.0 * value:.2f}"


def _in_domain_note(in_domain: dict) -> str:
    overall = in_domain["overall"]
    if "n_tool" not in overall:  # a result file of the older score-only rule
        return f"in-domain: HierR Success@0.9 over {overall['n']} held-out rows (slca_verl.eval.in_domain)"
    parts = [
        f"in-domain: Success@0.9 over {overall['n']} held-out rows, verl's own validation rollouts "
        f"(slca_verl.eval.in_domain): {overall['n_tool']} rows with gold calls succeed at r_tool >= 0.9, "
        f"{overall['n_direct']} without gold calls when answered without a call; a reply the judge rated must be "
        "rated acceptable"
    ]
    for key, what in (("tool_accuracy", "tool accuracy"), ("abstention", "abstention")):
        if overall.get(key) is not None:
            parts.append(f"{what} {overall[key]:.2f} %")
    if overall.get("score@0.9") is not None:
        parts.append(f"the authors' rule (normalised score >= 0.9) {overall['score@0.9']:.2f} %")
    return "; ".join(parts)


def columns(out_dir: str) -> tuple[dict[str, str], list[str]]:
    """``({column: cell}, [how each present column was computed])`` from the result files in ``out_dir``."""
    cells = dict.fromkeys(COLUMNS, "not run")
    notes = []
    in_domain = _load(out_dir, "in_domain")
    if in_domain:
        overall = in_domain["overall"]
        cells[COLUMNS[0]] = f"{overall['success@0.9']:.2f}"
        notes.append(_in_domain_note(in_domain))
        verl = in_domain.get("verl_validation")
        if verl and verl.get("by_data_source"):
            notes.append(
                f"verl's own validation of the same rollouts (step {verl['step']}, {verl['metrics']}): "
                + ", ".join(f"{v['what']} {src} {v['value']:.2f} %" for src, v in verl["by_data_source"].items())
            )
    board = _load(out_dir, "bfcl_leaderboard")
    if board:
        v3 = board["v3_style"]
        cells[COLUMNS[1]] = _pct(v3["value"])
        cells[COLUMNS[2]] = _pct(board["overall_v4"])
        limit = board.get("limit_per_category")
        notes.append(
            f"BFCL: bfcl-eval {board.get('bfcl_eval_version') or '?'} generate + evaluate, model {board['model']}, "
            f"{len(board['categories'])} categories ({', '.join(sorted(board['categories']))})"
            + (f", first {limit} entries of each (not a leaderboard score)" if limit else "")
            + "; v3-style = (non-live + live + multi-turn) / 3"
            + (f" (n/a: not run: {', '.join(v3['missing_categories'])})" if v3["value"] is None else "")
            + "; v4 overall counts the categories left out as 0: "
            + (", ".join(board["left_out"]) or "none")
        )
    tau = _load(out_dir, "tau2")
    if tau:
        per_domain = {d: v["pass^1"] for d, v in tau["domains"].items()}
        cells[COLUMNS[3]] = ", ".join(f"{d} {_pct(v)}" for d, v in per_domain.items())
        spread = {d: v.get("per_trial_pass^1", {}) for d, v in tau["domains"].items()}
        notes.append(
            f"τ²-bench: tau2's own evaluator, agent {tau['agent_model']}, user simulator {tau['user_model']} "
            f"({tau.get('user_base_url', '?')}), {tau.get('num_trials', '?')} trials, seed {tau.get('seed', '?')}; "
            "Pass^1 per trial: "
            + "; ".join(f"{d} " + "/".join(_pct(x) for x in s.values()) for d, s in spread.items() if s)
        )
    ast = _load(out_dir, "bfcl")
    if ast:
        notes.append(
            f"check, not a column: in-house single-turn AST accuracy (slca_verl.eval.bfcl_ast, bfcl-eval's "
            f"ast_checker) {ast['summary']['overall']['accuracy']:.2f} % over "
            f"{ast['summary']['overall']['n']} questions"
        )
    return cells, notes


def render(out_dir: str, label: str) -> str:
    cells, notes = columns(out_dir)
    lines = [
        "| method | " + " | ".join(COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
        f"| {label} | " + " | ".join(cells[c] for c in COLUMNS) + " |",
        "",
    ]
    lines += [f"- {n}" for n in notes] or ["- no result files in this folder yet"]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out_dir", required=True)
    p.add_argument("--label", default=None, help="the row's method name (default: the folder's name)")
    args = p.parse_args(argv)
    cli_logging()
    if not os.path.isdir(args.out_dir):
        logger.error("summary: --out_dir %s is not a folder", args.out_dir)
        return 2
    text = render(args.out_dir, args.label or os.path.basename(os.path.normpath(args.out_dir)))
    path = os.path.join(args.out_dir, "summary.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    logger.info("summary: %s", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
