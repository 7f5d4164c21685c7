"""slca_tool_agent on CPU: the real Qwen3 tokenizer and chat template, a scripted server, SGLS offline, HierR.

Every scenario checks that the segment ids line up token for token with the decoded turns, and that the reward
layout puts r_tool / r_sum where slca_grpo looks for them, summing to HierR's score.
"""

import json

import pytest
import torch
from agent_loop_helpers import (
    PARIS,
    STOCK,
    SUMMARY_TEXT,
    WEATHER,
    ScriptedServer,
    call,
    compose_config,
    make_loop,
    make_row,
    reward_layout,
    rollout,
    runs,
)

from slca_verl.agent_loop import (
    METRIC_KEYS,
    check_reward_config,
)
from slca_verl.estimators.segments import OBSERVATION, SEGMENT_IDS_FIELD, SUMMARY, TOOL


@pytest.fixture(scope="module")
def cfg():
    return compose_config()


def trained_runs(tok, out):
    """(kind, decoded text) of each run of equal segment ids, observations included."""
    return [(k, tok.decode(out.response_ids[s:e])) for k, s, e in runs(out.segment_ids)]


def assert_ids_follow_mask(out):
    assert len(out.segment_ids) == len(out.response_mask) == len(out.response_ids)
    for sid, m in zip(out.segment_ids, out.response_mask):
        assert (sid != OBSERVATION) == bool(m)


def assert_turns(tok, out, expected):
    """The non-observation runs decode to exactly the scripted assistant texts (+ <|im_end|>), with their kinds."""
    assert_ids_follow_mask(out)
    got = [(k, t) for k, t in trained_runs(tok, out) if k != OBSERVATION]
    assert got == [(k, t + "<|im_end|>") for k, t in expected]


def observations(tok, out):
    return [t for k, t in trained_runs(tok, out) if k == OBSERVATION]


def last(ids, kind):
    return max(i for i, s in enumerate(ids) if s == kind)


# ---------------------------------------------------------------------------------------------------------------
# scenarios


async def test_one_tool_turn_and_a_summary_are_tool_then_summary_with_rewards_at_their_ends(cfg, tok):
    q = "What is the weather in Paris?"
    row = make_row(q, [WEATHER], PARIS, "g-one")
    (out,), _ = await rollout(cfg, tok, {q: [call("get_weather", city="Paris"), SUMMARY_TEXT]}, [row])
    assert_turns(tok, out, [(TOOL, call("get_weather", city="Paris")), (SUMMARY, SUMMARY_TEXT)])
    (obs,) = observations(tok, out)
    assert obs.startswith("\n<|im_start|>user\n<tool_response>\n") and obs.endswith("<|im_start|>assistant\n")
    assert '"tool": "get_weather"' in obs  # the SGLS offline answer for this row's tool

    reward, d = await reward_layout(out, row)
    assert reward["r_tool"] == pytest.approx(1.0)  # exact gold match: every execution component is 1
    rm = d["rm_scores"]
    ids = d[SEGMENT_IDS_FIELD]
    assert ids.dtype == torch.int8 and ids.tolist() == out.segment_ids
    assert rm[last(out.segment_ids, TOOL)].item() == pytest.approx(reward["r_tool"])
    assert rm[last(out.segment_ids, SUMMARY)].item() == pytest.approx(reward["r_sum"])
    assert torch.count_nonzero(rm) <= 2
    assert rm.sum().item() == pytest.approx(reward["score"])
    assert d["extra_fields"]["slca_reward_dropped"] == 0.0
    m = out.extra_fields["slca_agent_metrics"]
    assert (m["turns"], m["tool_calls"], m["invalid_calls"], m["has_summary"]) == (2, 1, 0, 1)


async def test_parallel_calls_in_one_list_block_get_one_response_each(cfg, tok):
    q = "Weather in Paris and in London?"
    gold = [
        [
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "get_weather", "arguments": {"city": "London"}},
        ]
    ]
    block = (
        "<tool_call>\n"
        + json.dumps(
            [
                {"name": "get_weather", "arguments": {"city": "Paris"}},
                {"name": "get_weather", "parameters": {"city": "London"}},
            ]
        )
        + "\n</tool_call>"
    )
    row = make_row(q, [WEATHER], gold, "g-par")
    (out,), _ = await rollout(cfg, tok, {q: [block, "Paris is sunny at 21 degrees, London is rainy at 14."]}, [row])
    assert_turns(tok, out, [(TOOL, block), (SUMMARY, "Paris is sunny at 21 degrees, London is rainy at 14.")])
    (obs,) = observations(tok, out)
    assert obs.count("<tool_response>") == 2 and '"Paris"' in obs and '"London"' in obs
    reward, d = await reward_layout(out, row)
    assert reward["parallel"] == 1.0 and reward["r_tool"] == pytest.approx(1.0)
    assert d["rm_scores"].sum().item() == pytest.approx(reward["score"])
    assert out.extra_fields["slca_agent_metrics"]["tool_calls"] == 2


