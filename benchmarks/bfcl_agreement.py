"""Agreement of HierR's execution components with BFCL's own AST checker on BFCL's shipped data.

    pip install --no-deps -r requirements-bfcl.txt        # bfcl-eval beside verl, without touching numpy/torch
    python benchmarks/bfcl_agreement.py                    # prints the agreement table (~5 s on 2 CPU cores)

For every case of BFCL's simple (python), multiple, parallel and parallel_multiple categories, the gold answer is
rendered as one hermes ``<tool_call>`` block (BFCL's first acceptable value for each argument; arguments whose first
acceptable value is "" are BFCL's "may be omitted" and are left out), scored by HierR and by
``bfcl_eval.eval_checker.ast_eval.ast_checker.ast_checker``. Then each case is corrupted in one way at a time:

    wrong_name     first call renamed to another (allowed) tool name          → name_f1 < 1 expected
    drop_arg       a required argument of the first call removed             → key < 1 and value < 1
    wrong_value    one argument of the first call set to a value BFCL lists nowhere → value < 1
    extra_call     the first call duplicated inside the block                → name_f1 < 1 and parallel = 0
    reordered      the calls of a parallel block reversed                    → nothing changes (both are order-free)
    serialised     the calls of a parallel block split into one block each   → parallel = 0 (BFCL cannot see blocks)

and two variants that are not errors to one of the two scorers, to show where they differ by design:

    alt_value      one argument set to BFCL's *second* acceptable value (HierR knows only one gold value)
    num_as_str     one numeric argument sent as a string, "7" for 7 (HierR's loose equality accepts it)

"HierR exact" means name_f1 = key = value = parallel = 1.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slca_verl.eval.bfcl_ast import gold_calls, load_checker  # noqa: E402
from slca_verl.rewards import HierRConfig, score_trajectory_sync  # noqa: E402

CATEGORIES = {
    "simple": "BFCL_v4_simple_python.json",
    "multiple": "BFCL_v4_multiple.json",
    "parallel": "BFCL_v4_parallel.json",
    "parallel_multiple": "BFCL_v4_parallel_multiple.json",
}
CORRUPTIONS = (
    "gold",
    "wrong_name",
    "drop_arg",
    "wrong_value",
    "extra_call",
    "reordered",
    "serialised",
    "alt_value",
    "num_as_str",
)
COMPONENTS = ("name_f1", "key", "value", "parallel")


def load_cases(data_dir: Path | None = None) -> list[dict]:
    import bfcl_eval

    root = data_dir or Path(bfcl_eval.__file__).parent / "data"
    cases = []
    for cat, fname in CATEGORIES.items():
        answers = {}
        for line in (root / "possible_answer" / fname).read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                answers[row["id"]] = row["ground_truth"]
        for line in (root / fname).read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                cases.append(
                    {"id": row["id"], "category": cat, "functions": row["function"], "possible": answers[row["id"]]}
                )
    return cases


def _required_arg(call: dict, possible_params: dict) -> str | None:
    for k in call["arguments"]:
        if "" not in possible_params.get(k, []):
            return k
    return None


def _different(value, acceptable: list):
    """A value of the same kind that is not among BFCL's acceptable values."""
    if isinstance(value, bool):
        cand = not value
    elif isinstance(value, (int, float)):
        cand = value + 7919
    elif isinstance(value, str):
        cand = value + "_corrupted"
    elif isinstance(value, list):
        cand = value + ["corrupted"]
    elif isinstance(value, dict):
        cand = {**value, "corrupted": 1}
    else:
        cand = "corrupted"
    return cand if cand not in acceptable else None


def corrupt(kind: str, calls: list[dict], possible: list[dict], functions: list[dict]):
    """(blocks, extra allowed names) for one corruption, or None when it does not apply to this case."""
    calls = copy.deepcopy(calls)
    first_params = next(iter(possible[0].values()))
    if kind == "gold":
        return [calls], []
    if kind == "wrong_name":
        others = [f["name"] for f in functions if f["name"] not in {c["name"] for c in calls}]
        new = others[0] if others else calls[0]["name"] + "_v2"
        calls[0]["name"] = new
        return [calls], [new]
    if kind == "drop_arg":
        k = _required_arg(calls[0], first_params)
        if k is None:
            return None
        del calls[0]["arguments"][k]
        return [calls], []
    if kind == "wrong_value":
        for k, v in calls[0]["arguments"].items():
            new = _different(v, first_params.get(k, []))
            if new is not None:
                calls[0]["arguments"][k] = new
                return [calls], []
        return None
    if kind == "extra_call":
        return [calls + [copy.deepcopy(calls[0])]], []
    if kind == "alt_value":
        for k, acceptable in first_params.items():
            alts = [v for v in acceptable if v != "" and v != calls[0]["arguments"].get(k, "")]
            if k in calls[0]["arguments"] and alts and not isinstance(alts[0], dict):
                calls[0]["arguments"][k] = alts[0]
                return [calls], []
        return None
    if kind == "num_as_str":
        for k, v in calls[0]["arguments"].items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                calls[0]["arguments"][k] = str(v)
                return [calls], []
        return None
    if kind in ("reordered", "serialised"):
        if len(calls) < 2:
            return None
        return ([calls[::-1]], []) if kind == "reordered" else ([[c] for c in calls], [])
    raise ValueError(kind)


