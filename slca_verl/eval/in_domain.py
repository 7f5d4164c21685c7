"""In-domain evaluation: Success@tau, tool accuracy, abstention, Name-F1, ArgMatch and Process of a checkpoint's
replies on the eval parquet, per data source, beside the numbers verl's own validation logged.

Two inputs are accepted:

1. verl's own validation dump (``trainer.val_only=true trainer.validation_data_dir=DIR`` writes ``DIR/<step>.jsonl``
   with ``output``, ``gts``, ``score`` and every HierR key of the reward), which ``recipes/eval_in_domain.sh``
   produces; the rows are aggregated as they are. verl does not write a row's data source into the dump: with
   ``--eval_parquet`` each row is matched to its parquet row by its ground truth (question and gold calls), which
   fills the per-source breakdown;
2. a predictions JSONL of ``{"index": i, "response": "<decoded multi-turn response>"}`` plus ``--eval_parquet``; each
   reply is scored here with HierR (:func:`slca_verl.rewards.compute_score`, judge from the ``--judge*`` flags).

    python -m slca_verl.eval.in_domain --predictions DIR/0.jsonl --eval_parquet VAL.parquet \
        --metrics RUN/metrics.jsonl --out_dir eval/qwen7b_slca
    python -m slca_verl.eval.in_domain --predictions preds.jsonl --eval_parquet data/toucan/toucan_test.parquet \
        --judge llm --judge_base_urls http://127.0.0.1:8016/v1 --judge_model gpt-oss-120b --out_dir eval/x

Success of a row is what the row asks for (docs/eval.md, "In-domain"):
    a row with gold calls       r_tool >= tau, and, when the judge rated its reply, a rating >= ``--min_rating``
                                (3, "acceptable", of the judge's 1..5)
    a row without gold calls    no call and no broken call attempt (``num_calls == 0`` and ``format_valid``): the
                                row asks for a direct reply, and verl's abstention counts the same thing
    a row whose gold cannot be read (``gold_invalid``) is left out and counted

Metrics (means over rows, in %):
    Success@tau  the rule above; the headline is tau = 0.9
    Tool acc     ToolPO's strict success (``toolpo_success``) over the rows with gold calls: every gold call right,
                 nothing extra -- what verl's validation logs as ``val-aux/<source>/toolpo_success``
    Abstention   rows without gold calls answered without a call
    Judged replies OK  the rows whose reply the judge rated, rated ``--min_rating`` or better ("—": none rated)
    Name-F1      HierR ``name_f1``: multiset F1 of predicted vs gold tool names (every row)
    ArgMatch     HierR ``value``: loosely-equal argument values / gold arguments (greedy call matching)
    Process      HierR ``r_tool``: the execution reward (format, names, keys, values, parallel)
    Score@tau    the authors' rule, 1[score / (w_tool + w_sum) >= tau], for a comparison with the paper's figures
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import re
import sys
from collections import defaultdict
from typing import Any, Sequence

from slca_verl.eval.report import markdown_table, read_jsonl, write_report
from slca_verl.progress import cli_logging
from slca_verl.toolcall.rows import plain

logger = logging.getLogger(__name__)

TAUS = (0.7, 0.8, 0.9, 1.0)
ACCEPTABLE = 3  # the judge's rubric: 1 very poor, 2 poor, 3 acceptable, 4 good, 5 excellent
REQUIRED_KEYS = (
    "score",
    "r_tool",
    "name_f1",
    "value",
    "num_gold_calls",
    "num_calls",
    "format_valid",
    "judge_used",
    "judge_rating",
)


def _check_rows(rows: Sequence[dict]) -> None:
    if not rows:
        raise ValueError("in_domain: no rows to score")
    for i, r in enumerate(rows):
        missing = [k for k in REQUIRED_KEYS if k not in r or r[k] is None]
        if missing:
            raise ValueError(f"in_domain: row {i} lacks HierR keys {missing}; score it first (pass --eval_parquet)")
        if not all(math.isfinite(float(r[k])) for k in REQUIRED_KEYS):
            raise ValueError(f"in_domain: row {i} has a non-finite HierR value")


def reply_acceptable(row: dict, min_rating: int = ACCEPTABLE) -> bool:
    """True when the judge did not rate the row's reply, or rated it ``min_rating`` or better (a failed judgment
    has rating 0: not acceptable)."""
    return not int(row["judge_used"]) or int(row["judge_rating"]) >= min_rating


def answered_directly(row: dict) -> bool:
    """No call that parsed and no broken call attempt (an unbalanced or unreadable block makes ``format_valid`` 0)."""
    return int(row["num_calls"]) == 0 and bool(int(row["format_valid"]))


def row_success(row: dict, tau: float, min_rating: int = ACCEPTABLE) -> bool:
    """Success of one HierR row at threshold ``tau``: what the row asks for, done (module docstring)."""
    if int(row["num_gold_calls"]) > 0:
        return float(row["r_tool"]) >= tau - 1e-9 and reply_acceptable(row, min_rating)
    return answered_directly(row)


def summarise(
    rows: Sequence[dict], taus: Sequence[float] = TAUS, w_total: float = 2.0, min_rating: int = ACCEPTABLE
) -> dict:
    """Aggregate HierR rows into the in-domain metrics (percentages; ``None`` where no row of the kind exists).

    Args:
        rows: dicts carrying HierR's keys (:data:`REQUIRED_KEYS`; ``toolpo_success``, ``r_sum`` and
            ``gold_invalid`` are used when present).
        taus: success thresholds.
        w_total: w_tool + w_sum of the reward that produced ``score`` (the authors' rule only).
        min_rating: the judge's lowest rating that counts as an acceptable reply.

    Raises:
        ValueError: no rows, a row without the HierR keys, or a non-finite value.
    """
    _check_rows(rows)
    invalid = [r for r in rows if int(r.get("gold_invalid") or 0)]
    rows = [r for r in rows if not int(r.get("gold_invalid") or 0)]
    if not rows:
        raise ValueError(f"in_domain: all {len(invalid)} rows have unreadable gold (gold_invalid)")
    n = len(rows)
    tool = [r for r in rows if int(r["num_gold_calls"]) > 0]
    direct = [r for r in rows if int(r["num_gold_calls"]) == 0]
    judged = [r for r in rows if int(r["judge_used"])]

    def pct(values: Sequence[float]) -> float | None:
        return 100.0 * sum(values) / len(values) if values else None

    def mean(key: str) -> float:
        return pct([float(r[key]) for r in rows])

    out: dict[str, Any] = {"n": n, "n_tool": len(tool), "n_direct": len(direct), "n_gold_invalid": len(invalid)}
    for tau in taus:
        out[f"success@{tau:g}"] = pct([row_success(r, tau, min_rating) for r in rows])
    out["tool_accuracy"] = (
        pct([float(r["toolpo_success"]) for r in tool]) if tool and all("toolpo_success" in r for r in tool) else None
    )
    out["abstention"] = pct([answered_directly(r) for r in direct])
    out.update(name_f1=mean("name_f1"), arg_match=mean("value"), process=mean("r_tool"))
    out["judged"] = pct([1.0] * len(judged) + [0.0] * (n - len(judged)))
    out["reply_acceptable"] = pct([reply_acceptable(r, min_rating) for r in judged])
    for tau in taus:
        out[f"score@{tau:g}"] = pct([float(r["score"]) / w_total >= tau - 1e-9 for r in rows])
    # a row with gold calls that passed on r_tool with no judged reply (judge off, or no reply to judge)
    out["tool_success_unjudged@0.9"] = sum(row_success(r, 0.9, min_rating) and not int(r["judge_used"]) for r in tool)
    if all("r_sum" in r for r in rows):
        out["preference"] = mean("r_sum")
    out["format_valid"] = mean("format_valid")
    return out


def gold_key(ground_truth: Any) -> str:
    """The key a validation row is matched to its parquet row by: the question and the gold calls."""
    gt = plain(ground_truth, json_text="containers")  # the gold calls come back as JSON text or decoded
    if not isinstance(gt, dict):
        return json.dumps(gt, sort_keys=True, default=str)
    return json.dumps([gt.get("question_content"), gt.get("gold_tool_calls")], sort_keys=True, default=str)


def attach_sources(rows: Sequence[dict], parquet_rows: Sequence[dict]) -> list[dict]:
    """``rows`` (verl's validation dump) with ``data_source`` taken from the eval parquet row of the same ground truth
    (``gts`` in the dump). A row without a match is ``unmatched``; a ground truth shared by rows of several sources
    is ``ambiguous``; both are logged."""
    sources: dict[str, set[str]] = defaultdict(set)
    for p in parquet_rows:
        sources[gold_key((p.get("reward_model") or {}).get("ground_truth"))].add(str(p.get("data_source", "")))
    out, misses = [], defaultdict(int)
    for r in rows:
        if r.get("data_source") not in (None, ""):
            out.append(r)
            continue
        found = sources.get(gold_key(r.get("gts")), set())
        src = next(iter(found)) if len(found) == 1 else ("ambiguous" if found else "unmatched")
        if len(found) != 1:
            misses[src] += 1
        out.append({**r, "data_source": src})
    for what, k in misses.items():
        logger.warning("in_domain: %d row(s) %s against the eval parquet by their ground truth", k, what)
    return out


def by_source(rows: Sequence[dict], **kw) -> dict[str, dict]:
    """Per ``data_source``; ``{}`` when some row has none (a verl dump scored without ``--eval_parquet``)."""
    if any(r.get("data_source") in (None, "") for r in rows):
        return {}
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[str(r["data_source"])].append(r)
    return {k: summarise(v, **kw) for k, v in sorted(groups.items())}


_VAL_KEY = re.compile(r"^val-aux/(?P<source>[^/]+)/(?P<metric>toolpo_success|num_gold_calls)/mean@(?P<n>\d+)$")


def verl_validation(metrics_path: str) -> dict | None:
    """What verl's own validation logged (the file logger's JSONL): per data source, ``toolpo_success`` (in %) and
    whether it is tool accuracy (the source's rows have gold calls) or abstention (none has), from the last record
    with validation keys. ``None`` when the file has none."""
    last = None
    for rec in read_jsonl(metrics_path):
        data = rec.get("data", {})
        if any(_VAL_KEY.match(k) for k in data):
            last = rec
    if last is None:
        return None
    per: dict[str, dict] = defaultdict(dict)
    for key, value in last["data"].items():
        m = _VAL_KEY.match(key)
        if m:
            per[m["source"]][m["metric"]] = float(value)
            per[m["source"]]["key"] = f"val-aux/{m['source']}/toolpo_success/mean@{m['n']}"
    sources = {}
    for src, v in sorted(per.items()):
        if "toolpo_success" not in v:
            continue
        kind = "abstention" if v.get("num_gold_calls", 1.0) == 0 else "tool accuracy"
        sources[src] = {"what": kind, "value": 100.0 * v["toolpo_success"], "key": v["key"]}
    return {"metrics": metrics_path, "step": int(last.get("step", 0)), "by_data_source": sources}


async def score_predictions(
    predictions: Sequence[dict], parquet_rows: Sequence[dict], reward_kwargs: dict, concurrency: int = 32
) -> list[dict]:
    """HierR for each ``{"index", "response"}`` against row ``index`` of the eval parquet."""
    from slca_verl.rewards import compute_score

    sem = asyncio.Semaphore(concurrency)

    async def one(p: dict) -> dict:
        row = parquet_rows[int(p["index"])]
        async with sem:
            out = await compute_score(
                row.get("data_source", ""),
                p["response"],
                row["reward_model"]["ground_truth"],
                row.get("extra_info"),
                **reward_kwargs,
            )
        return {**out, "index": int(p["index"]), "data_source": row.get("data_source", "")}

    return list(await asyncio.gather(*(one(p) for p in predictions)))


def _cell(v: Any) -> Any:
    return "—" if v is None else v


def table(result: dict) -> str:
    """``in_domain.md``: the per-set table, the rule in one paragraph, and verl's own validation numbers."""
    metrics = result["overall"]
    succ = [k for k in metrics if k.startswith("success@")]
    cols = [*succ, "tool_accuracy", "abstention", "reply_acceptable", "name_f1", "arg_match", "process"]
    names = {
        "tool_accuracy": "Tool acc",
        "abstention": "Abstention",
        "reply_acceptable": "Judged replies OK",
        "name_f1": "Name-F1",
        "arg_match": "ArgMatch",
        "process": "Process",
    }
    header = ["set", "n", "with calls", "direct", *[names.get(c, c.replace("success@", "Success@")) for c in cols]]
    sets = [("all", metrics), *result.get("by_data_source", {}).items()]
    text = markdown_table(
        header, [[k, v["n"], v["n_tool"], v["n_direct"], *[_cell(v[c]) for c in cols]] for k, v in sets]
    )
    rule = result.get("rule", {})
    text += (
        f"\nSuccess@τ: a row with gold calls succeeds when r_tool ≥ τ, a row without gold calls when the policy "
        f"made no call; either way, when the judge rated the reply, only with a rating ≥ "
        f"{rule.get('min_rating', ACCEPTABLE)} of 5 ({metrics['judged']:.2f} % of the rows were rated, "
        f"{_pct_text(metrics['reply_acceptable'])} of those acceptable). The authors' rule, normalised score ≥ τ "
        f"(the paper's Success@τ): Score@0.9 = {_pct_text(metrics.get('score@0.9'))}."
    )
    if metrics.get("n_gold_invalid"):
        text += f" {metrics['n_gold_invalid']} row(s) with unreadable gold left out."
    if result.get("by_data_source_note"):
        text += f" {result['by_data_source_note']}"
    text += "\n"
    verl = result.get("verl_validation")
    if verl:
        rows = []
        for src, v in verl["by_data_source"].items():
            ours = result.get("by_data_source", {}).get(src, {})
            mine = ours.get("tool_accuracy" if v["what"] == "tool accuracy" else "abstention")
            rows.append([src, v["what"], v["value"], _cell(mine), f"`{v['key']}`"])
        text += (
            f"\nverl's own validation ({verl['metrics']}, step {verl['step']}), beside the same numbers from the "
            "rows above:\n\n"
        )
        text += markdown_table(["data source", "what", "verl", "this report", "verl's key"], rows)
    return text


def _pct_text(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f} %"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--predictions", required=True, help="verl validation dump or {index, response} JSONL")
    p.add_argument(
        "--eval_parquet",
        default=None,
        help="the held-out rows: needed when the predictions are not yet scored; for a verl dump, it "
        "gives each row its data source",
    )
    p.add_argument("--metrics", default=None, help="verl's file-logger JSONL of the validation run (val-aux/* keys)")
    p.add_argument("--out_dir", required=True)
    p.add_argument("--taus", default=",".join(f"{t:g}" for t in TAUS))
    p.add_argument(
        "--min_rating",
        type=int,
        default=ACCEPTABLE,
        help="the judge's lowest rating (1..5) that counts as an acceptable reply; 0: ignore the judge",
    )
    p.add_argument("--judge", default=None, help="llm | offline_proxy | none (HierR's reward_kwargs)")
    p.add_argument("--judge_base_urls", default=None, help="comma-separated")
    p.add_argument("--judge_model", default=None)
    p.add_argument("--w_tool", type=float, default=1.0)
    p.add_argument("--w_sum", type=float, default=1.0)
    args = p.parse_args(argv)
    cli_logging()

    preds = read_jsonl(args.predictions)
    parquet_rows = None
    if args.eval_parquet:
        import pandas as pd

        parquet_rows = pd.read_parquet(args.eval_parquet).to_dict("records")
    if preds and all(k in preds[0] for k in REQUIRED_KEYS):
        rows, source = preds, "verl validation dump"
        if parquet_rows is not None:
            rows = attach_sources(rows, parquet_rows)
    else:
        if parquet_rows is None:
            logger.error("%s is not scored (no HierR keys); pass --eval_parquet", args.predictions)
            return 1
        kwargs: dict[str, Any] = {"w_tool": args.w_tool, "w_sum": args.w_sum}
        if args.judge:
            kwargs["judge"] = args.judge
        if args.judge_base_urls:
            kwargs["judge_base_urls"] = args.judge_base_urls.split(",")
        if args.judge_model:
            kwargs["judge_model"] = args.judge_model
        rows, source = asyncio.run(score_predictions(preds, parquet_rows, kwargs)), "scored here with HierR"
    taus = [float(t) for t in args.taus.split(",")]
    kw = {"taus": taus, "w_total": args.w_tool + args.w_sum, "min_rating": args.min_rating}
    result: dict[str, Any] = {
        "source": source,
        "predictions": args.predictions,
        "eval_parquet": args.eval_parquet,
        "taus": taus,
        "rule": {"min_rating": args.min_rating, "w_total": kw["w_total"]},
        "overall": summarise(rows, **kw),
        "by_data_source": by_source(rows, **kw),
    }
    if not result["by_data_source"]:
        result["by_data_source_note"] = "No per-source breakdown: verl's dump has no data source; pass --eval_parquet."
    if args.metrics:
        if os.path.exists(args.metrics):
            result["verl_validation"] = verl_validation(args.metrics)
        else:
            logger.warning("in_domain: --metrics %s does not exist; verl's validation numbers left out", args.metrics)
    json_path, md_path = write_report(args.out_dir, "in_domain", result, table(result))
    logger.info("in-domain (%s, n=%d): %s -> %s, %s", source, len(rows), result["overall"], json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
