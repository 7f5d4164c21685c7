"""glaive-function-calling-v2 (Apache-2.0) -> verl RL parquet, one row per user turn.

    python -m data_prep.glaive --input glaive-function-calling-v2.json --output_dir data/glaive [--drop_no_call_turns]

A record is ``{"system": "SYSTEM: ... functions ... -\\n{tool}\\n{tool}", "chat": "USER: ...\\n\\n\\nASSISTANT: ..."}``.
The tools are the JSON objects after the system text; the chat is split on ``USER:``, ``ASSISTANT:`` and
``FUNCTION RESPONSE:`` markers; an assistant message holding ``<functioncall> {"name": ..., "arguments": '{...}'}``
(arguments as a single-quoted JSON string) is a one-call step. Records whose system offers no function
("no access to external functions") are rejected as ``no_tools``.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, Iterable, Sequence

from data_prep.calls import CallParseError, parse_glaive_call
from data_prep.cli import main_for
from data_prep.dialogue import Turn, extract_json_values, split_dialogue
from data_prep.hermes_fc import add_turn_arguments
from data_prep.readers import UNREADABLE
from data_prep.rows import Candidate, Rejection
from data_prep.schema import normalize_tools

SOURCE = "glaive"
DATA_SOURCE = "glaive_fc"
_MARKER = re.compile(r"(?:^|\n)\s*(USER|ASSISTANT|FUNCTION RESPONSE|SYSTEM):", re.S)
_ROLES = {"USER": "user", "ASSISTANT": "assistant", "FUNCTION RESPONSE": "tool", "SYSTEM": "system"}
__all__ = ["SOURCE", "convert_record", "parse_chat", "main"]


def parse_chat(chat: str) -> list[Turn]:
    """The ``chat`` text -> turns; ``<functioncall>`` messages get their call parsed (or ``call_error`` set)."""
    pieces = _MARKER.split(chat)
    if pieces[0].strip():
        raise ValueError(f"chat does not start with a role marker: {pieces[0][:80]!r}")
    turns = []
    for marker, text in zip(pieces[1::2], pieces[2::2]):
        content = text.replace("<|endoftext|>", "").strip()
        turn = Turn(_ROLES[marker], content)
        if turn.role == "assistant" and "<functioncall>" in content:
            before, _, call_text = content.partition("<functioncall>")
            turn.content = before.strip()
            try:
                turn.calls = [parse_glaive_call(call_text)]
            except CallParseError as exc:
                turn.call_error = str(exc)
        turns.append(turn)
    return turns


def convert_record(record: Any, index: int, drop_no_call_turns: bool = False) -> Iterable[Candidate | Rejection]:
    """One glaive record -> one candidate per user turn."""
    if not isinstance(record, dict) or UNREADABLE in record:
        return [Rejection("malformed_record", str(record)[:200], index)]
    system, chat = record.get("system"), record.get("chat")
    if not isinstance(system, str) or not isinstance(chat, str):
        return [Rejection("malformed_record", "system and chat must be strings", index)]
    raw_tools = [v for v in extract_json_values(system, "{") if isinstance(v, dict)]
    if not raw_tools:
        return [Rejection("no_tools", "the system text offers no function", index)]
    tools = normalize_tools(raw_tools)
    return split_dialogue(parse_chat(chat), tools, DATA_SOURCE, index, drop_no_call_turns)


def _make_convert(args: argparse.Namespace):
    return lambda record, index: convert_record(record, index, args.drop_no_call_turns)


def main(argv: Sequence[str] | None = None):
    return main_for(SOURCE, __doc__.splitlines()[0], _make_convert, argv, add_arguments=add_turn_arguments)


if __name__ == "__main__":
    main()
