"""HierR total, no-call penalty, preference-reward rules, baselines' terms and bad input (hand-computed)."""

import asyncio
import json
import math
import time

import numpy as np
import pytest

from slca_verl.rewards import RESULT_KEYS, HierRConfig, OfflineProxyJudge, Verdict, score_decoded, score_trajectory

GT = {
    "allowed_tools": ["weather", "news"],
    "gold_tool_calls": [[{"name": "weather", "arguments": {"city": "Paris"}}]],
    "question_content": "Weather in Paris?",
    "subset_name": "single",
    "tool_schemas": "[]",
}
CALL = '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>'
REPLY = "It is 21 degrees and sunny in Paris."
DEFAULT_VERDICT = Verdict(4)


class FakeJudge:
    """Scripted judge: returns the given verdict and records what it was asked."""

    name = "fake"

    def __init__(self, verdict=DEFAULT_VERDICT):
        self.verdict = verdict
        self.asked = []

    async def rate(self, question, tool_responses, reply):
        self.asked.append((question, list(tool_responses), reply))
        return self.verdict

    def metrics(self):
        return {}


def score(assistant, responses=('{"temp": 21}',), gt=GT, judge=None, **cfg):
    return asyncio.run(
        score_trajectory(list(assistant), list(responses), gt, judge=judge, config=HierRConfig(**cfg) if cfg else None)
    )


def test_the_total_is_the_weighted_sum_of_execution_and_preference_rewards():
    judge = FakeJudge(Verdict(4))  # R_sum = (4 - 1) / 4 = 0.75
    out = score([CALL, REPLY], judge=judge)
    assert out["r_tool"] == pytest.approx(1.0) and out["r_sum"] == pytest.approx(0.75)
    assert out["score"] == pytest.approx(1.75)
    assert out["success"] == 0  # 1.75 / 2 = 0.875 < 0.9
    assert judge.asked == [("Weather in Paris?", ['{"temp": 21}'], REPLY)]
    weighted = score([CALL, REPLY], judge=FakeJudge(Verdict(4)), w_tool=2.0, w_sum=0.5)
    assert weighted["score"] == pytest.approx(2.0 * 1.0 + 0.5 * 0.75)


def test_success_needs_the_normalised_total_to_reach_tau():
    out = score([CALL, REPLY], judge=FakeJudge(Verdict(5)))
    assert out["score"] == pytest.approx(2.0) and out["success"] == 1


def test_no_call_when_gold_calls_exist_scores_the_penalty_on_the_summary():
    judge = FakeJudge()
    out = score(["I think it is sunny, no need to check anything."], responses=(), judge=judge)
    assert out["no_call"] == 1
    assert (out["score"], out["r_tool"], out["r_sum"]) == (-0.5, 0.0, -0.5)
    assert all(out[k] == 0.0 for k in ("fmt", "name_f1", "key", "value", "parallel"))
    assert judge.asked == []
    assert score(["nothing"], responses=(), no_call_penalty=-1.0)["score"] == -1.0


@pytest.mark.parametrize(
    "text",
    [
        "</tool_call>",
        "It is sunny.</tool_call>",
        "</tool_call>\n</tool_call> done",
        "<tool_call>oops",
        "<tool_call>\n" + REPLY,
        "<tool_call></tool_call>" + REPLY,
    ],
)
def test_tags_without_a_call_that_parses_are_no_call_and_cannot_dodge_the_penalty(text):
    out = score([text], responses=(), judge=FakeJudge())
    assert out["no_call"] == 1 and out["score"] == -0.5 and out["r_tool"] == 0.0


def test_no_gold_calls_and_no_call_is_not_penalised():
    gt = dict(GT, gold_tool_calls=[])
    out = score(["That needs no tool at all."], responses=(), gt=gt)
    assert out["no_call"] == 0 and out["score"] == pytest.approx(0.9)


@pytest.mark.parametrize(
    "assistant, responses, why",
    [
        ([CALL, REPLY], (), "no tool response"),
        ([CALL, "Sunny."], ('{"temp": 21}',), "reply under 10 characters"),
        ([CALL], ('{"temp": 21}',), "episode ended on tool responses"),
        ([CALL, "<think>" + "long thoughts " * 5 + "</think>" + CALL], ('{"t": 1}',), "last turn is a tool call"),
    ],
)
def test_the_preference_reward_is_zero_without_calling_the_judge(assistant, responses, why):
    judge = FakeJudge(Verdict(5))
    out = score(assistant, responses, judge=judge)
    assert out["r_sum"] == 0.0 and out["judge_used"] == 0, why
    assert judge.asked == [], why