async def test_two_tool_turns_are_one_tool_segment_rewarded_once_at_its_end(cfg, tok):
    q = "Weather in Paris, then the AAPL price?"
    gold = [PARIS[0], [{"name": "get_stock_price", "arguments": {"ticker": "AAPL"}}]]
    turns = [
        call("get_weather", city="Paris"),
        call("get_stock_price", ticker="AAPL"),
        "Paris is 21 degrees; AAPL trades at 190.",
    ]
    row = make_row(q, [WEATHER, STOCK], gold, "g-two")
    (out,), _ = await rollout(cfg, tok, {q: turns}, [row])
    assert_turns(tok, out, [(TOOL, turns[0]), (TOOL, turns[1]), (SUMMARY, turns[2])])
    assert len(observations(tok, out)) == 2
    assert out.extra_fields["slca_trajectory"]["assistant_texts"] == turns
    assert len(out.extra_fields["slca_trajectory"]["tool_responses"]) == 2
    reward, d = await reward_layout(out, row)
    rm = d["rm_scores"]
    first_turn_end = runs(out.segment_ids)[0][2] - 1
    assert rm[first_turn_end].item() == 0.0  # only the segment's last token carries r_tool
    assert rm[last(out.segment_ids, TOOL)].item() == pytest.approx(reward["r_tool"])
    assert rm.sum().item() == pytest.approx(reward["score"])


async def test_no_call_is_all_summary_and_carries_the_no_call_penalty(cfg, tok):
    q = "Is it raining in Paris right now?"
    row = make_row(q, [WEATHER], PARIS, "g-nocall")
    (out,), _ = await rollout(cfg, tok, {q: ["I think it is probably sunny in Paris."]}, [row])
    assert_turns(tok, out, [(SUMMARY, "I think it is probably sunny in Paris.")])
    assert set(out.segment_ids) == {SUMMARY}
    reward, d = await reward_layout(out, row)
    assert (reward["no_call"], reward["score"], reward["r_sum"], reward["r_tool"]) == (1, -0.5, -0.5, 0.0)
    assert d["rm_scores"][-1].item() == -0.5 and d["rm_scores"].sum().item() == -0.5
    assert out.extra_fields["slca_agent_metrics"]["has_tool_segment"] == 0


async def test_an_episode_cut_by_length_on_a_tool_call_has_no_summary(cfg, tok):
    q = "Weather in Paris with a long note?"
    long_call = call("get_weather", city="Paris " + "very " * 400)
    row = make_row(q, [WEATHER], PARIS, "g-cut")
    (out,), _ = await rollout(
        cfg, tok, {q: [call("get_weather", city="Paris"), long_call, "never reached"]}, [row], response_length=300
    )
    assert len(out.response_ids) == len(out.segment_ids) == 300
    assert_ids_follow_mask(out)
    kinds = [k for k, _, _ in runs(out.segment_ids)]
    assert kinds == [TOOL, OBSERVATION, TOOL] and SUMMARY not in out.segment_ids
    assert tok.decode(out.response_ids[runs(out.segment_ids)[2][1] :]).startswith("<tool_call>")
    reward, d = await reward_layout(out, row)
    assert reward["r_sum"] == 0.0  # no summary: nothing to judge
    assert d["rm_scores"][299].item() == pytest.approx(reward["r_tool"])  # the cut tool turn ends the segment
    assert d["rm_scores"].sum().item() == pytest.approx(reward["score"])
    assert out.extra_fields["slca_agent_metrics"]["has_summary"] == 0


async def test_an_episode_cut_by_the_turn_limit_on_a_tool_call_has_no_summary(cfg, tok):
    q = "Weather in Paris, limited turns?"
    row = make_row(q, [WEATHER], PARIS, "g-turns")
    (out,), _ = await rollout(
        cfg, tok, {q: [call("get_weather", city="Paris"), "unused"]}, [row], max_assistant_turns=1
    )
    assert_turns(tok, out, [(TOOL, call("get_weather", city="Paris"))])
    assert out.extra_fields["slca_agent_metrics"]["has_summary"] == 0


