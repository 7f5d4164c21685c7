"""slca_tool_agent with every tool-call format verl 0.9.1 registers, switched by
actor_rollout_ref.rollout.multi_turn.format: verl's own parser of the format reads the policy's call (this project's
checks on top), SGLS answers it, the segment ids mark the call turn TOOL and the reply SUMMARY, and HierR scores the
calls the loop parsed and ran (handed over in slca_trajectory.parsed_turns), exactly as it scores the same episode
written in hermes. A call the format's parser cannot read gets its error back and is scored invalid, never silently
taken for a direct reply."""

import pytest
from agent_loop_helpers import (
    PARIS,
    SUMMARY_TEXT,
    WEATHER,
    call,
    compose_config,
    make_row,
    reward_layout,
    rollout,
    runs,
)
from verl.experimental.agent_loop.tool_parser import ToolParser

from slca_verl.estimators.segments import OBSERVATION, SUMMARY, TOOL
from slca_verl.toolcall.formats import get_format

VERL_FORMATS = sorted(n for n in ToolParser._registry if n not in ("slca_hermes", "hermes"))
Q = "What is the weather in Paris?"
CALL = [{"name": "get_weather", "arguments": {"city": "Paris"}}]


async def _episode(name, tok, first_turn):
    cfg = compose_config(f"actor_rollout_ref.rollout.multi_turn.format={name}")
    row = make_row(Q, [WEATHER], PARIS, f"g-{name}")
    (out,), _ = await rollout(cfg, tok, {Q: [first_turn, SUMMARY_TEXT]}, [row])
    reward, _ = await reward_layout(out, row)
    return out, reward


@pytest.fixture(scope="module")
def hermes_reward(tok):
    import asyncio

    return asyncio.run(_episode("hermes", tok, call("get_weather", city="Paris")))[1]


@pytest.mark.parametrize("name", VERL_FORMATS)
async def test_a_call_in_the_format_runs_and_scores_as_the_same_call_in_hermes(name, tok, hermes_reward):
    out, reward = await _episode(name, tok, get_format(name).render_calls(CALL))
    kinds = [k for k, _, _ in runs(out.segment_ids)]
    assert kinds == [TOOL, OBSERVATION, SUMMARY]
    obs = tok.decode(out.response_ids[runs(out.segment_ids)[1][1] : runs(out.segment_ids)[1][2]])
    assert '"tool": "get_weather"' in obs and "Error" not in obs  # SGLS answered the call verl's parser read
    pieces = out.extra_fields["slca_trajectory"]
    assert pieces["format"] == name
    assert pieces["parsed_turns"][0]["calls"] == CALL and pieces["parsed_turns"][0]["errors"] == []
    for key in ("r_tool", "fmt", "name_f1", "key", "value", "parallel", "num_calls", "format_valid", "score"):
        assert reward[key] == hermes_reward[key], key
    assert reward["r_tool"] == pytest.approx(1.0) and reward["judge_used"] == 1


@pytest.mark.parametrize("name", VERL_FORMATS)
async def test_a_call_the_format_cannot_read_gets_its_error_and_is_scored_invalid(name, tok):
    fmt = get_format(name)
    good = fmt.render_calls(CALL)
    cut = good[: good.rindex(fmt.spec.call_close)]  # the call's closing marker never written
    out, reward = await _episode(name, tok, cut)
    m = out.extra_fields["slca_agent_metrics"]
    assert runs(out.segment_ids)[0][0] == TOOL  # still the tool turn: the attempt is credited to tool tokens
    record = out.extra_fields["slca_trajectory"]["parsed_turns"][0]
    assert reward["format_valid"] == 0  # an unclosed call is never a clean format
    if m["malformed_calls"] == 0:  # verl's parser reads the unterminated call (qwen3_coder): it ran, it is scored
        assert record["calls"] == CALL and reward["num_calls"] == 1
    else:  # it cannot: the loop answered the error, HierR counts the same invalid call and no call
        assert record["calls"] == [] and record["errors"] == [f"unreadable {name} call"]
        assert reward["no_call"] == 1 and reward["fmt"] == 0.0 and reward["num_calls"] == 0


@pytest.mark.parametrize("name", [*VERL_FORMATS, "hermes"])
@pytest.mark.parametrize("last", [False, True], ids=["reply_follows", "episode_ends_on_it"])
async def test_a_bare_call_marker_is_an_attempt_and_never_sheds_the_no_call_penalty(name, tok, last):
    """Every marker the loop takes for a tool turn is one the reward scores as an attempt (an error entry), and on a
    gold row the no-call penalty stays on the rollout's tokens, also when the marked turn is the last one."""
    for marker in get_format(name).spec.markers:
        cfg = compose_config(f"actor_rollout_ref.rollout.multi_turn.format={name}")
        row = make_row(Q, [WEATHER], PARIS, f"bare-{name}")
        turns = [f"{SUMMARY_TEXT} {marker}", SUMMARY_TEXT]
        (out,), _ = await rollout(cfg, tok, {Q: turns}, [row], max_assistant_turns=1 if last else 2)
        reward, data = await reward_layout(out, row)
        assert runs(out.segment_ids)[0][0] == TOOL, marker  # the loop took the marked turn for a tool turn ...
        assert reward["num_calls"] == 0 and reward["format_valid"] < 1, (marker, reward)  # ... and so did HierR
        assert reward["no_call"] == 1 and reward["score"] == -0.5
        assert float(data["rm_scores"].sum()) == pytest.approx(-0.5), marker  # the penalty was not dropped
