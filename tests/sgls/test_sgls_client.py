"""ChatClient against real HTTP servers on 127.0.0.1: retries, timeouts, failover, concurrency, loops."""

import asyncio
import threading
import time

import pytest
from sgls_helpers import Reply, ScriptedServer, dead_url

from slca_verl.sgls.client import ChatClient, ChatClientError

MSG = [{"role": "user", "content": "hi"}]


def test_chat_returns_message_content_and_sends_the_openai_payload():
    with ScriptedServer(lambda req, n: Reply(content="hello")) as srv:

        async def main():
            c = ChatClient(srv.base_url, "sim-model")
            out = await c.chat(MSG, temperature=0.3, max_tokens=7, seed=5, response_format={"type": "json_object"})
            await c.aclose()
            return out

        assert asyncio.run(main()) == "hello"
        req = srv.requests[0]
        assert req["model"] == "sim-model" and req["messages"] == MSG
        assert req["temperature"] == 0.3 and req["max_tokens"] == 7 and req["seed"] == 5
        assert req["response_format"] == {"type": "json_object"}


def test_a_client_used_under_asyncio_run_without_aclose_closes_its_session_with_the_loop():
    """verl's sync reward paths and hierr.score_trajectory_sync call the client under asyncio.run, once per call: each
    loop's session must close when that loop shuts down (it used to stay open: "Unclosed client session")."""
    with ScriptedServer(lambda req, n: "ok") as srv:
        c = ChatClient(srv.base_url, "m")
        sessions = []

        async def main():
            out = await c.chat(MSG)
            sessions.append(c._state().session)
            return out

        assert [asyncio.run(main()) for _ in range(3)] == ["ok"] * 3
    assert len({id(s) for s in sessions}) == 3 and all(s.closed for s in sessions)


def test_base_url_without_v1_suffix_is_accepted():
    with ScriptedServer(lambda req, n: "ok") as srv:
        c = ChatClient(srv.base_url[: -len("/v1")], "m")

        async def main():
            try:
                return await c.chat(MSG)
            finally:
                await c.aclose()

        assert asyncio.run(main()) == "ok"


def test_server_errors_are_retried_until_success():
    def script(req, n):
        return Reply(status=500, body="boom") if n < 2 else Reply(content="fine")

    with ScriptedServer(script) as srv:
        c = ChatClient(srv.base_url, "m", backoff_s=0.01, max_retries=3, unhealthy_cooldown_s=0.0)

        async def main():
            try:
                return await c.chat(MSG)
            finally:
                await c.aclose()

        assert asyncio.run(main()) == "fine"
        m = c.metrics()
        assert len(srv.requests) == 3 and m["retries"] == 2 and m["errors/http_5xx"] == 2 and m["successes"] == 1


def test_persistent_500_raises_http_5xx_after_all_retries():
    with ScriptedServer(lambda req, n: Reply(status=503, body="overloaded")) as srv:
        c = ChatClient(srv.base_url, "m", backoff_s=0.01, max_retries=2)

        async def main():
            try:
                await c.chat(MSG)
            finally:
                await c.aclose()

        with pytest.raises(ChatClientError) as ei:
            asyncio.run(main())
        assert ei.value.kind == "http_5xx" and ei.value.status == 503 and "overloaded" in ei.value.message
        assert len(srv.requests) == 3


def test_client_errors_are_not_retried():
    with ScriptedServer(lambda req, n: Reply(status=400, body='{"error": "bad model"}')) as srv:
        c = ChatClient(srv.base_url, "m", backoff_s=0.01, max_retries=3)
        with pytest.raises(ChatClientError) as ei:
            asyncio.run(c.chat(MSG))
        assert ei.value.kind == "http_4xx" and "bad model" in ei.value.message
        assert len(srv.requests) == 1


def test_slow_server_gives_timeout_error_within_the_time_budget():
    with ScriptedServer(lambda req, n: Reply(delay_s=2.0)) as srv:
        c = ChatClient(srv.base_url, "m", timeout_s=0.2, max_retries=1, backoff_s=0.01)
        t0 = time.monotonic()
        with pytest.raises(ChatClientError) as ei:
            asyncio.run(c.chat(MSG))
        assert ei.value.kind == "timeout"
        assert time.monotonic() - t0 < 1.5
        assert c.metrics()["errors/timeout"] == 2


