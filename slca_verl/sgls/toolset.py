"""Tool schemas: normalise dataset schemas into valid JSON Schema once, then validate calls without an LLM.

    tools = ToolSet.from_schemas(row_tool_schemas)          # OpenAI, bare-function or xLAM style; cached by content
    problem = tools.validate("get_weather", {"city": 3})    # None, or a CallRejection (404/400 body)

Dataset schemas are often not JSON Schema: xLAM writes ``"type": "List[int]"`` or ``"str, optional"`` and puts the
properties directly under ``parameters``; BFCL writes ``"dict"``, ``"float"``, ``"tuple"``, ``"any"``; old schemas
mark required properties with ``"required": true`` inside the property. :func:`normalize_tool` maps all of these to
Draft 2020-12 JSON Schema through the project's one normaliser (:mod:`slca_verl.toolcall.schema`, tolerant mode:
unknown type names become "any value", with a debug log; data preparation uses it in strict mode, so a prepared
row's schema comes back unchanged) and the result is checked with
``check_schema``; a schema that still fails is replaced by ``{"type": "object"}`` with a warning, so one bad row
never stops training. A tool's response schema is taken from ``response_schema``, ``response``, ``returns`` or
``output_schema`` when it is a JSON object schema.

Nothing here raises for bad data: a schema that cannot check calls at all (a dangling or remote ``$ref``, nesting
deeper than MAX_SCHEMA_DEPTH, a schema that breaks the checker) marks its tool unusable, and every call of it gets
a ``tool_schema_error`` saying why; unreadable schemas are named in the 404 of the tool that vanished; arguments
that JSON does not allow (NaN, Infinity, absurd nesting) get a 400; regexes run with a time bound.
"""

from __future__ import annotations

import contextvars
import copy
import hashlib
import json
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import jsonschema
import regex
from jsonschema import Draft202012Validator, validators

from slca_verl.toolcall.limits import nesting_exceeds
from slca_verl.toolcall.schema import normalize_parameters, normalize_schema

logger = logging.getLogger(__name__)

_RESPONSE_KEYS = ("response_schema", "response", "returns", "output_schema")
MAX_SCHEMA_DEPTH = 64  # nesting of a tool schema (dicts and lists)
MAX_ARGUMENT_DEPTH = 32  # nesting of a call's arguments or a simulated body


