"""Text and ground-truth parsing for HierR: hermes ``<tool_call>`` blocks, ``<think>`` stripping, turn splitting.

Nothing here scores; every function is total (bad input gives an empty / invalid result and a reason, never an
exception), because a reward function that raises kills a whole training step.

Hermes format (Qwen2.5 / Qwen3 chat templates)::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

A block may also hold a JSON list of such objects (several calls in one block = parallel calls).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
# <think>…</think> and <thinking>…</thinking>, closed pairs only.
_THINK_OPEN_RE = re.compile(r"<think(?:ing)?>")
_THINK_CLOSE_RE = re.compile(r"</think(?:ing)?>")
# The role headers around a run of tool responses, as the Qwen template renders them, with or without the special
# tokens (verl decodes with skip_special_tokens=True, which drops <|im_start|>/<|im_end|> but keeps the role words).
_HEADER_BEFORE_RE = re.compile(r"(?:<\|im_end\|>)?\s*(?:<\|im_start\|>)?(?:user|tool)?\s*$")
_HEADER_AFTER_RE = re.compile(r"\s*(?:<\|im_end\|>)?\s*(?:(?:<\|im_start\|>)?assistant[ \t]*\n)?")
_HEADER_WINDOW = 64  # headers are short; matching only this window keeps splitting linear in the text length
_SPECIAL_TOKENS_RE = re.compile(r"<\|(?:im_start|im_end|endoftext)\|>")


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


def to_python(obj: Any) -> Any:
    """numpy arrays / scalars (parquet round trips) → plain lists / Python scalars, recursively."""
    if isinstance(obj, dict):
        return {str(k): to_python(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_python(v) for v in obj]
    tolist = getattr(obj, "tolist", None)  # numpy ndarray and numpy scalars
    if callable(tolist) and type(obj).__module__ == "numpy":
        return to_python(tolist())
    return obj


def parse_tool_calls(
    text: str, allowed_tools: set[str] | None, *, accept_string_arguments: bool = False
) -> ParsedCalls:
    """Parse the ``<tool_call>`` blocks of assistant text (``<think>`` must already be stripped).

    A block is valid iff its JSON is an object, or a non-empty list of objects, each with a string ``name`` in
    ``allowed_tools`` (any name when ``allowed_tools`` is None) and a dict ``arguments`` (or ``parameters``;
    absent or null means ``{}``). With ``accept_string_arguments`` a JSON-encoded string of an object is decoded.
    """
    out = ParsedCalls(open_tags=text.count(OPEN_TAG), close_tags=text.count(CLOSE_TAG))
    for _, _, body in find_blocks(text, OPEN_TAG, CLOSE_TAG):
        calls, err = _parse_block(body, allowed_tools, accept_string_arguments)
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
    merged = ParsedCalls(denominator=0)
    for text in assistant_texts:
        turn = parse_tool_calls(strip_think(text), allowed_tools, accept_string_arguments=accept_string_arguments)
        merged.blocks += turn.blocks
        merged.errors += turn.errors
        merged.open_tags += turn.open_tags
        merged.close_tags += turn.close_tags
        merged.denominator += turn.tag_denominator
    return merged


def _parse_block(body: str, allowed: set[str] | None, accept_string_arguments: bool) -> tuple[list[ToolCall], str]:
    body = body.strip()
    if not body:
        return [], "empty tool_call block"
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError) as e:
        return [], f"tool_call is not JSON ({type(e).__name__})"
    objs = [parsed] if isinstance(parsed, dict) else parsed if isinstance(parsed, list) else None
    if not objs:
        return [], f"tool_call JSON is {type(parsed).__name__}, not an object or a list of objects"
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


@dataclass
class Trajectory:
    """A rollout split into assistant turns and tool responses (flat, in order)."""

    assistant_texts: list[str]
    tool_responses: list[str]
    # True when the text ends on tool responses (no assistant text after the last one).
    ends_with_observation: bool = False
    # runs of tool responses separated by assistant text (one run per environment turn in a real rollout)
    tool_response_runs: int = 0


def split_decoded_response(solution_str: str) -> Trajectory:
    """Split a decoded multi-turn response into assistant turns and tool responses.

    Works on both renderings of the Qwen template: with special tokens
    (``…</tool_call><|im_end|>\\n<|im_start|>user\\n<tool_response>…</tool_response><|im_end|>\\n<|im_start|>assistant\\n…``)
    and without them (verl's ``skip_special_tokens=True``: ``…</tool_call>\\nuser\\n<tool_response>…``).
    """
    if not isinstance(solution_str, str):
        solution_str = "" if solution_str is None else str(solution_str)
    assistant, responses = [], []
    runs: list[list[tuple[int, int, str]]] = []  # tool responses separated by whitespace only form one run
    for block in find_blocks(solution_str, "<tool_response>", "</tool_response>"):
        if runs and not solution_str[runs[-1][-1][1] : block[0]].strip():
            runs[-1].append(block)
        else:
            runs.append([block])
    pos = 0
    for run in runs:
        piece = solution_str[pos : run[0][0]]
        window = piece[-_HEADER_WINDOW:]
        assistant.append(piece[: len(piece) - len(window)] + window[: _HEADER_BEFORE_RE.search(window).start()])
        responses.extend(body.strip() for _, _, body in run)
        pos = run[-1][1]
        pos += _HEADER_AFTER_RE.match(solution_str[pos : pos + _HEADER_WINDOW]).end()
    tail = solution_str[pos:]
    ends_with_observation = bool(responses) and not tail.strip()
    if tail.strip() or not assistant:
        assistant.append(tail)
    assistant = [_SPECIAL_TOKENS_RE.sub("", a).strip() for a in assistant]
    return Trajectory(assistant_texts=assistant, tool_responses=responses, ends_with_observation=ends_with_observation,
                      tool_response_runs=len(runs))


#: the forms of gold the authors' data holds (``ground_truth.gold_format``; slca_verl.rewards.execution says what
#: each form cannot measure)
GOLD_FORMATS = ("nested", "flat", "names")


@dataclass
class GroundTruth:
    """Normalised ground truth. ``gold_steps`` is a list of steps, each a non-empty list of gold calls."""

    gold_steps: list[list[ToolCall]]
    allowed_tools: set[str] | None
    question: str
    tool_schemas: Any
    subset_name: str
    reasons: list[str] = field(default_factory=list)
    gold_errors: list[str] = field(default_factory=list)
    gold_format: str = "nested"  # nested | flat | names: which reward information the gold carries

    @property
    def gold_calls(self) -> list[ToolCall]:
        return [c for s in self.gold_steps for c in s]


def _maybe_json(obj: Any) -> Any:
    if isinstance(obj, str):
        try:
            return json.loads(obj)
        except ValueError:
            return obj
    return obj


def _gold_call(item: Any) -> tuple[ToolCall | None, str]:
    """One gold call as (call, "") or (None, why it cannot be scored). Accepts ``{"name", "arguments"}`` (or
    ``parameters``; a JSON string of an object is decoded), the OpenAI form ``{"type": "function", "function":
    {...}}`` and a bare name (names-only gold: arguments are not checked). Never guesses: arguments that are a
    list or a string that is not a JSON object would otherwise give any predicted arguments full credit."""
    if isinstance(item, str) and item:
        return ToolCall(name=item, arguments={}), ""
    if isinstance(item, dict) and isinstance(item.get("function"), dict) and "name" not in item:
        item = item["function"]
    if not isinstance(item, dict):
        return None, f"a gold call is a {type(item).__name__}, not an object or a name"
    name = item.get("name")
    if not isinstance(name, str) or not name:
        return None, f"a gold call has no string name ({str(name)[:40]!r})"
    args, problem = _arguments(item, decode_strings=True)
    if problem:
        return None, f"gold arguments of {name[:64]!r} are {problem}, not an object"
    return ToolCall(name=name, arguments=args), ""


def _gold_steps(raw_gold: list) -> tuple[list[list[ToolCall]], list[str]]:
    """Nested steps ``[[call, …], …]`` or a flat list ``[call, …]`` (one step) → (steps, errors). Empty steps are
    skipped (they hold no call); an unreadable call or a step that is not a list is an error, never dropped."""
    nested = any(isinstance(s, list) for s in raw_gold)
    steps, errors = [], []
    for n, step in enumerate(raw_gold if nested else [raw_gold]):
        if not isinstance(step, list):
            errors.append(f"gold step {n} is a {type(step).__name__}, not a list of calls")
            continue
        calls = []
        for item in step:
            call, err = _gold_call(item)
            if err:
                errors.append(err)
            else:
                calls.append(call)
        if calls:
            steps.append(calls)
    return steps, errors


def parse_ground_truth(ground_truth: Any) -> GroundTruth:
    """Normalise the authors' ground-truth dict (docs/method.md), tolerating JSON strings and numpy arrays.

    ``gold_tool_calls`` may be nested steps ``[[call, …], …]`` or a flat list ``[call, …]`` (one step).
    ``allowed_tools`` missing → taken from ``tool_schemas`` names, else None (any tool name is accepted).
    Gold that cannot be read (see :func:`_gold_call`) sets ``gold_errors``; HierR then scores the row 0 with
    ``gold_invalid`` = 1 instead of scoring it as an irrelevance row.
    """
    reasons = []
    gt = to_python(_maybe_json(ground_truth))
    if not isinstance(gt, dict):
        return GroundTruth([], None, "", None, "", [f"ground_truth is a {type(ground_truth).__name__}, not a dict"])

    raw_gold = to_python(_maybe_json(gt.get("gold_tool_calls")))
    steps: list[list[ToolCall]] = []
    gold_errors: list[str] = []
    if raw_gold is None:
        gold_errors.append("ground_truth has no gold_tool_calls (an irrelevance row has [])")
    elif not isinstance(raw_gold, list):
        gold_errors.append(f"gold_tool_calls is a {type(raw_gold).__name__}, not a list")
    else:
        steps, gold_errors = _gold_steps(raw_gold)
    gold_format = _gold_format(gt.get("gold_format"), raw_gold, reasons)

    schemas = to_python(_maybe_json(gt.get("tool_schemas")))
    allowed_raw = to_python(_maybe_json(gt.get("allowed_tools")))
    allowed: set[str] | None
    if isinstance(allowed_raw, list) and allowed_raw:
        allowed = {str(t) for t in allowed_raw}
    else:
        allowed = _schema_names(schemas)
        reasons.append(
            "allowed_tools missing; using tool_schemas names" if allowed else "allowed_tools missing; any name accepted"
        )
        allowed = allowed or None
    question = gt.get("question_content")
    return GroundTruth(
        gold_steps=steps,
        allowed_tools=allowed,
        question=question if isinstance(question, str) else "",
        tool_schemas=schemas,
        subset_name=str(gt.get("subset_name") or ""),
        reasons=reasons,
        gold_errors=gold_errors,
        gold_format=gold_format,
    )


def _gold_format(declared: Any, raw_gold: Any, reasons: list[str]) -> str:
    """``ground_truth.gold_format`` as data_prep writes it, else inferred from the raw gold: a list of lists is
    nested, a list of names names-only, any other list flat (an empty list is nested: an irrelevance row)."""
    if declared is not None:
        if declared in GOLD_FORMATS:
            return declared
        reasons.append(f"gold_format {str(declared)[:40]!r} is not one of {list(GOLD_FORMATS)}; inferred")
    if not isinstance(raw_gold, list) or not raw_gold or any(isinstance(s, list) for s in raw_gold):
        return "nested"
    return "names" if all(isinstance(s, str) for s in raw_gold) else "flat"


def _schema_names(schemas: Any) -> set[str]:
    names = set()
    for s in schemas if isinstance(schemas, list) else []:
        if isinstance(s, dict):
            fn = s.get("function") if isinstance(s.get("function"), dict) else s
            if isinstance(fn.get("name"), str):
                names.add(fn["name"])
    return names
