"""ToolACE (Team-ACE, Apache-2.0) -> verl RL parquet, one row per user turn.

    python -m data_prep.toolace --input data.json --output_dir data/toolace [--drop_no_call_turns]

A record is ``{"system": "... Here is a list of functions in JSON format ...:\\n[{...}, ...]\\n...",
"conversations": [{"from": "user"|"assistant"|"tool", "value"}]}``. The tools are the first JSON list of
named objects in the system text (``"type": "dict"`` parameters, normalised by :mod:`data_prep.tool_schema`).
An assistant message that is a bracketed python call list ``[Fn(a=1), Other Fn(b="x")]`` is one step of
parallel calls (ToolACE names may contain spaces); other assistant messages are prose.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from data_prep.calls import parse_python_calls
from data_prep.dialogue import dialogue_main, extract_json_values, sharegpt_turns, split_dialogue
from data_prep.row_builder import Candidate, Rejection
from data_prep.tool_schema import normalize_tools

SOURCE = "toolace"
# "[Name(" at the start marks a call attempt; parse failures then reject the turn instead of passing as prose
_CALL_LIST = re.compile(r"^\s*\[\s*[A-Za-z_][\w .\-]*\(", re.S)
__all__ = ["SOURCE", "convert_record", "tools_from_system", "main"]


def tools_from_system(system: str) -> list[dict] | None:
    """The first JSON list in ``system`` whose items are objects with a ``name``."""
    for value in extract_json_values(system, "["):
        if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
            return value
    return None


def _split_python(content: str) -> tuple[list[dict], str] | None:
    return (parse_python_calls(content), "") if _CALL_LIST.match(content) else None


def convert_record(record: Any, index: int, drop_no_call_turns: bool = False) -> Iterable[Candidate | Rejection]:
    """One ToolACE record -> one candidate per user turn."""
    if not isinstance(record, dict):
        return [Rejection("malformed_record", str(record)[:200], index)]
    system, conversations = record.get("system"), record.get("conversations")
    if not isinstance(system, str) or not isinstance(conversations, list):
        return [Rejection("malformed_record", "system must be text and conversations a list", index)]
    raw_tools = tools_from_system(system)
    if not raw_tools:
        return [Rejection("no_tools", "no JSON function list in the system text", index)]
    tools = normalize_tools(raw_tools)
    return split_dialogue(sharegpt_turns(conversations, _split_python), tools, SOURCE, index, drop_no_call_turns)


def main(argv: Sequence[str] | None = None):
    return dialogue_main(SOURCE, __doc__.splitlines()[0], convert_record, argv)


if __name__ == "__main__":
    main()
