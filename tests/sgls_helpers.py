"""A scripted OpenAI-compatible chat server on 127.0.0.1 for tests and benchmarks.

    with ScriptedServer(lambda req, n: Reply(content='{"ok": true}', delay_s=0.05)) as srv:
        client = ChatClient(srv.base_url, model="m")

The server runs aiohttp.web in its own thread and event loop, so tests may use any loop (asyncio.run, pytest-asyncio)
and the server's delays never block the client's loop. ``handler(request_json, n)`` gets the parsed request body and
the 0-based index of the request on this server, and returns a :class:`Reply` or a plain string (the content of a
200 completion). A handler's exception becomes an HTTP 500.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Reply:
    content: str | None = "{}"
    status: int = 200
    delay_s: float = 0.0
    body: str | None = None  # raw body, overrides the completion built from content
    raw: bytes | None = None  # raw bytes of the body (e.g. not valid UTF-8), overrides body and content
    finish_reason: str = "stop"
    headers: dict = field(default_factory=dict)


def completion_body(content: str | None, finish_reason: str = "stop", model: str = "scripted") -> str:
    return json.dumps(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )


def free_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound once by the OS, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dead_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connection refused)."""
    return f"http://127.0.0.1:{free_port()}/v1"


class ScriptedServer:
    def __init__(
        self, handler: Callable[[dict, int], Any] | None = None, delay_s: float = 0.0, api_key: str | None = None
    ):
        self.handler = handler or (lambda req, n: Reply())
        self.delay_s = delay_s
        self.api_key = api_key  # set: like `vllm serve --api-key`, 401 unless "Authorization: Bearer <key>"
        self.refused = 0  # requests answered 401
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner = None
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _handle(self, request):
        from aiohttp import web

        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            with self._lock:
                self.refused += 1
            return web.json_response({"error": "Unauthorized"}, status=401)  # vLLM's answer
        try:
            payload = await request.json()
        except Exception:
            payload = {}
        with self._lock:
            n = len(self.requests)
            self.requests.append(payload)
        try:
            reply = self.handler(payload, n)
        except Exception as e:  # scripted failure
            return web.Response(status=500, text=f"handler error: {e}")
        if isinstance(reply, str):
            reply = Reply(content=reply)
        delay = self.delay_s + reply.delay_s
        if delay > 0:
            await asyncio.sleep(delay)
        if reply.raw is not None:
            return web.Response(
                status=reply.status,
                body=reply.raw,
                content_type="application/json",
                charset="utf-8",
                headers=reply.headers,
            )
        body = reply.body if reply.body is not None else completion_body(reply.content, reply.finish_reason)
        return web.Response(status=reply.status, text=body, content_type="application/json", headers=reply.headers)

    def start(self) -> "ScriptedServer":
        from aiohttp import web

        ready = threading.Event()

        def run():
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self._handle)
            runner = web.AppRunner(app, access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
            loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]
            self._runner = runner
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("scripted server did not start within 10 s")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> "ScriptedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
