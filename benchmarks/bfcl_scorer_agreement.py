"""Does the in-house single-turn AST check (``slca_verl.eval.bfcl_ast``) agree with ``bfcl evaluate``?

Both score the same replies: for the first ``--limit`` questions of each of BFCL's single-turn AST categories, a
set of reply variants is written (the gold answer as hermes blocks, one per call; the gold answer as one block
holding a JSON list of calls; a wrong argument value; a wrong function name; no call; and, for the irrelevance
categories, a call where none is wanted). The in-house scorer reads each text with the project's hermes parser and
bfcl-eval's ``ast_checker``; ``bfcl evaluate`` (through ``slca_verl.eval.bfcl_leaderboard`` in bfcl-eval's venv)
reads it with its Qwen FC handler's decoder and its own runner. The table is the agreement per variant, and the
disagreements are listed with the reason.

    bash scripts/bfcl_setup.sh
    python benchmarks/bfcl_scorer_agreement.py --limit 40 --out docs/results/bfcl_scorer_agreement.json
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from slca_verl.eval import bfcl_ast, bfcl_leaderboard

logger = logging.getLogger("bfcl_scorer_agreement")


def _blocks(calls: list[dict]) -> str:
    return "\n".join("<tool_call>\n" + json.dumps(c) + "\n</tool_call>" for c in calls)


def _alter(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 7
    if isinstance(value, str):
        return value + "_x"
    if isinstance(value, list):
        return [] if value else ["_x"]
    return "_x"


def variants(case: dict) -> dict[str, str]:
    """Reply texts for one question, by variant name (a variant that does not apply to it is absent)."""
    if case["category"] in bfcl_ast.NO_CALL_CATEGORIES:
        fn = case["functions"][0]
        return {
            "no_call": "I cannot help with that with these tools.",
            "a_call": _blocks([{"name": fn["name"], "arguments": {}}]),
        }
    calls = bfcl_ast.gold_calls(case["possible"], case["functions"])
    out = {"gold_blocks": _blocks(calls), "no_call": "I cannot help with that."}
    if len(calls) > 1:
        out["gold_list"] = "<tool_call>\n" + json.dumps(calls) + "\n</tool_call>"
    wrong = copy.deepcopy(calls)
    if wrong and wrong[0]["arguments"]:
        key = sorted(wrong[0]["arguments"])[0]
        wrong[0]["arguments"][key] = _alter(wrong[0]["arguments"][key])
        out["wrong_value"] = _blocks(wrong)
    if calls:
        renamed = copy.deepcopy(calls)
        renamed[0]["name"] += "_x"
        out["wrong_name"] = _blocks(renamed)
    return out


def bfcl_verdicts(texts: dict[str, str], cases: dict[str, dict], bfcl_python: str, work: str) -> dict[str, bool]:
    """``{id: valid}`` from ``bfcl evaluate`` on result files holding ``texts``."""
    root = Path(work) / "bfcl" / "result" / bfcl_leaderboard.model_dir()
    by_cat: dict[str, list[str]] = {}
    for case_id in texts:
        by_cat.setdefault(cases[case_id]["category"], []).append(case_id)
    for cat, ids in by_cat.items():
        group = "live" if cat.startswith("live_") else "non_live"
        (root / group).mkdir(parents=True, exist_ok=True)
        with open(root / group / f"BFCL_v4_{cat}_result.json", "w") as f:
            for case_id in ids:
                f.write(json.dumps({"id": case_id, "result": texts[case_id]}) + "\n")
    code = bfcl_leaderboard.main(
        ["--skip_generate", "--categories", ",".join(sorted(by_cat)), "--bfcl_python", bfcl_python, "--out_dir", work]
    )
    if code != 0:
        raise RuntimeError(f"bfcl evaluate failed ({code}); see {work}/bfcl_evaluate.log")
    failed = set()
    for path in (Path(work) / "bfcl" / "score").rglob("BFCL_v4_*_score.json"):
        failed |= {json.loads(line)["id"] for line in path.read_text().splitlines()[1:] if line.strip()}
    return {case_id: case_id not in failed for case_id in texts}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--limit", type=int, default=40, help="questions per category")
    p.add_argument("--bfcl_python", default=None, help="the bfcl-eval venv's Python (default: .bfcl_python)")
    p.add_argument("--out", default=None, help="write the result JSON here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    repo = Path(__file__).resolve().parents[1]
    py = args.bfcl_python or ((repo / ".bfcl_python").read_text().strip() if (repo / ".bfcl_python").exists() else "")
    if not py or not os.access(py, os.X_OK):
        logger.error("no bfcl-eval venv: bash scripts/bfcl_setup.sh (or --bfcl_python)")
        return 2
    t0 = time.time()
    checker, language, model_name = bfcl_ast.load_checker()
    cases = {c["id"]: c for c in bfcl_ast.load_cases(limit=args.limit) if c["id"] not in bfcl_ast.UNSATISFIABLE}
    per_variant: dict[str, dict[str, str]] = {}
    for case_id, case in cases.items():
        for name, text in variants(case).items():
            per_variant.setdefault(name, {})[case_id] = text
    result = {"limit": args.limit, "questions": len(cases), "variants": {}, "disagreements": []}
    for name, texts in sorted(per_variant.items()):
        ours = {i: bfcl_ast.score_case(cases[i], t, checker, language, model_name)["valid"] for i, t in texts.items()}
        with tempfile.TemporaryDirectory(prefix=f"agree_{name}_") as work:
            theirs = bfcl_verdicts(texts, cases, py, work)
        cells = Counter((ours[i], theirs[i]) for i in texts)
        result["variants"][name] = {
            "n": len(texts),
            "both_pass": cells[(True, True)],
            "both_fail": cells[(False, False)],
            "ours_only": cells[(True, False)],
            "bfcl_only": cells[(False, True)],
            "agreement": (cells[(True, True)] + cells[(False, False)]) / len(texts),
        }
        result["disagreements"] += [
            {"variant": name, "id": i, "ours": ours[i], "bfcl": theirs[i]} for i in texts if ours[i] != theirs[i]
        ][:10]
    total = sum(v["n"] for v in result["variants"].values())
    agree = sum(v["both_pass"] + v["both_fail"] for v in result["variants"].values())
    result["agreement"] = agree / total
    result["wall_seconds"] = round(time.time() - t0, 1)
    heads = ("n", "agree", "both pass", "both fail", "ours only", "bfcl only")
    print(f"{'variant':<12} " + " ".join(f"{h:>{5 if h == 'n' else 10}}" for h in heads))
    for name, v in result["variants"].items():
        print(
            f"{name:<12} {v['n']:>5} {100 * v['agreement']:>6.1f}% {v['both_pass']:>10} {v['both_fail']:>10} "
            f"{v['ours_only']:>10} {v['bfcl_only']:>10}"
        )
    print(
        f"overall: {100 * result['agreement']:.1f}% of {total} replies ({len(cases)} questions), "
        f"{result['wall_seconds']} s"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
