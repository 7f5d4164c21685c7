"""NousResearch hermes-function-calling-v1 (Apache-2.0) -> verl RL parquet, one row per user turn.

    python -m data_prep.hermes_fc --input func-calling.json --output_dir data/hermes_fc [--drop_no_call_turns]

A record is ShareGPT ``{"conversations": [{"from": "system"|"human"|"gpt"|"tool", "value"}], "tools"?}``.
Tools come from the ``tools`` field when present, else from the system message's ``<tools>…</tools>`` block
(JSON, a python literal, or one JSON object per line). Calls are ``<tool_call>`` blocks in ``gpt`` messages,
whose body may be a python dict literal; tool results are ``<tool_response>`` blocks in ``tool`` messages.
Records of the json-mode configs (no tools) are rejected as ``no_tools``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Sequence

from data_prep.calls import parse_hermes_calls
from data_prep.dialogue import dialogue_main, sharegpt_turns, split_dialogue
from data_prep.row_builder import Candidate, Rejection
from data_prep.tool_schema import SchemaError, normalize_tools
from slca_verl.toolcall import limits

SOURCE = "hermes_fc"
_TOOLS_BLOCK = re.compile(r"<tools>(.*?)</tools>", re.S)
__all__ = ["SOURCE", "convert_record", "main", "tools_from_system"]


def tools_from_system(text: str) -> list[Any] | None:
    """The tool list inside the first non-empty ``<tools>…</tools>`` (None when there is none).

    Hermes system prompts mention "within <tools></tools> XML tags" before the real block, hence non-empty.
    """
    body = next((b.strip() for b in _TOOLS_BLOCK.findall(text or "") if b.strip()), None)
    if body is None:
        return None
    for parse in (_json_list, _python_literal, _concatenated_objects):
        try:
            value = parse(body)
        except (ValueError, SyntaxError, TypeError):
            continue
        return value if isinstance(value, list) else [value]
    raise SchemaError("tools_unparseable", f"<tools> block is neither JSON nor a python literal: {body[:120]}")


def _json_list(body: str) -> Any:
    return limits.loads(body, "<tools> block")


def _python_literal(body: str) -> Any:
    return limits.literal_eval(body, "<tools> block")


def _concatenated_objects(body: str) -> list[Any]:
    """``{...}\n{...}``: JSON objects separated only by whitespace."""
    decoder, values, i = json.JSONDecoder(), [], 0
    while i < len(body):
        if body[i].isspace():
            i += 1
            continue
        value, i = limits.raw_decode(decoder, body, i, "<tools> block")
        values.append(value)
    return values


def _split_hermes(content: str) -> tuple[list[dict], str] | None:
    if "<tool_call>" not in content:
        return None
    return parse_hermes_calls(content), re.sub(r"<tool_call>.*?</tool_call>", "", content, flags=re.S).strip()


def convert_record(record: Any, index: int, drop_no_call_turns: bool = False) -> Iterable[Candidate | Rejection]:
    """One ShareGPT record -> one candidate per user turn."""
    if not isinstance(record, dict):
        return [Rejection("malformed_record", str(record)[:200], index)]
    conversations = record.get("conversations")
    if not isinstance(conversations, list):
        return [Rejection("malformed_record", "no conversations list", index)]
    raw_tools = record.get("tools")
    if not raw_tools:
        system = next(
            (m.get("value", "") for m in conversations if isinstance(m, dict) and m.get("from") == "system"), ""
        )
        raw_tools = tools_from_system(system)
    if not raw_tools:
        return [Rejection("no_tools", "neither a tools field nor a <tools> block", index)]
    tools = normalize_tools(raw_tools)
    return split_dialogue(sharegpt_turns(conversations, _split_hermes), tools, SOURCE, index, drop_no_call_turns)


def main(argv: Sequence[str] | None = None):
    return dialogue_main(SOURCE, __doc__.splitlines()[0], convert_record, argv)


if __name__ == "__main__":
    main()
