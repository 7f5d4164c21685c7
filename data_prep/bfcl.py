"""BFCL evaluation rows from the data bfcl-eval ships -> verl parquet (``bfcl_test.parquet``), for evaluation.

    python -m data_prep.bfcl --output_dir data/bfcl [--input .../bfcl_eval/data] [--categories simple_python ...]

Reads ``BFCL_v4_<category>.json`` and ``possible_answer/BFCL_v4_<category>.json`` (JSON lines) from the
installed ``bfcl_eval/data`` folder (install: ``pip install --no-deps bfcl-eval==2026.3.23``; nothing of
bfcl-eval is imported). One row per entry, ``data_source = "bfcl_<category>"``. BFCL's answers list the
acceptable values of each argument; the gold call takes the first one (``""`` means "may be omitted", so an
argument whose first choice is ``""`` is left out), all calls of an entry form one parallel step, and the full
answer stays in ``ground_truth.possible_answer`` (JSON str) with ``ground_truth.bfcl_id`` for the official
checker. Java / JavaScript parameters are strings in BFCL's protocol, so their types become ``string`` (the
source type is kept in the description) and gold values are written as source text. Irrelevance categories
have no answer: gold ``[]``. Categories whose ground truth is not a call list (multi_turn_*, memory,
web_search, format_sensitivity, live_relevance) are not converted; the report lists them.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
from typing import Any, Iterable, Sequence

from data_prep.cli import main_for
from data_prep.decontam import bfcl_data_dir
from data_prep.readers import InputError, Unreadable, read_json_lines
from data_prep.row_builder import Candidate, Rejection
from data_prep.tool_schema import normalize_tools
from slca_verl.toolcall.limits import non_finite_path

SOURCE = "bfcl"
AST_CATEGORIES = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "irrelevance",
    "live_irrelevance",
)
NO_ANSWER_CATEGORIES = ("irrelevance", "live_irrelevance")
NOT_CONVERTED = {
    "multi_turn_base": "execution-checked multi-turn dialogue, not a call list",
    "multi_turn_long_context": "execution-checked multi-turn dialogue, not a call list",
    "multi_turn_miss_func": "execution-checked multi-turn dialogue, not a call list",
    "multi_turn_miss_param": "execution-checked multi-turn dialogue, not a call list",
    "memory": "agentic memory task with a text answer",
    "web_search": "agentic web-search task with a text answer",
    "format_sensitivity": "an index of ids, not questions",
    "live_relevance": "any call counts as correct; there is no gold call",
}
__all__ = ["SOURCE", "AST_CATEGORIES", "convert_record", "load", "main"]


def _read_jsonl(path: str) -> list[Any]:
    if not os.path.isfile(path):
        raise InputError(f"{path}: missing (is --input a bfcl_eval/data folder?)")
    return read_json_lines(path)


def _entry_id(entry: Any) -> str | None:
    return entry["id"] if isinstance(entry, dict) and isinstance(entry.get("id"), str) else None


def load(args: argparse.Namespace) -> tuple[list[Any], dict]:
    """(category, entry, possible answer or None) for every entry of the chosen categories.

    An entry line that does not parse stays a record (rejected under its reader reason); an answer line that does
    not parse or has no string ``id`` cannot be matched to its entry, which is then rejected as
    ``bfcl_answer_missing``; the notes count those answer lines per category.
    """
    data_dir = args.input or bfcl_data_dir()
    if data_dir is None or not os.path.isdir(data_dir):
        raise FileNotFoundError("bfcl_eval data not found: pip install --no-deps bfcl-eval==2026.3.23, or --input")
    records: list[Any] = []
    per_category, unusable_answers = {}, {}
    for category in args.categories:
        entries = _read_jsonl(os.path.join(data_dir, f"BFCL_v4_{category}.json"))
        answers = {}
        if category not in NO_ANSWER_CATEGORIES:
            lines = _read_jsonl(os.path.join(data_dir, "possible_answer", f"BFCL_v4_{category}.json"))
            answers = {_entry_id(a): a for a in lines if _entry_id(a) is not None}
            if len(answers) < len(lines):
                unusable_answers[category] = sum(_entry_id(a) is None for a in lines)
        records.extend(e if isinstance(e, Unreadable) else (category, e, answers.get(_entry_id(e))) for e in entries)
        per_category[category] = len(entries)
    notes = {
        "bfcl_data_dir": data_dir,
        "entries_by_category": per_category,
        "categories_not_converted": {c: why for c, why in NOT_CONVERTED.items() if c not in args.categories},
    }
    if unusable_answers:
        notes["answer_lines_without_id"] = unusable_answers
    return records, notes


def _as_source_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _stringify_parameters(function: dict) -> dict:
    """Java / JavaScript: BFCL passes every argument as source text, so every parameter is a string."""
    function = copy.deepcopy(function)
    for prop in (function.get("parameters") or {}).get("properties", {}).values():
        source_type = prop.get("type")
        prop["type"] = "string"
        prop.pop("items", None)
        prop.pop("properties", None)
        if source_type and source_type not in ("string", "String"):
            prop["description"] = f"{prop.get('description', '')} (source type: {source_type})".strip()
    return function


def _first_choice(value: Any, schema: dict) -> Any:
    """Nested dicts in BFCL answers list acceptable values per key too: take the first where the schema
    does not expect a list (a leading ``""`` means the key may be omitted)."""
    if not isinstance(value, dict) or schema.get("type") != "object":
        return value
    props, out = schema.get("properties", {}), {}
    for key, v in value.items():
        sub = props.get(key, {})
        if isinstance(v, list) and sub.get("type") != "array" and v:
            if v[0] == "":
                continue
            v = v[0]
        out[key] = _first_choice(v, sub)
    return out


def _gold_step(answer: dict, stringify: bool, tools: list[dict]) -> list[dict]:
    params_of = {t["function"]["name"]: t["function"]["parameters"].get("properties", {}) for t in tools}
    step = []
    for call in answer["ground_truth"]:
        ((name, params),) = call.items()
        args = {}
        for key, choices in params.items():
            if not isinstance(choices, list) or not choices:
                raise ValueError(f"{name}.{key}: acceptable values are not a non-empty list")
            if choices[0] == "":
                continue  # first choice "omit the argument"
            value = _first_choice(choices[0], params_of.get(name, {}).get(key, {}))
            args[key] = _as_source_text(value) if stringify else value
        step.append({"name": name, "arguments": args})
    return step


def convert_record(record: tuple[str, dict, dict | None], index: int) -> Iterable[Candidate | Rejection]:
    """One BFCL entry (with its possible answer) -> one evaluation candidate."""
    category, entry, answer = record
    if _entry_id(entry) is None:
        return [Rejection("malformed_record", f"entry has no string id: {str(entry)[:120]}", index)]
    turns = entry.get("question") or []
    if len(turns) != 1 or not isinstance(turns[0], list):
        return [Rejection("malformed_record", f"{entry.get('id')}: expected one turn of messages", index)]
    messages = [{"role": m["role"], "content": m["content"]} for m in turns[0]]
    users = [m["content"] for m in messages if m["role"] == "user"]
    stringify = category in ("simple_java", "simple_javascript")
    functions = [_stringify_parameters(f) if stringify else f for f in entry.get("function") or []]
    tools = normalize_tools(functions)
    if category in NO_ANSWER_CATEGORIES:
        gold, possible = [], []
    elif answer is None:
        return [Rejection("bfcl_answer_missing", f"{entry.get('id')}: no possible answer", index)]
    else:
        gold, possible = [_gold_step(answer, stringify, tools)], answer["ground_truth"]
        if non_finite_path(possible) is not None:
            return [Rejection("non_finite_number", f"{entry['id']}: the possible answer holds NaN or infinity", index)]
    return [
        Candidate(
            data_source=f"bfcl_{category}",
            messages=messages,
            tools=tools,
            gold=gold,
            question=users[-1] if users else "",
            record_index=index,
            subset=category,
            extra_ground_truth={"bfcl_id": entry["id"], "possible_answer": json.dumps(possible)},
        )
    ]


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--categories",
        nargs="+",
        default=list(AST_CATEGORIES),
        choices=list(AST_CATEGORIES),
        help="BFCL categories to convert (default: every call-list category)",
    )


def main(argv: Sequence[str] | None = None):
    return main_for(
        SOURCE,
        __doc__.splitlines()[0],
        lambda args: convert_record,
        argv,
        add_arguments=_add_arguments,
        load=load,
        split_name="test",
        input_required=False,
        dedup="none",
    )


if __name__ == "__main__":
    main()
