"""The hermes tool-call format, written and read: the system prompt listing the tools, an assistant turn's calls,
and the project's one hermes reader (:func:`parse_tool_calls`, :func:`parse_turn_calls`, :func:`read_call`), which
the agent loop runs calls by and HierR scores them by.

    system_prompt([{"name": "get_weather", "description": ..., "parameters": {...}}])
    render_calls([{"name": "get_weather", "arguments": {"city": "Paris"}}])
    # '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'

One ``<tool_call>`` block per call, one JSON object per block, as Qwen's chat templates write them and as every
hermes reader accepts (bfcl-eval's Qwen handler rejects a block holding a list of calls, which this project's own
parser would read; docs/eval.md). Non-ASCII text is written as is (``ensure_ascii=False``).

The reader is tolerant where hermes models are: a block may hold a JSON list of calls (parallel calls),
``parameters`` may stand for ``arguments``, ``<think>`` is stripped first; every block it cannot read is counted
with a reason, never dropped silently and never raised.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
# <think>…</think> and <thinking>…</thinking>, closed pairs only.
_THINK_OPEN_RE = re.compile(r"<think(?:ing)?>")
_THINK_CLOSE_RE = re.compile(r"</think(?:ing)?>")
OPEN, CLOSE = OPEN_TAG, CLOSE_TAG


def system_prompt(tools: Iterable[dict]) -> str:
    """The system prompt listing ``tools`` in hermes ``<tools>`` style, one JSON tool per line."""
    listing = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (
        "You are a helpful assistant with access to tools.\n\n"
        "# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{listing}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n\n'
        "Call several functions at once by writing several <tool_call> blocks. "
        "If no function fits the request, answer directly without calling one."
    )


def render_call(name: str, arguments: Any) -> str:
    """One call as its ``<tool_call>`` block."""
    return f"{OPEN}\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + f"\n{CLOSE}"


def render_calls(calls: Iterable[dict]) -> str:
    """The calls of one (parallel) step, ``{"name", "arguments"}`` each (arguments default to ``{}``), one block
    per call, newline-separated."""
    return "\n".join(render_call(c["name"], c.get("arguments", {})) for c in calls)


# ---------------------------------------------------------------------------------------------------------------
# reading: the one hermes reader of the project (the agent loop runs what it reads, HierR scores it)


@dataclass
class ToolCall:
    """One parsed call. ``arguments`` is always a dict."""

    name: str
    arguments: dict


@dataclass
class ParsedCalls:
    """Every ``<tool_call>`` block of the assistant text, parsed.

    Attributes:
        blocks: the valid blocks in order, each a list of calls (a list block holds parallel calls).
        open_tags / close_tags: counts of the literal tags (after ``<think>`` stripping).
        valid_blocks: number of valid blocks (``len(blocks)``).
        errors: one short reason per invalid block, in order.
    """

    blocks: list[list[ToolCall]] = field(default_factory=list)
    open_tags: int = 0
    close_tags: int = 0
    errors: list[str] = field(default_factory=list)
    # Σ over turns of max(#open, #close) when merged from several turns (a tag pair split across two turns is two
    # broken blocks, as the agent loop sees it); None: max(open_tags, close_tags) of the one text
    denominator: int | None = None
    # the steps of parallel calls, for formats with one call per block (every format but hermes): each turn's valid
    # calls are one step. None: the blocks are the steps (hermes, where a list block holds a parallel step)
    steps: list[list[ToolCall]] | None = None

    @property
    def calls(self) -> list[ToolCall]:
        return [c for b in self.blocks for c in b]

    @property
    def valid_blocks(self) -> int:
        return len(self.blocks)

    @property
    def tag_denominator(self) -> int:
        return max(self.open_tags, self.close_tags) if self.denominator is None else self.denominator

    @property
    def fully_valid(self) -> bool:
        """Balanced tags and every block valid (vacuously true without tags)."""
        return self.open_tags == self.close_tags and self.valid_blocks == self.tag_denominator


def strip_think(text: str) -> str:
    """Remove closed ``<think>…</think>`` pairs; a dangling ``</think>`` (Qwen3 puts ``<think>`` in the prompt)
    drops everything before it. Linear time (a regex with a lazy ``.*?`` is quadratic on unclosed tags)."""
    kept, pos = [], 0
    while True:
        m_open = _THINK_OPEN_RE.search(text, pos)
        m_close = _THINK_CLOSE_RE.search(text, m_open.end()) if m_open else None
        if not m_close:
            break
        kept.append(text[pos : m_open.start()])
        pos = m_close.end()
    text = "".join(kept) + text[pos:]
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    return text


def find_blocks(text: str, open_tag: str, close_tag: str) -> list[tuple[int, int, str]]:
    """``(start, end, body)`` of each ``open_tag…close_tag`` pair, left to right, the body ending at the first close
    tag (like a lazy regex), in linear time: once no close tag is left, no later open tag can match either."""
    out, pos = [], 0
    while True:
        i = text.find(open_tag, pos)
        if i < 0:
            break
        j = text.find(close_tag, i + len(open_tag))
        if j < 0:
            break
        out.append((i, j + len(close_tag), text[i + len(open_tag) : j]))
        pos = j + len(close_tag)
    return out


def parse_tool_calls(
    text: str, allowed_tools: set[str] | None, *, accept_string_arguments: bool = False
) -> ParsedCalls:
    """Parse the ``<tool_call>`` blocks of assistant text (``<think>`` must already be stripped).

    A block is valid iff its JSON is an object, or a non-empty list of objects, each with a string ``name`` in
    ``allowed_tools`` (any name when ``allowed_tools`` is None) and a dict ``arguments`` (or ``parameters``;
    absent or null means ``{}``). With ``accept_string_arguments`` a JSON-encoded string of an object is decoded.
    """
    out = ParsedCalls(open_tags=text.count(OPEN_TAG), close_tags=text.count(CLOSE_TAG))
    for _, _, calls, err in read_blocks(text, allowed_tools, accept_string_arguments=accept_string_arguments):
        if err:
            out.errors.append(err)
        else:
            out.blocks.append(calls)
    unmatched = out.tag_denominator - len(out.blocks) - len(out.errors)
    if unmatched > 0:
        out.errors.append(f"{unmatched} unbalanced tool_call tag(s)")
    return out


def parse_turn_calls(
    assistant_texts: list[str], allowed_tools: set[str] | None, *, accept_string_arguments: bool = False
) -> ParsedCalls:
    """The calls of a rollout, parsed turn by turn as the agent loop parses them (each turn ``<think>``-stripped on
    its own, blocks never spanning two turns), merged in order. What the loop executed is what HierR scores: a
    ``<tool_call>`` opened in one turn and closed in the next is two broken blocks, never one call."""
    return merge_turns(
        [
            parse_tool_calls(strip_think(t), allowed_tools, accept_string_arguments=accept_string_arguments)
            for t in assistant_texts
        ]
    )


def merge_turns(turns: list[ParsedCalls], steps: bool = False) -> ParsedCalls:
    """Per-turn parses merged in order (each turn's tag count its own, so a tag pair split across turns is two
    broken blocks); with ``steps``, each turn's calls are one parallel step (formats with one call per block)."""
    merged = ParsedCalls(denominator=0, steps=[] if steps else None)
    for turn in turns:
        merged.blocks += turn.blocks
        merged.errors += turn.errors
        merged.open_tags += turn.open_tags
        merged.close_tags += turn.close_tags
        merged.denominator += turn.tag_denominator
        if steps and turn.calls:
            merged.steps.append(turn.calls)
    return merged


