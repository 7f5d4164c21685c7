"""The project's one OpenAI-compatible chat-completions client (SGLS simulator, HierR judge).

    client = ChatClient(["http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"], model="Qwen3-8B", timeout_s=30)
    text = await client.chat([{"role": "user", "content": "hi"}], max_tokens=64)
    await client.aclose()

What it does for every request:
- load-balances over several base URLs (the ``vllm serve`` replicas): the least-loaded healthy replica wins,
  round-robin among equals; a replica that times out, refuses connections or answers 5xx is put in cooldown for
  ``unhealthy_cooldown_s`` and the next attempt fails over to another one at once (no backoff);
- bounds concurrency (``max_concurrency`` in flight per event loop) and pools connections;
- retries timeouts, connection errors, 5xx, 429 and malformed bodies ``max_retries`` times with exponential
  backoff and jitter (``Retry-After`` is honoured for 429, capped by ``timeout_s``); 4xx is not retried;
- raises :class:`ChatClientError` with a ``kind`` once retries are spent, never a raw aiohttp exception;
- with ``max_outage_s``, raises :class:`ServiceDown` instead once every call for that long has failed (no success
  since the first of them): a dead server stops the run naming itself, where a short outage only costs the calls it
  failed (each counted and logged). Callers that turn a failed call into a score or an error message let
  :class:`ServiceDown` through.

The aiohttp session and semaphore are created lazily inside the running event loop, one pair per loop: verl's
agent loops run in their own loops and threads, and a session bound to another loop breaks.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import os
import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import aiohttp

logger = logging.getLogger(__name__)

ERROR_KINDS = ("timeout", "http_5xx", "rate_limited", "http_4xx", "connection", "bad_response", "all_replicas_down")
_RETRIABLE = frozenset({"timeout", "http_5xx", "rate_limited", "connection", "bad_response"})
_MARKS_UNHEALTHY = frozenset({"timeout", "http_5xx", "connection"})


class ChatClientError(Exception):
    """A chat request that failed for good (after retries).

    Attributes:
        kind: one of ``ERROR_KINDS``: "timeout", "http_5xx", "rate_limited", "http_4xx", "connection",
            "bad_response" (2xx whose body is not a chat completion: not text in its charset, not JSON, nested
            too deeply to parse, no ``choices[0].message.content`` string), "all_replicas_down" (several replicas, all
            in cooldown when retries ran out).
        message: human-readable cause, naming the replica and the HTTP status where there is one.
        status: HTTP status when the server answered, else None.
    """

    def __init__(self, kind: str, message: str, status: int | None = None):
        super().__init__(f"[{kind}] {message}")
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after: float | None = None  # seconds, from a 429's Retry-After header


class ServiceDown(RuntimeError):
    """Every call to a server has failed for longer than the client's ``max_outage_s``: not one bad request but a
    service that is gone. Meant to stop a training run (naming the server and the last error) rather than let it
    train on the zero rewards or error responses the failures become."""

    def __init__(self, base_urls: list[str], outage_s: float, failures: int, last: ChatClientError):
        super().__init__(
            f"{', '.join(base_urls)}: every call has failed for {outage_s:.0f} s ({failures} calls, last: {last}); "
            "the service is down. Bring it back and resume the run (verl resumes from its last checkpoint)"
        )
        self.base_urls = base_urls
        self.outage_s = outage_s
        self.last = last


@dataclass
class ChatCompletion:
    """One successful completion: the text plus what callers may need to judge it."""

    content: str
    finish_reason: str | None
    replica: str
    attempts: int
    latency_s: float
    usage: dict = field(default_factory=dict)


def _normalize_base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if url.endswith("/chat/completions"):
        url = url[: -len("/chat/completions")]
    if not url.endswith("/v1"):
        url = url + "/v1"
    return url


class _Replica:
    def __init__(self, base_url: str):
        self.base_url = base_url
        self.url = base_url + "/chat/completions"
        self.in_flight = 0
        self.unhealthy_until = 0.0
        self.requests = 0
        self.failures = 0

    def healthy(self, now: float) -> bool:
        return now >= self.unhealthy_until


async def _close_with_the_loop(session: aiohttp.ClientSession):
    """An async generator parked at its ``yield`` for the life of the loop: the loop's ``shutdown_asyncgens`` (which
    ``asyncio.run`` and verl's workers call before closing a loop) finalises it, and the session closes in that loop.
    Without it a client used under ``asyncio.run`` left an open session and connector behind each loop."""
    try:
        yield
    finally:
        await session.close()


class _LoopState:
    """Session and semaphore owned by one event loop; the session closes when the loop shuts down."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_concurrency: int, headers: dict):
        self.loop = loop
        self.semaphore = asyncio.Semaphore(max_concurrency)
        connector = aiohttp.TCPConnector(limit=max_concurrency, limit_per_host=max_concurrency, ttl_dns_cache=300)
        self.session = aiohttp.ClientSession(connector=connector, headers=headers)
        self._closer = None

    async def close_with_the_loop(self) -> None:
        """Park the closer in the running loop (once)."""
        if self._closer is None:
            self._closer = _close_with_the_loop(self.session)
            await self._closer.__anext__()


