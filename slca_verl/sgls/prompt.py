"""The simulator prompt (the model plays the API server) and getting a JSON body back out of the reply.

    messages = build_messages(tool, {"city": "Paris"}, context=[{"name": ..., "arguments": ..., "response": ...}])
    body, repaired = extract_json(reply_text)    # raises ValueError when no JSON can be recovered

Extraction: ``<think>…</think>`` and markdown fences are dropped, the first JSON object or array in the text is
decoded; a reply cut off mid-JSON (the ``max_tokens`` limit) is repaired by closing its open strings, arrays and
objects, and flagged as repaired.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .schema import NormalisedTool

SYSTEM_PROMPT = (
    "You act as the production backend of a web service. Each message is one incoming request to one endpoint; "
    "you answer with the JSON body that the real service would send back.\n"
    "Rules:\n"
    "1. Output one JSON value and nothing else: no explanations, no markdown fences.\n"
    "2. Make the data specific and plausible (real-looking names, ids, dates, amounts), and consistent with the "
    "request and with anything this service already answered earlier in the session.\n"
    "3. When the request is well-formed but cannot succeed (the item does not exist, nothing matches), answer "
    'with a realistic error object such as {"error": {"code": 404, "message": "..."}} rather than inventing '
    "success.\n"
    "4. Keep it compact: return the fields a client needs, at most a handful of list items."
)


def _short(text: str, limit: int) -> str:
    if limit <= 0 or len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + " … " + text[-half:]


_SECTIONS: dict[str, str] = {}


def _tool_section(tool: NormalisedTool) -> str:
    """The endpoint part of the prompt; built once per tool (the same tool is called many times)."""
    text = _SECTIONS.get(tool.fingerprint)
    if text is None:
        spec = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        text = f"Endpoint specification:\n{json.dumps(spec, ensure_ascii=False)}"
        if tool.response_schema is not None:
            text += "\n\nThe response body must validate against this JSON Schema:\n" + json.dumps(
                tool.response_schema, ensure_ascii=False
            )
        if len(_SECTIONS) > 20000:
            _SECTIONS.clear()
        _SECTIONS[tool.fingerprint] = text
    return text


def build_messages(
    tool: NormalisedTool,
    arguments: dict,
    context: list[dict] | None = None,
    *,
    context_turns: int = 4,
    context_chars: int = 600,
) -> list[dict]:
    """Chat messages for one simulated call.

    Args:
        tool: the endpoint (name, description, parameter schema, optional response schema).
        arguments: the call's (validated) arguments.
        context: earlier calls of the same trajectory, oldest first: ``{"name", "arguments", "response"}`` dicts;
            the last ``context_turns`` are shown, each response cut to ``context_chars``.
    """
    parts = [_tool_section(tool)]
    recent = (context or [])[-context_turns:] if context_turns > 0 else []
    if recent:
        lines = []
        for c in recent:
            args = json.dumps(c.get("arguments", {}), ensure_ascii=False, sort_keys=True)
            resp = _short(str(c.get("response", "")), context_chars)
            lines.append(f"- {c.get('name', '?')} {args} -> {resp}")
        parts.append("Earlier requests in this session and what the service answered:\n" + "\n".join(lines))
    parts.append(
        f"Incoming request: {tool.name} with arguments "
        f"{json.dumps(arguments, ensure_ascii=False, sort_keys=True)}\nRespond with the JSON body only."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)(```|$)", re.DOTALL)


def extract_json(text: str) -> tuple[Any, bool]:
    """The first JSON object/array in a model reply. Returns ``(value, repaired)``; raises ValueError if none."""
    if not isinstance(text, str):
        raise ValueError("reply is not text")
    cleaned = _THINK.sub("", text).strip()
    fence = _FENCE.search(cleaned)
    candidates = [fence.group(1).strip()] if fence else []
    candidates.append(cleaned)
    decoder = json.JSONDecoder()
    for cand in candidates:
        starts = [i for i in (cand.find("{"), cand.find("[")) if i >= 0]
        for start in sorted(starts):
            try:
                value, _ = decoder.raw_decode(cand, start)
                return value, False
            except json.JSONDecodeError:
                pass
            repaired = repair_truncated_json(cand[start:])
            if repaired:  # an empty {} / [] left after repair carries no answer
                return repaired, True
    raise ValueError(f"no JSON object in the reply: {_short(' '.join(text.split()), 160)!r}")


def _open_closers(text: str) -> tuple[list[str], bool, bool] | None:
    """Closers still owed by a JSON prefix, and whether it ends inside a string / after a backslash."""
    stack, in_str, escape = [], False, False
    for ch in text:
        if in_str:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return None  # a complete value followed by more text: not a truncation
    return stack, in_str, escape


def repair_truncated_json(text: str) -> Any | None:
    """Close what a cut-off JSON text left open; None when the prefix itself is not JSON-like."""
    state = _open_closers(text)
    if state is None or not state[0]:
        return None
    _, in_str, escape = state
    body = text.rstrip()
    if in_str:
        body = (body[:-1] if escape else body) + '"'
    for _ in range(8):  # drop a dangling key / separator / token until the closers make valid JSON
        state = _open_closers(body)
        if state is not None and state[0] and not state[1]:
            try:
                return json.loads(body + "".join(reversed(state[0])))
            except json.JSONDecodeError:
                pass
        trimmed = re.sub(r'(\s*,\s*|\s*:\s*)$', "", body)
        if trimmed == body:
            trimmed = re.sub(r'("(?:[^"\\]|\\.)*"|[^,\[\]{}:\s"]+)\s*$', "", body)
        if trimmed == body or not trimmed:
            return None
        body = trimmed
    return None
