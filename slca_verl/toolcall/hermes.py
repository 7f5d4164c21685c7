"""The hermes tool-call format, written: the system prompt listing the tools, and an assistant turn's calls.

    system_prompt([{"name": "get_weather", "description": ..., "parameters": {...}}])
    render_calls([{"name": "get_weather", "arguments": {"city": "Paris"}}])
    # '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'

One ``<tool_call>`` block per call, one JSON object per block, as Qwen's chat templates write them and as every
hermes reader accepts (bfcl-eval's Qwen handler rejects a block holding a list of calls, which this project's own
parser would read; docs/eval.md). Non-ASCII text is written as is (``ensure_ascii=False``).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

OPEN, CLOSE = "<tool_call>", "</tool_call>"


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