def hermes(blocks: list[list[dict]]) -> str:
    return "\n".join("<tool_call>\n" + json.dumps(b[0] if len(b) == 1 else b) + "\n</tool_call>" for b in blocks)


def evaluate(max_cases: int | None = None) -> dict:
    """Score every (case, corruption) with HierR and BFCL. Returns {"rows": [...], "seconds": float}."""
    ast_checker, languages, model = load_checker()
    language = languages.PYTHON
    cases = load_cases()[:max_cases]
    cfg = HierRConfig()
    rows = []
    start = time.perf_counter()
    for case in cases:
        gold = gold_calls(case["possible"], case["functions"])
        allowed = [f["name"] for f in case["functions"]]
        for kind in CORRUPTIONS:
            variant = corrupt(kind, gold, case["possible"], case["functions"])
            if variant is None:
                continue
            blocks, extra_names = variant
            gt = {"allowed_tools": allowed + extra_names, "gold_tool_calls": [gold], "question_content": ""}
            hierr = score_trajectory_sync([hermes(blocks)], [], gt, config=cfg)
            model_output = [{c["name"]: c["arguments"]} for b in blocks for c in b]
            try:
                verdict = ast_checker(
                    case["functions"], model_output, case["possible"], language, case["category"], model
                )
                valid, error = bool(verdict["valid"]), verdict.get("error_type", "")
            except Exception as e:  # a checker crash is a BFCL rejection we want to see in the table
                valid, error = False, f"checker raised {type(e).__name__}"
            rows.append(
                {
                    "id": case["id"],
                    "category": case["category"],
                    "kind": kind,
                    "bfcl_valid": valid,
                    "bfcl_error": error,
                    **{k: hierr[k] for k in COMPONENTS + ("fmt", "r_tool")},
                    "hierr_exact": all(hierr[k] == 1.0 for k in COMPONENTS),
                }
            )
    return {"rows": rows, "cases": len(cases), "seconds": time.perf_counter() - start}


def agreement_table(rows: list[dict]) -> str:
    by = defaultdict(list)
    for r in rows:
        by[r["kind"]].append(r)
    head = (
        f"{'variant':<12} {'n':>5} {'HierR exact':>11} {'BFCL valid':>10} {'both':>5} {'HierR only':>10} "
        f"{'BFCL only':>9} {'agree':>7}   mean name/key/value/parallel"
    )
    lines = [head, "-" * len(head)]
    for kind in CORRUPTIONS:
        rs = by.get(kind, [])
        if not rs:
            continue
        h = sum(r["hierr_exact"] for r in rs)
        b = sum(r["bfcl_valid"] for r in rs)
        both = sum(r["hierr_exact"] and r["bfcl_valid"] for r in rs)
        agree = sum(r["hierr_exact"] == r["bfcl_valid"] for r in rs) / len(rs)
        means = "/".join(f"{sum(r[c] for r in rs) / len(rs):.3f}" for c in COMPONENTS)
        lines.append(
            f"{kind:<12} {len(rs):>5} {h:>11} {b:>10} {both:>5} {h - both:>10} {b - both:>9} {agree:>7.1%}   {means}"
        )
    return "\n".join(lines)


def disagreements(rows: list[dict], limit: int = 3) -> str:
    out = defaultdict(list)
    for r in rows:
        if r["hierr_exact"] != r["bfcl_valid"]:
            side = "HierR exact, BFCL rejects" if r["hierr_exact"] else "BFCL valid, HierR not exact"
            out[(r["kind"], side, r["bfcl_error"])].append(r["id"])
    lines = []
    for (kind, side, err), ids in sorted(out.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {kind:<11} {side:<28} x{len(ids):<4} bfcl_error={err or '-'}  e.g. {', '.join(ids[:limit])}")
    return "\n".join(lines) or "  none"


def main() -> None:
    result = evaluate()
    print(
        f"BFCL cases: {result['cases']} (simple_python, multiple, parallel, parallel_multiple); "
        f"{len(result['rows'])} scored variants in {result['seconds']:.1f} s\n"
    )
    print(agreement_table(result["rows"]))
    print("\nDisagreements (variant, which side, BFCL's error type):")
    print(disagreements(result["rows"]))


if __name__ == "__main__":
    main()
