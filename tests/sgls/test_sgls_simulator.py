"""Simulator with the offline backend: determinism, cache scopes, coalescing, sqlite, faults, verl BaseTool."""

import asyncio
import json
import threading
from pathlib import Path

import pytest

from slca_verl.sgls.backend import BackendReply, SimulatorFailure
from slca_verl.sgls.config import SGLSConfig
from slca_verl.sgls.simulator import Simulator

SEARCH = {
    "type": "function",
    "function": {
        "name": "search_flights",
        "description": "Find flights",
        "parameters": {
            "type": "object",
            "properties": {"origin": {"type": "string"}, "dest": {"type": "string"}, "max_stops": {"type": "integer"}},
            "required": ["origin", "dest"],
        },
        "response_schema": {
            "type": "object",
            "properties": {
                "flights": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "format": "uuid"},
                            "price": {"type": "number", "minimum": 50, "maximum": 900},
                            "cabin": {"type": "string", "enum": ["economy", "business"]},
                            "date": {"type": "string", "format": "date"},
                        },
                        "required": ["id", "price", "cabin", "date"],
                        "additionalProperties": False,
                    },
                },
                "currency": {"type": "string", "const": "EUR"},
            },
            "required": ["flights", "currency"],
        },
    },
}
ECHO = {
    "type": "function",
    "function": {"name": "ping", "description": "", "parameters": {"type": "object", "properties": {}}},
}
TOOLS = [SEARCH, ECHO]
ARGS = {"origin": "CDG", "dest": "JFK"}
YAML = Path(__file__).resolve().parents[2] / "slca_verl" / "config" / "sgls_tool.yaml"


class CountingBackend:
    """Distinct answer per backend call, so caching shows in the text."""

    def __init__(self, delay_s=0.0, fail=False):
        self.n = 0
        self.delay_s = delay_s
        self.fail = fail
        self.lock = threading.Lock()

    async def simulate(self, tool, arguments, context=None):
        with self.lock:
            self.n += 1
            n = self.n
        await asyncio.sleep(self.delay_s)
        if self.fail:
            raise SimulatorFailure("timeout", "server did not answer", 3)
        return BackendReply(text=json.dumps({"answer": n}))

    def metrics(self):
        return {"n": self.n}

    async def aclose(self):
        pass


def run(coro):
    return asyncio.run(coro)


def test_offline_answer_conforms_to_the_response_schema():
    sim = Simulator({"backend": "offline"})
    res = run(sim.call("search_flights", ARGS, tool_schemas=TOOLS, scope="g"))
    assert res.status == "ok"
    body = json.loads(res.text)
    tool = sim.toolset(TOOLS).get("search_flights")
    assert tool.response_validator.is_valid(body) and body["currency"] == "EUR" and len(body["flights"]) >= 1


def test_offline_answers_depend_only_on_the_call_not_on_order_or_instance():
    a = Simulator({"backend": "offline", "cache_scope": "none"})
    b = Simulator({"backend": "offline", "cache_scope": "none"})
    first = run(a.call("search_flights", ARGS, tool_schemas=TOOLS))
    run(b.call("search_flights", {"origin": "X", "dest": "Y"}, tool_schemas=TOOLS))
    second = run(b.call("search_flights", {"dest": "JFK", "origin": "CDG"}, tool_schemas=TOOLS))
    other = run(a.call("search_flights", {"origin": "CDG", "dest": "LHR"}, tool_schemas=TOOLS))
    assert first.text == second.text and first.text != other.text


def test_offline_answer_without_response_schema_echoes_the_call():
    res = run(Simulator({"backend": "offline"}).call("ping", {}, tool_schemas=TOOLS, scope="g"))
    body = json.loads(res.text)
    assert body["status"] == "success" and body["tool"] == "ping" and body["arguments"] == {}


def test_invalid_call_never_reaches_the_backend():
    backend = CountingBackend()
    sim = Simulator({"backend": "offline"}, backend=backend)
    res = run(sim.call("search_flights", {"origin": "CDG"}, tool_schemas=TOOLS, scope="g"))
    res2 = run(sim.call("book_hotel", {}, tool_schemas=TOOLS, scope="g"))
    assert res.status == res2.status == "validation_error" and backend.n == 0
    assert json.loads(res.text)["error"]["code"] == 400 and json.loads(res2.text)["error"]["code"] == 404
    assert sim.metrics()["validation_rejections"] == 2


