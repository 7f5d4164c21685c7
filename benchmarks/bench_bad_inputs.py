"""Worst-case times of the bounded-time defences against bad inputs (issue 14): each case builds one adversarial
input of a stated size and times the public entry point on it (best of ``--repeats``). These are bounds to record
in docs/bad_inputs.md, not tests: a test only checks what the entry point returns.

    python benchmarks/bench_bad_inputs.py                 # every case
    python benchmarks/bench_bad_inputs.py --only hierr    # the cases whose area starts with "hierr"

Prints the machine, then one row per case: area, case, input size, best seconds. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import describe  # noqa: E402

# A case is (area, name, size, make): ``make()`` builds the input and returns a zero-argument callable to time.
Case = tuple[str, str, str, Callable[[], Callable[[], object]]]
CASES: list[Case] = []


def case(area: str, name: str, size: str):
    def register(make: Callable[[], Callable[[], object]]):
        CASES.append((area, name, size, make))
        return make

    return register


# ---------------------------------------------------------------------------------------------------------------
# rewards (HierR, parsing)
# ---------------------------------------------------------------------------------------------------------------


def _hierr(assistant: list[str], gt: dict):
    import asyncio

    from slca_verl.rewards import score_trajectory

    return lambda: asyncio.run(score_trajectory(assistant, ['{"ok": true}'], gt))


_GT = {"gold_tool_calls": [[{"name": "get_weather", "arguments": {"city": "Paris"}}]], "question_content": "Weather?"}


@case("hierr", "20k distinct call names in one block, no allowed_tools", "20,000 calls")
def _many_names():
    calls = [{"name": f"tool_{i}", "arguments": {"k": i}} for i in range(20_000)]
    return _hierr(["<tool_call>" + json.dumps(calls) + "</tool_call>", "Done, here is the answer."], _GT)


@case("hierr", "20k <tool_call> blocks in one turn", "20,000 blocks")
def _many_blocks():
    one = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    return _hierr([one * 20_000, "Done, here is the answer."], _GT)


@case("hierr", "20k unmatched <tool_call> tags", "20,000 tags")
def _unmatched_tags():
    return _hierr(["<tool_call>" * 20_000 + "Paris", "Done, here is the answer."], _GT)


@case("loop", "agent-loop parser on 20k blocks", "20,000 blocks")
def _loop_parser():
    from slca_verl.agent_loop.parser import parse_hermes_calls

    text = '<tool_call>{"name": "get_weather", "parameters": {"city": "Paris"}}</tool_call>' * 20_000
    return lambda: parse_hermes_calls(text)


@case("loop", "agent-loop parser on a block nested 100k deep", "100,000 levels")
def _loop_parser_deep():
    from slca_verl.agent_loop.parser import parse_hermes_calls

    text = "<tool_call>" + "[" * 100_000 + "</tool_call>"
    return lambda: parse_hermes_calls(text)


# ---------------------------------------------------------------------------------------------------------------
# SGLS and judge
# ---------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# data_prep
# ---------------------------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="run only the cases whose area starts with this")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(describe())
    print(f"{'area':<10} {'case':<58} {'size':<16} {'best s':>8}")
    results = []
    for area, name, size, make in CASES:
        if not area.startswith(args.only):
            continue
        fn = make()
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        print(f"{area:<10} {name:<58} {size:<16} {best:8.4f}")
        results.append({"area": area, "case": name, "size": size, "best_s": round(best, 5)})
    print(json.dumps({"bench": "bad_inputs", "machine": describe(), "results": results}))


if __name__ == "__main__":
    main()
