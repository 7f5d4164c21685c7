"""Text and ground-truth parsing for HierR: turn splitting of decoded text and the ground truth; the hermes reader
(``<tool_call>`` blocks, ``<think>`` stripping) is :mod:`slca_verl.toolcall.hermes`, re-exported here.

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

from slca_verl.toolcall.hermes import (  # noqa: F401  (the hermes reader, re-exported for HierR's callers)
    CLOSE_TAG,
    OPEN_TAG,
    ParsedCalls,
    ToolCall,
    _arguments,
    find_blocks,
    parse_tool_calls,
    parse_turn_calls,
    read_call,
    strip_think,
)
from slca_verl.toolcall.rows import GOLD_FORMS, plain

logger = logging.getLogger(__name__)

# The role headers around a run of tool responses, as the Qwen template renders them, with or without the special
# tokens (verl decodes with skip_special_tokens=True, which drops <|im_start|>/<|im_end|> but keeps the role words).
_HEADER_BEFORE_RE = re.compile(r"(?:<\|im_end\|>)?\s*(?:<\|im_start\|>)?(?:user|tool)?\s*$")
_HEADER_AFTER_RE = re.compile(r"\s*(?:<\|im_end\|>)?\s*(?:(?:<\|im_start\|>)?assistant[ \t]*\n)?")
_HEADER_WINDOW = 64  # headers are short; matching only this window keeps splitting linear in the text length
_SPECIAL_TOKENS_RE = re.compile(r"<\|(?:im_start|im_end|endoftext)\|>")


@dataclass
class Trajectory:
    """A rollout split into assistant turns and tool responses (flat, in order)."""

    assistant_texts: list[str]
    tool_responses: list[str]
    # True when the text ends on tool responses (no assistant text after the last one).
    ends_with_observation: bool = False
    # the number of responses in each run of tool responses separated by assistant text (one run per environment
    # turn in a real rollout), in order (``assistant_texts[i]`` is the text before run i)
    run_sizes: tuple[int, ...] = ()

    @property
    def tool_response_runs(self) -> int:
        return len(self.run_sizes)


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
    return Trajectory(
        assistant_texts=assistant,
        tool_responses=responses,
        ends_with_observation=ends_with_observation,
        run_sizes=tuple(len(run) for run in runs),
    )


#: the forms of gold the authors' data holds (``ground_truth.gold_format``; slca_verl.rewards.execution says what
#: each form cannot measure)


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
    gt = plain(_maybe_json(ground_truth))
    if not isinstance(gt, dict):
        return GroundTruth([], None, "", None, "", [f"ground_truth is a {type(ground_truth).__name__}, not a dict"])

    raw_gold = plain(_maybe_json(gt.get("gold_tool_calls")))
    steps: list[list[ToolCall]] = []
    gold_errors: list[str] = []
    if raw_gold is None:
        gold_errors.append("ground_truth has no gold_tool_calls (an irrelevance row has [])")
    elif not isinstance(raw_gold, list):
        gold_errors.append(f"gold_tool_calls is a {type(raw_gold).__name__}, not a list")
    else:
        steps, gold_errors = _gold_steps(raw_gold)
    gold_format = _gold_format(gt.get("gold_format"), raw_gold, reasons)

    schemas = plain(_maybe_json(gt.get("tool_schemas")))
    allowed_raw = plain(_maybe_json(gt.get("allowed_tools")))
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
        if declared in GOLD_FORMS:
            return declared
        reasons.append(f"gold_format {str(declared)[:40]!r} is not one of {list(GOLD_FORMS)}; inferred")
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
