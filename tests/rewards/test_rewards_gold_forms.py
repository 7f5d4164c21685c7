"""HierR on each gold form the authors' data holds: nested steps, flat v1 lists of calls, names only.
Hand-computed against the default weights 0.10 fmt / 0.25 name / 0.15 key / 0.20 value / 0.30 parallel; a
component the gold cannot measure is left out and the measured weights renormalised (docs/rewards.md)."""

import asyncio
import json

import pytest

from slca_verl.rewards import score_trajectory

REPLY = "Done: here is everything you asked for."


def block(*calls) -> str:
    return "<tool_call>\n" + json.dumps(list(calls) if len(calls) > 1 else calls[0]) + "\n</tool_call>"


def a(**args):
    return {"name": "a", "arguments": args}


def b(**args):
    return {"name": "b", "arguments": args}


def score(turns, gold, **gt):
    truth = {"allowed_tools": ["a", "b"], "gold_tool_calls": gold, "question_content": "q?", **gt}
    return asyncio.run(score_trajectory([*turns, REPLY], ["{}"] * len(turns), truth))


def test_names_only_gold_scores_format_and_names_and_says_it_did_not_check_arguments():
    gold = ["a", "a", "b"]
    parallel = score([block(a(x=1), a(x=2), b())], gold)
    assert parallel["gold_format"] == "names"
    assert (parallel["key"], parallel["value"], parallel["parallel"]) == (0.0, 0.0, 0.0)  # not measured
    assert parallel["r_tool"] == pytest.approx((0.10 + 0.25) / 0.35)  # = 1.0 whatever the arguments
    partial = score([block(a(x=1)), block(b())], gold)  # name F1 = 2 * 2 / (2 + 3) = 0.8
    assert partial["name_f1"] == pytest.approx(0.8)
    assert partial["r_tool"] == pytest.approx((0.10 + 0.25 * 0.8) / 0.35)  # 0.857; the authors' reward: 0.65


def test_flat_gold_with_several_calls_has_no_step_structure_so_parallel_is_not_scored():
    gold = [a(x=1), b(y=2)]
    sequential = score([block(a(x=1)), block(b(y=2))], gold)
    assert sequential["gold_format"] == "flat" and sequential["parallel"] == 0.0
    assert sequential["r_tool"] == pytest.approx((0.10 + 0.25 + 0.15 + 0.20) / 0.70)  # 1.0; the authors': 0.70
    wrong_value = score([block(a(x=1), b(y=3))], gold)  # value: (1 + 0) / 2 gold calls with arguments
    assert wrong_value["r_tool"] == pytest.approx((0.10 + 0.25 + 0.15 + 0.20 * 0.5) / 0.70)


def test_single_call_flat_gold_is_one_step_and_scores_exactly_like_nested_gold():
    flat, nested = score([block(a(x=1))], [a(x=1)]), score([block(a(x=1))], [[a(x=1)]])
    assert flat["gold_format"] == "flat" and nested["gold_format"] == "nested"
    assert flat["r_tool"] == nested["r_tool"] == pytest.approx(1.0) and flat["parallel"] == 1.0


def test_the_gold_format_data_prep_writes_beside_nested_gold_decides():
    # data_prep writes every form as nested steps and names the form (names-only: arguments {})
    gold = [[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]]
    names = score([block(a(x=1), b(z=0))], gold, gold_format="names")
    assert (names["gold_format"], names["key"], names["value"]) == ("names", 0.0, 0.0)
    assert names["r_tool"] == pytest.approx(1.0)  # (0.10 + 0.25) / 0.35, parallel not scored (2 names)
    as_nested = score([block(a(x=1), b(z=0))], gold, gold_format="nested")
    assert as_nested["r_tool"] == pytest.approx(1.0)  # no gold arguments: key = value = 1, parallel 2 == 2
    unknown = score([block(a(x=1))], [[a(x=1)]], gold_format="v7")
    assert unknown["gold_format"] == "nested" and "gold_format 'v7' is not one of" in unknown["reason"]