def test_identical_calls_in_one_group_share_an_answer_and_other_groups_do_not():
    backend = CountingBackend()
    sim = Simulator({"cache_scope": "group"}, backend=backend)

    async def main():
        a = await sim.call("search_flights", ARGS, tool_schemas=TOOLS, scope="uid-1")
        b = await sim.call("search_flights", {"dest": "JFK", "origin": "CDG"}, tool_schemas=TOOLS, scope="uid-1")
        c = await sim.call("search_flights", ARGS, tool_schemas=TOOLS, scope="uid-2")
        return a, b, c

    a, b, c = run(main())
    assert a.text == b.text != c.text and backend.n == 2
    assert b.metadata["cached"] == "hit" and a.metadata["cached"] == "miss"


def test_run_scope_shares_across_groups_and_none_scope_never_caches():
    run_backend, none_backend = CountingBackend(), CountingBackend()
    run_sim = Simulator({"cache_scope": "run"}, backend=run_backend)
    none_sim = Simulator({"cache_scope": "none"}, backend=none_backend)
    for scope in ("a", "b", "c"):
        run(run_sim.call("ping", {}, tool_schemas=TOOLS, scope=scope))
        run(none_sim.call("ping", {}, tool_schemas=TOOLS, scope=scope))
    assert run_backend.n == 1 and none_backend.n == 3


def test_concurrent_identical_calls_are_coalesced_into_one_backend_call():
    backend = CountingBackend(delay_s=0.05)
    sim = Simulator({"cache_scope": "group"}, backend=backend)

    async def main():
        return await asyncio.gather(*[sim.call("ping", {}, tool_schemas=TOOLS, scope="g") for _ in range(16)])

    results = run(main())
    assert {r.text for r in results} == {json.dumps({"answer": 1})} and backend.n == 1
    m = sim.metrics()
    assert m["cache_misses"] == 1 and m["cache_coalesced"] + m["cache_hits"] == 15


def test_backend_failure_becomes_a_simulator_error_and_is_not_cached():
    backend = CountingBackend(fail=True)
    sim = Simulator({"cache_scope": "group"}, backend=backend)
    r1 = run(sim.call("ping", {}, tool_schemas=TOOLS, scope="g"))
    r2 = run(sim.call("ping", {}, tool_schemas=TOOLS, scope="g"))
    assert r1.status == r2.status == "simulator_error" and backend.n == 2
    err = json.loads(r1.text)["error"]
    assert err["type"] == "simulator_error" and err["code"] == 504 and "timeout" in err["message"]
    assert sim.metrics()["backend_failures"] == 2


def test_sqlite_cache_lets_a_resumed_run_see_the_same_world(tmp_path):
    db = str(tmp_path / "sgls.sqlite")
    first = Simulator({"cache_scope": "run", "sqlite_path": db}, backend=CountingBackend())
    a = run(first.call("search_flights", ARGS, tool_schemas=TOOLS))
    run(first.aclose())
    backend = CountingBackend()
    resumed = Simulator({"cache_scope": "run", "sqlite_path": db}, backend=backend)
    b = run(resumed.call("search_flights", ARGS, tool_schemas=TOOLS))
    assert a.text == b.text and backend.n == 0 and b.metadata["cached"] == "hit"


def test_fault_rates_inject_realistic_errors_at_the_configured_rate():
    cfg = {
        "backend": "offline",
        "seed": 1,
        "faults": {"timeout_rate": 0.1, "server_error_rate": 0.1, "rate_limit_rate": 0.1},
    }
    sim = Simulator(cfg)

    async def main():
        return [await sim.call("ping", {}, tool_schemas=TOOLS, scope="g") for _ in range(600)]

    results = run(main())
    injected = [r for r in results if r.metadata.get("injected")]
    assert 120 <= len(injected) <= 240  # 30 % of 600, generous bounds
    kinds = {r.metadata["error_kind"] for r in injected}
    assert kinds == {"timeout", "server_error", "rate_limited"}
    codes = {json.loads(r.text)["error"]["code"] for r in injected}
    assert {504, 429} <= codes and codes & {500, 502, 503}
    assert all(r.status == "simulator_error" for r in injected)
    assert sim.metrics()["injected_faults"] == len(injected)


def test_config_rejects_unknown_keys_and_bad_values():
    with pytest.raises(ValueError, match="unknwon_key"):
        SGLSConfig.from_dict({"unknwon_key": 1})
    with pytest.raises(ValueError, match="cache_scope"):
        SGLSConfig.from_dict({"cache_scope": "epoch"})
    with pytest.raises(ValueError, match="base_urls"):
        SGLSConfig.from_dict({"backend": "openai"})
    assert SGLSConfig.from_dict({"type": "native", "faults": {"timeout_rate": 0.5}}).faults.timeout_rate == 0.5


