"""Adversarial policy output and ground truth through the public entry points: the agent loop with the real Qwen3
tokenizer (what runs), HierR (what is scored), and the agreement between the two.

Every case asserts the specific value, count or reason a bad input gets, not only that nothing raised.
"""

import asyncio
import json

import pytest
from agent_loop_helpers import SUMMARY_TEXT, WEATHER, compose_config, make_row, reward_layout, rollout
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slca_verl.agent_loop.parser import parse_hermes_calls
from slca_verl.rewards import HierRConfig, score_trajectory
from slca_verl.rewards.parsing import parse_tool_calls

GOLD = [[{"name": "get_weather", "arguments": {"city": "Paris"}}]]
GT = {"allowed_tools": ["get_weather"], "gold_tool_calls": GOLD, "question_content": "Weather in Paris?"}
REPLY = "It is 21 degrees and sunny in Paris."


@pytest.fixture(scope="module")
def cfg():
    return compose_config()


def hierr(assistant, gt=GT, responses=('{"temp": 21}',), **cfg):
    config = HierRConfig(**cfg) if cfg else None
    return asyncio.run(score_trajectory(list(assistant), list(responses), gt, config=config))


def block(obj) -> str:
    return "<tool_call>\n" + json.dumps(obj) + "\n</tool_call>"


# ---------------------------------------------------------------------------------------------------------------
# one parser decision: what runs is what is scored


async def test_arguments_null_beside_parameters_runs_and_scores_the_parameters(cfg, tok):
    q = "Weather in Paris, null arguments?"
    turn = block({"name": "get_weather", "arguments": None, "parameters": {"city": "Paris"}})
    row = make_row(q, [WEATHER], GOLD, "g-null-args")
    (out,), server = await rollout(cfg, tok, {q: [turn, SUMMARY_TEXT]}, [row])
    tool_message = server.prompts[q][1]
    assert '"city": "Paris"' in tool_message  # the simulator was called with the parameters, not with {}
    assert out.extra_fields["slca_agent_metrics"]["validation_errors"] == 0
    reward, _ = await reward_layout(out, row)
    assert reward["r_tool"] == pytest.approx(1.0) and reward["key"] == 1.0 and reward["value"] == 1.0


async def test_empty_string_arguments_run_as_no_arguments_and_score_as_no_arguments(cfg, tok):
    q = "Weather in Paris, empty arguments?"
    turn = block({"name": "get_weather", "arguments": ""})
    row = make_row(q, [WEATHER], GOLD, "g-empty-args")
    (out,), _ = await rollout(cfg, tok, {q: [turn, SUMMARY_TEXT]}, [row])
    m = out.extra_fields["slca_agent_metrics"]
    assert (m["malformed_calls"], m["validation_errors"]) == (0, 1)  # ran with {}; SGLS: "city" is required
    reward, _ = await reward_layout(out, row)
    # a valid block (fmt 1), right name (1), parallel 1, no keys: 0.10 + 0.25 + 0.30
    assert (reward["fmt"], reward["key"], reward["value"]) == (1.0, 0.0, 0.0)
    assert reward["r_tool"] == pytest.approx(0.65)


JSON_LEAF = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=8,
)
ARGS = st.one_of(
    JSON_VALUE,
    st.dictionaries(st.sampled_from(["city", "unit"]), JSON_LEAF, max_size=2),
    st.dictionaries(st.sampled_from(["city"]), JSON_LEAF, max_size=1).map(json.dumps),  # string-encoded
    st.sampled_from(["", "  ", "{", "[1, 2]", "null"]),
)
CALL_OBJECT = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.sampled_from(["get_weather", "other"]), JSON_LEAF),
        "arguments": ARGS,
        "parameters": ARGS,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CALL_OBJECT)
def test_the_loop_parser_and_hierr_read_every_call_object_the_same_way(obj):
    _, (loop_call,) = parse_hermes_calls(block(obj))
    parsed = parse_tool_calls(block(obj), None, accept_string_arguments=True)
    if parsed.calls:
        (scored,) = parsed.calls
        assert loop_call.error is None
        assert (loop_call.name, json.loads(loop_call.arguments)) == (scored.name, scored.arguments)
    else:
        assert loop_call.error == parsed.errors[0]  # the policy is told exactly why the reward ignored the block


def test_string_encoded_arguments_run_but_score_only_when_hierr_accepts_them():
    text = block({"name": "get_weather", "arguments": json.dumps({"city": "Paris"})})
    _, (loop_call,) = parse_hermes_calls(text)
    assert json.loads(loop_call.arguments) == {"city": "Paris"}
    strict = hierr([text, REPLY])
    assert strict["fmt"] == 0.0 and "got a JSON-encoded string" in strict["reason"]
    assert hierr([text, REPLY], accept_string_arguments=True)["r_tool"] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------------------------
