"""In-domain evaluation: Name-F1, ArgMatch, Process and Success@tau of a checkpoint's replies on the eval parquet.

Two inputs are accepted:

1. verl's own validation dump (``trainer.val_only=true trainer.validation_data_dir=DIR`` writes ``DIR/<step>.jsonl``
   with ``output``, ``score`` and every HierR key of the reward), which ``recipes/eval_in_domain.sh`` produces; the
   rows are aggregated as they are;
2. a predictions JSONL of ``{"index": i, "response": "<decoded multi-turn response>"}`` plus ``--eval_parquet``; each
   reply is scored here with HierR (:func:`slca_verl.rewards.compute_score`, judge from the ``--judge*`` flags).

    python -m slca_verl.eval.in_domain --predictions DIR/0.jsonl --out_dir eval/qwen7b_slca
    python -m slca_verl.eval.in_domain --predictions preds.jsonl --eval_parquet data/toucan/toucan_test.parquet \
        --judge llm --judge_base_urls http://127.0.0.1:8016/v1 --judge_model gpt-oss-120b --out_dir eval/x

Metrics (means over rows, in %):
    Name-F1     HierR ``name_f1``: multiset F1 of predicted vs gold tool names
    ArgMatch    HierR ``value``: loosely-equal argument values / gold arguments (greedy call matching)
    Process     HierR ``r_tool``: the execution reward (format, names, keys, values, parallel)
    Success@tau 1[score / (w_tool + w_sum) >= tau]; the paper's headline is tau = 0.9
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import sys
from collections import defaultdict
from typing import Any, Sequence

from slca_verl.eval.report import markdown_table, read_jsonl, write_report

logger = logging.getLogger(__name__)

TAUS = (0.7, 0.8, 0.9, 1.0)
REQUIRED_KEYS = ("score", "r_tool", "name_f1", "value")


def summarise(rows: Sequence[dict], taus: Sequence[float] = TAUS, w_total: float = 2.0) -> dict:
    """Aggregate HierR rows into the in-domain metrics (percentages).

    Args:
        rows: dicts carrying at least ``score``, ``r_tool``, ``name_f1`` and ``value`` (HierR's keys).
        taus: success thresholds on the normalised score.
        w_total: w_tool + w_sum of the reward that produced ``score``.

    Raises:
        ValueError: no rows, a row without the HierR keys, or a non-finite value.
    """
    if not rows:
        raise ValueError("in_domain: no rows to score")
    for i, r in enumerate(rows):
        missing = [k for k in REQUIRED_KEYS if k not in r]
        if missing:
            raise ValueError(f"in_domain: row {i} lacks HierR keys {missing}; score it first (pass --eval_parquet)")
        if not all(math.isfinite(float(r[k])) for k in REQUIRED_KEYS):
            raise ValueError(f"in_domain: row {i} has a non-finite HierR value")
    n = len(rows)

    def mean(key: str) -> float:
        return 100.0 * sum(float(r[key]) for r in rows) / n

    out = {"n": n, "name_f1": mean("name_f1"), "arg_match": mean("value"), "process": mean("r_tool")}
    for tau in taus:
        out[f"success@{tau:g}"] = 100.0 * sum(float(r["score"]) / w_total >= tau - 1e-9 for r in rows) / n
    if all("r_sum" in r for r in rows):
        out["preference"] = mean("r_sum")
    if all("format_valid" in r for r in rows):
        out["format_valid"] = mean("format_valid")
    return out


def by_source(rows: Sequence[dict], **kw) -> dict[str, dict]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[str(r.get("data_source", "all"))].append(r)
    return {k: summarise(v, **kw) for k, v in sorted(groups.items())} if len(groups) > 1 else {}


async def score_predictions(predictions: Sequence[dict], parquet_rows: Sequence[dict], reward_kwargs: dict,
                            concurrency: int = 32) -> list[dict]:  # fmt: skip
    """HierR for each ``{"index", "response"}`` against row ``index`` of the eval parquet."""
    from slca_verl.rewards import compute_score

    sem = asyncio.Semaphore(concurrency)

    async def one(p: dict) -> dict:
        row = parquet_rows[int(p["index"])]
        async with sem:
            out = await compute_score(row.get("data_source", ""), p["response"], row["reward_model"]["ground_truth"],
                                      row.get("extra_info"), **reward_kwargs)  # fmt: skip
        return {**out, "index": int(p["index"]), "data_source": row.get("data_source", "")}

    return list(await asyncio.gather(*(one(p) for p in predictions)))


def table(result: dict) -> str:
    metrics = result["overall"]
    cols = ["name_f1", "arg_match", "process", *[k for k in metrics if k.startswith("success@")]]
    names = {"name_f1": "Name-F1", "arg_match": "ArgMatch", "process": "Process"}
    header = ["set", "n", *[names.get(c, c.replace("success@", "Success@")) for c in cols]]
    rows = [["all", metrics["n"], *[metrics[c] for c in cols]]]
    rows += [[k, v["n"], *[v[c] for c in cols]] for k, v in result.get("by_data_source", {}).items()]
    return markdown_table(header, rows)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--predictions", required=True, help="verl validation dump or {index, response} JSONL")
    p.add_argument("--eval_parquet", default=None, help="needed when the predictions are not yet scored")
    p.add_argument("--out_dir", required=True)
    p.add_argument("--taus", default=",".join(f"{t:g}" for t in TAUS))
    p.add_argument("--judge", default=None, help="llm | offline_proxy | none (HierR's reward_kwargs)")
    p.add_argument("--judge_base_urls", default=None, help="comma-separated")
    p.add_argument("--judge_model", default=None)
    p.add_argument("--w_tool", type=float, default=1.0)
    p.add_argument("--w_sum", type=float, default=1.0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    preds = read_jsonl(args.predictions)
    if preds and all(k in preds[0] for k in REQUIRED_KEYS):
        rows, source = preds, "verl validation dump"
    else:
        if not args.eval_parquet:
            logger.error("%s is not scored (no HierR keys); pass --eval_parquet", args.predictions)
            return 1
        import pandas as pd

        parquet_rows = pd.read_parquet(args.eval_parquet).to_dict("records")
        kwargs: dict[str, Any] = {"w_tool": args.w_tool, "w_sum": args.w_sum}
        if args.judge:
            kwargs["judge"] = args.judge
        if args.judge_base_urls:
            kwargs["judge_base_urls"] = args.judge_base_urls.split(",")
        if args.judge_model:
            kwargs["judge_model"] = args.judge_model
        rows, source = asyncio.run(score_predictions(preds, parquet_rows, kwargs)), "scored here with HierR"
    taus = [float(t) for t in args.taus.split(",")]
    w_total = args.w_tool + args.w_sum
    result = {
        "source": source,
        "predictions": args.predictions,
        "taus": taus,
        "overall": summarise(rows, taus, w_total),
        "by_data_source": by_source(rows, taus=taus, w_total=w_total),
    }
    json_path, md_path = write_report(args.out_dir, "in_domain", result, table(result))
    logger.info("in-domain (%s, n=%d): %s -> %s, %s", source, len(rows), result["overall"], json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
