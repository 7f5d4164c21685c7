"""Benchmark: convert N generated raw-Toucan-1.5M trajectories (parquet shards) with ``python -m data_prep.toucan_raw``.

    python benchmarks/bench_toucan_raw.py [--trajectories 100000] [--shards 8] [--servers 500] [--seed 0]

The shards have the upstream columns (``uuid, subset_name, messages, question, available_tools, target_tools,
question_quality_assessment, response_quality_assessment, metadata``, JSON strings) and message layout: a system
tool declaration, reasoning-only assistant messages, one ``function_call`` per assistant message (parallel calls
consecutive), ``function`` results, a final answer. Subsets: 45% single-turn-original, 15% single-turn-diversify,
20% multi-turn (2-3 user turns), 20% irrelevant; each trajectory offers the 2-6 tools of one of ``--servers``
servers, with 1-3 steps of 1-3 calls. The conversion runs in a child process that reports its own peak RSS
(``VmHWM`` of ``/proc/self/status``, which starts afresh at exec; ``ru_maxrss`` would also count the pages the
child inherited from this generating process before exec). The shards are generated one at a time beforehand.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import describe  # noqa: E402

#: the conversion child: ``python -m data_prep.toucan_raw`` plus a line with its own peak RSS
CONVERT = (
    "import sys\nfrom data_prep import toucan_raw\ntoucan_raw.main(sys.argv[1:])\n"
    "print(next(line for line in open('/proc/self/status') if line.startswith('VmHWM')))"
)
SUBSETS = [("single-turn-original", 0.45), ("single-turn-diversify", 0.15), ("multi-turn", 0.20), ("irrelevant", 0.20)]
TYPES = [
    ("string", lambda r: f"value {r.randint(0, 999)}"),
    ("integer", lambda r: r.randint(0, 100)),
    ("number", lambda r: round(r.random() * 100, 2)),
    ("boolean", lambda r: r.random() < 0.5),
]


def make_servers(n: int, rng: random.Random) -> list[list[tuple[dict, list]]]:
    servers = []
    for s in range(n):
        tools = []
        for t in range(rng.randint(2, 6)):
            props, makers, required = {}, [], []
            for p in range(rng.randint(1, 4)):
                type_name, maker = rng.choice(TYPES)
                props[f"p{p}"] = {"type": type_name, "description": f"Parameter {p} of tool {t} on server {s}."}
                makers.append((f"p{p}", maker))
                if p == 0 or rng.random() < 0.5:
                    required.append(f"p{p}")
            schema = {
                "type": "object",
                "properties": props,
                "required": required,
                "additionalProperties": False,
                "$schema": "http://json-schema.org/draft-07/schema#",
            }
            tool = {
                "type": "function",
                "function": {
                    "name": f"server{s}-tool_{t}",
                    "description": f"Tool {t} of MCP server {s}: " + "does things. " * 8,
                    "parameters": schema,
                },
            }
            tools.append((tool, makers))
        servers.append(tools)
    return servers


def _call(rng, tool, makers):
    args = {name: maker(rng) for name, maker in makers}
    return {
        "role": "assistant",
        "content": "",
        "function_call": {
            "name": tool["function"]["name"],
            "arguments": json.dumps(args),
            "call_id": f"call_{rng.getrandbits(32):x}",
        },
    }


def _answer_turn(rng, tools, irrelevant):
    msgs = [{"role": "assistant", "content": "", "reasoning_content": "I should look at the tools. " * 10}]
    if not irrelevant:
        for _ in range(rng.randint(1, 3)):
            width = rng.choice([1, 1, 1, 2, 3])
            calls = [_call(rng, *rng.choice(tools)) for _ in range(width)]
            msgs += calls + [
                {
                    "role": "function",
                    "name": c["function_call"]["name"],
                    "content": json.dumps({"result": "ok " * rng.randint(5, 60)}),
                }
                for c in calls
            ]
    msgs.append({"role": "assistant", "content": "Here is what I found. " * rng.randint(5, 30)})
    return msgs


def make_trajectory(i: int, rng: random.Random, servers) -> dict:
    subset = rng.choices([s for s, _ in SUBSETS], [w for _, w in SUBSETS])[0]
    tools = rng.choice(servers)
    listing = [t for t, _ in tools]
    messages = [{"role": "system", "content": "<|im_system|>tool_declare<|im_middle|>" + json.dumps(listing)}]
    turns = rng.randint(2, 3) if subset == "multi-turn" else 1
    for k in range(turns):
        messages.append({"role": "user", "content": f"Request {i}.{k}: please help with task {rng.randint(0, 10**9)}."})
        messages += _answer_turn(rng, tools, subset == "irrelevant" or (k > 0 and rng.random() < 0.3))
    rating = lambda: {"reasoning": "Assessed. " * 20, "score": rng.randint(2, 5)}  # noqa: E731
    return {
        "uuid": str(uuidlib.UUID(int=rng.getrandbits(128))),
        "subset_name": subset,
        "messages": json.dumps(messages),
        "question": messages[1]["content"],
        "available_tools": json.dumps(listing),
        "target_tools": ", ".join(t["function"]["name"] for t in listing[:2]),
        "question_quality_assessment": json.dumps(
            {
                d: rating()
                for d in (
                    "tool_selection_difficulty",
                    "tool_selection_uniqueness",
                    "question_quality",
                    "scenario_realism",
                    "verifiable",
                    "stability",
                )
            }
        ),
        "response_quality_assessment": json.dumps(
            {
                "completeness": rating(),
                "conciseness": rating(),
                "desired_tools_used_percentage": 1.0,
                "order_correctness": True,
            }
        ),
        "metadata": json.dumps(
            {
                "mcp_servers": [{"server_name": "server", "remote_server_response": {"tools": listing}}],
                "notes": "x" * 2000,
            }
        ),
    }


def write_shards(folder: str, n: int, shards: int, n_servers: int, seed: int) -> None:
    rng = random.Random(seed)
    servers = make_servers(n_servers, rng)
    per = -(-n // shards)
    for s in range(shards):
        rows = [make_trajectory(i, rng, servers) for i in range(s * per, min(n, (s + 1) * per))]
        pq.write_table(pa.Table.from_pylist(rows), os.path.join(folder, f"train-{s:05d}-of-{shards:05d}.parquet"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trajectories", type=int, default=100_000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--servers", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="options passed on to data_prep.toucan_raw")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        shards, out = os.path.join(tmp, "Toucan-1.5M"), os.path.join(tmp, "out")
        os.makedirs(shards)
        t0 = time.perf_counter()
        write_shards(shards, args.trajectories, args.shards, args.servers, args.seed)
        generated = time.perf_counter() - t0
        input_mb = sum(os.path.getsize(os.path.join(shards, f)) for f in os.listdir(shards)) / 2**20
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        t0 = time.perf_counter()
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                CONVERT,
                "--input",
                shards,
                "--output_dir",
                out,
                "--quiet",
                "--val_ratio",
                "0.02",
                *args.extra,
            ],
            check=True,
            cwd=repo,
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - t0
        peak_mb = int(child.stdout.split("VmHWM:")[-1].split()[0]) / 1024  # kB
        with open(os.path.join(out, "toucan_raw_report.json")) as f:
            report = json.load(f)
        output_mb = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)) / 2**20
    print(describe())
    print(
        json.dumps(
            {
                "trajectories": report["records_in"],
                "rows_in": report["rows_in"],
                "rows_written": report["rows_written"],
                "rows_rejected": report["rows_rejected"],
                "rejected_by_reason": report["rejected_by_reason"],
                "written_by_subset": report["written_by_subset"],
                "seconds": round(elapsed, 1),
                "trajectories_per_s": round(report["records_in"] / elapsed),
                "rows_per_s": round(report["rows_in"] / elapsed),
                "peak_rss_mb": round(peak_mb),
                "input_mb": round(input_mb, 1),
                "output_mb": round(output_mb, 1),
                "generation_s": round(generated, 1),
                "load_avg": [round(x, 2) for x in os.getloadavg()],
                "cpus": os.cpu_count(),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
