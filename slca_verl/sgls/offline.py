"""Deterministic offline backend: schema-conformant responses without any model, for tests, CPU demos, smoke runs.

    backend = OfflineBackend(seed=0)
    reply = await backend.simulate(tool, {"city": "Paris"}, context=[])   # same call -> same text, always

With a response schema the body is synthesised from it (every required property, enums, formats, numeric bounds,
array sizes respected, checked against the schema); without one it is a success envelope that echoes the call and
adds a deterministic id. The random generator is seeded from ``sha256(seed, tool fingerprint, canonical arguments)``,
so answers do not depend on call order, process, or cache state.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
from typing import Any

from .backend import BackendReply, SimulatorFailure
from .toolset import NormalizedTool, SchemaUnusable, canonical_json, json_problem, schema_errors

logger = logging.getLogger(__name__)

_MAX_DEPTH = 6
_MAX_SIZE = 10_000  # minLength / maxLength beyond this are capped (a schema asking for 10**9 is not honoured)
_MAX_ITEMS = 16  # minItems is capped at this (4 below the second level); the check then reports the shortfall
_WORDS = ("alpha", "bravo", "delta", "nova", "orion", "zephyr", "atlas", "lumen", "sierra", "terra")


def call_rng(seed: int, tool: NormalizedTool, arguments: Any, salt: int = 0) -> random.Random:
    digest = hashlib.sha256(f"{seed}|{salt}|{tool.fingerprint}|{canonical_json(arguments)}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def synthesise(schema: Any, rng: random.Random, hint: str = "value", depth: int = 0) -> Any:
    """A value that conforms to ``schema`` (best effort for patterns and exotic keywords)."""
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return f"{hint}_{rng.randrange(16**6):06x}"
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    if "default" in schema and rng.random() < 0.3:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return synthesise(schema[key][0], rng, hint, depth + 1)
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        merged: dict = {}
        for sub in schema["allOf"]:
            if isinstance(sub, dict):
                merged.update(sub)
        return synthesise(merged, rng, hint, depth + 1)
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t is None:
        t = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if t == "string":
        return _string(schema, rng, hint)
    if t == "integer":
        lo, hi = _bounds(schema, 0, 1000, integer=True)
        return rng.randint(int(lo), int(hi))
    if t == "number":
        lo, hi = _bounds(schema, 0.0, 1000.0)
        x = round(rng.uniform(lo, hi), 2)
        return x if lo <= x <= hi else lo
    if t == "boolean":
        return rng.random() < 0.5
    if t == "null":
        return None
    if t == "array":
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and prefix:
            return [synthesise(s, rng, hint, depth + 1) for s in prefix]
        cap = _MAX_ITEMS if depth < 2 else 4  # nested minItems multiply: keep the body small
        lo = min(_count(schema, "minItems", 1 if depth < 3 else 0), cap)
        hi = _count(schema, "maxItems", max(lo, 3))
        n = rng.randint(lo, max(lo, min(hi, lo + 3)))
        item = schema.get("items", {"type": "string"})
        return [synthesise(item, rng, hint.rstrip("s") or "item", depth + 1) for _ in range(n)]
    # object
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = set(schema.get("required") or [])
    out = {}
    for name, sub in props.items():
        if name in required or rng.random() < 0.7:
            out[name] = synthesise(sub, rng, name, depth + 1)
    return out


def _number(schema: dict, key: str) -> float | None:
    """A finite numeric keyword, else None (a string, a bool, NaN or Infinity says nothing usable)."""
    v = schema.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or abs(v) > 1e15:
        return None
    return v


def _bounds(schema: dict, lo: float, hi: float, integer: bool = False) -> tuple[float, float]:
    """Finite bounds from (exclusive)minimum / maximum; the defaults where the schema gives none."""
    step = 1 if integer else 1e-6
    has_lo = has_hi = False
    for key, shift in (("minimum", 0), ("exclusiveMinimum", step)):
        v = _number(schema, key)
        if v is not None:
            lo, has_lo = v + shift, True
    for key, shift in (("maximum", 0), ("exclusiveMaximum", step)):
        v = _number(schema, key)
        if v is not None:
            hi, has_hi = v - shift, True
    if has_lo and not has_hi and hi < lo:
        hi = lo + 1000
    elif has_hi and not has_lo and hi < lo:
        lo = hi - 1000
    if integer:
        lo, hi = math.ceil(lo), math.floor(hi)
    if hi < lo:
        hi = lo
    return lo, hi


def _count(schema: dict, key: str, default: int) -> int:
    """A size keyword (minItems, maxLength, …) as a bounded int; the default when missing or unusable."""
    v = _number(schema, key)
    return default if v is None or v < 0 else min(int(v), _MAX_SIZE)


def _string(schema: dict, rng: random.Random, hint: str) -> str:
    fmt = schema.get("format")
    if fmt == "date":
        s = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    elif fmt == "date-time":
        s = (
            f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            f"T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z"
        )
    elif fmt == "email":
        s = f"{rng.choice(_WORDS)}{rng.randint(1, 99)}@example.com"
    elif fmt in ("uri", "url"):
        s = f"https://example.com/{hint}/{rng.randrange(16**6):06x}"
    elif fmt == "uuid":
        s = "%08x-%04x-4%03x-a%03x-%012x" % tuple(rng.randrange(16**k) for k in (8, 4, 3, 3, 12))
    else:
        s = f"{hint}_{rng.choice(_WORDS)}_{rng.randrange(16**4):04x}"
    lo, hi = _count(schema, "minLength", 0), _count(schema, "maxLength", _MAX_SIZE)
    if len(s) < lo:
        s = s + "x" * (lo - len(s))
    if len(s) > hi:
        s = s[:hi]
    return s


def _conformance_problem(tool: NormalizedTool, body: Any) -> str:
    """Why ``body`` is not a usable answer of ``tool`` ("" when it is): not plain JSON, or off its response schema."""
    problem = json_problem(body)
    if problem is not None:
        return problem
    if tool.response_validator is None:
        return ""
    try:
        errors = schema_errors(tool.response_validator, body)
    except SchemaUnusable as e:
        return str(e)
    if not errors:
        return ""
    err = errors[0]
    return f"schema_violation at {'/'.join(map(str, err.absolute_path)) or '<root>'}: {err.message[:200]}"


class OfflineBackend:
    """Backend protocol: ``async simulate(tool, arguments, context) -> BackendReply``; no network, no model."""

    name = "offline"

    def __init__(self, seed: int = 0):
        self.seed = int(seed)
        self.calls = 0

    async def simulate(self, tool: NormalizedTool, arguments: dict, context: list[dict] | None = None) -> BackendReply:
        self.calls += 1
        if tool.response_schema is not None:
            body, problem = None, ""
            for salt in range(8):  # patterns and exotic keywords may defeat one draw; keep the first that conforms
                cand = synthesise(tool.response_schema, call_rng(self.seed, tool, arguments, salt), tool.name)
                problem = _conformance_problem(tool, cand)
                if not problem:
                    body = cand
                    break
            if body is None:
                raise SimulatorFailure(
                    "schema_violation",
                    f"the offline simulator could not build a body that conforms to the response schema of "
                    f"'{tool.name}' in 8 draws; last: {problem}",
                )
        else:
            rng = call_rng(self.seed, tool, arguments)
            body = {
                "status": "success",
                "tool": tool.name,
                "request_id": f"req_{rng.randrange(16**10):010x}",
                "arguments": arguments,
                "result": {"summary": f"{tool.name} completed for the given arguments", "count": rng.randint(1, 5)},
            }
        return BackendReply(text=json.dumps(body, ensure_ascii=False), attempts=0)

    def metrics(self) -> dict:
        return {"offline_calls": self.calls}

    async def aclose(self) -> None:
        return None
