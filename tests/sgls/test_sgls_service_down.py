"""A server that is gone stops the run naming itself; a short outage costs only the calls it failed.

``max_outage_s`` (the simulator's ``sgls.max_outage_s``, the judge's ``reward_kwargs.judge_max_outage_s``): once every
call to a server has failed for that long, the shared ChatClient raises ServiceDown, which the simulator, the agent
loop, the judge and HierR let through (each of them turns any other failure into an error response or a zero score,
counted). Real HTTP servers on 127.0.0.1; the agent loop is slca_tool_agent with the real tokenizer.
"""

import asyncio
import time

import pytest
from agent_loop_helpers import PARIS, WEATHER, call, compose_config, make_row, rollout
from sgls_helpers import Reply, ScriptedServer, dead_url

from slca_verl.sgls.client import ChatClient, ChatClientError, ServiceDown

MSG = [{"role": "user", "content": "hi"}]


def test_a_dead_server_fails_calls_until_the_outage_passes_max_outage_s_then_raises_service_down():
    url = dead_url()
    client = ChatClient(url, "m", max_retries=0, max_outage_s=0.3)

    async def main():
        with pytest.raises(ChatClientError) as first:
            await client.chat(MSG)
        assert not isinstance(first.value, ServiceDown)
        await asyncio.sleep(0.35)
        with pytest.raises(ServiceDown) as down:
            await client.chat(MSG)
        await client.aclose()
        return down.value

    down = asyncio.run(main())
    assert url in str(down) and "every call has failed for" in str(down) and "2 calls" in str(down)
    assert down.last.kind == "connection"


def test_a_short_outage_ends_with_a_success_and_never_raises_service_down():
    """503 (or 401) for a while, then answers: the failed calls are failures, counted; the first success resets
    the outage clock, so later failures start a new one."""
    t_up = time.monotonic() + 0.4

    def script(req, n):
        return Reply(status=503, content=None) if time.monotonic() < t_up else "ok"

    with ScriptedServer(script) as srv:
        client = ChatClient(srv.base_url, "m", max_retries=0, max_outage_s=0.6)

        async def main():
            results = []
            for _ in range(8):
                try:
                    results.append(await client.chat(MSG))
                except ServiceDown:
                    raise
                except ChatClientError as e:
                    results.append(e.kind)
                await asyncio.sleep(0.1)
            await client.aclose()
            return results

        results = asyncio.run(main())
    assert "http_5xx" in results and results[-1] == "ok"
    assert client.metrics()["failed/http_5xx"] == results.count("http_5xx")


def test_max_outage_s_must_be_positive_seconds():
    with pytest.raises(ValueError, match="max_outage_s"):
        ChatClient("http://127.0.0.1:1/v1", "m", max_outage_s=0)


async def test_a_dead_judge_stops_the_reward_naming_itself_where_before_it_scored_r_sum_0():
    from slca_verl.agent_loop.reward import compute_score

    url = dead_url()
    row = make_row("What is the weather in Paris?", [WEATHER], PARIS, "g")
    extra = {**row["extra_info"], "slca_assistant_texts": None}
    kw = dict(judge="llm", judge_base_urls=[url], judge_model="j", judge_max_retries=0)
    text = call("get_weather", city="Paris") + "\n<tool_response>\n{}\n</tool_response>\nIt is sunny in Paris."
    gt = row["reward_model"]["ground_truth"]
    scored = await compute_score("unit_test", text, gt, extra, **kw)
    assert scored["judge_failed"] == 1 and scored["r_sum"] == 0  # without the setting: a counted zero
    await compute_score("unit_test", text, gt, extra, judge_max_outage_s=0.2, **kw)  # the clock starts
    await asyncio.sleep(0.25)
    with pytest.raises(ServiceDown, match=url.removesuffix("/v1")):
        await compute_score("unit_test", text, gt, extra, judge_max_outage_s=0.2, **kw)


@pytest.fixture(scope="module")
def cfg():
    return compose_config()


async def test_a_dead_simulator_stops_the_rollout_naming_itself_and_a_live_one_answers(cfg, tok):
    """slca_tool_agent turns every failed call into an error response (counted), except ServiceDown: a simulator
    that has failed every call for max_outage_s ends the rollout with it, so verl's step fails naming the server."""
    q = "What is the weather in Paris?"
    script = {q: [call("get_weather", city="Paris"), "It is sunny in Paris today, 21 degrees."]}
    url = dead_url()
    sgls = {
        "backend": "openai",
        "base_urls": [url],
        "model": "sim",
        "max_retries": 0,
        "max_outage_s": 1e-9,
        "cache_scope": "none",
        "reply_attempts": 1,
    }
    with pytest.raises(ServiceDown, match=url.removesuffix("/v1")):
        await rollout(cfg, tok, script, [make_row(q, [WEATHER], PARIS, "g1")], sgls={**sgls})
    # without the setting the same dead server costs the call: an error response, counted, and the episode goes on
    (out,), _ = await rollout(
        cfg, tok, script, [make_row(q, [WEATHER], PARIS, "g2")], sgls={**sgls, "max_outage_s": None}
    )
    assert out.extra_fields["slca_agent_metrics"]["simulator_errors"] == 1