#: the error entry of a ``<tool_call>`` or ``</tool_call>`` tag without its partner (slca_tool_agent answers each)
UNMATCHED_TAG = f"unmatched {OPEN_TAG} / {CLOSE_TAG} tag"


def loop_entries(text: str, blocks: list | None = None) -> list[tuple[ToolCall | None, str]]:
    """What ``slca_tool_agent`` runs of one hermes turn, in the order it answers them: ``(call, "")`` for each call of
    a block it can read (a list block gives one entry per call), ``(None, reason)`` for each block it cannot read (one
    bad call spoils its block) and then for each tag without its partner. ``<think>`` is stripped first; a turn with no
    tag has no entry (the loop ends the episode on it). ``blocks``: :func:`read_blocks` of the stripped text, when the
    caller has it already. The loop's parser builds its calls from this, and HierR checks decoded text against it."""
    visible = strip_think(text)
    if OPEN_TAG not in visible and CLOSE_TAG not in visible:
        return []
    if blocks is None:
        blocks = read_blocks(visible, None, accept_string_arguments=True)
    entries: list[tuple[ToolCall | None, str]] = []
    for _, _, calls, err in blocks:
        entries.extend([(None, err)] if err else [(c, "") for c in calls])
    unmatched = max(visible.count(OPEN_TAG), visible.count(CLOSE_TAG)) - len(blocks)
    entries.extend((None, UNMATCHED_TAG) for _ in range(unmatched))
    return entries


