"""Multi-turn dialogues -> one RL row per user turn, as the authors' converter (``split_turns``) does.

A row's prompt is the dialogue up to and including user turn *k*; its gold is every assistant tool-call step
between that user turn and the next one (one step per assistant message; the calls inside a message are
parallel). A turn whose calls all left gold (``Turn.gold_calls``, e.g. refused upstream) is rejected as
``gold_calls_all_failed``, never made an irrelevance row. A user turn answered without any call becomes an
``irrelevant`` row (gold ``[]``) unless ``drop_no_call_turns`` is set, in which case it is counted as rejected
under ``no_call_turn``.

Earlier calls stay in the history as assistant text with hermes ``<tool_call>`` blocks; tool results become
``role: "tool"`` messages (chat templates wrap them in ``<tool_response>``). The source's own system message is
replaced by the row builder's tool-listing system prompt.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Sequence

from data_prep.calls import CallParseError
from data_prep.cli import main_for
from data_prep.row_builder import Candidate, Rejection
from slca_verl.toolcall import hermes, limits

__all__ = [
    "Turn",
    "ROLE_ALIASES",
    "split_dialogue",
    "extract_json_values",
    "assistant_turn",
    "sharegpt_turns",
    "add_turn_arguments",
    "dialogue_main",
]

#: ``split(content) -> None`` for prose, else ``(calls, remaining text)``; raises CallParseError for a call it
#: cannot parse.
CallSplitter = Callable[[str], Optional["tuple[list[dict], str]"]]

ROLE_ALIASES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
    "observation": "tool",
    "function_response": "tool",
    "ipython": "tool",
}
_RESPONSE_TAGS = re.compile(r"^\s*<tool_response>\s*|\s*</tool_response>\s*$")


@dataclass
class Turn:
    """One message: ``calls`` holds the parsed calls of an assistant message (empty when it made none)."""

    role: str
    content: str
    calls: list[dict] = field(default_factory=list)
    call_error: str | None = None  # set when the message holds a call that could not be parsed
    #: the calls that count as gold when they differ from ``calls`` (None: all of them). A source sets it to drop
    #: calls the environment refused (Toucan's ``Tool x does not exists.``) from gold while the prompt history
    #: keeps them, as the dialogue had them.
    gold_calls: list[dict] | None = None

    def gold(self) -> list[dict]:
        return self.calls if self.gold_calls is None else self.gold_calls


def assistant_turn(content: str, split_calls: CallSplitter) -> Turn:
    """An assistant message, its calls parsed by the source's ``split_calls`` (a parse failure is kept as
    ``call_error``, which rejects the user turn it answers)."""
    turn = Turn("assistant", content)
    try:
        found = split_calls(content)
    except CallParseError as exc:
        turn.call_error = str(exc)
        return turn
    if found is not None:
        turn.calls, turn.content = found
    return turn


def sharegpt_turns(conversations: list[dict], split_calls: CallSplitter) -> list[Turn]:
    """ShareGPT messages (``from``/``value`` or ``role``/``content``) -> turns."""
    turns = []
    for i, msg in enumerate(conversations):
        if not isinstance(msg, dict):
            raise ValueError(f"message {i} is {'null' if msg is None else 'a ' + type(msg).__name__}, not an object")
        role = ROLE_ALIASES.get(str(msg.get("from", msg.get("role", ""))).lower())
        content = msg.get("value", msg.get("content"))
        if role is None or not isinstance(content, str):
            raise ValueError(f"message with unknown role or non-text content: {str(msg)[:120]}")
        turns.append(assistant_turn(content, split_calls) if role == "assistant" else Turn(role, content))
    return turns


def add_turn_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--drop_no_call_turns",
        action="store_true",
        help="reject user turns answered without a call (default: keep them as irrelevance rows)",
    )


ConvertRecord = Callable[[Any, int, bool], Iterable[Candidate | Rejection]]


def dialogue_main(source: str, description: str, convert_record: ConvertRecord, argv: Sequence[str] | None = None):
    """The CLI of a multi-turn source: ``main_for`` plus ``--drop_no_call_turns``."""

    def make_convert(args: argparse.Namespace):
        return lambda record, index: convert_record(record, index, args.drop_no_call_turns)

    return main_for(source, description, make_convert, argv, add_arguments=add_turn_arguments)


def _render(turn: Turn) -> dict:
    if turn.role == "assistant" and turn.calls:
        text = turn.content.strip()
        rendered = hermes.render_calls(turn.calls)
        return {"role": "assistant", "content": f"{text}\n{rendered}" if text else rendered}
    if turn.role == "tool":
        return {"role": "tool", "content": _RESPONSE_TAGS.sub("", turn.content)}
    return {"role": turn.role, "content": turn.content}


def split_dialogue(
    turns: list[Turn], tools: list[dict], data_source: str, record_index: int, drop_no_call_turns: bool = False
) -> list[Candidate | Rejection]:
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
        gold = [t.gold() for t in answer if t.role == "assistant" and t.gold()]
        if not gold and any(t.calls for t in answer):
            out.append(
                Rejection("gold_calls_all_failed", f"user turn {k}: every call it made failed upstream", record_index)
            )  # not an irrelevance row: a call was wanted
            continue
        if not gold and drop_no_call_turns:
            out.append(Rejection("no_call_turn", f"user turn {k} is answered without a call", record_index))
            continue
        out.append(
            Candidate(
                data_source=data_source,
                messages=[_render(t) for t in turns[: start + 1]],
                tools=tools,
                gold=gold,
                question=turns[start].content,
                record_index=record_index,
                turn_index=k,
            )
        )
    return out


def extract_json_values(text: str, start_chars: str = "[{") -> list[Any]:
    """Every JSON value that starts at one of ``start_chars`` in ``text``, left to right (non-overlapping)."""
    decoder = json.JSONDecoder()
    values, i = [], 0
    while i < len(text):
        if text[i] in start_chars:
            try:
                value, end = limits.raw_decode(decoder, text, i, "JSON in the text")
            except json.JSONDecodeError:
                i += 1
                continue
            values.append(value)
            i = end
        else:
            i += 1
    return values