class ChatClient:
    """Async OpenAI-compatible chat client with load balancing, retries, failover and metrics.

    Args:
        base_urls: one URL or a list; ``http://host:port`` and ``http://host:port/v1`` are both accepted.
        model: the served model name sent in every request.
        api_key: sent as ``Authorization: Bearer``; None for a server that asks for no key.
        api_key_file: a file holding the key (whitespace around it ignored), read once here; used when ``api_key``
            is None (``recipes/serve_*.sh`` write ``$SERVICES_DIR/api_key``, mode 0600). The key is never logged.
        timeout_s: wall-clock limit of one HTTP attempt (queueing for the semaphore is not counted).
        max_retries: extra attempts after the first (so at most ``1 + max_retries`` HTTP requests per call).
        backoff_s: base of the exponential backoff, ``backoff_s * 2**k`` times a jitter in [0.5, 1].
        max_concurrency: requests in flight per event loop; also the connection-pool size.
        unhealthy_cooldown_s: how long a failing replica is avoided while others are healthy.
        max_outage_s: when every call has failed for this long (no success since the first failure of the run of
            failures), raise :class:`ServiceDown` instead of :class:`ChatClientError`; None: never.
    """

    def __init__(
        self,
        base_urls: list[str] | str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_file: str | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_concurrency: int = 64,
        unhealthy_cooldown_s: float = 10.0,
        max_outage_s: float | None = None,
    ):
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        if not urls:
            raise ValueError("ChatClient needs at least one base URL")
        self._replicas = [_Replica(_normalize_base_url(u)) for u in urls]
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_concurrency = int(max_concurrency)
        self.unhealthy_cooldown_s = float(unhealthy_cooldown_s)
        if max_outage_s is not None and not float(max_outage_s) > 0:
            raise ValueError(f"ChatClient max_outage_s={max_outage_s!r}: a number of seconds > 0, or None")
        self.max_outage_s = None if max_outage_s is None else float(max_outage_s)
        self._failing_since: float | None = None  # monotonic time of the first failure since the last success
        self._failing_calls = 0
        self._headers = {"Content-Type": "application/json"}
        if not api_key and api_key_file:
            api_key = read_api_key(api_key_file)
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._lock = threading.Lock()  # metrics and replica state are shared by every loop/thread
        self._loops: dict[int, _LoopState] = {}
        self._rr = 0
        self._rng = random.Random(0)
        self._counters = {"requests": 0, "successes": 0, "failures": 0, "attempts": 0, "retries": 0, "failovers": 0}
        self._errors = {k: 0 for k in ERROR_KINDS}  # per attempt
        self._final_errors = {k: 0 for k in ERROR_KINDS}  # per call that failed for good
        self._latencies: deque[float] = deque(maxlen=20000)

    # ------------------------------------------------------------------ public API

    async def chat(
        self,
        messages: list[dict],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        response_format: dict | None = None,
        seed: int | None = None,
    ) -> str:
        """Send one chat completion and return ``choices[0].message.content``.

        Raises:
            ChatClientError: after retries, with ``kind`` saying why.
        """
        completion = await self.complete(
            messages, temperature=temperature, max_tokens=max_tokens, response_format=response_format, seed=seed
        )
        return completion.content

    async def complete(
        self,
        messages: list[dict],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        response_format: dict | None = None,
        seed: int | None = None,
        extra_body: dict | None = None,
    ) -> ChatCompletion:
        """Like :meth:`chat` but returns a :class:`ChatCompletion` (finish_reason, replica, attempts, latency)."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        if response_format is not None:
            payload["response_format"] = response_format
        if seed is not None:
            payload["seed"] = seed
        if extra_body:
            payload.update(extra_body)

        state = self._state()
        await state.close_with_the_loop()
        with self._lock:
            self._counters["requests"] += 1
        tried: set[int] = set()
        last: ChatClientError | None = None
        async with state.semaphore:
            start = time.monotonic()  # latency excludes queueing for a concurrency slot
            for attempt in range(self.max_retries + 1):
                idx = self._pick(tried)
                if attempt > 0:
                    with self._lock:
                        self._counters["retries"] += 1
                        if idx not in tried:
                            self._counters["failovers"] += 1
                    delay = self._delay(attempt, last, failover=idx not in tried)
                    if delay > 0:
                        await asyncio.sleep(delay)
                tried.add(idx)
                try:
                    content, finish, usage = await self._post(state.session, idx, payload)
                except ChatClientError as e:
                    last = e
                    with self._lock:
                        self._errors[e.kind] += 1
                    logger.debug("chat attempt %d on %s failed: %s", attempt + 1, self._replicas[idx].base_url, e)
                    if e.kind not in _RETRIABLE:
                        break
                    continue
                latency = time.monotonic() - start
                with self._lock:
                    self._counters["successes"] += 1
                    self._latencies.append(latency)
                    self._failing_since, self._failing_calls = None, 0
                return ChatCompletion(content, finish, self._replicas[idx].base_url, attempt + 1, latency, usage)

        assert last is not None
        final = last
        if len(self._replicas) > 1 and last.kind in _MARKS_UNHEALTHY:
            now = time.monotonic()
            if not any(r.healthy(now) for r in self._replicas):
                final = ChatClientError(
                    "all_replicas_down",
                    f"all {len(self._replicas)} replicas are failing; last error: {last.message}",
                    last.status,
                )
        now = time.monotonic()
        with self._lock:
            self._counters["failures"] += 1
            self._final_errors[final.kind] += 1
            if self._failing_since is None:
                self._failing_since = start
            self._failing_calls += 1
            outage, failing = now - self._failing_since, self._failing_calls
        logger.warning("chat request failed after %d attempt(s): %s", attempt + 1, final)
        if self.max_outage_s is not None and outage >= self.max_outage_s:
            down = ServiceDown(self.base_urls, outage, failing, final)
            logger.error("%s", down)
            raise down
        raise final

    def metrics(self) -> dict:
        """Counters since construction (flat dict of numbers, ready for a metrics logger).

        Keys: requests, successes, failures, attempts, retries, failovers, ``errors/<kind>`` (per attempt),
        ``failed/<kind>`` (per call), latency_p50_s / p90 / p99 / mean (successful calls, retries included, time
        spent waiting for a concurrency slot excluded),
        ``replica/<i>/requests``, ``replica/<i>/failures``, ``replica/<i>/healthy``, in_flight.
        """
        with self._lock:
            out: dict[str, float] = dict(self._counters)
            out.update({f"errors/{k}": v for k, v in self._errors.items()})
            out.update({f"failed/{k}": v for k, v in self._final_errors.items()})
            lat = sorted(self._latencies)
            now = time.monotonic()
            for i, r in enumerate(self._replicas):
                out[f"replica/{i}/requests"] = r.requests
                out[f"replica/{i}/failures"] = r.failures
                out[f"replica/{i}/healthy"] = int(r.healthy(now))
            out["in_flight"] = sum(r.in_flight for r in self._replicas)
        out.update(latency_summary(lat))
        return out

    async def aclose(self) -> None:
        """Close the session of the running loop, and drop sessions whose loops are already closed."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        for key, st in list(self._loops.items()):
            if st.loop is loop:
                await st.session.close()
                del self._loops[key]
            elif st.loop.is_closed():
                del self._loops[key]

    @property
    def base_urls(self) -> list[str]:
        return [r.base_url for r in self._replicas]

    # ------------------------------------------------------------------ internals

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        st = self._loops.get(id(loop))
        if st is None or st.loop is not loop or st.session.closed:
            st = _LoopState(loop, self.max_concurrency, self._headers)
            with self._lock:
                for k in [k for k, v in self._loops.items() if v.loop.is_closed()]:
                    del self._loops[k]
                self._loops[id(loop)] = st
        return st

    def _pick(self, tried: set[int]) -> int:
        """Least-loaded healthy replica not yet tried in this call; else any healthy; else the soonest to recover."""
        now = time.monotonic()
        with self._lock:
            n = len(self._replicas)
            self._rr = (self._rr + 1) % n
            order = [(self._rr + k) % n for k in range(n)]
            for pool in (
                [i for i in order if self._replicas[i].healthy(now) and i not in tried],
                [i for i in order if self._replicas[i].healthy(now)],
            ):
                if pool:
                    return min(pool, key=lambda i: self._replicas[i].in_flight)
            return min(order, key=lambda i: self._replicas[i].unhealthy_until)

    def _delay(self, attempt: int, last: ChatClientError | None, failover: bool) -> float:
        if failover and last is not None and last.kind in _MARKS_UNHEALTHY:
            return 0.0  # another replica is available: try it at once
        with self._lock:
            jitter = 0.5 + 0.5 * self._rng.random()
        delay = self.backoff_s * (2 ** (attempt - 1)) * jitter
        retry_after = last.retry_after if last is not None else None
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.timeout_s))
        return delay

    async def _post(self, session: aiohttp.ClientSession, idx: int, payload: dict) -> tuple[str, str | None, dict]:
        rep = self._replicas[idx]
        with self._lock:
            rep.in_flight += 1
            rep.requests += 1
            self._counters["attempts"] += 1
        try:
            return await self._post_once(session, rep, payload)
        except ChatClientError as e:
            with self._lock:
                rep.failures += 1
                if e.kind in _MARKS_UNHEALTHY:
                    rep.unhealthy_until = time.monotonic() + self.unhealthy_cooldown_s
            raise
        finally:
            with self._lock:
                rep.in_flight -= 1

    async def _post_once(self, session: aiohttp.ClientSession, rep: _Replica, payload: dict):
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        try:
            async with session.post(rep.url, json=payload, timeout=timeout) as resp:
                status = resp.status
                raw = await resp.read()
                charset = resp.charset or "utf-8"
                retry_after = resp.headers.get("Retry-After")
        except asyncio.TimeoutError as e:
            raise ChatClientError("timeout", f"{rep.base_url}: no answer within {self.timeout_s:g} s") from e
        except aiohttp.ClientError as e:
            raise ChatClientError("connection", f"{rep.base_url}: {type(e).__name__}: {e}") from e
        except OSError as e:
            raise ChatClientError("connection", f"{rep.base_url}: {type(e).__name__}: {e}") from e
        try:
            body = raw.decode(charset)
        except (UnicodeDecodeError, LookupError):
            if status < 400:
                raise ChatClientError(
                    "bad_response",
                    f"{rep.base_url}: HTTP {status} body is not valid {charset} "
                    f"text: {_snippet(raw.decode(charset if _known(charset) else 'utf-8', 'replace'))}",
                    status,
                ) from None
            body = raw.decode("utf-8", "replace")  # an error body is only quoted in the message

        if status == 429:
            err = ChatClientError("rate_limited", f"{rep.base_url}: HTTP 429 {_snippet(body)}", status)
            try:
                err.retry_after = float(retry_after) if retry_after else None
            except ValueError:
                pass
            raise err
        if status >= 500:
            raise ChatClientError("http_5xx", f"{rep.base_url}: HTTP {status} {_snippet(body)}", status)
        if status == 408:
            raise ChatClientError("timeout", f"{rep.base_url}: HTTP 408 {_snippet(body)}", status)
        if status >= 400:
            raise ChatClientError("http_4xx", f"{rep.base_url}: HTTP {status} {_snippet(body)}", status)
        try:
            data = json.loads(body)
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError, RecursionError) as e:  # RecursionError: "[[[[…"
            raise ChatClientError(
                "bad_response", f"{rep.base_url}: HTTP {status} body is not a chat completion: {_snippet(body)}", status
            ) from e
        if not isinstance(content, str):
            raise ChatClientError(
                "bad_response", f"{rep.base_url}: message.content is {type(content).__name__}", status
            )
        return content, choice.get("finish_reason"), data.get("usage") or {}


