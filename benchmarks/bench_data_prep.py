"""Benchmark: convert N synthetic xLAM-format rows to verl parquet (the issue's target: 60,000 in under 30 s).

    python benchmarks/bench_data_prep.py [--rows 60000] [--tools 3000] [--seed 0]

The rows mimic xLAM-function-calling-60k: python-style parameter types ("List[int]", "str, optional",
"Tuple[float, float]", "Dict[str, Any]"), 1-5 tools per query drawn from a pool of distinct APIs (the real set
has ~3,600), 1-3 parallel answers whose arguments fit their schema. Times the whole CLI path after reading
(conversion, schema checks, gold validation, dedup, split, parquet + report writing) and prints rows/s.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import tempfile
import time

from data_prep import xlam
from data_prep.pipeline import Options, run

TYPES = [
    ("str", lambda r: f"value-{r.randint(0, 999)}"),
    ("int", lambda r: r.randint(0, 100)),
    ("float", lambda r: round(r.random() * 100, 3)),
    ("bool", lambda r: r.random() < 0.5),
    ("List[int]", lambda r: [r.randint(0, 9) for _ in range(r.randint(1, 4))]),
    ("List[str]", lambda r: [f"s{r.randint(0, 9)}" for _ in range(r.randint(1, 3))]),
    ("Tuple[float, float]", lambda r: [r.random(), r.random()]),
    ("Dict[str, Any]", lambda r: {"k": r.randint(0, 5)}),
]


def make_tool_pool(n: int, rng: random.Random) -> list[tuple[dict, list]]:
    pool = []
    for t in range(n):
        params, makers = {}, []
        for p in range(rng.randint(1, 5)):
            type_name, maker = rng.choice(TYPES)
            optional = p > 0 and rng.random() < 0.4
            params[f"p{p}"] = {
                "type": type_name + (", optional" if optional else ""),
                "description": f"Parameter {p} of api {t}.",
            }
            if optional and rng.random() < 0.5:
                params[f"p{p}"]["default"] = None
            makers.append((f"p{p}", maker, optional))
        pool.append(({"name": f"api_{t}", "description": f"Synthetic API number {t}.", "parameters": params}, makers))
    return pool


def make_rows(n_rows: int, n_tools: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    pool = make_tool_pool(n_tools, rng)
    rows = []
    for i in range(n_rows):
        chosen = rng.sample(pool, rng.randint(1, 5))
        answers = []
        for tool, makers in chosen[: rng.randint(1, min(3, len(chosen)))]:
            args = {name: maker(rng) for name, maker, optional in makers if not optional or rng.random() < 0.5}
            answers.append({"name": tool["name"], "arguments": args})
        rows.append(
            {
                "id": i,
                "query": f"Synthetic request {i}: please call {answers[0]['name']} for me.",
                "tools": json.dumps([t for t, _ in chosen]),
                "answers": json.dumps(answers),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=60_000)
    ap.add_argument("--tools", type=int, default=3_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    records = make_rows(args.rows, args.tools, args.seed)
    with tempfile.TemporaryDirectory() as out:
        opts = Options(output_dir=out, name="xlam", seed=args.seed, val_ratio=0.02, progress=False)
        start = time.perf_counter()
        report = run("xlam", "<synthetic>", records, xlam.convert_record, opts)
        elapsed = time.perf_counter() - start
        size_mb = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)) / 2**20
    print(
        json.dumps(
            {
                "rows_in": report.rows_in,
                "rows_written": report.rows_written,
                "rows_rejected": report.rows_rejected,
                "rejected_by_reason": dict(report.rejected),
                "seconds": round(elapsed, 2),
                "rows_per_s": round(args.rows / elapsed),
                "output_mb": round(size_mb, 1),
                "cpus": os.cpu_count(),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
