"""xLAM-function-calling-60k (Salesforce, CC-BY-4.0) -> verl RL parquet.

    python -m data_prep.xlam --input xlam_function_calling_60k.json --output_dir data/xlam --val_ratio 0.02

A record is ``{"id", "query", "tools": JSON str, "answers": JSON str}``; ``tools`` use xLAM's python-style
types (``"List[int]"``, ``"str, optional"``), normalised by :mod:`data_prep.tool_schema`. The answers of a query
are one step of parallel calls, so each record gives one row with ``gold_tool_calls = [answers]``
(``[]`` when a record has no answer: an irrelevance row).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from data_prep.calls import parse_json_calls
from data_prep.cli import simple_main
from data_prep.row_builder import Candidate, Rejection
from data_prep.tool_schema import normalize_tools

SOURCE = "xlam"
__all__ = ["SOURCE", "convert_record", "main"]


def convert_record(record: Any, index: int) -> Iterable[Candidate | Rejection]:
    """One xLAM record -> one candidate, or a rejection naming what is wrong with it."""
    if not isinstance(record, dict):
        return [Rejection("malformed_record", str(record)[:200], index)]
    missing = [k for k in ("query", "tools", "answers") if k not in record]
    if missing:
        return [Rejection("malformed_record", f"missing fields {missing}", index)]
    tools = normalize_tools(record["tools"])  # SchemaError -> rejection with its reason
    answers = record["answers"]
    calls = parse_json_calls(answers if answers not in (None, "") else [])
    query = record["query"] if isinstance(record["query"], str) else ""
    return [
        Candidate(
            data_source=SOURCE,
            messages=[{"role": "user", "content": query}],
            tools=tools,
            gold=[calls] if calls else [],
            question=query,
            record_index=index,
        )
    ]


def main(argv: Sequence[str] | None = None):
    return simple_main(SOURCE, __doc__.splitlines()[0], convert_record, argv)


if __name__ == "__main__":
    main()
