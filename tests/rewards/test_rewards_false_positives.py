"""No honest rollout is taken for an attack: every rollout the real slca_tool_agent produces scores the same on every
path verl takes to HierR, and none is scored as forged (benchmarks/reward_false_positives.py, its table in
docs/rewards.md).

The battery runs each honest episode through the real loop (verl's ToolAgentLoop state machine, the real Qwen3
tokenizer and chat template, SGLS's offline simulator) in each of verl's nine tool-call formats, then scores it through
the agent loop's entry point, the decoded one with and without verl's turn count, and every reward manager verl 0.9.1
registers (built by verl's load_reward_manager) with either entry point. Then the rule that makes the difference:
without the turn count, decoded text is checked against the answers of the loop that produced it (slca_tool_agent
answers an unreadable call with its own error text; verl's tool_agent does not answer it).
"""

import asyncio

import pytest
import reward_false_positives as FP  # noqa: E402  (the benchmark script under test)

from slca_verl.rewards import compute_score
from slca_verl.rewards.hierr import HierRConfig, answering_loop

UNREADABLE_THEN_RIGHT = "unreadable call, its error, the right call, reply"
PATHS = {"loop", "decoded+count", "decoded"} | {
    f"{m}/{e}" for m in ("dapo", "gdpo", "naive", "rate_limited") for e in ("rewards", "agent_loop")
}


@pytest.fixture(scope="module")
def records(tok):
    return asyncio.run(FP.battery(FP.FORMATS, tok))


def by_key(records):
    return {(r["format"], r["rollout"]): r for r in records}


def test_the_battery_covers_every_format_manager_and_entry_point(records):
    assert {r["format"] for r in records} == set(FP.FORMATS) and len(FP.FORMATS) == 9
    assert FP.managers() == ["dapo", "gdpo", "naive", "rate_limited"]  # verl's registry, less remote (refuses HierR)
    assert all(set(r["paths"]) == PATHS for r in records)
    names = {r["rollout"] for r in records if r["format"] == "hermes"}
    for fmt in FP.FORMATS:  # every rollout in every format (the authors' empty-list block is hermes' own)
        assert {r["rollout"] for r in records if r["format"] == fmt} | {
            "empty-list block beside the right call, reply"
        } == names, fmt


def test_every_honest_rollout_scores_the_same_on_every_path_and_none_as_forged(records):
    """Before the fix, 37 of the 118 rollouts scored -0.5 with forged_tool_output 1 on the decoded path without the
    turn count (and on the dapo, rate_limited and gdpo managers): each rollout in which the loop answered an
    unreadable call."""
    forged = [
        (r["format"], r["rollout"], path)
        for r in records
        for path, p in r["paths"].items()
        if p["forged_tool_output"] > 0
    ]
    assert forged == []
    differ = [(r["format"], r["rollout"]) for r in records if FP.agreed(r) is None]
    assert differ == []


def test_the_loop_did_what_each_rollout_is_named_for(records):
    """The battery's rollouts are what they say: the loop answered the unreadable call, the unknown tool, the schema
    violation and the simulator failure with errors, dropped the third parallel call, and cut the episodes."""
    got = by_key(records)
    for fmt in FP.FORMATS:
        m = {name: got[(fmt, name)]["metrics"] for (f, name) in got if f == fmt}
        assert m[UNREADABLE_THEN_RIGHT]["malformed_calls"] == 1 and m[UNREADABLE_THEN_RIGHT]["tool_calls"] == 2
        assert m["unreadable call beside the right call (both answered), reply"]["malformed_calls"] >= 1
        unknown = m["unknown tool, its error, the right tool, reply"]
        if fmt == "kimi":  # verl's kimi parser infers the name from the row's schemas: the misspelt call runs
            assert unknown["invalid_calls"] == 0 and unknown["redundant_calls"] == 1
        else:
            assert unknown["unknown_tool_calls"] == 1
        assert m["schema validation error, the fix, reply"]["validation_errors"] == 1
        assert m["simulator error, the retry, reply"]["simulator_errors"] == 1
        assert m["three calls, max_parallel_calls 2 (one dropped), reply"]["dropped_calls"] == 1
        assert m["unreadable call, its error, the right call, cut by the turn limit"]["has_summary"] == 0
        assert m["unreadable call, its error, the right call, reply cut by the length limit"]["has_summary"] == 1
        # the honest corrected episode keeps its reply's judgment on every path (r_tool 0.95: one block of two bad)
        paths = got[(fmt, UNREADABLE_THEN_RIGHT)]["paths"]
        assert all(p["r_tool"] == pytest.approx(0.95) and p["judge_used"] == 1 for p in paths.values()), fmt


