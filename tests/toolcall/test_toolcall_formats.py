"""Every tool-call format verl 0.9.1 registers, through slca_verl.toolcall.formats: what the format writes, verl's own
ToolParser of that name reads back (the real Qwen3 tokenizer in between), and so does our format object, which also
reports what verl's parser drops (a broken call, a non-object argument list, an unknown tool)."""

import asyncio
import json

import pytest
from verl.experimental.agent_loop.tool_parser import ToolParser

from slca_verl.toolcall.formats import SPECS, get_format

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}

CALLS = [
    {"name": "get_weather", "arguments": {"city": "Zürich", "days": 3}},
    {"name": "set_alarm", "arguments": {"hour": 7, "loud": True}},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "set_alarm",
            "parameters": {
                "type": "object",
                "properties": {"hour": {"type": "integer"}, "loud": {"type": "boolean"}},
                "required": ["hour"],
            },
        },
    },
]
VERL_FORMATS = sorted(n for n in ToolParser._registry if n != "slca_hermes")


def _calls(parsed):
    return [(c.name, c.arguments) for c in parsed.calls]


def test_every_format_verl_registers_has_a_spec():
    assert set(VERL_FORMATS) <= set(SPECS), sorted(set(VERL_FORMATS) - set(SPECS))
    with pytest.raises(ValueError, match="multi_turn.format='nope'"):
        get_format("nope")


@pytest.mark.parametrize("name", VERL_FORMATS)
def test_verls_own_parser_reads_back_what_the_format_writes(name, tok):
    from slca_verl.toolcall.formats import openai_tools

    text = "Let me check.\n" + get_format(name).render_calls(CALLS)
    ids = tok.encode(text, add_special_tokens=False)
    _, calls = asyncio.run(ToolParser.get_tool_parser(name, tok).extract_tool_calls(ids, openai_tools(TOOLS)))
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [(c["name"], c["arguments"]) for c in CALLS]


@pytest.mark.parametrize("name", VERL_FORMATS)
def test_our_format_object_reads_the_same_calls_and_flags_a_tool_turn(name):
    fmt = get_format(name)
    text = fmt.render_calls(CALLS)
    parsed = asyncio.run(fmt.parse(text, tools=TOOLS, allowed={"get_weather", "set_alarm"}))
    assert _calls(parsed) == [(c["name"], c["arguments"]) for c in CALLS] and parsed.errors == []
    assert parsed.fully_valid
    assert fmt.has_call_attempt(text) and not fmt.has_call_attempt("It is sunny in Zürich.")
    # a call written while thinking is not a call
    assert _calls(asyncio.run(fmt.parse("<think>" + text + "</think>Sunny.", tools=TOOLS))) == []


@pytest.mark.parametrize("name", VERL_FORMATS)
def test_what_verls_parser_drops_or_we_refuse_is_an_error_entry(name):
    fmt = get_format(name)
    good = fmt.render_calls(CALLS[:1])
    unknown = asyncio.run(fmt.parse(good, tools=TOOLS, allowed={"set_alarm"}))
    assert _calls(unknown) == [] and unknown.errors == ["unknown tool 'get_weather'"]
    # the call's closing marker cut off (a turn ended by the length limit): never silently "no call"
    cut = good[: good.rindex(fmt.spec.call_close)]
    broken = asyncio.run(fmt.parse(cut, tools=TOOLS))
    assert fmt.has_call_attempt(cut)
    assert len(broken.errors) + len(broken.calls) >= 1 and not broken.fully_valid


def test_hermes_goes_through_the_projects_own_reader_list_blocks_included():
    fmt = get_format("hermes")
    block = '<tool_call>\n[{"name": "a", "arguments": {}}, {"name": "b", "parameters": {"x": 1}}]\n</tool_call>'
    parsed = asyncio.run(fmt.parse(block))
    assert _calls(parsed) == [("a", {}), ("b", {"x": 1})] and parsed.valid_blocks == 1
    assert get_format("slca_hermes").spec is fmt.spec


