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


# ---------------------------------------------------------------------------------------------------------------
# SGLS and judge
# ---------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# data_prep
# ---------------------------------------------------------------------------------------------------------------


def _data_prep_file(name: str, text: str) -> str:
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="bench_bad_inputs_")) / name
    path.write_text(text)
    return str(path)


def _xlam_line(i: int) -> str:
    tool = {"name": "f", "parameters": {"x": {"type": "int"}}}
    return json.dumps({"query": f"q{i}", "tools": json.dumps([tool]), "answers": "[]"})


@case("data_prep", "read_records: .jsonl, one line 5000 deep", "10,000 lines")
def _bench_reader_deep_line():
    from data_prep.readers import read_records

    lines = [_xlam_line(i) for i in range(10_000)]
    lines[5000] = "[" * 5000 + "]" * 5000
    path = _data_prep_file("deep.jsonl", "\n".join(lines))
    return lambda: read_records(path)


@case("data_prep", "read_records: .json array, one item 5000 deep", "10,000 items")
def _bench_reader_deep_item():
    from data_prep.readers import read_records

    items = [_xlam_line(i) for i in range(10_000)]
    items[5000] = "[" * 5000 + "]" * 5000
    path = _data_prep_file("deep.json", "[\n" + ",\n".join(items) + "\n]")
    return lambda: read_records(path)


@case("data_prep", "normalize_tools: schema 450 object levels deep", "450 levels")
def _bench_schema_deep():
    from data_prep.limits import RecordError
    from data_prep.schema import normalize_tools

    schema: dict = {"type": "string"}
    for _ in range(450):
        schema = {"type": "object", "properties": {"a": schema}}
    text = json.dumps([{"name": "f", "parameters": schema}])

    def run():
        try:
            normalize_tools(text)
        except RecordError:
            pass

    return run


@case("data_prep", "normalize_tools: type string List[List[...]]", "100,000 levels")
def _bench_type_string_deep():
    from data_prep.limits import RecordError
    from data_prep.schema import normalize_tools

    tools = [{"name": "f", "parameters": {"x": {"type": "List[" * 100_000 + "int" + "]" * 100_000}}}]

    def run():
        try:
            normalize_tools(tools)
        except RecordError:
            pass

    return run


@case("data_prep", "parse_python_calls: argument 1+1+...+1", "100,000 terms")
def _bench_python_call_chain():
    from data_prep.calls import parse_python_calls
    from data_prep.limits import RecordError

    text = "[f(x=" + "1+" * 100_000 + "1)]"

    def run():
        try:
            parse_python_calls(text)
        except RecordError:
            pass

    return run


@case("data_prep", "extract_json_values: 900 unclosed nested arrays", "2,700 chars")
def _bench_extract_unclosed():
    from data_prep.dialogue import extract_json_values

    text = "[0," * 900
    return lambda: extract_json_values(text, "[")


@case("data_prep", "nesting_exceeds: one wide record", "1,000,000 lists")
def _bench_nesting_wide():
    from data_prep.limits import nesting_exceeds

    record = {"values": [[i] for i in range(1_000_000)]}
    return lambda: nesting_exceeds(record)



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