def read_blocks(
    text: str, allowed_tools: set[str] | None, *, accept_string_arguments: bool = False
) -> list[tuple[int, int, list[ToolCall], str]]:
    """``(start, end, calls, error)`` of each ``<tool_call>`` block of ``text``, in order: its calls and "", or no
    call and the reason, worded for the policy (the agent loop sends it back as the tool response). The one block
    reader behind :func:`parse_tool_calls` (HierR) and the agent loop's parser."""
    return [
        (start, end, *_parse_block(body, allowed_tools, accept_string_arguments))
        for start, end, body in find_blocks(text, OPEN_TAG, CLOSE_TAG)
    ]


def _parse_block(body: str, allowed: set[str] | None, accept_string_arguments: bool) -> tuple[list[ToolCall], str]:
    body = body.strip()
    if not body:
        return [], "empty <tool_call> block"
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError) as e:
        return [], f"the <tool_call> block is not valid JSON ({str(e)[:200]})"
    objs = [parsed] if isinstance(parsed, dict) else parsed if isinstance(parsed, list) else None
    if not objs:
        return [], f"the <tool_call> block holds a JSON {type(parsed).__name__}, not an object or a list of objects"
    calls = []
    for obj in objs:
        call, err = read_call(obj, accept_string_arguments=accept_string_arguments)
        if err:
            return [], err
        if allowed is not None and call.name not in allowed:
            return [], f"unknown tool {call.name[:64]!r}"
        calls.append(call)
    return calls, ""


def read_call(obj: Any, *, accept_string_arguments: bool) -> tuple[ToolCall | None, str]:
    """One call object of a ``<tool_call>`` block as (call, "") or (None, reason). The one rule for what a policy
    called, shared by the agent loop (what runs) and HierR (what is scored), so the two never disagree:

    - ``name``: a non-empty string;
    - arguments: the first non-empty of ``arguments`` and ``parameters`` (None, "", {} count as empty), else ``{}``
      — the authors' ``obj.get("arguments") or obj.get("parameters") or {}``; so ``"arguments": null`` beside
      ``"parameters": {...}`` takes the parameters and ``"arguments": ""`` means no arguments;
    - a string holding a JSON object is decoded only with ``accept_string_arguments`` (the loop runs such calls;
      HierR, like the authors' reward, counts them invalid unless ``reward_kwargs.accept_string_arguments``);
    - anything else that is not an object is a reason.
    """
    if not isinstance(obj, dict):
        return None, f"a <tool_call> list holds a JSON {type(obj).__name__}, not an object"
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None, 'a tool call needs a string "name"'
    args, problem = _arguments(obj, decode_strings=accept_string_arguments)
    if problem:
        return None, f'"arguments" of {name[:64]!r} must be a JSON object, got {problem}'
    return ToolCall(name=name, arguments=args), ""


def _arguments(obj: dict, decode_strings: bool) -> tuple[dict | None, str]:
    """(arguments, "") or (None, what they are instead): the first non-empty of ``arguments`` and ``parameters``
    (None, "" and {} are empty) else ``{}``, a string holding a JSON object decoded when ``decode_strings``."""
    args = next((v for v in (obj.get("arguments"), obj.get("parameters")) if not _empty_arguments(v)), {})
    if isinstance(args, str):
        if not decode_strings:
            return None, "a JSON-encoded string"
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return None, "a string that is not JSON"
    return (args, "") if isinstance(args, dict) else (None, f"a {type(args).__name__}")


def _empty_arguments(value: Any) -> bool:
    return value is None or (
        isinstance(value, (str, dict)) and not (value.strip() if isinstance(value, str) else value)
    )