async def test_a_malformed_call_gets_its_parse_error_back_and_the_episode_continues(cfg, tok):
    q = "Weather in Paris (malformed first)?"
    bad = '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>'
    turns = [bad, call("get_weather", city="Paris"), SUMMARY_TEXT]
    row = make_row(q, [WEATHER], PARIS, "g-bad")
    (out,), _ = await rollout(cfg, tok, {q: turns}, [row])
    assert_turns(tok, out, [(TOOL, bad), (TOOL, turns[1]), (SUMMARY, SUMMARY_TEXT)])
    first_obs = observations(tok, out)[0]
    assert "Error: the tool call could not be parsed" in first_obs and "not valid JSON" in first_obs
    m = out.extra_fields["slca_agent_metrics"]
    assert (m["malformed_calls"], m["invalid_calls"], m["tool_calls"]) == (1, 1, 2)


async def test_a_call_to_a_tool_not_in_the_row_is_an_error_response_not_a_fallback(cfg, tok):
    q = "Price of AAPL please?"
    row = make_row(q, [WEATHER], [[{"name": "get_weather", "arguments": {"city": "Paris"}}]], "g-unknown")
    (out,), _ = await rollout(
        cfg, tok, {q: [call("get_stock_price", ticker="AAPL"), "Sorry, I cannot look that up."]}, [row]
    )
    (obs,) = observations(tok, out)
    assert "Error: unknown tool 'get_stock_price'. Available tools: ['get_weather']." in obs
    m = out.extra_fields["slca_agent_metrics"]
    assert (m["unknown_tool_calls"], m["invalid_calls"]) == (1, 1)


async def test_a_row_without_schemas_gets_an_error_response_and_a_counted_metric(cfg, tok):
    q = "Weather in Paris, no tools given?"
    row = make_row(q, None, PARIS, "g-noschema")
    (out,), server = await rollout(cfg, tok, {q: [call("get_weather", city="Paris"), "I could not check."]}, [row])
    (obs,) = observations(tok, out)
    assert "Error: no tools are available for this request" in obs and "get_weather" in obs
    assert out.extra_fields["slca_agent_metrics"]["no_schema_calls"] == 1
    assert "<tools>" not in server.prompts[q][0]


async def test_two_rows_with_different_tool_sets_in_one_batch_see_and_reach_only_their_own_tools(cfg, tok):
    qa, qb = "Row A: weather in Paris?", "Row B: price of AAPL?"
    rows = [
        make_row(qa, [WEATHER], PARIS, "g-a", index=0),
        make_row(qb, [STOCK], [[{"name": "get_stock_price", "arguments": {"ticker": "AAPL"}}]], "g-b", index=1),
    ]
    scripts = {
        qa: [call("get_stock_price", ticker="AAPL"), "I can only check the weather."],
        qb: [call("get_stock_price", ticker="AAPL"), "AAPL trades at 190 dollars today."],
    }
    (out_a, out_b), server = await rollout(cfg, tok, scripts, rows)
    assert '"get_weather"' in server.prompts[qa][0] and "get_stock_price" not in server.prompts[qa][0]
    assert '"get_stock_price"' in server.prompts[qb][0] and "get_weather" not in server.prompts[qb][0]
    assert "Error: unknown tool 'get_stock_price'" in observations(tok, out_a)[0]
    obs_b = observations(tok, out_b)[0]
    assert '"tool": "get_stock_price"' in obs_b and "Error" not in obs_b
    assert out_a.extra_fields["slca_agent_metrics"]["unknown_tool_calls"] == 1
    assert out_b.extra_fields["slca_agent_metrics"]["invalid_calls"] == 0


async def test_think_blocks_are_not_calls_and_parameters_work_as_arguments(cfg, tok):
    q = "Weather in Paris, thinking first?"
    turn = (
        '<think>\nMaybe <tool_call>{"name": "get_stock_price", "arguments": {}}</tool_call>? No.\n</think>\n\n'
        '<tool_call>\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n</tool_call>'
    )
    think_summary = "<think>\nI have the answer.\n</think>\n\n" + SUMMARY_TEXT
    row = make_row(q, [WEATHER], PARIS, "g-think")
    (out,), _ = await rollout(cfg, tok, {q: [turn, think_summary]}, [row])
    assert_turns(tok, out, [(TOOL, turn), (SUMMARY, think_summary)])
    (obs,) = observations(tok, out)
    assert '"tool": "get_weather"' in obs and '"city": "Paris"' in obs and obs.count("<tool_response>") == 1
    assert out.extra_fields["slca_agent_metrics"]["invalid_calls"] == 0