_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_text(value: Any, _depth: int = 0) -> Any:
    """``value`` with every lone UTF-16 surrogate in its strings (``"\\ud83d"`` in JSON a policy or a simulator
    wrote) replaced by U+FFFD, so it can be encoded, hashed and tokenised. Containers are rebuilt only when needed;
    nesting deeper than 200 levels is returned as is (the schema check rejects it)."""
    if isinstance(value, str):
        # a Python str holds code points, so any code point in the surrogate range is a lone one
        return _SURROGATE.sub("\ufffd", value)
    if _depth > 200:
        return value
    if isinstance(value, dict):
        return {scrub_text(k, _depth + 1): scrub_text(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_text(v, _depth + 1) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """Key-sorted compact JSON: equal values give equal strings (cache keys, fingerprints)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def fingerprint(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:16]


def json_problem(value: Any, max_depth: int = MAX_ARGUMENT_DEPTH) -> str | None:
    """Why ``value`` is not a plain JSON value that can be hashed, echoed and shown to a model, or None.

    Catches what Python's json module lets through but JSON does not have: NaN / Infinity (``json.loads`` accepts
    them, and ``1e400`` overflows to infinity), nesting deeper than ``max_depth``, and object keys that are not
    strings. The message names the first offending place, e.g. ``"non-finite number NaN at 'x.y'"``.
    """
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:
        node, where = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return f"non-finite number {json.dumps(node)} at '{_path(where) or '<root>'}' (JSON has no NaN or Infinity)"
        if isinstance(node, (dict, list, tuple)):
            if len(where) >= max_depth:
                return f"nested deeper than {max_depth} levels at '{_path(where[:8])}...'"
            if isinstance(node, dict):
                bad = next((k for k in node if not isinstance(k, str)), None)
                if bad is not None:
                    return f"object key {bad!r} at '{_path(where) or '<root>'}' is not a string"
                stack.extend((v, where + (k,)) for k, v in node.items())
            else:
                stack.extend((v, where + (i,)) for i, v in enumerate(node))
    return None


# ---------------------------------------------------------------------------------------------- bounded regexes

# JSON Schema's ``pattern`` / ``patternProperties`` come from the dataset and the strings they are matched against
# from the policy, so a backtracking pattern (``^(a+)+$`` on "aaaa…ab") must not stall a rollout: jsonschema's own
# keywords call ``re.search`` without a bound (2.8 s at 26 characters, doubling per character). The three keywords
# that match regexes are replaced by versions that use the ``regex`` module (already installed with transformers),
# whose matcher avoids most such blow-ups and takes a timeout: each search gets at most PATTERN_TIMEOUT_S, and one
# validation all its searches together at most PATTERN_BUDGET_S. A string whose search runs out of time is rejected
# with its own message; a property name, counted as not matching. (Not covered: ``unevaluatedProperties`` beside
# ``patternProperties`` still goes through ``re``; it is rare in tool schemas.)
PATTERN_TIMEOUT_S = 0.05
PATTERN_BUDGET_S = 0.25
_PATTERN_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("sgls_pattern_deadline", default=None)
_COMPILED: dict[str, Any] = {}


class _PatternTimeout(Exception):
    pass


def _search(pattern: str, text: str) -> bool:
    """``re.search(pattern, text)`` within the time bound; raises _PatternTimeout when the bound is spent."""
    compiled = _COMPILED.get(pattern)
    if compiled is None:
        try:
            compiled = regex.compile(pattern)
        except (regex.error, TypeError, ValueError, OverflowError) as e:
            raise _PatternTimeout(f"pattern {pattern!r} cannot be evaluated ({e})") from None
        if len(_COMPILED) > 5000:
            _COMPILED.clear()
        _COMPILED[pattern] = compiled
    deadline = _PATTERN_DEADLINE.get()
    timeout = PATTERN_TIMEOUT_S if deadline is None else min(PATTERN_TIMEOUT_S, deadline - time.monotonic())
    if timeout <= 0:
        raise _PatternTimeout("the time allowed for pattern checks of this call is spent")
    try:
        return compiled.search(text, timeout=timeout) is not None
    except TimeoutError:
        raise _PatternTimeout(f"matching pattern {pattern!r} took longer than {timeout:.2g} s") from None


def _bounded_pattern(validator, patrn, instance, schema):
    if not validator.is_type(instance, "string"):
        return
    try:
        ok = _search(patrn, instance)
    except _PatternTimeout as e:
        yield jsonschema.ValidationError(f"{_short(instance)} could not be checked against its pattern: {e}")
        return
    if not ok:
        yield jsonschema.ValidationError(f"{_short(instance)} does not match {patrn!r}")


def _key_matches(pattern: str, key: str) -> bool:
    try:
        return _search(pattern, key)
    except _PatternTimeout:
        return False


def _bounded_pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for k, v in instance.items():
            if _key_matches(pattern, k):
                yield from validator.descend(v, subschema, path=k, schema_path=pattern)


def _bounded_additional_properties(validator, ap, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    props, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in props and not any(_key_matches(p, k) for p in patterns)]
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        yield jsonschema.ValidationError(f"Additional properties are not allowed ({', '.join(map(repr, extras))})")


BoundedValidator = validators.extend(
    Draft202012Validator,
    {
        "pattern": _bounded_pattern,
        "patternProperties": _bounded_pattern_properties,
        "additionalProperties": _bounded_additional_properties,
    },
)


class SchemaUnusable(ValueError):
    """A tool schema that cannot be used to check calls (dangling or remote ``$ref``, absurd nesting, …)."""


def schema_errors(validator: Any, instance: Any) -> list:
    """All validation errors of ``instance``, sorted by path, with the pattern time budget set for this check.

    Raises:
        SchemaUnusable: the schema itself broke while checking (an unresolvable ``$ref`` and the like).
    """
    token = _PATTERN_DEADLINE.set(time.monotonic() + PATTERN_BUDGET_S)
    try:
        return sorted(validator.iter_errors(instance), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    except RecursionError as e:
        raise SchemaUnusable("the schema recurses too deeply for these values") from e
    except Exception as e:  # referencing.exceptions.Unresolvable and whatever else a broken schema raises
        raise SchemaUnusable(f"checking against the schema failed ({type(e).__name__}: {str(e)[:200]})") from e
    finally:
        _PATTERN_DEADLINE.reset(token)


# ---------------------------------------------------------------------------------------------- $ref


def _unescape_pointer(part: str) -> str:
    return unquote(part).replace("~1", "/").replace("~0", "~")


def _refs(schema: Any) -> list[Any]:
    """Every ``$ref`` value in a schema (iterative walk)."""
    out, stack = [], [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "$ref" in node:
                out.append(node["$ref"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


def _localise_refs(schema: dict, holders: list[dict], what: str) -> dict:
    """Make every ``$ref`` in ``schema`` resolvable inside it, or raise SchemaUnusable naming the one that is not.

    Datasets often put the ``definitions`` / ``$defs`` block beside ``parameters`` (in the function object), where a
    ``"#/definitions/X"`` inside the parameters cannot reach it: such a block is copied into the schema's root.
    Only local references (``#`` / ``#/…``) are supported; remote ones are never fetched.
    """
    copied = True
    while copied:  # a copied block may itself refer to another block beside parameters
        copied = False
        for ref in _refs(schema):
            if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
                raise SchemaUnusable(
                    f"{what}: $ref {_short(ref)} is not a local '#/...' reference "
                    "(remote and anchor references are not fetched)"
                )
            parts = [_unescape_pointer(p) for p in ref[2:].split("/")] if ref != "#" else []
            if parts and parts[0] not in schema:
                block = next((h[parts[0]] for h in holders if isinstance(h.get(parts[0]), dict)), None)
                if block is not None:
                    schema = {**schema, parts[0]: {k: normalize_schema(v)[0] for k, v in block.items()}}
                    copied = True
            node: Any = schema
            for part in parts:
                if isinstance(node, dict) and part in node:
                    node = node[part]
                elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                    node = node[int(part)]
                else:
                    raise SchemaUnusable(f"{what}: $ref {ref!r} points at nothing in the schema")
            if not isinstance(node, (dict, bool)):
                raise SchemaUnusable(f"{what}: $ref {ref!r} points at a {_json_type(node)}, not a schema")
    return schema


def _checked(
    schema: dict, what: str, forbid_extra: bool = False, holders: list[dict] | None = None
) -> tuple[dict, Any]:
    """The schema ready for validation and its validator; raises SchemaUnusable (see _localise_refs)."""
    if forbid_extra and schema.get("type") == "object":
        schema = {**schema, "additionalProperties": schema.get("additionalProperties", False)}
    schema = _localise_refs(schema, holders or [], what)
    try:
        BoundedValidator.check_schema(schema)
    except jsonschema.SchemaError as e:
        logger.warning(
            "sgls schema: %s is not valid JSON Schema after normalisation (%s); accepting any object", what, e.message
        )
        schema = {"type": "object"}
    except RecursionError as e:
        raise SchemaUnusable(f"{what}: nested too deeply to check") from e
    return schema, BoundedValidator(schema)


@dataclass
class NormalizedTool:
    """A tool with JSON-Schema-valid parameters and an optional response schema.

    ``problem`` is set (and the validators are None) when the dataset's schema cannot be used to check calls; every
    call of such a tool gets a ``tool_schema_error`` saying why.
    """

    name: str
    description: str
    parameters: dict
    response_schema: dict | None = None
    fingerprint: str = ""
    validator: Any = field(default=None, repr=False, compare=False)
    response_validator: Any = field(default=None, repr=False, compare=False)
    problem: str = ""

    def openai_schema(self) -> dict:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def normalize_tool(raw: dict, *, forbid_extra_arguments: bool = False) -> NormalizedTool:
    """One tool schema (OpenAI ``{"type": "function", "function": …}``, bare function, or xLAM) -> NormalizedTool.

    Args:
        raw: the dataset's tool schema (a dict, or a JSON string of one).
        forbid_extra_arguments: add ``additionalProperties: false`` where the schema says nothing about it.

    Raises:
        ValueError: no usable tool object or no name (the tool cannot even be listed). A named tool whose schema
            is unusable (nested deeper than MAX_SCHEMA_DEPTH, a ``$ref`` that cannot be resolved, a schema that
            breaks the checker) is returned with ``problem`` set instead.
    """
    if isinstance(raw, str):
        raw = json.loads(raw)
    if not isinstance(raw, dict):
        raise ValueError(f"a tool schema must be a JSON object, got {_json_type(raw)}")
    fn = raw.get("function", raw) if isinstance(raw.get("function"), dict) else raw
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"tool schema without a name: {_short(raw, 200)}")
    description = str(fn.get("description") or "")
    try:
        return _normalize_named_tool(raw, fn, name, description, forbid_extra_arguments)
    except SchemaUnusable as e:
        problem = str(e)
    except RecursionError:
        problem = "it is nested too deeply to use"
    logger.warning("sgls schema: tool %r is unusable: %s", name, problem)
    return NormalizedTool(
        name=name,
        description=description[:2000],
        parameters={"type": "object"},
        fingerprint=fingerprint([name, problem]),
        problem=problem,
    )


def _normalize_named_tool(raw: dict, fn: dict, name: str, description: str, forbid_extra: bool) -> NormalizedTool:
    if nesting_exceeds(raw, MAX_SCHEMA_DEPTH):
        raise SchemaUnusable(f"it nests deeper than {MAX_SCHEMA_DEPTH} levels")
    holders = [fn, raw]
    params = normalize_parameters(fn.get("parameters", fn.get("input_schema", {})))
    params, validator = _checked(params, f"parameters of {name!r}", forbid_extra, holders)
    response_schema, response_validator = None, None
    for holder in holders:
        for key in _RESPONSE_KEYS:
            cand = holder.get(key)
            if isinstance(cand, dict) and cand:
                response_schema = normalize_schema(cand)[0]
                break
        if response_schema is not None:
            break
    if response_schema is not None:
        response_schema, response_validator = _checked(response_schema, f"response schema of {name!r}", holders=holders)
    return NormalizedTool(
        name=name,
        description=description,
        parameters=params,
        response_schema=response_schema,
        fingerprint=fingerprint([name, params, response_schema]),
        validator=validator,
        response_validator=response_validator,
    )


class _LRU:
    def __init__(self, size: int):
        self.size = size
        self.data: OrderedDict = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key):
        with self.lock:
            if key in self.data:
                self.data.move_to_end(key)
                return self.data[key]
        return None

    def put(self, key, value):
        with self.lock:
            self.data[key] = value
            self.data.move_to_end(key)
            while len(self.data) > self.size:
                self.data.popitem(last=False)


_TOOL_CACHE = _LRU(20000)


def load_tool(raw: dict | str, *, forbid_extra_arguments: bool = False) -> NormalizedTool:
    """:func:`normalize_tool` with a process-wide cache keyed by the raw schema's content (normalise once)."""
    if not isinstance(raw, str) and nesting_exceeds(raw, MAX_SCHEMA_DEPTH + 4):
        return normalize_tool(raw, forbid_extra_arguments=forbid_extra_arguments)  # reports it; keying it would recurse
    key = (canonical_json(raw) if not isinstance(raw, str) else raw, forbid_extra_arguments)
    hit = _TOOL_CACHE.get(key)
    if hit is None:
        hit = normalize_tool(
            copy.deepcopy(raw) if isinstance(raw, dict) else raw, forbid_extra_arguments=forbid_extra_arguments
        )
        _TOOL_CACHE.put(key, hit)
    return hit


# ---------------------------------------------------------------------------------------------- validation


@dataclass
class CallRejection:
    """A call refused before any LLM call, as a real API would refuse it (404 unknown tool, 400 bad arguments).

    ``status`` is the Simulator status it gets: "validation_error" (the policy's call is wrong) or, for a tool
    whose own schema is unusable (500 ``tool_schema_error``), "simulator_error" (not the policy's fault).
    """

    status_code: int
    error_type: str
    message: str
    details: list[dict] = field(default_factory=list)
    status: str = "validation_error"

    def body(self) -> dict:
        err = {"code": self.status_code, "type": self.error_type, "message": self.message}
        if self.details:
            err["details"] = self.details
        return {"error": err}

    def text(self) -> str:
        return json.dumps(self.body(), ensure_ascii=False, sort_keys=True)


def _path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _describe(err: jsonschema.ValidationError, schema: dict) -> dict:
    """One readable detail per error; \"required\" is expanded by the caller (one error per missing key)."""
    where = _path(err.absolute_path)
    v = err.validator
    if v == "type":
        want = err.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        got = _json_type(err.instance)
        return {
            "param": where,
            "problem": "wrong_type",
            "message": f"parameter '{where}' must be of type {want}, got {got} {_short(err.instance)}",
        }
    if v == "enum":
        return {
            "param": where,
            "problem": "not_in_enum",
            "message": f"parameter '{where}' must be one of {_short(err.validator_value, 300)}, "
            f"got {_short(err.instance)}",
        }
    if v == "additionalProperties":
        props = (err.schema or {}).get("properties", {})
        extra = sorted(k for k in err.instance if k not in props) if isinstance(err.instance, dict) else []
        scope = f" in '{where}'" if where else ""
        accepted = ", ".join(sorted(props)) or "none"
        return {
            "param": ", ".join(extra),
            "problem": "unknown_parameter",
            "message": f"unknown parameter(s) {', '.join(repr(e) for e in extra)}{scope}; accepted: {accepted}",
        }
    return {"param": where, "problem": v, "message": f"parameter '{where or '<root>'}': {err.message[:300]}"}


def _json_type(x: Any) -> str:
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "boolean"
    if isinstance(x, int):
        return "integer"
    if isinstance(x, float):
        return "number"
    if isinstance(x, str):
        return "string"
    if isinstance(x, list):
        return "array"
    return "object"


def _short(x: Any, limit: int = 80) -> str:
    try:
        s = json.dumps(x, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        s = f"<{_json_type(x)} that cannot be shown>"
    return s if len(s) <= limit else s[:limit] + "..."


def validate_arguments(tool: NormalizedTool, arguments: Any) -> CallRejection | None:
    """Check a call's arguments against the tool's parameter schema; deterministic (errors sorted by path)."""
    if tool.problem:
        return schema_rejection(tool.name, tool.problem)
    if not isinstance(arguments, dict):
        return CallRejection(
            400,
            "invalid_request_error",
            f"arguments of '{tool.name}' must be a JSON object, got {_json_type(arguments)}",
        )
    problem = json_problem(arguments)
    if problem is not None:
        return CallRejection(
            400,
            "invalid_request_error",
            f"invalid arguments for '{tool.name}': {problem}",
            [{"param": "", "problem": "not_json", "message": problem}],
        )
    try:
        errors = schema_errors(tool.validator, arguments)
    except SchemaUnusable as e:
        logger.warning("sgls schema: could not check a call of %r: %s", tool.name, e)
        return schema_rejection(tool.name, str(e))
    if not errors:
        return None
    details, seen = [], set()
    for e in errors:
        if e.validator == "required" and isinstance(e.instance, dict):
            where = _path(e.absolute_path)
            for r in e.validator_value:
                param = f"{where}.{r}" if where else str(r)
                if r not in e.instance and (param, "missing_required") not in seen:
                    seen.add((param, "missing_required"))
                    details.append(
                        {
                            "param": param,
                            "problem": "missing_required",
                            "message": f"missing required parameter '{param}'",
                        }
                    )
            continue
        d = _describe(e, tool.parameters)
        if (d["param"], d["problem"]) not in seen:
            seen.add((d["param"], d["problem"]))
            details.append(d)
    details = details[:10]
    msg = f"invalid arguments for '{tool.name}': " + "; ".join(d["message"] for d in details)
    return CallRejection(400, "invalid_request_error", msg, details)


def schema_rejection(name: str, problem: str) -> CallRejection:
    """The answer to every call of a tool whose schema is unusable: a 500 naming why (not the policy's fault)."""
    return CallRejection(
        500, "tool_schema_error", f"the schema of tool '{name}' is unusable: {problem}", status="simulator_error"
    )


class ToolSet:
    """The tools available to one sample, by name.

    ``problems`` lists why schemas of this sample could not be read at all (not JSON, not a list, a tool without a
    name); an unknown-tool rejection repeats them, so a tool that vanished says why.
    """

    def __init__(self, tools: list[NormalizedTool], problems: list[str] | None = None):
        self.tools = {t.name: t for t in tools}
        self.problems = list(problems or [])

    @classmethod
    def from_schemas(cls, schemas: Any, *, forbid_extra_arguments: bool = False) -> "ToolSet":
        """Build from a list (or JSON string of a list) of tool schemas in any supported style; never raises."""
        if isinstance(schemas, str):
            try:
                schemas = json.loads(schemas)
            except (ValueError, RecursionError) as e:
                return cls([], [f"tool_schemas is a string that is not JSON ({str(e)[:120]})"])
        if isinstance(schemas, dict):
            schemas = [schemas]
        if schemas is not None and not isinstance(schemas, (list, tuple)):
            return cls([], [f"tool_schemas must be a list of tool schemas, got {_json_type(schemas)}"])
        tools, problems = [], []
        for i, raw in enumerate(schemas or []):
            if hasattr(raw, "model_dump"):  # verl's OpenAIFunctionToolSchema
                raw = raw.model_dump(exclude_none=True)
            try:
                tools.append(load_tool(raw, forbid_extra_arguments=forbid_extra_arguments))
            except (ValueError, TypeError, AttributeError, RecursionError) as e:
                logger.warning("sgls schema: skipping an unreadable tool schema (%s)", e)
                problems.append(f"tool schema {i + 1} is unreadable ({str(e)[:160]})")
        return cls(tools, problems)

    def get(self, name: str) -> NormalizedTool | None:
        return self.tools.get(name) if isinstance(name, str) else None

    def validate(self, name: Any, arguments: Any) -> CallRejection | None:
        """None when the call is acceptable, else the rejection a real API server would send."""
        if not isinstance(name, str):
            return CallRejection(
                400, "invalid_request_error", f"the tool name must be a string, got {_json_type(name)}"
            )
        tool = self.tools.get(name)
        if tool is None:
            available = ", ".join(sorted(self.tools)) or "none"
            message = f"unknown tool '{name}'; available tools: {available}"
            if self.problems:
                message += "; this sample's tool schemas could not all be read: " + "; ".join(self.problems[:3])
            return CallRejection(404, "tool_not_found", message)
        return validate_arguments(tool, arguments)
