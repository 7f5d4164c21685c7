"""Simulator with the OpenAI backend against scripted HTTP servers on 127.0.0.1."""

import asyncio
import json
import threading
import time

from sgls_helpers import Reply, ScriptedServer, dead_url

from slca_verl.sgls.simulator import Simulator

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather now",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "response_schema": {
            "type": "object",
            "properties": {"temp_c": {"type": "number"}, "sky": {"type": "string"}},
            "required": ["temp_c", "sky"],
        },
    },
}
PING = {
    "type": "function",
    "function": {"name": "ping", "description": "Ping", "parameters": {"type": "object", "properties": {}}},
}
TOOLS = [WEATHER, PING]
GOOD = '{"temp_c": 21.5, "sky": "clear"}'


def sim_for(urls, **over):
    cfg = {
        "backend": "openai",
        "base_urls": urls if isinstance(urls, list) else [urls],
        "model": "sim",
        "timeout_s": 2.0,
        "max_retries": 2,
        "backoff_s": 0.01,
        "reply_attempts": 2,
        "cache_scope": "group",
    }
    cfg.update(over)
    return Simulator(cfg)


def call(sim, name="get_weather", args=None, scope="g", n=1):
    async def main():
        try:
            return await asyncio.gather(
                *[
                    sim.call(name, args if args is not None else {"city": "Rome"}, tool_schemas=TOOLS, scope=scope)
                    for _ in range(n)
                ]
            )
        finally:
            await sim.aclose()

    out = asyncio.run(main())
    return out[0] if n == 1 else out


def test_request_carries_prompt_seed_and_json_schema_response_format():
    with ScriptedServer(lambda req, n: GOOD) as srv:
        res = call(sim_for(srv.base_url, temperature=0.6))
        assert res.status == "ok" and json.loads(res.text) == json.loads(GOOD)
        req = srv.requests[0]
        assert req["model"] == "sim" and req["temperature"] == 0.6 and isinstance(req["seed"], int)
        rf = req["response_format"]
        assert rf["type"] == "json_schema" and rf["json_schema"]["schema"]["required"] == ["temp_c", "sky"]
        system, user = req["messages"]
        assert system["role"] == "system" and "backend" in system["content"]
        assert "get_weather" in user["content"] and '"city": "Rome"' in user["content"]


def test_tool_without_response_schema_asks_for_a_json_object():
    with ScriptedServer(lambda req, n: '{"pong": true}') as srv:
        res = call(sim_for(srv.base_url), name="ping", args={})
        assert res.status == "ok" and srv.requests[0]["response_format"] == {"type": "json_object"}


def test_reply_wrapped_in_prose_and_fences_is_extracted():
    with ScriptedServer(lambda req, n: "Here you go:\n```json\n" + GOOD + "\n```\nAnything else?") as srv:
        res = call(sim_for(srv.base_url))
        assert res.status == "ok" and json.loads(res.text) == json.loads(GOOD) and len(srv.requests) == 1


def test_garbage_reply_is_retried_then_succeeds():
    with ScriptedServer(lambda req, n: "I am a teapot" if n == 0 else GOOD) as srv:
        sim = sim_for(srv.base_url)
        res = call(sim)
        assert res.status == "ok" and res.metadata["attempts"] == 2 and len(srv.requests) == 2
        assert srv.requests[0]["seed"] != srv.requests[1]["seed"]


def test_persistent_garbage_ends_as_a_clear_simulator_error():
    with ScriptedServer(lambda req, n: "no json here, sorry") as srv:
        sim = sim_for(srv.base_url, reply_attempts=3)
        res = call(sim)
        assert res.status == "simulator_error" and len(srv.requests) == 3
        err = json.loads(res.text)["error"]
        assert err["type"] == "simulator_error" and "invalid_json" in err["message"]


def test_off_schema_reply_is_retried_and_then_reported():
    with ScriptedServer(lambda req, n: '{"temp_c": "warm", "sky": "clear"}') as srv:
        res = call(sim_for(srv.base_url))
        assert res.status == "simulator_error" and res.metadata["error_kind"] == "schema_violation"
        assert "temp_c" in json.loads(res.text)["error"]["detail"] and len(srv.requests) == 2


def test_truncated_reply_is_repaired_when_the_server_says_length():
    with ScriptedServer(lambda req, n: Reply(content='{"temp_c": 3, "sky": "overc', finish_reason="length")) as srv:
        res = call(sim_for(srv.base_url))
        assert res.status == "ok" and json.loads(res.text) == {"temp_c": 3, "sky": "overc"}
        assert res.metadata["repaired"] is True


def test_server_refusing_response_format_falls_back_to_the_repair_path():
    def script(req, n):
        if "response_format" in req:
            return Reply(status=400, body='{"error": "grammar compilation failed"}')
        return GOOD

    with ScriptedServer(script) as srv:
        res = call(sim_for(srv.base_url))
        assert res.status == "ok" and "response_format" in srv.requests[0] and "response_format" not in srv.requests[1]


def test_500s_are_retried_by_the_client():
    with ScriptedServer(lambda req, n: Reply(status=500, body="oops") if n < 2 else GOOD) as srv:
        sim = sim_for(srv.base_url, unhealthy_cooldown_s=0.0)
        res = call(sim)
        assert res.status == "ok" and len(srv.requests) == 3