# gold calls never vanish


CALL = block({"name": "get_weather", "arguments": {"city": "Paris"}})


def test_gold_in_openai_form_scores_like_the_plain_form():
    openai = [[{"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]]
    plain, wrapped = hierr([CALL, REPLY]), hierr([CALL, REPLY], gt={**GT, "gold_tool_calls": openai})
    assert wrapped["gold_invalid"] == 0 and wrapped["num_gold_calls"] == 1
    assert wrapped["r_tool"] == plain["r_tool"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "gold, reason",
    [
        ([[{"arguments": {"city": "Paris"}}]], "has no string name"),
        ([[{"name": 7, "arguments": {}}]], "has no string name"),
        ([[{"name": "get_weather", "arguments": ["Paris"]}]], "are a list, not an object"),
        ([[{"name": "get_weather", "arguments": "city=Paris"}]], "a string that is not JSON"),
        ([[{"name": "get_weather", "arguments": {"city": "Paris"}}], {"name": "get_weather"}], "gold step 1 is a dict"),
        ([[42]], "a gold call is a int"),
        ({"name": "get_weather"}, "gold_tool_calls is a dict, not a list"),
    ],
)
def test_unreadable_gold_scores_zero_with_its_reason_instead_of_as_an_irrelevance_row(gold, reason):
    for assistant in ([CALL, REPLY], ["I will not call anything."]):
        out = hierr(assistant, gt={**GT, "gold_tool_calls": gold})
        assert out["gold_invalid"] == 1 and reason in out["reason"] and out["reason"].startswith("unreadable gold")
        assert (out["score"], out["r_tool"], out["r_sum"]) == (0.0, 0.0, 0.0)  # not 0.9 for "correctly" abstaining


def test_irrelevance_gold_is_still_read_as_no_call_expected():
    out = hierr(["No tool is needed here: the answer is 4."], gt={**GT, "gold_tool_calls": []}, responses=())
    assert out["gold_invalid"] == 0 and out["no_call"] == 0 and out["r_tool"] == pytest.approx(0.9)


# ---------------------------------------------------------------------------------------------------------------
# sizes a policy can produce


def test_thousands_of_distinct_call_names_are_scored_exactly():
    n = 3000
    calls = [{"name": f"tool_{i}", "arguments": {}} for i in range(n - 1)] + [
        {"name": "get_weather", "arguments": {"city": "Paris"}}
    ]
    out = hierr([block(calls), REPLY], gt={k: v for k, v in GT.items() if k != "allowed_tools"})
    assert (out["num_calls"], out["redundant_calls"]) == (n, n - 1)
    assert out["name_f1"] == pytest.approx(2 * 1 / (n + 1))
    assert (out["key"], out["value"]) == (1.0, 1.0)  # the one gold call found its match among 3000


# ---------------------------------------------------------------------------------------------------------------
# defence in depth: whatever answering one call raises ends that call, not the batch


async def test_a_call_whose_handling_raises_gets_an_error_response_and_a_counted_internal_error(cfg, tok):
    q = "Weather in Paris, with a simulator bug?"
    row = make_row(q, [WEATHER], GOLD, "g-bug")
    ok_q = "Weather in Paris, in the same batch?"
    ok_row = make_row(ok_q, [WEATHER], GOLD, "g-ok")

    from agent_loop_helpers import ScriptedServer, make_loop

    server = ScriptedServer(tok, {q: [CALL, SUMMARY_TEXT], ok_q: [CALL, SUMMARY_TEXT]})
    buggy, fine = make_loop(cfg, tok, server), make_loop(cfg, tok, server)
    sgls = buggy.sgls_tool  # one SGLS tool per process, shared by the loops (as in verl's workers)
    real_call = sgls.call

    async def raising_call(name, arguments, *, scope="", **kwargs):  # fault injection at the simulator boundary
        if buggy_scope in scope:
            raise KeyError("a bug inside the simulator")
        return await real_call(name, arguments, scope=scope, **kwargs)

    buggy_scope = sgls.scope_key(group_id="g-bug")
    sgls.call = raising_call
    try:
        out, ok = await asyncio.gather(buggy.run({"temperature": 1.0}, **row), fine.run({"temperature": 1.0}, **ok_row))
    finally:
        del sgls.call
    assert "Error: the tool call failed (KeyError)." in server.prompts[q][1]
    assert out.extra_fields["slca_agent_metrics"]["internal_errors"] == 1
    assert ok.extra_fields["slca_agent_metrics"]["internal_errors"] == 0
    assert '"tool": "get_weather"' in server.prompts[ok_q][1]  # the other row of the batch got its answer
    reward, _ = await reward_layout(out, row)  # the trajectory still ends on its summary and is scored
    assert reward["num_tool_responses"] == 1 and reward["r_tool"] == pytest.approx(1.0)