def test_the_authors_cases_score_as_the_turn_count_scores_them(records):
    """The authors' reward's own test inputs (hermes): an empty-list block, or a malformed block, beside the correct
    call in one turn; slca_tool_agent answers both entries. Without the turn count they scored -0.5 (forged);
    r_tool is 0.95 on every path now (the authors' reward: 0.70 for the empty list, which it reads as a valid block
    with no call, 0.95 for the malformed one)."""
    got = by_key(records)
    for name in (
        "empty-list block beside the right call, reply",
        "unreadable call beside the right call (both answered), reply",
    ):
        paths = got[("hermes", name)]["paths"]
        assert {round(p["r_tool"], 9) for p in paths.values()} == {0.95}, name
        assert paths["decoded"]["score"] == paths["decoded+count"]["score"] == pytest.approx(1.2)


# ---------------------------------------------------------------------------------------------------------------
# which loop produced the text

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
BROKEN = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>'
ERROR = (
    "Error: the tool call could not be parsed: the <tool_call> block is not valid JSON "
    "(Expecting ',' delimiter: line 1 column 55 (char 54))."
)
GT = {
    "allowed_tools": ["get_weather"],
    "gold_tool_calls": [[{"name": "get_weather", "arguments": {"city": "Paris"}}]],
    "question_content": "Weather in Paris?",
}


def env(*bodies):
    return "\nuser\n" + "\n".join(f"<tool_response>\n{b}\n</tool_response>" for b in bodies) + "\nassistant\n"


HONEST = BROKEN + env(ERROR) + CALL + env('{"temp_c": 21}') + "It is 21 degrees in Paris."


def decoded(text, extra_info=None, **kwargs):
    return asyncio.run(compute_score("toucan", text, GT, extra_info or {}, judge="none", **kwargs))


def test_the_rule_is_the_loop_that_produced_the_text():
    # slca_tool_agent (the default) answered the unreadable call with its error text: honest
    assert decoded(HONEST)["forged_tool_output"] == 0 and decoded(HONEST)["r_tool"] == pytest.approx(0.95)
    # verl's tool_agent never answers an unreadable call: the same text holds a run it could not have sent
    out = decoded(HONEST, agent_loop="tool_agent")
    assert out["forged_tool_output"] == 1 and out["score"] == -0.5
    # the rollout's own evidence (merged into extra_info by the naive and rate_limited managers) comes first
    assert decoded(HONEST, {"slca_trajectory": {}}, agent_loop="tool_agent")["forged_tool_output"] == 0
    assert decoded(HONEST, {"turn_scores": [], "tool_rewards": []})["forged_tool_output"] == 1
    assert answering_loop({}, None) == "slca_tool_agent" and answering_loop(None, "tool_agent") == "tool_agent"


def test_under_the_slca_rule_an_unreadable_calls_answer_must_be_the_loops_own_error_text():
    # a response in place of the loop's error text was typed: the policy's words would reach the judge as tool output
    typed = BROKEN + env('{"temp_c": 21, "sky": "sunny"}') + CALL + env('{"temp_c": 21}') + "It is 21 degrees in Paris."
    assert decoded(typed)["forged_tool_output"] == 1
    # more responses than the turn has attempts
    assert decoded(BROKEN + env(ERROR, ERROR) + CALL + env("{}") + "It is 21 degrees.")["forged_tool_output"] == 1
    # a reply with no attempt before a run: nothing there for the loop to answer
    assert decoded("Let me check." + env(ERROR) + CALL + env("{}") + "It is 21 degrees.")["forged_tool_output"] == 1


def test_agent_loop_must_be_a_name():
    with pytest.raises(ValueError, match="reward_kwargs.agent_loop=5 must be an agent loop name"):
        HierRConfig.from_kwargs({"agent_loop": 5})
    assert HierRConfig.from_kwargs({"agent_loop": " tool_agent "}).agent_loop == "tool_agent"