@pytest.mark.parametrize("name", VERL_FORMATS)
def test_hierr_scores_decoded_turns_of_any_format_as_it_scores_hermes(name):
    """The decoded-text entry point (rows from another agent loop): reward_kwargs.tool_call_format names the format."""
    from slca_verl.rewards import HierRConfig, score_trajectory

    gt = {
        "allowed_tools": ["get_weather", "set_alarm"],
        "gold_tool_calls": [CALLS],
        "tool_schemas": TOOLS,
        "question_content": "Weather in Zürich for 3 days, and an alarm at 7?",
    }
    reply = "Zürich will be sunny for three days, and the loud alarm is set for 7."
    scores = {}
    hermes_list_block = "<tool_call>\n" + json.dumps(CALLS, ensure_ascii=False) + "\n</tool_call>"
    for fmt_name in ("hermes", name):  # one parallel step: hermes writes it as one list block, the others per turn
        first = hermes_list_block if fmt_name == "hermes" else get_format(fmt_name).render_calls(CALLS)
        turns = [first, reply]
        cfg = HierRConfig.from_kwargs({"tool_call_format": fmt_name})
        scores[fmt_name] = asyncio.run(score_trajectory(turns, ['{"ok": true}', '{"ok": true}'], gt, config=cfg))
    for key in ("r_tool", "fmt", "name_f1", "key", "value", "parallel", "num_calls", "format_valid"):
        assert scores[name][key] == scores["hermes"][key], key
    assert scores[name]["r_tool"] == pytest.approx(1.0)


def test_an_unknown_tool_call_format_in_reward_kwargs_fails_at_start_up_naming_the_key():
    from slca_verl.rewards import HierRConfig

    with pytest.raises(ValueError, match="reward_kwargs.tool_call_format"):
        HierRConfig.from_kwargs({"tool_call_format": "xml_of_my_own"})


@pytest.mark.parametrize(
    "record",
    [
        "not a record",
        {"open": 1, "close": 1, "errors": []},  # a string; no "calls"
        {"open": 1, "close": 1, "errors": [], "calls": [{"name": "get_weather", "arguments": "{}"}]},  # not a dict
        {"open": "x", "close": 1, "errors": [], "calls": []},
    ],
)
def test_a_parse_record_not_in_the_loops_shape_is_one_invalid_call_never_a_call_or_a_crash(record):
    """parsed_turns reach HierR through extra_info: whatever they hold, nothing unreadable scores as a call."""
    from slca_verl.rewards import score_trajectory

    gt = {"allowed_tools": ["get_weather"], "gold_tool_calls": [[CALLS[0]]], "question_content": "Weather?"}
    row = asyncio.run(
        score_trajectory(
            ["x", "It is sunny."], ['{"ok": 1}'], gt, call_format="qwen3_coder", parsed_turns=[record, None]
        )
    )
    assert row["num_calls"] == 0 and row["no_call"] == 1 and row["fmt"] == 0.0
    assert "unreadable agent-loop parse record" in row["reason"]


@pytest.mark.parametrize("name", sorted(SPECS))
async def test_every_marker_of_every_format_alone_is_a_counted_attempt(name):
    """What the agent loop takes for a tool turn (any of the format's markers) the reward scores as an attempt: a
    marker with nothing readable behind it is an error entry and counts in the format denominator."""
    fmt = get_format(name)
    for marker in fmt.spec.markers:
        for text in (f"The answer is 4. {marker}", f"{marker} then text", marker):
            parsed = await fmt.parse(text, allowed={"get_weather"})
            assert parsed.blocks == [] and parsed.errors, (marker, text)
            assert parsed.tag_denominator >= 1 and not parsed.fully_valid, (marker, text)


async def test_kimi_arguments_that_are_not_an_object_are_an_error_not_an_empty_call():
    """verl's kimi parser turns them into {} and the call would run; every other format reports them."""
    kimi = get_format("kimi")
    good = kimi.render_calls([{"name": "get_weather", "arguments": {"city": "Paris"}}])
    bad = good.replace('{"city": "Paris"}', '["Paris"]')
    assert (await kimi.parse(good, allowed={"get_weather"}, tools=[WEATHER_TOOL])).calls
    parsed = await kimi.parse(bad, allowed={"get_weather"}, tools=[WEATHER_TOOL])
    assert parsed.blocks == [] and parsed.errors == ["kimi call arguments are not a JSON object"]
