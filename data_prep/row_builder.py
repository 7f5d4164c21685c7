"""The one row builder every source uses: a :class:`Candidate` in, a verl RL parquet row out.

Row layout (the authors' Toucan RL parquet plus what our agent loop and SGLS need)::

    prompt        list of {"role", "content"}: system prompt listing the tools (hermes <tools> style),
                  then the dialogue up to and including the user turn to answer. Earlier tool calls are
                  assistant text with <tool_call> blocks, tool results are role "tool" messages.
    data_source   "xlam" | "toolace" | "hermes_fc" | "glaive_fc" | "toucan_toolcall" | "bfcl_<category>"
    ability       "tool_calling"
    agent_name    "slca_tool_agent"
    reward_model  {"style": "rule", "ground_truth": {
                      "allowed_tools": [names],
                      "gold_tool_calls": JSON str of [[{"name", "arguments"}, ...], ...]  (steps of parallel calls),
                      "question_content": str, "subset_name": "tool_call" | "irrelevant" | source subset,
                      "tool_schemas": JSON str of the OpenAI tool list}}
    extra_info    {"index": int (position in its split file), "split": str, "tool_schemas": JSON str,
                   "original_turn_index": int (which user turn of the source dialogue), "need_tools_kwargs": False}
    tools         JSON str of the OpenAI tool list (as the authors' rows have)

``gold_tool_calls`` is a JSON string, as in the authors' converter, because a list of lists of structs with
free-form ``arguments`` cannot be a stable parquet type; readers ``json.loads`` it (a list is accepted too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from data_prep.tool_schema import tools_index, validate_call
from slca_verl.toolcall import hermes
from slca_verl.toolcall.limits import has_lone_surrogate, non_finite_path

__all__ = [
    "ABILITY",
    "AGENT_NAME",
    "Candidate",
    "Rejection",
    "check_candidate",
    "row_problem",
    "build_row",
    "SYSTEM_PROMPT_STYLES",
]

ABILITY = "tool_calling"
AGENT_NAME = "slca_tool_agent"
SYSTEM_PROMPT_STYLES = ("hermes", "none")


@dataclass
class Candidate:
    """One RL sample before checks: the dialogue so far, the tools, and the gold calls of the turn to answer."""

    data_source: str
    messages: list[dict]  # dialogue without the tool-listing system prompt; ends with the user turn
    tools: list[dict]  # normalised OpenAI tools (data_prep.tool_schema.normalize_tools)
    gold: list[list[dict]]  # steps; each step a list of parallel {"name", "arguments"} calls
    question: str
    record_index: int
    turn_index: int = 0
    subset: str | None = None  # default: "tool_call" when there is gold, else "irrelevant"
    extra_ground_truth: dict[str, Any] = field(default_factory=dict)
    prompt: list[dict] | None = None  # a finished prompt kept verbatim (Toucan pass-through)
    split: str | None = None  # a split the source pins (held out by construction); None: the seeded random split


@dataclass
class Rejection:
    """A row that will not be written, with the report bucket and a human-readable detail."""

    reason: str
    detail: str
    record_index: int


_MAX_TURN_INDEX = 2**31 - 1


def _field_problem(c: Candidate) -> str | None:
    """What would give a parquet column a second type (or overflow it), so that writing the split fails."""
    if not isinstance(c.data_source, str) or not c.data_source:
        return f"data_source is {c.data_source!r}, not a non-empty string"
    if c.subset is not None and not isinstance(c.subset, str):
        return f"subset_name is a {type(c.subset).__name__}, not a string"
    if type(c.turn_index) is not int or not 0 <= c.turn_index <= _MAX_TURN_INDEX:
        return f"original_turn_index {c.turn_index!r} is not an integer in [0, {_MAX_TURN_INDEX}]"
    for i, m in enumerate(c.prompt if c.prompt is not None else c.messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            return f"message {i} is not {{role: str, content: str}}"
    for key, value in c.extra_ground_truth.items():
        if not isinstance(value, str):
            return f"ground_truth.{key} is a {type(value).__name__}, not a string"
    return None


def check_candidate(c: Candidate) -> Rejection | None:
    """Reject empty questions, malformed gold structure, gold calls that do not fit their tool's schema, non-finite
    numbers in gold or schemas, and fields whose type the parquet columns cannot hold."""
    if not isinstance(c.question, str) or not c.question.strip():
        return Rejection("empty_question", "the turn to answer has no user text", c.record_index)
    if not c.tools:
        return Rejection("no_tools", "the sample offers no tool", c.record_index)
    if not isinstance(c.gold, list) or not all(isinstance(step, list) and step for step in c.gold):
        return Rejection("gold_not_nested", "gold_tool_calls must be a list of non-empty steps", c.record_index)
    problem = _field_problem(c)
    if problem is not None:
        return Rejection("field_type_invalid", problem, c.record_index)
    where = non_finite_path(c.gold)  # (tool schemas are checked once per tool by normalize_tool)
    if where is not None:
        return Rejection(
            "non_finite_number", f"gold_tool_calls at {where or '(root)'}: NaN or infinity is not JSON", c.record_index
        )
    index = tools_index(c.tools)
    names_only = c.extra_ground_truth.get("gold_format") == "names"  # no arguments to check: only the name
    for step in c.gold:
        for call in step:
            problem = _validate_name(call, index) if names_only else validate_call(call, index)
            if problem is not None:
                return Rejection(problem[0], problem[1], c.record_index)
    return None


def _validate_name(call: Any, index: dict[str, str]) -> tuple[str, str] | None:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return "gold_call_malformed", f"call is not an object with a string name: {str(call)[:120]}"
    if call["name"] not in index:
        return "gold_call_unknown_tool", f"{call['name']!r} is not among the row's tools"
    return None


def row_problem(row: dict[str, Any], record_index: int) -> Rejection | None:
    """The last check of a built row: every string must be storable as UTF-8."""
    gt = row["reward_model"]["ground_truth"]
    texts = [
        row["data_source"],
        row["tools"],
        *(m["content"] for m in row["prompt"]),
        *gt["allowed_tools"],
        *(v for v in gt.values() if isinstance(v, str)),
    ]
    if has_lone_surrogate(texts):
        return Rejection(
            "invalid_unicode", "a string holds a lone surrogate (U+D800-U+DFFF), which UTF-8 cannot store", record_index
        )
    return None


def build_row(c: Candidate, system_prompt: str = "hermes") -> dict[str, Any]:
    """A checked candidate -> the parquet row (``extra_info.index`` / ``split`` are filled in at write time)."""
    tools_json = json.dumps(c.tools, ensure_ascii=False, allow_nan=False)
    if c.prompt is not None:
        prompt = c.prompt
    elif system_prompt == "hermes":
        system = hermes.system_prompt(c.tools)
        messages = list(c.messages)
        if messages and messages[0]["role"] == "system":  # one system message: the source's text after ours
            system = f"{system}\n\n{messages.pop(0)['content']}"
        prompt = [{"role": "system", "content": system}] + messages
    else:
        prompt = list(c.messages)
    gold = [[{"name": call["name"], "arguments": call.get("arguments", {})} for call in step] for step in c.gold]
    ground_truth = {
        "allowed_tools": [t["function"]["name"] for t in c.tools],
        "gold_tool_calls": json.dumps(gold, ensure_ascii=False, allow_nan=False),
        "question_content": c.question,
        "subset_name": c.subset or ("tool_call" if gold else "irrelevant"),
        "tool_schemas": tools_json,
        **c.extra_ground_truth,
    }
    return {
        "prompt": [{"role": m["role"], "content": m["content"]} for m in prompt],
        "data_source": c.data_source,
        "ability": ABILITY,
        "agent_name": AGENT_NAME,
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {
            "index": -1,
            "split": "",
            "tool_schemas": tools_json,
            "original_turn_index": int(c.turn_index),
            "need_tools_kwargs": False,
        },
        "tools": tools_json,
    }