async def test_identical_repeated_calls_are_counted_as_redundant(cfg, tok):
    q = "Weather in Paris, asked twice?"
    same = call("get_weather", city="Paris")
    row = make_row(q, [WEATHER], PARIS, "g-redundant")
    (out,), _ = await rollout(cfg, tok, {q: [same, same, SUMMARY_TEXT]}, [row])
    obs1, obs2 = observations(tok, out)
    assert obs1 == obs2  # SGLS group cache: the same call gets the same answer
    m = out.extra_fields["slca_agent_metrics"]
    assert (m["redundant_calls"], m["tool_calls"]) == (1, 2)


async def test_calls_beyond_the_parallel_limit_are_counted_as_dropped(cfg, tok):
    q = "Weather in three cities?"
    block = (
        "<tool_call>\n"
        + json.dumps([{"name": "get_weather", "arguments": {"city": c}} for c in ("A", "B", "C")])
        + "\n</tool_call>"
    )
    row = make_row(q, [WEATHER], PARIS, "g-limit")
    (out,), _ = await rollout(cfg, tok, {q: [block, SUMMARY_TEXT]}, [row], max_parallel_calls=2)
    assert observations(tok, out)[0].count("<tool_response>") == 2
    m = out.extra_fields["slca_agent_metrics"]
    assert (m["tool_calls"], m["dropped_calls"]) == (2, 1)


async def test_tools_already_listed_in_the_system_prompt_are_not_listed_twice(cfg, tok):
    q = "Weather in Paris, hermes system prompt?"
    row = make_row(q, [WEATHER], PARIS, "g-sys", tools_in_system=True)
    _, server = await rollout(cfg, tok, {q: [SUMMARY_TEXT]}, [row])
    assert server.prompts[q][0].count("<tools>") == 1


async def test_metrics_have_the_same_keys_on_every_row(cfg, tok):
    qa, qb = "Agg A: weather?", "Agg B: weather?"
    rows = [make_row(qa, [WEATHER], PARIS, "g-agg"), make_row(qb, [WEATHER], PARIS, "g-agg")]
    outs, _ = await rollout(cfg, tok, {qa: [call("get_weather", city="Paris"), SUMMARY_TEXT], qb: ["No call."]}, rows)
    for out in outs:
        assert tuple(out.extra_fields["slca_agent_metrics"]) == METRIC_KEYS
    metrics = [o.extra_fields["slca_agent_metrics"] for o in outs]
    assert sorted(m["tool_calls"] for m in metrics) == [0, 1] and [m["has_summary"] for m in metrics] == [1, 1]
    reward, _ = await reward_layout(outs[0], rows[0])
    assert {f"agent_{k}" for k in METRIC_KEYS} <= set(reward)


# ---------------------------------------------------------------------------------------------------------------
# configurations the layout cannot serve are refused with the setting to change


def test_the_legacy_trainer_is_refused_for_the_segment_layout_but_not_for_scalar(cfg):
    legacy = compose_config("trainer.use_v1=False")
    with pytest.raises(ValueError, match=r"trainer\.use_v1=True"):
        check_reward_config(legacy, "slca")
    check_reward_config(legacy, "scalar")
    check_reward_config(cfg, "slca")


def test_a_reward_model_scored_after_the_rollout_is_refused_naming_enable_resource_pool():
    colocated = compose_config("reward.reward_model.enable=True", "reward.reward_model.enable_resource_pool=False")
    with pytest.raises(ValueError, match=r"reward\.reward_model\.enable_resource_pool=True"):
        check_reward_config(colocated, "slca")
    check_reward_config(
        compose_config("reward.reward_model.enable=True", "reward.reward_model.enable_resource_pool=True"), "slca"
    )


async def test_a_reward_without_components_is_refused_by_the_slca_layout(cfg, tok):
    q = "Weather in Paris, plain reward?"
    (out,), _ = await rollout(cfg, tok, {q: [SUMMARY_TEXT]}, [make_row(q, [WEATHER], PARIS, "g-plain")])
    out.reward_score = 1.0
    out.extra_fields["reward_extra_info"] = {"acc": 1.0}
    with pytest.raises(ValueError, match="reward_layout: scalar"):
        out.as_dict()
    out.reward_layout = "scalar"
    assert out.as_dict()["rm_scores"][-1].item() == 1.0


