"""LLM backend: an OpenAI-compatible server (``vllm serve``) plays the API server.

    backend = OpenAIBackend(SGLSConfig(backend="openai", base_urls=[...], model="Qwen3-235B-A22B-Instruct-2507"))
    reply = await backend.simulate(tool, arguments, context)     # BackendReply, or raises SimulatorFailure

Per call: build the prompt (prompt.py), ask for structured output where possible — ``response_format =
{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`` when the tool has a response schema (vLLM
then cannot emit off-schema JSON), ``{"type": "json_object"}`` otherwise (``structured_output: auto``) — extract
the JSON body, and check it against the response schema. A reply that is not JSON, or was cut off and could not
be repaired, or holds what JSON does not (NaN / Infinity, nesting deeper than 32 levels: ``NonJSONValue``), or
violates the schema, is retried (``reply_attempts`` LLM calls in all, the later ones with a
different seed); then :class:`SimulatorFailure` is raised. Transport failures (timeouts, 5xx, dead replicas) are
retried inside :class:`ChatClient` and end as ``SimulatorFailure`` with the client's error kind.
The request seed is derived from the call, so a server with seeded sampling repeats itself even without a cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re

from .backend import BackendReply, SimulatorFailure
from .client import ChatClient, ChatClientError
from .config import SGLSConfig
from .prompt import build_messages, extract_json
from .toolset import NormalizedTool, SchemaUnusable, canonical_json, schema_errors

logger = logging.getLogger(__name__)


def _schema_name(name: str) -> str:
    return (re.sub(r"[^A-Za-z0-9_-]", "_", name) or "response")[:64]


class OpenAIBackend:
    name = "openai"

    def __init__(self, config: SGLSConfig, client: ChatClient | None = None):
        self.config = config
        self.client = client or ChatClient(
            config.base_urls,
            config.model,
            api_key=config.api_key,
            api_key_file=config.api_key_file,
            timeout_s=config.timeout_s,
            max_retries=config.max_retries,
            backoff_s=config.backoff_s,
            max_concurrency=config.max_concurrency,
            unhealthy_cooldown_s=config.unhealthy_cooldown_s,
            max_outage_s=config.max_outage_s,
        )
        self._unconstrained: set[str] = set()  # tools whose response_format the server refused (4xx)
        self.stats = {
            "structured_output_refused": 0,
            "llm_calls": 0,
            "reply_retries": 0,
            "invalid_json": 0,
            "schema_violations": 0,
            "repaired": 0,
        }

    def response_format(self, tool: NormalizedTool) -> dict | None:
        mode = self.config.structured_output
        if mode == "none":
            return None
        if tool.response_schema is not None and mode in ("auto", "json_schema"):
            return {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(tool.name), "schema": tool.response_schema, "strict": True},
            }
        if mode == "json_schema":
            return None  # nothing to constrain to
        return {"type": "json_object"}

    def _seed(self, tool: NormalizedTool, arguments: dict, attempt: int) -> int:
        h = hashlib.sha256(f"{self.config.seed}|{attempt}|{tool.fingerprint}|{canonical_json(arguments)}".encode())
        return int.from_bytes(h.digest()[:4], "big") & 0x7FFFFFFF

    async def simulate(self, tool: NormalizedTool, arguments: dict, context: list[dict] | None = None) -> BackendReply:
        messages = build_messages(
            tool, arguments, context, context_turns=self.config.context_turns, context_chars=self.config.context_chars
        )
        fmt = None if tool.fingerprint in self._unconstrained else self.response_format(tool)
        problem, kind = "", "invalid_json"
        for attempt in range(self.config.reply_attempts):
            if attempt > 0:
                self.stats["reply_retries"] += 1
            self.stats["llm_calls"] += 1
            try:
                completion = await self.client.complete(
                    messages,
                    temperature=self.config.temperature,
                    max_tokens=self.config.max_tokens,
                    response_format=fmt,
                    seed=self._seed(tool, arguments, attempt),
                )
            except ChatClientError as e:
                if e.status in (401, 403):  # a wrong / missing API key is no reason to drop structured output
                    raise SimulatorFailure(
                        e.kind,
                        f"{e.message} (the simulator server refused the API key: set "
                        "api_key_file / api_key in the SGLS config)",
                        attempt + 1,
                    ) from e
                if e.kind == "http_4xx" and fmt is not None and attempt + 1 < self.config.reply_attempts:
                    # e.g. a grammar backend that cannot compile this schema: fall back to the repair/retry path
                    logger.warning(
                        "sgls: server refused response_format for %s (%s); retrying without it", tool.name, e.message
                    )
                    self.stats["structured_output_refused"] += 1
                    self._unconstrained.add(tool.fingerprint)
                    fmt, problem, kind = None, e.message, e.kind
                    continue
                raise SimulatorFailure(e.kind, e.message, attempt + 1) from e
            try:
                body, repaired = extract_json(completion.content)
            except ValueError as e:
                self.stats["invalid_json"] += 1
                problem = f"invalid_json: {e}"
                kind = "invalid_json"
                continue
            if repaired and completion.finish_reason != "length":
                self.stats["invalid_json"] += 1
                problem = "invalid_json: the reply holds malformed JSON"
                kind = "invalid_json"
                continue
            if tool.response_validator is not None:
                try:
                    errors = schema_errors(tool.response_validator, body)
                except SchemaUnusable as e:
                    self.stats["schema_violations"] += 1
                    problem, kind = f"schema_violation: {e}", "schema_violation"
                    continue
                if errors:
                    err = errors[0]
                    self.stats["schema_violations"] += 1
                    where = "/".join(map(str, err.absolute_path)) or "<root>"
                    problem = f"schema_violation at {where}: {err.message[:200]}"
                    kind = "schema_violation"
                    continue
            if repaired:
                self.stats["repaired"] += 1
            return BackendReply(
                text=json.dumps(body, ensure_ascii=False),
                attempts=attempt + 1,
                repaired=repaired,
                finish_reason=completion.finish_reason,
            )
        raise SimulatorFailure(
            kind,
            f"no usable reply from the simulator model after {self.config.reply_attempts} attempt(s); last: {problem}",
            self.config.reply_attempts,
        )

    def metrics(self) -> dict:
        out = dict(self.stats)
        out.update({f"client/{k}": v for k, v in self.client.metrics().items()})
        return out

    async def aclose(self) -> None:
        await self.client.aclose()