def test_a_judge_failure_scores_zero_is_counted_and_explained():
    out = score([CALL, REPLY], judge=FakeJudge(Verdict(0, True, "judge request failed [timeout]")))
    assert out["r_sum"] == 0.0 and out["judge_failed"] == 1 and out["judge_used"] == 1
    assert out["score"] == pytest.approx(1.0)
    assert "timeout" in out["reason"]


def test_the_final_reply_has_think_stripped():
    judge = FakeJudge()
    score([CALL, "<think>let me see</think>" + REPLY], judge=judge)
    assert judge.asked[0][2] == REPLY


def test_redundant_calls_count_predicted_calls_beyond_the_gold_name_multiset():
    calls = [{"name": "weather", "arguments": {"city": "Paris"}}] * 2 + [{"name": "news", "arguments": {}}]
    text = "<tool_call>" + json.dumps(calls) + "</tool_call>"
    out = score([text, REPLY])
    assert out["num_calls"] == 3 and out["redundant_calls"] == 2
    # name F1 = 2*1 / (3+1) = 0.5; parallel: 3 calls vs 1 gold → 0
    assert out["name_f1"] == pytest.approx(0.5) and out["parallel"] == 0.0


def test_toolpo_action_is_the_fraction_of_strictly_correct_gold_calls():
    gt = dict(
        GT,
        gold_tool_calls=[
            [{"name": "weather", "arguments": {"city": "Paris"}}, {"name": "news", "arguments": {"topic": "rain"}}]
        ],
    )
    calls = [
        {"name": "weather", "arguments": {"city": "paris", "unit": "c"}},
        {"name": "news", "arguments": {"topic": "sun"}},
    ]
    out = score(["<tool_call>" + json.dumps(calls) + "</tool_call>", REPLY], gt=gt)
    assert out["toolpo_action"] == pytest.approx(0.5)  # extra keys allowed, wrong value not
    assert out["toolpo_success"] == 0.0 and out["rltr_completion"] == 0.0
    assert out["rltr_total"] == 0.0  # completion 0 + repeat 0 + error 0


def test_toolpo_success_needs_every_gold_call_and_nothing_more():
    assert score([CALL, REPLY])["toolpo_success"] == 1.0
    assert score([CALL + CALL, REPLY])["toolpo_success"] == 0.0  # one call too many
    assert score([CALL + CALL, REPLY])["rltr_completion"] == 1.0  # RLTR only asks that nothing is missing


def test_rltr_penalises_consecutive_repeats_by_a_tenth_each():
    out = score([CALL + CALL + CALL, REPLY])
    # completion 1, repeats 2 → -0.2, no error
    assert out["rltr_repeat"] == pytest.approx(-0.2)
    assert out["rltr_total"] == pytest.approx(0.8)


def test_rltr_scores_minus_one_for_an_invalid_format_and_reports_the_error_term():
    out = score([CALL + "<tool_call>{oops</tool_call>", REPLY])
    assert out["rltr_error"] == pytest.approx(-0.2) and out["rltr_total"] == -1.0
    assert out["format_valid"] == 0 and out["fmt"] == pytest.approx(0.5)
    assert score(["no call at all"], responses=())["rltr_total"] == -0.5  # the no-call penalty


# ------------------------------------------------------------------------------------------------ bad input


def invalid(body):
    return score(["<tool_call>" + body + "</tool_call>", REPLY])


def test_non_json_tool_calls_score_zero_format_with_a_reason():
    out = invalid("get weather for Paris")
    assert out["fmt"] == 0.0 and out["num_calls"] == 0 and "not valid JSON" in out["reason"]  # the loop's words too
    # a call that does not parse is not a call: the no-call penalty, never more than making no call
    assert out["no_call"] == 1 and out["r_tool"] == 0.0 and out["score"] == -0.5


def test_an_array_of_non_objects_is_an_invalid_block():
    out = invalid("[1, 2, 3]")
    assert out["fmt"] == 0.0 and "not an object" in out["reason"]
    assert "holds a JSON str" in invalid('"weather"')["reason"]


def test_an_unknown_tool_invalidates_its_block():
    out = invalid('{"name": "rm_rf", "arguments": {}}')
    assert out["fmt"] == 0.0 and "unknown tool 'rm_rf'" in out["reason"]


def test_string_encoded_arguments_are_invalid_unless_accepted():
    body = json.dumps({"name": "weather", "arguments": json.dumps({"city": "Paris"})})
    strict = invalid(body)
    assert strict["fmt"] == 0.0 and "got a JSON-encoded string" in strict["reason"]
    lenient = score(["<tool_call>" + body + "</tool_call>", REPLY], accept_string_arguments=True)
    assert lenient["r_tool"] == pytest.approx(1.0) and lenient["reason"] == ""


