"""A tolerant hermes tool-call parser, registered in verl's ``ToolParser`` registry as ``slca_hermes``.

verl's ``hermes`` parser reads ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` only: a list of calls in
one block, ``parameters`` instead of ``arguments``, a call inside ``<think>`` or malformed JSON are dropped with a
log line, so the episode ends as if the model had answered without a call. This parser accepts

    <tool_call>[{"name": "a", "arguments": {...}}, {"name": "b", "parameters": {...}}]</tool_call>   (parallel calls)
    <think> ... <tool_call>ignored while thinking</tool_call> ... </think>                           (stripped first)
    <tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call>                                (string arguments)

It turns every block it cannot read into a :class:`ParsedCall` with ``error`` set, so the agent loop answers it with
the parse error as the tool response and the episode continues (the policy sees what it did wrong). Each call
block is read by :func:`slca_verl.toolcall.hermes.read_blocks`, the reader HierR scores by, so what runs is what is
scored (``"arguments": null`` beside ``"parameters"`` runs the parameters; ``"arguments": ""`` runs ``{}``).

Use it from any verl tool agent with ``actor_rollout_ref.rollout.multi_turn.format=slca_hermes``; ``slca_tool_agent``
uses it whenever ``multi_turn.format`` is ``hermes``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from verl.experimental.agent_loop.tool_parser import (
    FunctionCall,
    HermesToolParser,
    ToolParser,
)
from verl.utils.ray_utils import get_event_loop

from slca_verl.toolcall.formats import openai_tools
from slca_verl.toolcall.hermes import CLOSE_TAG, OPEN_TAG, loop_entries, read_blocks, strip_think

logger = logging.getLogger(__name__)

PARSER_NAME = "slca_hermes"


class ParsedCall(FunctionCall):
    """verl's ``FunctionCall`` plus ``error``: set when the block could not be read as a call."""

    error: str | None = None


def parse_hermes_calls(text: str) -> tuple[str, list[ParsedCall]]:
    """Content (tool-call blocks removed, ``<think>`` stripped) and the calls of one assistant turn, in order.

    Every block yields one call per object (a list block yields several) or, when any of its objects cannot be read,
    one error entry and no call (HierR counts such a block invalid); an unmatched tag yields one error entry too.
    Never raises.
    """
    visible = strip_think(text)
    if OPEN_TAG not in visible and CLOSE_TAG not in visible:
        return text, []
    blocks = read_blocks(visible, None, accept_string_arguments=True)  # HierR's block reader, so both see one call
    # one bad call spoils its block, as in HierR: nothing of it runs or is scored
    calls = [
        _error(err)
        if call is None
        else ParsedCall(name=call.name, arguments=json.dumps(call.arguments, ensure_ascii=False))
        for call, err in loop_entries(visible, blocks)
    ]
    content, pos = [], 0
    for start, end, _, _ in blocks:
        content.append(visible[pos:start])
        pos = end
    content.append(visible[pos:])
    return "".join(content).strip(), calls


def _error(message: str) -> ParsedCall:
    return ParsedCall(name="", arguments="", error=message)


@ToolParser.register(PARSER_NAME)
class SLCAHermesToolParser(HermesToolParser):
    """verl's hermes parser with list blocks, ``parameters``, ``<think>`` and malformed-call reporting."""

    async def extract_tool_calls(self, responses_ids: list[int], tools: Any = None) -> tuple[str, list[FunctionCall]]:
        text = await get_event_loop().run_in_executor(None, self.tokenizer.decode, responses_ids)
        return parse_hermes_calls(text)


def parsed_record(parsed) -> dict:
    """A turn's :class:`~slca_verl.toolcall.hermes.ParsedCalls` as JSON-able data, for the reward (HierR rebuilds
    it with :func:`slca_verl.rewards.hierr.parsed_from_records`)."""
    return {
        "open": parsed.open_tags,
        "close": parsed.close_tags,
        "errors": list(parsed.errors),
        "calls": [{"name": c.name, "arguments": c.arguments} for c in parsed.calls],
    }


class FormatToolParser(ToolParser):
    """Any of verl's formats but hermes, read through :mod:`slca_verl.toolcall.formats` (verl's own parser of that
    name, then this project's checks): calls it cannot run come back as :class:`ParsedCall` entries with ``error``
    set, so the loop answers each with its reason, as for hermes. The turn's parse is kept in :attr:`last_parsed`
    (one loop instance runs one trajectory) for the reward, so HierR scores the calls the loop ran.

    ``row_tools``: the row's tool schemas (set by the loop per trajectory, kept as verl's tool schema model), from
    which qwen3_coder reads parameter types and kimi tool names; verl hands the parser the simulator's generic
    schema instead."""

    def __init__(self, tokenizer, fmt, inner: ToolParser):
        super().__init__(tokenizer)
        self.format, self.inner = fmt, inner
        self._row_tools: list | None = None
        self.last_parsed = None

    @property
    def row_tools(self) -> list | None:
        return self._row_tools

    @row_tools.setter
    def row_tools(self, schemas) -> None:
        self._row_tools = openai_tools(schemas)  # once per trajectory, not once per turn

    @property
    def stop_token_ids(self) -> list[int]:
        return self.inner.stop_token_ids

    async def extract_tool_calls(self, responses_ids: list[int], tools: Any = None) -> tuple[str, list[FunctionCall]]:
        text = await get_event_loop().run_in_executor(
            None, lambda: self.tokenizer.decode(responses_ids, skip_special_tokens=False)
        )
        try:  # verl's parser for the content it keeps in the chat history; our parse below for the calls
            content, _ = await self.inner.extract_tool_calls(responses_ids, self.row_tools)
        except Exception:  # its failure must not end the trajectory: the calls below say what was wrong
            content = text
        parsed = await self.format.parse(text, tools=self.row_tools)
        self.last_parsed = parsed
        # the calls, then the unreadable attempts: the order ToolCallFormat.loop_entries gives the reward
        calls = [ParsedCall(name=c.name, arguments=json.dumps(c.arguments, ensure_ascii=False)) for c in parsed.calls]
        return content, calls + [_error(e) for e in parsed.errors]