def test_persistent_500s_become_a_simulator_error_not_an_exception():
    with ScriptedServer(lambda req, n: Reply(status=500, body="oops")) as srv:
        sim = sim_for(srv.base_url)
        res = call(sim)
        assert res.status == "simulator_error" and res.metadata["error_kind"] == "http_5xx"
        assert sim.metrics()["backend_failures"] == 1


def test_slow_server_times_out_quickly_into_a_simulator_error():
    with ScriptedServer(lambda req, n: Reply(content=GOOD, delay_s=3.0)) as srv:
        sim = sim_for(srv.base_url, timeout_s=0.2, max_retries=1)
        t0 = time.monotonic()
        res = call(sim)
        assert res.status == "simulator_error" and res.metadata["error_kind"] == "timeout"
        assert json.loads(res.text)["error"]["code"] == 504 and time.monotonic() - t0 < 2.0


def test_one_dead_replica_among_three_does_not_fail_any_call():
    with ScriptedServer(lambda req, n: GOOD) as s1, ScriptedServer(lambda req, n: GOOD) as s2:
        sim = sim_for([s1.base_url, dead_url(), s2.base_url], backoff_s=5.0, unhealthy_cooldown_s=60)

        async def main():
            try:
                return await asyncio.gather(
                    *[sim.call("get_weather", {"city": f"c{i}"}, tool_schemas=TOOLS, scope="g") for i in range(40)]
                )
            finally:
                await sim.aclose()

        t0 = time.monotonic()
        results = asyncio.run(main())
        assert all(r.status == "ok" for r in results) and time.monotonic() - t0 < 2.0  # no backoff (backoff_s=5.0)
        m = sim.metrics()
        assert m["backend/client/replica/1/healthy"] == 0 and m["backend/client/failovers"] >= 1
        assert len(s1.requests) + len(s2.requests) == 40


def test_concurrent_calls_keep_identical_calls_consistent_within_each_group():
    counter = {"n": 0}
    lock = threading.Lock()

    def script(req, n):  # every request gets a different answer: only the cache can make answers agree
        with lock:
            counter["n"] += 1
            k = counter["n"]
        return Reply(content=json.dumps({"temp_c": k, "sky": "clear"}), delay_s=0.03)

    with ScriptedServer(script) as srv:
        sim = sim_for(srv.base_url, max_concurrency=8)

        async def main():
            calls = [(g, city) for g in range(6) for city in ("Rome", "Oslo") for _ in range(8)]  # 96 calls
            try:
                res = await asyncio.gather(
                    *[sim.call("get_weather", {"city": c}, tool_schemas=TOOLS, scope=f"uid-{g}") for g, c in calls]
                )
            finally:
                await sim.aclose()
            return calls, res

        calls, results = asyncio.run(main())
        by_key = {}
        for key, r in zip(calls, results):
            assert r.status == "ok"
            by_key.setdefault(key, set()).add(r.text)
        assert all(len(texts) == 1 for texts in by_key.values())  # one answer per (group, call)
        assert len({next(iter(t)) for t in by_key.values()}) == 12  # groups and calls differ from each other
        assert len(srv.requests) == 12  # one LLM call per distinct (group, call)


# ------------------------------------------------------------------ API key (recipes/serve_*.sh serve with one)

SECRET = "sk-test-0123456789abcdef"


def key_file(tmp_path, text=SECRET + "\n"):
    path = tmp_path / "api_key"
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def test_the_key_from_api_key_file_is_sent_to_a_server_that_demands_it(tmp_path, caplog):
    caplog.set_level("DEBUG")
    with ScriptedServer(lambda req, n: GOOD, api_key=SECRET) as srv:
        sim = sim_for(srv.base_url, api_key_file=key_file(tmp_path))
        res = call(sim)
        assert res.status == "ok" and srv.refused == 0 and len(srv.requests) == 1
    assert SECRET not in caplog.text and SECRET not in repr(sim.config)


def test_without_the_key_the_call_fails_once_as_an_auth_error_not_a_structured_output_retry(caplog):
    with ScriptedServer(lambda req, n: GOOD, api_key=SECRET) as srv:
        sim = sim_for(srv.base_url, reply_attempts=3)
        res = call(sim)
        assert res.status == "simulator_error" and res.metadata["error_kind"] == "http_4xx"
        assert srv.refused == 1  # a 401 is not "the server refused response_format": no second request
    assert "refused the API key" in caplog.text and "retrying without it" not in caplog.text


def test_a_wrong_key_is_refused_and_an_unreadable_key_file_stops_start_up(tmp_path):
    with ScriptedServer(lambda req, n: GOOD, api_key=SECRET) as srv:
        sim = sim_for(srv.base_url, api_key="sk-wrong")
        assert call(sim).status == "simulator_error" and srv.refused == 1
        for bad, why in ((str(tmp_path / "missing"), "cannot be read"), (key_file(tmp_path, "\n"), "found nothing")):
            try:
                sim_for(srv.base_url, api_key_file=bad)
            except ValueError as e:
                assert bad in str(e) and why in str(e)
            else:
                raise AssertionError("a key file that holds no key must stop start-up")
