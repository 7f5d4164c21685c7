"""Multi-turn dialogues -> one RL row per user turn, as the authors' converter (``split_turns``) does.

A row's prompt is the dialogue up to and including user turn *k*; its gold is every assistant tool-call step
between that user turn and the next one (one step per assistant message; the calls inside a message are
parallel). A user turn answered without any call becomes an ``irrelevant`` row (gold ``[]``) unless
``drop_no_call_turns`` is set, in which case it is counted as rejected under ``no_call_turn``.

Earlier calls stay in the history as assistant text with hermes ``<tool_call>`` blocks; tool results become
``role: "tool"`` messages (chat templates wrap them in ``<tool_response>``). The source's own system message is
replaced by the row builder's tool-listing system prompt.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from data_prep.calls import render_hermes_calls
from data_prep.rows import Candidate, Rejection

__all__ = ["Turn", "ROLE_ALIASES", "split_dialogue", "extract_json_values"]

ROLE_ALIASES = {
    "system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
    "tool": "tool", "function": "tool", "observation": "tool", "function_response": "tool", "ipython": "tool",
}
_RESPONSE_TAGS = re.compile(r"^\s*<tool_response>\s*|\s*</tool_response>\s*$")


@dataclass
class Turn:
    """One message: ``calls`` holds the parsed calls of an assistant message (empty when it made none)."""

    role: str
    content: str
    calls: list[dict] = field(default_factory=list)
    call_error: str | None = None  # set when the message holds a call that could not be parsed


def _render(turn: Turn) -> dict:
    if turn.role == "assistant" and turn.calls:
        text = turn.content.strip()
        rendered = render_hermes_calls(turn.calls)
        return {"role": "assistant", "content": f"{text}\n{rendered}" if text else rendered}
    if turn.role == "tool":
        return {"role": "tool", "content": _RESPONSE_TAGS.sub("", turn.content)}
    return {"role": turn.role, "content": turn.content}


def split_dialogue(turns: list[Turn], tools: list[dict], data_source: str, record_index: int,
                   drop_no_call_turns: bool = False) -> list[Candidate | Rejection]:
    """One candidate (or rejection) per user turn; a dialogue without a user turn is one rejection."""
    turns = [t for t in turns if t.role != "system"]
    user_at = [i for i, t in enumerate(turns) if t.role == "user"]
    if not user_at:
        return [Rejection("no_user_turn", "the dialogue has no user message", record_index)]
    out: list[Candidate | Rejection] = []
    for k, start in enumerate(user_at):
        end = user_at[k + 1] if k + 1 < len(user_at) else len(turns)
        answer = turns[start + 1 : end]
        broken = next((t.call_error for t in answer if t.call_error), None)
        if broken:
            out.append(Rejection("gold_call_unparseable", f"user turn {k}: {broken}", record_index))
            continue
        gold = [t.calls for t in answer if t.role == "assistant" and t.calls]
        if not gold and drop_no_call_turns:
            out.append(Rejection("no_call_turn", f"user turn {k} is answered without a call", record_index))
            continue
        out.append(Candidate(
            data_source=data_source,
            messages=[_render(t) for t in turns[: start + 1]],
            tools=tools,
            gold=gold,
            question=turns[start].content,
            record_index=record_index,
            turn_index=k,
        ))
    return out


def extract_json_values(text: str, start_chars: str = "[{") -> list[Any]:
    """Every JSON value that starts at one of ``start_chars`` in ``text``, left to right (non-overlapping)."""
    decoder = json.JSONDecoder()
    values, i = [], 0
    while i < len(text):
        if text[i] in start_chars:
            try:
                value, end = decoder.raw_decode(text, i)
            except json.JSONDecodeError:
                i += 1
                continue
            values.append(value)
            i = end
        else:
            i += 1
    return values