async def test_an_agent_loop_without_an_sgls_config_says_which_setting_to_add(cfg, tok):
    with pytest.raises(ValueError, match="sgls_config_path"):
        make_loop(cfg, tok, ScriptedServer(tok, {}), sgls=None)


async def test_the_shipped_yaml_builds_the_loop_through_hydra_as_verl_does(cfg, tok):
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from slca_verl.agent_loop import SLCAToolAgentLoop
    from slca_verl.agent_loop.tools import _resolve_path

    (entry,) = OmegaConf.load(_resolve_path("pkg://slca_verl/config/agent_loop.yaml"))
    assert entry.name == "slca_tool_agent"
    loop = hydra.utils.instantiate(
        config=entry,
        trainer_config=DictConfigWrap(config=cfg),
        server_manager=ScriptedServer(tok, {}),
        tokenizer=tok,
        processor=None,
        hf_model_type="qwen3",
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(cfg.data),
        tools=ToolListWrap([]),
    )
    assert isinstance(loop, SLCAToolAgentLoop)
    assert (loop.max_assistant_turns, loop.max_parallel_calls, loop.reward_layout) == (10, 20, "slca")
    assert loop.sgls_tool.simulator.config.backend == "offline"


# ---------------------------------------------------------------------------------------------------------------
# the tolerant hermes parser on its own


def test_the_parser_reads_string_arguments_and_reports_each_bad_block_in_order():
    from slca_verl.agent_loop import parse_hermes_calls

    text = (
        '<tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call>'
        '<tool_call>{"name": "b", "arguments": [1]}</tool_call>'
        "<tool_call>[]</tool_call>"
        '<tool_call>{"name": "c"}</tool_call> trailing <tool_call>{"name": "d"'
    )
    content, calls = parse_hermes_calls(text)
    assert [(c.name, c.arguments, bool(c.error)) for c in calls] == [
        ("a", '{"x": 1}', False),
        ("", "", True),
        ("", "", True),
        ("c", "{}", False),
        ("", "", True),
    ]
    assert "must be a JSON object" in calls[1].error and "unmatched" in calls[4].error
    assert content.startswith("trailing")


def test_one_bad_call_in_a_list_block_spoils_the_block_as_hierr_scores_it():
    """A list block with one unreadable call runs nothing (one error entry): HierR counts the block invalid, so a
    call the loop executed out of it would be a call no reward saw (found by the reward-channel property test)."""
    from slca_verl.agent_loop import parse_hermes_calls
    from slca_verl.rewards.parsing import parse_turn_calls

    text = (
        '<tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "get_weather", "arguments": [1]}]</tool_call>'
    )
    _, calls = parse_hermes_calls(text)
    assert len(calls) == 1 and calls[0].name == "" and "must be a JSON object" in calls[0].error
    scored = parse_turn_calls([text], None, accept_string_arguments=True)
    assert scored.calls == [] and len(scored.errors) == 1
    good = '<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]</tool_call>'
    assert [(c.name, c.arguments) for c in parse_hermes_calls(good)[1]] == [("a", "{}"), ("b", '{"x": 1}')]


def test_the_parser_leaves_text_without_calls_untouched():
    from slca_verl.agent_loop import parse_hermes_calls

    assert parse_hermes_calls("<think><tool_call>{}</tool_call></think>Plain answer.") == (
        "<think><tool_call>{}</tool_call></think>Plain answer.",
        [],
    )


async def test_malformed_agent_metrics_count_as_zero_instead_of_failing_the_reward():
    from slca_verl.agent_loop.reward import compute_score as agent_compute_score

    gt = {"allowed_tools": ["w"], "gold_tool_calls": [[{"name": "w", "arguments": {}}]], "question_content": "q"}
    bad = {
        "tool_calls": "many",
        "turns": None,
        "invalid_calls": float("nan"),
        "redundant_calls": float("inf"),
        "dropped_calls": [1],
        "malformed_calls": "3",
    }
    extra = {"slca_trajectory": {"assistant_texts": ["no call"], "tool_responses": []}, "slca_agent_metrics": bad}
    out = await agent_compute_score("xlam", "no call", gt, extra, judge="none")
    assert (out["agent_tool_calls"], out["agent_turns"], out["agent_invalid_calls"]) == (0, 0, 0)
    assert (out["agent_redundant_calls"], out["agent_dropped_calls"], out["agent_malformed_calls"]) == (0, 0, 3)
    assert out["score"] == -0.5  # the reward itself is unaffected
