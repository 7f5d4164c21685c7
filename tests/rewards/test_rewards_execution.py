"""HierR execution reward: every component against hand-computed values (docs/method.md)."""

import pytest

from slca_verl.rewards.execution import (
    ExecutionWeights,
    execution_components,
    execution_reward,
    key_value_scores,
    loose_equal,
    loose_key,
    name_f1,
)
from slca_verl.rewards.parsing import ToolCall, parse_tool_calls, strip_think

W = ExecutionWeights()


def call(name, **args):
    return ToolCall(name, args)


def block(*calls):
    import json

    objs = [{"name": c.name, "arguments": c.arguments} for c in calls]
    return "<tool_call>\n" + json.dumps(objs[0] if len(objs) == 1 else objs) + "\n</tool_call>"


def components(text, gold_steps, allowed=None):
    return execution_components(parse_tool_calls(strip_think(text), allowed), gold_steps)


def test_a_perfect_single_call_scores_one_on_every_component():
    c = components(block(call("weather", city="Paris")), [[call("weather", city="Paris")]])
    assert c == {"fmt": 1.0, "name_f1": 1.0, "key": 1.0, "value": 1.0, "parallel": 1.0}
    assert execution_reward(c, W) == pytest.approx(1.0)


def test_the_weighted_sum_matches_a_hand_computed_partial_match():
    # key = |{city}| / |{city, unit, days}| = 1/3; value = 1 loosely-equal gold key of 2 = 1/2
    c = components(block(call("weather", city="paris ", days=3)), [[call("weather", city="Paris", unit="c")]])
    assert c["key"] == pytest.approx(1 / 3) and c["value"] == pytest.approx(0.5)
    # 0.10*1 + 0.25*1 + 0.15/3 + 0.20/2 + 0.30*1 = 0.80
    assert execution_reward(c, W) == pytest.approx(0.80)


def test_fmt_counts_valid_blocks_over_the_larger_tag_count():
    ok = block(call("f"))
    assert components(ok + "\n<tool_call>{not json}</tool_call>", [[call("f")]])["fmt"] == pytest.approx(1 / 2)
    # 3 open tags, 2 close tags, 2 valid blocks → 2/3
    assert components(ok + ok + "<tool_call>", [[call("f")]])["fmt"] == pytest.approx(2 / 3)
    assert components(block(call("g")), [[call("f")]], allowed={"f"})["fmt"] == 0.0  # unknown tool


def test_fmt_is_zero_without_any_call():
    assert components("no calls here", [])["fmt"] == 0.0


def test_name_f1_is_a_multiset_f1():
    # overlap {a:1, b:1} = 2 → 2*2 / (3 + 3)
    assert name_f1(["a", "a", "b"], ["a", "b", "c"]) == pytest.approx(2 / 3)
    assert name_f1([], []) == 1.0
    assert name_f1(["a"], []) == 0.0 and name_f1([], ["a"]) == 0.0


def test_key_and_value_take_the_best_unused_same_name_call_greedily_in_gold_order():
    gold = [call("f", a=1, b=1), call("f", a=1)]
    pred = [call("f", a=1), call("f", a=1, b=2)]
    # gold1: p1 → key 1/2 + value 1/2 = 1.0; p2 → key 1 + value 1/2 = 1.5 → takes p2
    # gold2: p1 → key 1, value 1
    key, value = key_value_scores(pred, gold)
    assert key == pytest.approx(1.0) and value == pytest.approx(0.75)


def test_each_predicted_call_serves_one_gold_call_only():
    key, value = key_value_scores([call("f", a=1)], [call("f", a=1), call("f", a=1)])
    assert key == pytest.approx(0.5) and value == pytest.approx(0.5)


def test_a_same_name_call_with_nothing_in_common_is_not_consumed():
    key, value = key_value_scores([call("f", z=9)], [call("f", a=1)])
    assert (key, value) == (0.0, 0.0)


def test_key_and_value_are_one_when_no_gold_call_has_arguments():
    assert key_value_scores([call("f", x=1)], [call("f")]) == (1.0, 1.0)
    assert key_value_scores([], []) == (1.0, 1.0)


def test_key_and_value_are_zero_when_gold_has_arguments_and_nothing_was_called():
    assert key_value_scores([], [call("f", a=1)]) == (0.0, 0.0)


@pytest.mark.parametrize(
    "pred, gold, equal",
    [
        (" Paris ", "paris", True),
        (10, "10", True),
        (10.0, 10, True),
        ("1e-10", 0, True),  # within 1e-9
        ("0.001", 0, False),
        (True, "true", True),
        ("1", True, True),
        ("false", "0", True),
        ("yes", "true", False),
        ([1, 2], [1, 2], True),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        ([1, 2], [2, 1], False),  # list order matters
        (None, None, True),
        (None, "", False),
        ("abc", "abd", False),
        ("北京", "北京 ", True),
    ],
)
def test_loose_equality_follows_the_five_rules(pred, gold, equal):
    assert loose_equal(pred, gold) is equal
    # its hashable stand-in (repeats are counted with it in linear time) agrees on every case
    assert (loose_key(pred) == loose_key(gold)) is equal


def test_parallel_compares_the_first_block_with_the_first_gold_step():
    gold = [[call("a"), call("b")], [call("c")]]
    together = block(call("a"), call("b")) + block(call("c"))
    apart = block(call("a")) + block(call("b")) + block(call("c"))
    assert components(together, gold)["parallel"] == 1.0
    assert components(apart, gold)["parallel"] == 0.0
    assert components(apart, gold)["name_f1"] == 1.0  # names ignore the step structure


def test_a_reordered_parallel_block_still_scores_full_marks():
    gold = [[call("w", city="A"), call("w", city="B")]]
    c = components(block(call("w", city="B"), call("w", city="A")), gold)
    assert c == {"fmt": 1.0, "name_f1": 1.0, "key": 1.0, "value": 1.0, "parallel": 1.0}


def test_calls_inside_think_are_not_counted():
    text = "<think>maybe " + block(call("wrong")) + "</think>" + block(call("f", a=1))
    c = components(text, [[call("f", a=1)]])
    assert c["fmt"] == 1.0 and c["name_f1"] == 1.0


def test_no_gold_and_no_call_gives_the_abstention_value():
    # fmt 0, name 1, key 1, value 1, parallel 1 (0 == 0) → 0.9
    c = components("The question needs no tool.", [])
    assert execution_reward(c, W) == pytest.approx(0.9)


def test_weights_are_configurable():
    c = components(block(call("f", a=1)) + "<tool_call>x</tool_call>", [[call("f", a=2)]])
    only_fmt = ExecutionWeights(fmt=1.0, name=0.0, key=0.0, value=0.0, parallel=0.0)
    only_value = ExecutionWeights(fmt=0.0, name=0.0, key=0.0, value=1.0, parallel=0.0)
    assert execution_reward(c, only_fmt) == pytest.approx(0.5)
    assert execution_reward(c, only_value) == pytest.approx(0.0)