def test_metrics_report_calls_hits_and_latency():
    sim = Simulator({"backend": "offline"})

    async def main():
        for _ in range(3):
            await sim.call("ping", {}, tool_schemas=TOOLS, scope="g")

    run(main())
    m = sim.metrics()
    assert m["calls"] == 3 and m["ok"] == 3 and m["cache_hits"] == 2 and m["cache_misses"] == 1
    assert m["cache_hit_rate"] == pytest.approx(2 / 3) and m["latency_p99_s"] >= m["latency_p50_s"] > 0


# ------------------------------------------------------------------------------------------ verl BaseTool


def test_sgls_tool_is_built_by_verls_tool_registry_from_the_yaml_template():
    from verl.tools.tool_registry import initialize_tools_from_config

    from slca_verl.sgls.tool import SGLSTool

    (tool,) = initialize_tools_from_config(str(YAML))
    assert isinstance(tool, SGLSTool) and tool.name == "get_weather"

    async def main():
        iid, _ = await tool.create(create_kwargs={"group_id": "uid-9"})
        ok = await tool.execute(iid, {"city": "Oslo"})
        bad = await tool.execute(iid, {"city": "Oslo", "unit": "kelvin"})
        await tool.release(iid)
        return ok, bad

    (ok_resp, reward, metrics), (bad_resp, _, bad_metrics) = run(main())
    assert reward == 0.0 and metrics["sgls_status"] == "ok" and json.loads(ok_resp.text)["tool"] == "get_weather"
    assert bad_metrics["sgls_status"] == "validation_error" and "kelvin" in bad_resp.text


def test_sgls_tool_uses_per_sample_schemas_from_create_kwargs_and_routes_by_name():
    from slca_verl.sgls.tool import SGLSTool

    tool = SGLSTool({"backend": "offline", "cache_scope": "group"}, None, simulator=Simulator({"backend": "offline"}))

    async def main():
        a, _ = await tool.create(create_kwargs={"tool_schemas": json.dumps(TOOLS), "group_id": "u1"})
        b, _ = await tool.create(tool_schemas=TOOLS, uid="u1")
        ra, _, _ = await tool.execute(a, ARGS, name="search_flights")
        rb, _, mb = await tool.execute(b, ARGS, name="search_flights")
        direct = await tool.call("search_flights", ARGS, tool_schemas=TOOLS, scope=tool.scope_key(group_id="u1"))
        return ra, rb, mb, direct

    ra, rb, mb, direct = run(main())
    assert ra.text == rb.text == direct.text and mb["sgls_cached"] is True and direct.status == "ok"


def test_sgls_tool_passes_earlier_answers_of_the_trajectory_as_context():
    from slca_verl.sgls.tool import SGLSTool

    seen = []

    class Recorder(CountingBackend):
        async def simulate(self, tool, arguments, context=None):
            seen.append(list(context or []))
            return await super().simulate(tool, arguments, context)

    tool = SGLSTool({}, None, simulator=Simulator({"cache_scope": "none"}, backend=Recorder()))

    class AgentData:
        request_id = "traj-1"

    async def main():
        iid, _ = await tool.create(tool_schemas=TOOLS)
        await tool.execute(iid, ARGS, name="search_flights", agent_data=AgentData())
        await tool.execute(iid, {}, name="ping", agent_data=AgentData())

    run(main())
    assert seen[0] == [] and seen[1][0]["name"] == "search_flights" and seen[1][0]["arguments"] == ARGS


def test_lone_surrogates_in_arguments_or_replies_become_replacement_characters_not_crashes():
    """json.loads('{"origin": "\\ud83d"}') gives a string that cannot be encoded; the policy writes such JSON."""
    args = json.loads('{"origin": "CD\\ud83dG", "dest": "JFK"}')
    for scope in ("none", "group"):  # the cache key hashes the arguments
        sim = Simulator({"backend": "offline", "cache_scope": scope})
        res = run(sim.call("search_flights", args, tool_schemas=TOOLS, scope="g"))
        assert res.status == "ok", res.text
        res.text.encode("utf-8")  # what the agent loop tokenises
    echo = run(Simulator({"backend": "offline"}).call("ping", {"x": args["origin"]}, tool_schemas=TOOLS, scope="g"))
    assert "CD\ufffdG" in echo.text

    class SurrogateReply(CountingBackend):
        async def simulate(self, tool, arguments, context=None):
            return BackendReply(text=json.loads('"{\\"sky\\": \\"\\ud800\\"}"'))

    sim = Simulator({"cache_scope": "group"}, backend=SurrogateReply())
    res = run(sim.call("ping", {}, tool_schemas=TOOLS, scope="g"))
    assert res.status == "ok" and res.text == '{"sky": "\ufffd"}'
    res.text.encode("utf-8")