def test_rate_limit_is_retried_and_reported_as_rate_limited():
    with ScriptedServer(lambda req, n: Reply(status=429, body="slow down", headers={"Retry-After": "0"})) as srv:
        c = ChatClient(srv.base_url, "m", max_retries=1, backoff_s=0.01)
        with pytest.raises(ChatClientError) as ei:
            asyncio.run(c.chat(MSG))
        assert ei.value.kind == "rate_limited" and len(srv.requests) == 2


def test_garbage_body_is_a_bad_response_error():
    with ScriptedServer(lambda req, n: Reply(body="<html>gateway</html>")) as srv:
        c = ChatClient(srv.base_url, "m", max_retries=1, backoff_s=0.01)
        with pytest.raises(ChatClientError) as ei:
            asyncio.run(c.chat(MSG))
        assert ei.value.kind == "bad_response" and "gateway" in ei.value.message


def test_one_dead_replica_among_three_is_avoided_after_one_failure():
    with ScriptedServer(lambda req, n: "a") as s1, ScriptedServer(lambda req, n: "b") as s2:
        dead = dead_url()
        c = ChatClient([dead, s1.base_url, s2.base_url], "m", backoff_s=5.0, unhealthy_cooldown_s=60)

        async def main():
            try:
                return await asyncio.gather(*[c.chat(MSG) for _ in range(30)])
            finally:
                await c.aclose()

        t0 = time.monotonic()
        outs = asyncio.run(main())
        elapsed = time.monotonic() - t0
        assert sorted(set(outs)) == ["a", "b"] and len(outs) == 30
        m = c.metrics()
        assert m["failures"] == 0 and m["replica/0/healthy"] == 0
        assert m["replica/0/failures"] == m["replica/0/requests"] >= 1
        assert m["replica/0/requests"] <= 30 // 3 + 1  # only requests already routed before the first failure
        assert elapsed < 2.0  # failover does not back off (one backoff of backoff_s=5.0 would take longer)
        assert len(s1.requests) + len(s2.requests) == 30


def test_all_replicas_dead_raises_all_replicas_down():
    c = ChatClient([dead_url(), dead_url()], "m", max_retries=2, backoff_s=0.01)
    with pytest.raises(ChatClientError) as ei:
        asyncio.run(c.chat(MSG))
    assert ei.value.kind == "all_replicas_down"


def test_single_dead_replica_raises_connection_error():
    c = ChatClient(dead_url(), "m", max_retries=1, backoff_s=0.01)
    with pytest.raises(ChatClientError) as ei:
        asyncio.run(c.chat(MSG))
    assert ei.value.kind == "connection"


def test_concurrency_is_bounded_by_max_concurrency():
    peak = {"max": 0}

    with ScriptedServer(lambda req, n: Reply(delay_s=0.05)) as srv:
        c = ChatClient(srv.base_url, "m", max_concurrency=4)

        async def one():
            return await c.chat(MSG)

        async def watch(stop):
            while not stop.is_set():
                peak["max"] = max(peak["max"], c.metrics()["in_flight"])
                await asyncio.sleep(0.005)

        async def main():
            stop = asyncio.Event()
            w = asyncio.create_task(watch(stop))
            await asyncio.gather(*[one() for _ in range(16)])
            stop.set()
            await w
            await c.aclose()

        t0 = time.monotonic()
        asyncio.run(main())
        assert peak["max"] <= 4 and peak["max"] >= 2
        assert time.monotonic() - t0 >= 4 * 0.05  # 16 requests, 4 at a time, 50 ms each


def test_one_client_works_from_two_event_loops_in_two_threads():
    with ScriptedServer(lambda req, n: "x") as srv:
        c = ChatClient(srv.base_url, "m")
        results, errors = [], []

        def worker():
            try:
                results.append(asyncio.run(c.chat(MSG)))
            except Exception as e:  # surfaced by the assertion below
                errors.append(e)

        # first loop, then two concurrent loops in threads, each creating its own session lazily
        assert asyncio.run(c.chat(MSG)) == "x"
        threads = [threading.Thread(target=worker) for _ in range(2)]
        [t.start() for t in threads]
        [t.join(10) for t in threads]
        assert errors == [] and results == ["x", "x"]


def test_metrics_report_latency_percentiles():
    with ScriptedServer(lambda req, n: Reply(delay_s=0.02)) as srv:
        c = ChatClient(srv.base_url, "m")

        async def main():
            await asyncio.gather(*[c.chat(MSG) for _ in range(5)])
            await c.aclose()

        asyncio.run(main())
        m = c.metrics()
        assert m["requests"] == 5 and m["successes"] == 5
        assert 0.02 <= m["latency_p50_s"] <= m["latency_p99_s"] < 2.0
