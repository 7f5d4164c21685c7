"""ToolACE (Team-ACE, Apache-2.0) -> verl RL parquet, one row per user turn.

    python -m data_prep.toolace --input data.json --output_dir data/toolace [--drop_no_call_turns]

A record is ``{"system": "... Here is a list of functions in JSON format ...:\\n[{...}, ...]\\n...",
"conversations": [{"from": "user"|"assistant"|"tool", "value"}]}``. The tools are the first JSON list of
named objects in the system text (``"type": "dict"`` parameters, normalised by :mod:`data_prep.schema`).
An assistant message that is a bracketed python call list ``[Fn(a=1), Other Fn(b="x")]`` is one step of
parallel calls (ToolACE names may contain spaces); other assistant messages are prose.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, Iterable, Sequence

from data_prep.calls import CallParseError, parse_python_calls
from data_prep.cli import main_for
from data_prep.dialogue import ROLE_ALIASES, Turn, extract_json_values, split_dialogue
from data_prep.hermes_fc import add_turn_arguments
from data_prep.readers import UNREADABLE
from data_prep.rows import Candidate, Rejection
from data_prep.schema import normalize_tools

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


def _turns(conversations: list[dict]) -> list[Turn]:
    turns = []
    for msg in conversations:
        role = ROLE_ALIASES.get(str(msg.get("from", msg.get("role", ""))).lower())
        content = msg.get("value", msg.get("content"))
        if role is None or not isinstance(content, str):
            raise ValueError(f"message with unknown role or non-text content: {str(msg)[:120]}")
        turn = Turn(role, content)
        if role == "assistant" and _CALL_LIST.match(content):
            try:
                turn.calls = parse_python_calls(content)
                turn.content = ""
            except CallParseError as exc:
                turn.call_error = str(exc)
        turns.append(turn)
    return turns


def convert_record(record: Any, index: int, drop_no_call_turns: bool = False) -> Iterable[Candidate | Rejection]:
    """One ToolACE record -> one candidate per user turn."""
    if not isinstance(record, dict) or UNREADABLE in record:
        return [Rejection("malformed_record", str(record)[:200], index)]
    system, conversations = record.get("system"), record.get("conversations")
    if not isinstance(system, str) or not isinstance(conversations, list):
        return [Rejection("malformed_record", "system must be text and conversations a list", index)]
    raw_tools = tools_from_system(system)
    if not raw_tools:
        return [Rejection("no_tools", "no JSON function list in the system text", index)]
    tools = normalize_tools(raw_tools)
    return split_dialogue(_turns(conversations), tools, SOURCE, index, drop_no_call_turns)


def _make_convert(args: argparse.Namespace):
    return lambda record, index: convert_record(record, index, args.drop_no_call_turns)


def main(argv: Sequence[str] | None = None):
    return main_for(SOURCE, __doc__.splitlines()[0], _make_convert, argv, add_arguments=add_turn_arguments)


if __name__ == "__main__":
    main()
