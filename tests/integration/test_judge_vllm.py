"""HierR's LLM judge against a real vLLM OpenAI server on the CPU (docs/sgls.md), through the shared ChatClient.

Start the server first (the SGLS scripts do it and write its base URL to ``.vllm_cpu_url`` at the repo root)::

    bash scripts/vllm_cpu_setup.sh && bash scripts/vllm_cpu_serve.sh

The served model is a tiny random Qwen3: its replies are garbage. What is tested is the protocol and the robustness
contract — every reply becomes a rating or a counted failure scored 0, never an exception.
"""

import asyncio

import pytest

from slca_verl.rewards import LLMJudge, compute_score, score_trajectory
from slca_verl.sgls.client import ChatClient

GT = {
    "allowed_tools": ["weather"],
    "gold_tool_calls": [[{"name": "weather", "arguments": {"city": "Paris"}}]],
    "question_content": "Weather in Paris?",
}
CALL = '<tool_call>{"name": "weather", "arguments": {"city": "Paris"}}</tool_call>'


def replies(n):
    return [f"It is {20 + i} degrees and sunny in Paris today (reply {i})." for i in range(n)]


def test_garbage_from_a_random_model_becomes_ratings_or_counted_failures(vllm):
    base, model = vllm

    async def main():
        client = ChatClient(base, model, timeout_s=60, max_retries=1, max_concurrency=8)
        judge = LLMJudge(client, max_tokens=48)
        rows = await asyncio.gather(
            *[score_trajectory([CALL, r], ['{"temp_c": 21, "sky": "sunny"}'], GT, judge=judge) for r in replies(8)]
        )
        await client.aclose()
        return rows, judge.metrics()

    rows, metrics = asyncio.run(main())
    assert all(r["judge_used"] == 1 for r in rows)
    for r in rows:
        if r["judge_failed"]:
            assert r["r_sum"] == 0.0 and r["judge_rating"] == 0 and r["reason"]
        else:
            assert 1 <= r["judge_rating"] <= 5 and r["r_sum"] == (r["judge_rating"] - 1) / 4
        assert r["score"] == pytest.approx(r["r_tool"] + r["r_sum"])
    assert metrics["calls"] == 8 and metrics["ratings"] + metrics["failures"] == 8
    assert metrics["failures"] == sum(r["judge_failed"] for r in rows)
    assert metrics["client/successes"] == 8  # the transport worked; only the content was bad


def test_structured_output_on_vllm_is_parsed_or_counted(vllm):
    base, model = vllm

    async def main():
        client = ChatClient(base, model, timeout_s=60, max_retries=1)
        judge = LLMJudge(client, max_tokens=64, structured_output=True)
        verdicts = [await judge.rate("Weather in Paris?", ['{"temp_c": 21}'], r) for r in replies(3)]
        await client.aclose()
        return verdicts, judge.metrics()

    verdicts, metrics = asyncio.run(main())
    assert all((v.failed and v.rating == 0) or 1 <= v.rating <= 5 for v in verdicts)
    assert metrics["ratings"] + metrics["failures"] == 3


def test_compute_score_reaches_the_server_through_reward_kwargs(vllm):
    base, model = vllm
    decoded = CALL + '\nuser\n<tool_response>\n{"temp_c": 21}\n</tool_response>\nassistant\n' + replies(1)[0]
    out = asyncio.run(
        compute_score(
            "toucan",
            decoded,
            GT,
            {},
            judge="llm",
            judge_base_urls=[base],
            judge_model=model,
            judge_max_tokens=32,
            judge_timeout_s=60,
        )
    )
    assert out["judge_used"] == 1 and out["r_tool"] == pytest.approx(1.0)
    assert out["judge_failed"] == 1 or 1 <= out["judge_rating"] <= 5