def test_a_very_long_output_is_scored_quickly_and_correctly():
    noise = "lorem ipsum " * 200_000  # 2.4 MB
    start = time.perf_counter()
    out = score([noise + CALL + noise, REPLY])
    assert time.perf_counter() - start < 5.0
    assert out["r_tool"] == pytest.approx(1.0)


def test_unicode_names_and_values_are_matched():
    gt = {"allowed_tools": ["天气"], "gold_tool_calls": [[{"name": "天气", "arguments": {"城市": "北京"}}]]}
    call = '<tool_call>{"name": "天气", "arguments": {"城市": "北京"}}</tool_call>'
    assert score([call, "北京今天晴，气温二十一度。"], gt=gt)["r_tool"] == pytest.approx(1.0)


def test_ground_truth_from_parquet_numpy_arrays_and_json_strings_is_accepted():
    gold = np.array([np.array([{"name": "weather", "arguments": {"city": "Paris"}}], dtype=object)], dtype=object)
    gt = dict(GT, allowed_tools=np.array(["weather"], dtype=object), gold_tool_calls=gold)
    assert score([CALL, REPLY], gt=gt)["r_tool"] == pytest.approx(1.0)
    as_string = dict(GT, gold_tool_calls=json.dumps(GT["gold_tool_calls"]))
    assert score([CALL, REPLY], gt=as_string)["r_tool"] == pytest.approx(1.0)
    assert score([CALL, REPLY], gt=json.dumps(GT))["r_tool"] == pytest.approx(1.0)


def test_missing_ground_truth_fields_give_defined_scores_and_reasons():
    no_allowed = {k: v for k, v in GT.items() if k != "allowed_tools"}
    out = score([CALL, REPLY], gt=no_allowed)
    assert out["r_tool"] == pytest.approx(1.0) and "allowed_tools missing" in out["reason"]
    no_gold = {k: v for k, v in GT.items() if k != "gold_tool_calls"}
    out = score([CALL, REPLY], gt=no_gold)  # unscorable, not "no call expected" (that would pay 0.9 for abstaining)
    assert out["gold_invalid"] == 1 and "no gold_tool_calls" in out["reason"]
    assert out["r_tool"] == 0.0 and out["score"] == 0.0
    for bad in (None, "not json", 42, ["a"]):
        out = score([CALL, REPLY], gt=bad)
        assert out["score"] == 0.0 and out["reason"].startswith("ground_truth is a") and out["gold_invalid"] == 1


def test_every_row_has_the_same_json_serialisable_scalar_keys():
    rows = [
        score([CALL, REPLY], judge=OfflineProxyJudge()),
        score(["nothing"], responses=()),
        invalid("{bad"),
        score([CALL, REPLY], gt=None),
        score([], responses=(), gt=dict(GT, gold_tool_calls=[])),
        asyncio.run(score_trajectory(None, None, GT)),
    ]
    for row in rows:
        assert tuple(row) == RESULT_KEYS
        assert all(isinstance(v, (int, float, str)) for v in row.values())
        assert all(math.isfinite(v) for v in row.values() if isinstance(v, float))
        json.dumps(row)


def test_decoded_text_with_and_without_special_tokens_scores_like_the_structured_pieces():
    plain = CALL + '\nuser\n<tool_response>\n{"temp": 21}\n</tool_response>\nassistant\n' + REPLY
    special = (
        CALL + '<|im_end|>\n<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>\n'
        "<|im_start|>assistant\n" + REPLY + "<|im_end|>"
    )
    structured = score([CALL, REPLY], judge=FakeJudge())
    for text in (plain, special):
        judge = FakeJudge()
        out = asyncio.run(score_decoded(text, GT, judge=judge))
        assert out == structured
        assert judge.asked == [("Weather in Paris?", ['{"temp": 21}'], REPLY)]


def test_a_tool_call_quoted_inside_a_tool_response_is_not_the_models_call():
    text = CALL + "\nuser\n<tool_response>\nsee <tool_call>{}</tool_call>\n</tool_response>\nassistant\n" + REPLY
    out = asyncio.run(score_decoded(text, GT))
    assert out["fmt"] == 1.0 and out["num_calls"] == 1


@pytest.mark.parametrize("tag", ["<tool_call>", "<tool_response>", "<think>"])
def test_thousands_of_unclosed_tags_are_parsed_in_linear_time(tag):
    text = tag * 20_000 + CALL  # a lazy-regex parser would take minutes here
    start = time.perf_counter()
    out = asyncio.run(score_decoded(text, GT))
    assert time.perf_counter() - start < 2.0
    assert tuple(out) == RESULT_KEYS
