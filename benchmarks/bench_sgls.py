"""SGLS throughput: the OpenAI-backend path against a server that adds a fixed latency, and the cache-hit path.

    python benchmarks/bench_sgls.py                      # 2,000 distinct calls, concurrency 64, 50 ms per request
    python benchmarks/bench_sgls.py --calls 5000 --delay-ms 100 --hit-calls 100000

The server (aiohttp, in its own process on 127.0.0.1) answers every chat completion with a schema-conformant JSON
body after ``--delay-ms``. Ideal wall time = calls / concurrency x delay; the target is <= 1.3x ideal (median of
``--repeats`` runs: the figure is sensitive to other load on a small machine). The
cache-hit figure is sequential ``Simulator.call`` throughput on one identical, already cached call (validation +
cache lookup; target >= 20,000 calls/s). Prints one JSON line of results at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import socket
import sys
import time

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_stock_quote",
            "description": "Latest quote for a ticker",
            "parameters": {
                "type": "object",
                "properties": {
                    "ticker": {"type": "string"},
                    "exchange": {"type": "string", "enum": ["NYSE", "NASDAQ"]},
                },
                "required": ["ticker"],
            },
            "response_schema": {
                "type": "object",
                "properties": {"ticker": {"type": "string"}, "price": {"type": "number"}},
                "required": ["ticker", "price"],
            },
        },
    }
]
BODY = json.dumps(
    {
        "id": "bench",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"ticker": "ACME", "price": 12.5}'},
                "finish_reason": "stop",
            }
        ],
    }
)


def _serve(port: int, delay_s: float, ready) -> None:
    from aiohttp import web

    async def handle(request):
        await request.read()
        await asyncio.sleep(delay_s)
        return web.Response(text=BODY, content_type="application/json")

    async def main():
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=2048).start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def bench(args, url: str) -> dict:
    from slca_verl.sgls.simulator import Simulator

    sim = Simulator(
        {
            "backend": "openai",
            "base_urls": [url],
            "model": "bench",
            "max_concurrency": args.concurrency,
            "timeout_s": 30.0,
            "cache_scope": "group",
        }
    )
    # warm up the connection pool (not timed)
    await asyncio.gather(
        *[
            sim.call("get_stock_quote", {"ticker": f"W{i}"}, tool_schemas=TOOLS, scope="warm")
            for i in range(args.concurrency)
        ]
    )
    walls, ok = [], 0
    for rep in range(args.repeats):  # distinct scope per repeat: every call is a cache miss
        t0 = time.perf_counter()
        results = await asyncio.gather(
            *[
                sim.call("get_stock_quote", {"ticker": f"T{i}"}, tool_schemas=TOOLS, scope=f"g{rep}")
                for i in range(args.calls)
            ]
        )
        walls.append(time.perf_counter() - t0)
        ok += sum(r.status == "ok" for r in results)
    wall = sorted(walls)[len(walls) // 2]
    ideal = args.calls / args.concurrency * args.delay_ms / 1000

    await sim.call("get_stock_quote", {"ticker": "HIT"}, tool_schemas=TOOLS, scope="hit")
    t1 = time.perf_counter()
    for _ in range(args.hit_calls):
        await sim.call("get_stock_quote", {"ticker": "HIT"}, tool_schemas=TOOLS, scope="hit")
    hit_wall = time.perf_counter() - t1
    m = sim.metrics()
    await sim.aclose()
    return {
        "calls": args.calls,
        "concurrency": args.concurrency,
        "delay_ms": args.delay_ms,
        "ok": ok,
        "repeats": args.repeats,
        "wall_s": round(wall, 3),
        "wall_runs_s": [round(w, 3) for w in walls],
        "ideal_s": round(ideal, 3),
        "ratio_to_ideal": round(wall / ideal, 3),
        "latency_p50_s": round(m["backend_latency_p50_s"], 4),
        "latency_p99_s": round(m["backend_latency_p99_s"], 4),
        "hit_calls": args.hit_calls,
        "hit_calls_per_s": round(args.hit_calls / hit_wall),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--delay-ms", type=float, default=50.0)
    p.add_argument("--hit-calls", type=int, default=50000)
    p.add_argument("--repeats", type=int, default=3, help="distinct-call runs; the median wall time is reported")
    p.add_argument("--max-ratio", type=float, default=1.3, help="exit 1 when wall/ideal exceeds this")
    p.add_argument("--min-hit-rate", type=float, default=20000, help="exit 1 below this many cache hits per second")
    args = p.parse_args(argv)

    port = _free_port()
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    server = ctx.Process(target=_serve, args=(port, args.delay_ms / 1000, ready), daemon=True)
    server.start()
    try:
        if not ready.wait(30):
            raise RuntimeError("benchmark server did not start")
        res = asyncio.run(bench(args, f"http://127.0.0.1:{port}/v1"))
    finally:
        server.terminate()
        server.join(5)
    print(f"distinct calls : {res['calls']} at concurrency {res['concurrency']}, {res['delay_ms']:g} ms/request")
    print(
        f"  median wall of {res['repeats']} runs {res['wall_s']:.3f} s vs ideal {res['ideal_s']:.3f} s "
        f"-> {res['ratio_to_ideal']:.2f}x ideal (target <= {args.max_ratio}x); "
        f"ok {res['ok']}/{res['calls'] * res['repeats']}"
    )
    print(f"cache hits     : {res['hit_calls_per_s']:,} calls/s (target >= {args.min_hit_rate:,.0f})")
    print(json.dumps(res))
    passed = res["ratio_to_ideal"] <= args.max_ratio and res["hit_calls_per_s"] >= args.min_hit_rate
    passed = passed and res["ok"] == res["calls"] * res["repeats"]
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