def read_api_key(path: str) -> str:
    """The API key in ``path`` (stripped). Raises ValueError naming the file, never its content, when the file
    cannot be read or holds no key: a run pointed at a key must not silently go out without one."""
    path = os.path.expanduser(str(path))
    try:
        with open(path, encoding="utf-8") as f:
            key = f.read().strip()
    except OSError as e:
        raise ValueError(f"api_key_file {path}: cannot be read ({type(e).__name__}: {e.strerror or e})") from None
    if not key or any(c.isspace() for c in key):
        raise ValueError(
            f"api_key_file {path}: expected one key on one line, found "
            f"{'nothing' if not key else 'whitespace inside it'}"
        )
    return key


def latency_summary(sorted_latencies: list[float], prefix: str = "latency") -> dict:
    """p50/p90/p99/mean of an ascending list of seconds (zeros when empty), keys ``{prefix}_p50_s`` etc."""
    out = {}
    n = len(sorted_latencies)
    for q in (50, 90, 99):
        out[f"{prefix}_p{q}_s"] = sorted_latencies[min(n - 1, int(q / 100 * n))] if n else 0.0
    out[f"{prefix}_mean_s"] = sum(sorted_latencies) / n if n else 0.0
    return out


def _known(charset: str) -> bool:
    try:
        codecs.lookup(charset)
        return True
    except LookupError:
        return False


def _snippet(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
