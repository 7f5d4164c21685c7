"""Every tool-call format verl 0.9.1 speaks, as one object: read an assistant turn's calls, write calls, name the tags.

    fmt = get_format("qwen3_coder")              # actor_rollout_ref.rollout.multi_turn.format's value
    fmt.render_calls([{"name": "get_weather", "arguments": {"city": "Paris"}}])
    parsed = await fmt.parse(text, tools=schemas)  # ParsedCalls: valid calls, a reason per unreadable one
    fmt.has_call_attempt(text)                     # the turn is a tool turn (segment ids), even when unreadable

``hermes`` is read by this project's own reader (:mod:`slca_verl.toolcall.hermes`: list blocks, ``parameters``,
every unreadable block reported). Every other format is read by verl's own registered ``ToolParser`` of that name
(gpt-oss, qwen3_coder, glm, seed, minimax, kimi, deepseek_v4, gemma4), never by a second parser of ours; on top of
it this layer is stricter than verl, which logs and drops what it cannot read:

- a call whose arguments are not a JSON object is an error entry (the rule of
  :func:`~slca_verl.toolcall.hermes.read_call`);
- a call of a tool the row does not list is an error entry (when the caller gives ``allowed``);
- every call marker verl's parser did not turn into a call (``call_open`` minus the calls it returned) is an error
  entry, "unreadable <format> call", so a broken call is never silently the same as no call;
- ``<think>`` is stripped first, as for hermes: a call written while thinking is not a call.

:data:`SPECS` holds each format's markers and how it writes one call (the model's chat template's way, as verl's
parser reads it back; ``tests/toolcall/test_toolcall_formats.py`` round-trips every format through verl's parser).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from slca_verl.toolcall import hermes
from slca_verl.toolcall.hermes import ParsedCalls, ToolCall, read_call, strip_think


def _raw_or_json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _qwen3_coder(name: str, args: dict) -> str:
    params = "".join(f"<parameter={k}>\n{_raw_or_json(v)}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def _glm(name: str, args: dict) -> str:
    pairs = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{_raw_or_json(v)}</arg_value>\n" for k, v in args.items())
    return f"<tool_call>{name}\n{pairs}</tool_call>"


def _seed(name: str, args: dict) -> str:
    params = "".join(f"<parameter={k}>{_raw_or_json(v)}</parameter>\n" for k, v in args.items())
    return f"<seed:tool_call>\n<function={name}>\n{params}</function>\n</seed:tool_call>"


def _minimax(name: str, args: dict) -> str:
    params = "".join(f'<parameter name="{k}">{_raw_or_json(v)}</parameter>\n' for k, v in args.items())
    return f'<minimax:tool_call>\n<invoke name="{name}">\n{params}</invoke>\n</minimax:tool_call>'


def _kimi(name: str, args: dict) -> str:
    return (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions."
        + name
        + ":0<|tool_call_argument_begin|>"
        + json.dumps(args, ensure_ascii=False)
        + "<|tool_call_end|><|tool_calls_section_end|>"
    )


def _deepseek_v4(name: str, args: dict) -> str:
    d = "｜DSML｜"
    params = "".join(
        f'<{d}parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">{_raw_or_json(v)}'
        f"</{d}parameter>\n"
        for k, v in args.items()
    )
    return f'<{d}tool_calls>\n<{d}invoke name="{name}">\n{params}</{d}invoke>\n</{d}tool_calls>'


def _gemma4(name: str, args: dict) -> str:
    def value(v: Any) -> str:
        if isinstance(v, str):
            return f'<|"|>{v}<|"|>'
        return "null" if v is None else json.dumps(v)  # bools and numbers bare; gemma4 has no nested values here

    return "<|tool_call>call:" + name + "{" + ",".join(f"{k}:{value(v)}" for k, v in args.items()) + "}<tool_call|>"


def _gpt_oss(name: str, args: dict) -> str:
    return (
        f"<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
        + json.dumps(args, ensure_ascii=False)
        + "<|call|>"
    )


@dataclass(frozen=True)
class FormatSpec:
    """How a format marks and writes calls.

    Attributes:
        name: verl's ``multi_turn.format`` value (its ``ToolParser`` registry key).
        call_open / call_close: the text that opens / closes one call (counted to find calls verl's parser lost).
        markers: any of these outside ``<think>`` makes a turn a tool turn.
        render_one: one call ``(name, arguments)`` as the format writes it; calls of one step are joined by
            ``joiner``.
    """

    name: str
    call_open: str
    call_close: str
    markers: tuple[str, ...]
    render_one: Callable[[str, dict], str]
    joiner: str = "\n"


SPECS: dict[str, FormatSpec] = {
    s.name: s
    for s in (
        FormatSpec(
            "hermes", hermes.OPEN_TAG, hermes.CLOSE_TAG, (hermes.OPEN_TAG, hermes.CLOSE_TAG), hermes.render_call
        ),
        FormatSpec(
            "qwen3_coder", "<function=", "</function>", ("<tool_call>", "</tool_call>", "<function="), _qwen3_coder
        ),
        FormatSpec("glm", "<tool_call>", "</tool_call>", ("<tool_call>", "</tool_call>"), _glm),
        FormatSpec("seed", "<seed:tool_call>", "</seed:tool_call>", ("<seed:tool_call>", "</seed:tool_call>"), _seed),
        FormatSpec("minimax", "<invoke name=", "</invoke>", ("<minimax:tool_call>", "<invoke name="), _minimax),
        FormatSpec(
            "kimi",
            "<|tool_call_begin|>",
            "<|tool_call_end|>",
            ("<|tool_calls_section_begin|>", "<|tool_call_begin|>"),
            _kimi,
            joiner="",
        ),
        FormatSpec(
            "deepseek_v4",
            "<｜DSML｜invoke name=",
            "</｜DSML｜invoke>",
            ("<｜DSML｜tool_calls>", "<｜DSML｜invoke"),
            _deepseek_v4,
        ),
        FormatSpec("gemma4", "<|tool_call>", "<tool_call|>", ("<|tool_call>", "<tool_call|>"), _gemma4, joiner=""),
        FormatSpec("gpt-oss", " to=functions.", "<|call|>", (" to=functions.", "<|call|>"), _gpt_oss, joiner=""),
    )
}
#: verl's hermes under this project's reader; the agent loop registers it in verl's registry too
SPECS["slca_hermes"] = SPECS["hermes"]


class _Text:
    """Stands for a tokenizer to verl's parsers: ``decode`` of the text is the text (they read decoded text)."""

    pad_token = ""  # gpt-oss removes it from the text with str.replace: "" removes nothing
    eos_token = ""

    @staticmethod
    def decode(text, skip_special_tokens: bool = False):
        return text

    @staticmethod
    def convert_tokens_to_ids(token):
        return None


def openai_tools(tools: Iterable[Any] | None) -> list | None:
    """Row tool schemas as verl's ``OpenAIFunctionToolSchema`` (qwen3_coder reads parameter types from them, kimi
    the tool names); schemas already in that model pass as they are, one verl's model cannot hold is left out."""
    if not tools:
        return None
    from verl.tools.schemas import OpenAIFunctionToolSchema

    out = []
    for t in tools:
        if isinstance(t, OpenAIFunctionToolSchema):
            out.append(t)
            continue
        t = {"name": t} if isinstance(t, str) else t
        fn = t.get("function", t) if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
        try:
            out.append(
                OpenAIFunctionToolSchema.model_validate(
                    {
                        "type": "function",
                        "function": {
                            "name": fn["name"],
                            "description": str(fn.get("description") or ""),
                            "parameters": {
                                "type": "object",
                                "properties": params.get("properties") or {},
                                "required": params.get("required") or [],
                            },
                        },
                    }
                )
            )
        except Exception:  # pydantic's ValidationError and friends: that schema is not usable for type hints
            continue
    return out or None


class ToolCallFormat:
    """One format: :meth:`parse` an assistant turn, :meth:`render_calls`, :meth:`has_call_attempt`."""

    def __init__(self, spec: FormatSpec):
        self.spec = spec
        self.name = spec.name

    def has_call_attempt(self, text: str) -> bool:
        """Whether the turn tried to call a tool: one of the format's markers outside ``<think>``."""
        visible = strip_think(text)
        return any(m in visible for m in self.spec.markers)

    def render_calls(self, calls: Iterable[dict]) -> str:
        """The calls of one step (``{"name", "arguments"}``, arguments default ``{}``) as the format writes them."""
        return self.spec.joiner.join(self.spec.render_one(c["name"], c.get("arguments", {})) for c in calls)

    async def loop_entries(self, text: str, *, tools: Iterable[Any] | None = None) -> list[tuple[ToolCall | None, str]]:
        """What ``slca_tool_agent`` runs of one turn, in the order it answers them: ``(call, "")`` per call it runs
        (any tool name: an unknown tool gets its own error response), ``(None, reason)`` per call attempt it cannot
        read, each answered ``parse_error_response(reason)``. hermes: in block order
        (:func:`~slca_verl.toolcall.hermes.loop_entries`); every other format: the calls, then the unreadable ones
        (the loop's ``FormatToolParser``). ``tools``: the row's schemas, as the loop hands them to verl's parser."""
        if self.name == "hermes":
            return hermes.loop_entries(text)
        parsed = await self.parse(text, tools=tools)
        return [(c, "") for c in parsed.calls] + [(None, e) for e in parsed.errors]

    async def parse(
        self,
        text: str,
        *,
        tools: Iterable[Any] | None = None,
        allowed: set[str] | None = None,
        accept_string_arguments: bool = True,
    ) -> ParsedCalls:
        """The turn's calls (``<think>`` stripped): valid ones in ``blocks`` (one call per block), a reason per call
        that cannot be read in ``errors``; ``open_tags`` / ``close_tags`` count the call markers. Never raises."""
        visible = strip_think(text)
        if self.name == "hermes":
            return hermes.parse_tool_calls(visible, allowed, accept_string_arguments=accept_string_arguments)
        out = ParsedCalls(open_tags=visible.count(self.spec.call_open), close_tags=visible.count(self.spec.call_close))
        if not any(m in visible for m in self.spec.markers):
            return out
        from verl.experimental.agent_loop.tool_parser import ToolParser

        try:
            parser = ToolParser.get_tool_parser(self.name, _Text())
            _, calls = await parser.extract_tool_calls(visible, openai_tools(tools))
        except Exception as e:  # verl's parser raising on hostile text: every marked call is unreadable
            calls, reason = [], f"{self.name} parser failed ({type(e).__name__})"
            out.errors += [reason] * max(1, out.tag_denominator)
            return out
        coerced = _coerced_arguments(self.name, visible, len(calls))
        for fc, was_coerced in zip(calls, coerced):
            if was_coerced:
                out.errors.append(f"{self.name} {COERCED_ARGUMENTS}")
                continue
            try:
                arguments = json.loads(fc.arguments) if isinstance(fc.arguments, str) else fc.arguments
            except (ValueError, RecursionError):
                arguments = fc.arguments  # read_call names what it is
            call, err = read_call(
                {"name": fc.name, "arguments": arguments}, accept_string_arguments=accept_string_arguments
            )
            if not err and allowed is not None and call.name not in allowed:
                err = f"unknown tool {call.name[:64]!r}"
            (out.errors.append(err) if err else out.blocks.append([call]))
        lost = out.tag_denominator - len(calls)
        out.errors += [f"unreadable {self.name} call"] * max(0, lost)
        if not out.blocks and not out.errors:  # a marker, and nothing verl's parser read: an attempt all the same
            out.errors.append(f"a {self.name} tool-call marker without a call the parser could read")
        out.denominator = max(out.tag_denominator, len(out.blocks) + len(out.errors))  # every attempt counts
        return out


def parse_error_response(reason: str) -> str:
    """The tool response ``slca_tool_agent`` sends for a call attempt it cannot read (``reason``: its error entry)."""
    return f"Error: the tool call could not be parsed: {reason}."


_KIMI_CALL_RE = re.compile(r"<\|tool_call_begin\|>.*?<\|tool_call_argument_begin\|>(.*?)<\|tool_call_end\|>", re.S)


#: the error entry of a call whose arguments verl's parser replaced by ``{}`` (it runs all the same)
COERCED_ARGUMENTS = "call arguments are not a JSON object"


def _coerced_arguments(name: str, text: str, n_calls: int) -> list[bool]:
    """Per call verl's parser returned, whether it replaced arguments that are not a JSON object by ``{}`` (kimi's
    parser does, and the call would run and be scored with no error); matched in order, only when the counts agree."""
    if name != "kimi":
        return [False] * n_calls
    raw = _KIMI_CALL_RE.findall(text)
    if len(raw) != n_calls:
        return [False] * n_calls
    out = []
    for body in raw:
        try:
            out.append(not isinstance(json.loads(body.strip()), dict))
        except (ValueError, RecursionError):
            out.append(True)
    return out


def get_format(name: str) -> ToolCallFormat:
    """The format of verl's ``multi_turn.format`` value ``name``.

    Raises:
        ValueError: ``name`` is not a format verl 0.9.1 registers (the start-up error naming the key).
    """
    if name not in SPECS:
        raise ValueError(
            f"actor_rollout_ref.rollout.multi_turn.format={name!r} is not a tool-call format slca-verl "
            f"reads; known: {sorted(SPECS)}"
        )
    return ToolCallFormat(SPECS[name])
