"""glaive-function-calling-v2 (Apache-2.0) -> verl RL parquet, one row per user turn.

    python -m data_prep.glaive --input glaive-function-calling-v2.json --output_dir data/glaive [--drop_no_call_turns]

A record is ``{"system": "SYSTEM: ... functions ... -\\n{tool}\\n{tool}", "chat": "USER: ...\\n\\n\\nASSISTANT: ..."}``.
The tools are the JSON objects after the system text; the chat is split on ``USER:``, ``ASSISTANT:`` and
``FUNCTION RESPONSE:`` markers; an assistant message holding ``<functioncall> {"name": ..., "arguments": '{...}'}``
(arguments as a single-quoted JSON string) is a one-call step. Records whose system offers no function
("no access to external functions") are rejected as ``no_tools``.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from data_prep.calls import parse_glaive_call
from data_prep.dialogue import Turn, assistant_turn, dialogue_main, extract_json_values, split_dialogue
from data_prep.row_builder import Candidate, Rejection
from data_prep.tool_schema import normalize_tools

SOURCE = "glaive"
DATA_SOURCE = "glaive_fc"
_MARKER = re.compile(r"(?:^|\n)\s*(USER|ASSISTANT|FUNCTION RESPONSE|SYSTEM):", re.S)
_ROLES = {"USER": "user", "ASSISTANT": "assistant", "FUNCTION RESPONSE": "tool", "SYSTEM": "system"}
__all__ = ["SOURCE", "convert_record", "parse_chat", "main"]


def _split_glaive(content: str) -> tuple[list[dict], str] | None:
    if "<functioncall>" not in content:
        return None
    before, _, call_text = content.partition("<functioncall>")
    return [parse_glaive_call(call_text)], before.strip()


def parse_chat(chat: str) -> list[Turn]:
    """The ``chat`` text -> turns; ``<functioncall>`` messages get their call parsed (or ``call_error`` set)."""
    pieces = _MARKER.split(chat)
    if pieces[0].strip():
        raise ValueError(f"chat does not start with a role marker: {pieces[0][:80]!r}")
    turns = []
    for marker, text in zip(pieces[1::2], pieces[2::2]):
        content = text.replace("<|endoftext|>", "").strip()
        role = _ROLES[marker]
        turns.append(assistant_turn(content, _split_glaive) if role == "assistant" else Turn(role, content))
    return turns


def convert_record(record: Any, index: int, drop_no_call_turns: bool = False) -> Iterable[Candidate | Rejection]:
    """One glaive record -> one candidate per user turn."""
    if not isinstance(record, dict):
        return [Rejection("malformed_record", str(record)[:200], index)]
    system, chat = record.get("system"), record.get("chat")
    if not isinstance(system, str) or not isinstance(chat, str):
        return [Rejection("malformed_record", "system and chat must be strings", index)]
    raw_tools = [v for v in extract_json_values(system, "{") if isinstance(v, dict)]
    if not raw_tools:
        return [Rejection("no_tools", "the system text offers no function", index)]
    tools = normalize_tools(raw_tools)
    return split_dialogue(parse_chat(chat), tools, DATA_SOURCE, index, drop_no_call_turns)


def main(argv: Sequence[str] | None = None):
    return dialogue_main(SOURCE, __doc__.splitlines()[0], convert_record, argv)


if __name__ == "__main__":
    main()
