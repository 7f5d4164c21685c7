"""Parsers for the ways the sources write a tool call, all returning ``[{"name": str, "arguments": dict}, ...]``.

- JSON: ``{"name": ..., "arguments": {...}}`` or a list of them (xLAM answers, Toucan, hermes);
  ``parameters`` is accepted for ``arguments``, and arguments given as a JSON string are decoded;
- hermes ``<tool_call>…</tool_call>`` blocks, whose body may be a python dict literal (single quotes);
- glaive ``<functioncall> {"name": "f", "arguments": '{"a": 1}'}`` (arguments in single quotes);
- ToolACE / BFCL python style ``[f(a=1, b="x"), g()]``.

Every parser raises :class:`CallParseError` instead of guessing, and
:class:`slca_verl.toolcall.limits.RecordError` (``too_deep`` / ``non_finite_number``) for calls beyond the record
bounds.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from slca_verl.toolcall import hermes, limits
from slca_verl.toolcall.schema import split_top_level

__all__ = [
    "CallParseError",
    "normalize_call",
    "parse_json_calls",
    "parse_hermes_calls",
    "parse_glaive_call",
    "parse_python_calls",
]


class CallParseError(ValueError):
    """A tool call that cannot be read."""


def normalize_call(obj: Any) -> dict:
    """One call object -> ``{"name", "arguments"}``; arguments given as JSON text are decoded."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"].strip():
        raise CallParseError(f"not a call object with a name: {str(obj)[:120]}")
    args = obj.get("arguments", obj.get("parameters", {}))
    if args is None:
        args = {}
    if isinstance(args, str):
        try:
            args = limits.loads(args, f"gold call {obj['name']} arguments") if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise CallParseError(f"{obj['name']}: arguments string is not JSON: {exc}") from None
    if not isinstance(args, dict):
        raise CallParseError(f"{obj['name']}: arguments is a {type(args).__name__}, not an object")
    return {"name": obj["name"].strip(), "arguments": args}


def parse_json_calls(value: Any) -> list[dict]:
    """A JSON string / object / list of call objects -> calls."""
    if isinstance(value, str):
        try:
            value = limits.loads(value, "gold call text")
        except json.JSONDecodeError as exc:
            raise CallParseError(f"call text is not JSON: {exc}") from None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise CallParseError(f"calls are a {type(value).__name__}, not a list")
    return [normalize_call(v) for v in value]


def _loads_lenient(body: str) -> Any:
    try:
        return limits.loads(body, "gold tool_call body")
    except json.JSONDecodeError:
        pass
    try:
        return limits.literal_eval(body, "gold tool_call body")
    except (ValueError, SyntaxError, TypeError) as exc:
        raise CallParseError(f"tool_call body is neither JSON nor a python literal: {exc}") from None


def parse_hermes_calls(text: str) -> list[dict]:
    """All ``<tool_call>`` blocks in an assistant message -> calls (``[]`` when there is no block). The blocks are
    found as the library's hermes reader finds them; unlike it (a policy's turn), a dataset's body may be a python
    literal, and an unreadable one raises (the row is rejected, not trained on)."""
    text = hermes.strip_think(text or "")
    if text.count(hermes.OPEN_TAG) != text.count(hermes.CLOSE_TAG):
        raise CallParseError("unbalanced <tool_call> tags")
    calls = []
    for _, _, body in hermes.find_blocks(text, hermes.OPEN_TAG, hermes.CLOSE_TAG):
        parsed = _loads_lenient(body.strip())
        for obj in parsed if isinstance(parsed, list) else [parsed]:
            calls.append(normalize_call(obj))
    return calls


_GLAIVE_ARGS_RE = re.compile(r"""^(\{.*"arguments"\s*:\s*)'(.*)'(\s*\})$""", re.S)


def parse_glaive_call(text: str) -> dict:
    """The text after ``<functioncall>``: JSON whose ``arguments`` is a single-quoted JSON string."""
    body = text.replace("<|endoftext|>", "").strip()
    try:
        return normalize_call(limits.loads(body, "gold functioncall"))
    except json.JSONDecodeError:
        pass
    m = _GLAIVE_ARGS_RE.match(body)
    if not m:
        raise CallParseError(f"functioncall is not JSON: {body[:120]}")
    head, args_text, tail = m.groups()
    try:
        obj = limits.loads(head + "null" + tail, "gold functioncall")
        args = limits.loads(args_text, "gold functioncall arguments") if args_text.strip() else {}
    except json.JSONDecodeError as exc:
        raise CallParseError(f"functioncall arguments are not JSON: {exc}") from None
    obj["arguments"] = args
    return normalize_call(obj)


def _split_calls(text: str) -> list[str]:
    """``f(a=1), g(b=[1, 2])`` -> ["f(a=1)", "g(b=[1, 2])"]; empty parts dropped, imbalance is an error."""
    try:
        return [p for p in split_top_level(text, strict=True) if p]
    except ValueError as exc:
        raise CallParseError(f"{exc} in python-style calls") from None


def parse_python_calls(text: str) -> list[dict]:
    """``[f(a=1, b="x"), Get Weather(city="Paris")]`` -> calls. Names may contain spaces and dots (ToolACE)."""
    body = (text or "").strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    if not body.strip():
        raise CallParseError("no call in python-style text")
    calls = []
    for part in _split_calls(body):
        open_at = part.find("(")
        if open_at <= 0 or not part.endswith(")"):
            raise CallParseError(f"not a call: {part[:120]}")
        name, arg_text = part[:open_at].strip(), part[open_at + 1 : -1]
        too_deep = limits.RecordError("too_deep", f"{name}: arguments nest deeper than the python parser allows")
        try:
            node = ast.parse(f"_f({arg_text})", mode="eval").body
        except (RecursionError, MemoryError):
            raise too_deep from None
        except SyntaxError as exc:
            if "too many nested" in str(exc.msg):
                raise too_deep from None
            raise CallParseError(f"{name}: arguments do not parse: {exc.msg}") from None
        if node.args:
            raise CallParseError(f"{name}: positional arguments cannot be mapped to parameter names")
        args = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise CallParseError(f"{name}: **kwargs cannot be mapped to parameter names")
            try:
                args[kw.arg] = ast.literal_eval(kw.value)
            except (ValueError, SyntaxError, TypeError, RecursionError) as exc:
                raise CallParseError(f"{name}: value of {kw.arg} is not a literal: {exc}") from None
        calls.append(normalize_call({"name": name, "arguments": args}))
    return calls
