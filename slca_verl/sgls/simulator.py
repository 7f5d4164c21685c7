"""The SGLS service: validate, maybe inject a fault, then answer from the cache or the backend.

    sim = Simulator({"backend": "offline", "cache_scope": "group"})
    res = await sim.call("get_weather", {"city": "Paris"}, tool_schemas=row_tools, scope="uid-17")
    res.status   # "ok" | "validation_error" | "simulator_error";  res.text is what the policy sees

One call, top to bottom:
1. the tool is looked up in the sample's schemas and the arguments validated (toolset.py): unknown tool -> 404 body
   (saying which of the sample's schemas could not be read, if any), bad arguments (including NaN / Infinity,
   nesting deeper than 32 levels) -> 400 body listing every problem; status "validation_error", no LLM call; a
   tool whose own schema is unusable (dangling or remote ``$ref``, absurd nesting) -> 500 ``tool_schema_error``
   body saying why, status "simulator_error";
2. with fault injection on, a valid call may get a realistic 504/5xx/429 body (status "simulator_error",
   ``metadata["injected"] = True``);
3. the answer is looked up in the cache under ``scope | tool | canonical arguments``; concurrent identical calls
   wait for the first; on a miss the backend simulates it (offline or OpenAI-compatible);
4. a backend that fails (server down, garbage after retries, even a bug that raises) gives a clear
   ``simulator_error`` body, never an exception; it is not cached, so a later identical call tries again.

Cache scope (``cache_scope``): "group" (the caller's ``scope`` is the GRPO group uid), "step" (``scope`` is the
training step), "run" (``scope`` ignored: one world for the whole run) or "none". With group/step scope and an
empty ``scope`` nothing is cached (a warning is logged once).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..toolcall.text import truncate
from .backend import SimulatorFailure
from .cache import ResponseCache, cache_key
from .client import ServiceDown, latency_summary
from .config import SGLSConfig
from .faults import FaultInjector
from .offline import OfflineBackend
from .toolset import ToolSet, canonical_json, scrub_text

logger = logging.getLogger(__name__)


@dataclass
class SimResult:
    """One simulated tool response.

    Attributes:
        text: the response body the policy sees (JSON text; errors are ``{"error": {...}}`` bodies).
        status: "ok", "validation_error" (the policy's call was malformed) or "simulator_error" (the simulated
            service failed: backend failure or injected fault — not the policy's fault).
        metadata: ``status_code``, ``cached`` ("hit" | "coalesced" | "miss" | None), ``latency_s``, and where
            relevant ``error_kind``, ``injected``, ``attempts``, ``repaired``.
    """

    text: str
    status: str
    metadata: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def simulator_error_body(kind: str, message: str) -> dict:
    code = 504 if kind == "timeout" else 503
    return {
        "error": {
            "code": code,
            "type": "simulator_error",
            "message": f"The service could not answer this request ({kind}). Please try again later.",
            "detail": message[:500],
        }
    }


def make_backend(config: SGLSConfig):
    if config.backend == "offline":
        return OfflineBackend(seed=config.seed)
    from .openai_backend import OpenAIBackend

    return OpenAIBackend(config)


class Simulator:
    """Schema-guided tool simulator; thread-safe and usable from several event loops at once.

    Args:
        config: :class:`SGLSConfig` or its dict form (the tool YAML's ``config`` block).
        backend: optional object with ``async simulate(tool, arguments, context) -> BackendReply`` (tests).
        default_tool_schemas: tools used when a call gives no ``tool_schemas``.
    """

    def __init__(self, config: SGLSConfig | dict | None = None, *, backend=None, default_tool_schemas=None):
        self.config = config if isinstance(config, SGLSConfig) else SGLSConfig.from_dict(config)
        self.backend = backend or make_backend(self.config)
        self.cache = ResponseCache(self.config.cache_max_entries, self.config.sqlite_path)
        self.faults = FaultInjector(self.config.faults, self.config.seed)
        self.default_tools = ToolSet.from_schemas(
            default_tool_schemas or [], forbid_extra_arguments=self.config.forbid_extra_arguments
        )
        self._toolsets: dict[str, ToolSet] = {}
        self._last_toolset: tuple | None = None  # (schemas object, ToolSet); schemas are treated as immutable
        self._lock = threading.Lock()
        self._warned_scope = False
        self._counts = {
            "calls": 0,
            "ok": 0,
            "cache_hits": 0,
            "cache_coalesced": 0,
            "cache_misses": 0,
            "validation_rejections": 0,
            "simulator_errors": 0,
            "backend_failures": 0,
            "injected_faults": 0,
            "backend_calls": 0,
            "llm_retries": 0,
            "repaired": 0,
        }
        self._latency: deque[float] = deque(maxlen=50000)
        self._backend_latency: deque[float] = deque(maxlen=50000)

    # ------------------------------------------------------------------ public API

    def scope_key(self, group_id: Any = None, step: Any = None) -> str:
        """The ``scope`` string to pass to :meth:`call` for the configured cache scope."""
        if self.config.cache_scope == "group":
            return "" if group_id is None else str(group_id)
        if self.config.cache_scope == "step":
            return "" if step is None else str(step)
        return ""

    def toolset(self, tool_schemas: Any) -> ToolSet:
        """Normalised tools for a sample (a ToolSet, a list of schemas, or a JSON string); memoised by content."""
        if isinstance(tool_schemas, ToolSet):
            return tool_schemas
        if tool_schemas is None:
            return self.default_tools
        last = self._last_toolset  # the same row object is passed call after call: skip re-keying it
        if last is not None and last[0] is tool_schemas:
            return last[1]
        if not isinstance(tool_schemas, (str, list, tuple)):  # reported by ToolSet (calls say why), not cached
            return ToolSet.from_schemas(tool_schemas)
        try:
            key = (
                tool_schemas
                if isinstance(tool_schemas, str)
                else canonical_json(
                    [t.model_dump(exclude_none=True) if hasattr(t, "model_dump") else t for t in tool_schemas]
                )
            )
        except (TypeError, ValueError, RecursionError):  # unkeyable (absurd nesting, odd keys): built, not memoised
            return ToolSet.from_schemas(tool_schemas, forbid_extra_arguments=self.config.forbid_extra_arguments)
        ts = self._toolsets.get(key)
        if ts is None:
            ts = ToolSet.from_schemas(tool_schemas, forbid_extra_arguments=self.config.forbid_extra_arguments)
            with self._lock:
                if len(self._toolsets) > 10000:
                    self._toolsets.clear()
                self._toolsets[key] = ts
        if not isinstance(tool_schemas, str):
            self._last_toolset = (tool_schemas, ts)
        return ts

    async def call(
        self,
        name: str,
        arguments: Any,
        *,
        tool_schemas: Any = None,
        scope: str = "",
        context: list[dict] | None = None,
    ) -> SimResult:
        """Answer one tool call. Never raises for a bad call or a failing backend (see module docstring).

        Args:
            name: tool name the policy called.
            arguments: the parsed arguments (anything; non-objects are rejected with a 400 body).
            tool_schemas: this sample's tools (OpenAI-format list, JSON string, or ToolSet); None -> defaults.
            scope: the cache-scope key (group uid or step, see :meth:`scope_key`).
            context: earlier ``{"name", "arguments", "response"}`` of the same trajectory, for the prompt.
        """
        t0 = time.perf_counter()
        self._count("calls")
        name, arguments = scrub_text(name), scrub_text(arguments)  # lone surrogates would break hashing / tokenising
        tools = self.toolset(tool_schemas)
        rejection = tools.validate(name, arguments)
        if rejection is not None:
            self._count("validation_rejections" if rejection.status == "validation_error" else "simulator_errors")
            return self._done(
                t0,
                SimResult(
                    rejection.text(),
                    rejection.status,
                    {"status_code": rejection.status_code, "cached": None, "error_kind": rejection.error_type},
                ),
            )
        tool = tools.get(name)

        fault = self.faults.draw()
        if fault is not None:
            self._count("injected_faults")
            if fault.delay_s > 0:
                await asyncio.sleep(fault.delay_s)
            return self._done(
                t0,
                SimResult(
                    fault.text(),
                    "simulator_error",
                    {"status_code": fault.status_code, "cached": None, "injected": True, "error_kind": fault.kind},
                ),
            )

        scope_id = self._scope(scope)

        async def produce():
            b0 = time.perf_counter()
            self._count("backend_calls")
            try:
                reply = await self.backend.simulate(tool, arguments, context)
            except SimulatorFailure as e:
                self._count("backend_failures")
                logger.warning("sgls: simulator failed for %s (%s): %s", name, e.kind, e.message)
                body = simulator_error_body(e.kind, e.message)
                meta = {"status_code": body["error"]["code"], "error_kind": e.kind, "attempts": e.attempts}
                return ("simulator_error", json.dumps(body, ensure_ascii=False, sort_keys=True), meta), False
            except ServiceDown:  # the simulator is gone, not one call: stop the run, naming it
                self._count("backend_failures")
                raise
            except Exception as e:  # a backend bug must cost one call, not the rollout batch
                self._count("backend_failures")
                logger.exception("sgls: backend raised for %s", name)
                body = simulator_error_body("internal_error", f"{type(e).__name__}: {e}")
                meta = {"status_code": body["error"]["code"], "error_kind": "internal_error", "attempts": 0}
                return ("simulator_error", json.dumps(body, ensure_ascii=False, sort_keys=True), meta), False
            finally:
                with self._lock:
                    self._backend_latency.append(time.perf_counter() - b0)
            if reply.attempts > 1:
                self._count("llm_retries", reply.attempts - 1)
            if reply.repaired:
                self._count("repaired")
            meta = {"status_code": 200, "attempts": reply.attempts, "repaired": reply.repaired}
            return ("ok", reply.text, meta), True

        if scope_id is None:
            (status, text, meta), _ = await produce()
            how = "miss"
            self._count("cache_misses")
        else:
            key = cache_key(scope_id, tool.fingerprint, arguments)
            (status, text, meta), how = await self.cache.get_or_compute(
                key, produce, encode=lambda v: json.dumps(list(v)), decode=lambda s: tuple(json.loads(s))
            )
            self._count({"hit": "cache_hits", "coalesced": "cache_coalesced", "miss": "cache_misses"}[how])
        if status == "simulator_error":
            self._count("simulator_errors")
        text = truncate(scrub_text(text), self.config.max_response_chars)
        return self._done(t0, SimResult(text, status, {**meta, "cached": how}))

    def metrics(self) -> dict:
        """Flat numeric metrics (prefix them with e.g. ``sgls/`` when logging).

        calls, ok, validation_rejections, simulator_errors (backend failures + injected faults), backend_failures,
        injected_faults, backend_calls, cache_hits, cache_coalesced (waited for an identical in-flight call),
        cache_misses, cache_hit_rate, llm_retries (extra LLM calls for unusable replies), repaired,
        latency_p50/p90/p99/mean_s (whole call), backend_latency_*_s, plus ``backend/…`` (client retries,
        failovers, per-replica health for the OpenAI backend).
        """
        with self._lock:
            out: dict[str, float] = dict(self._counts)
            lat, blat = sorted(self._latency), sorted(self._backend_latency)
        served = out["cache_hits"] + out["cache_coalesced"] + out["cache_misses"]
        out["cache_hit_rate"] = (out["cache_hits"] + out["cache_coalesced"]) / served if served else 0.0
        out["cache_entries"] = len(self.cache)
        out.update(latency_summary(lat, "latency"))
        out.update(latency_summary(blat, "backend_latency"))
        out.update({f"backend/{k}": v for k, v in self.backend.metrics().items()})
        return out

    async def aclose(self) -> None:
        await self.backend.aclose()
        self.cache.close()

    # ------------------------------------------------------------------ internals

    def _scope(self, scope: str) -> str | None:
        mode = self.config.cache_scope
        if mode == "none":
            return None
        if mode == "run":
            return "run"
        if not scope:
            if not self._warned_scope:
                self._warned_scope = True
                logger.warning(
                    "sgls: cache_scope=%s but the call gave no scope key; identical calls will not be "
                    "shared (pass group_id / step to create(), or scope= to call())",
                    mode,
                )
            return None
        return f"{mode}:{scope}"

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counts[key] += n

    def _done(self, t0: float, res: SimResult) -> SimResult:
        dt = time.perf_counter() - t0
        res.metadata["latency_s"] = dt
        with self._lock:
            self._latency.append(dt)
            if res.status == "ok":
                self._counts["ok"] += 1
        return res


_SHARED: dict[str, Simulator] = {}
_SHARED_LOCK = threading.Lock()


def shared_simulator(config: dict | SGLSConfig) -> Simulator:
    """One Simulator per distinct config in this process (all tools of a YAML share client, cache, metrics)."""
    cfg = config if isinstance(config, SGLSConfig) else SGLSConfig.from_dict(config)
    key = canonical_json(cfg.to_dict())
    with _SHARED_LOCK:
        sim = _SHARED.get(key)
        if sim is None:
            sim = _SHARED[key] = Simulator(cfg)
        return sim
