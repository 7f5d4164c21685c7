"""Tool schemas: normalise dataset schemas into valid JSON Schema once, then validate calls without an LLM.

    tools = ToolSet.from_schemas(row_tool_schemas)          # OpenAI, bare-function or xLAM style; cached by content
    problem = tools.validate("get_weather", {"city": 3})    # None, or a CallRejection (404/400 body)

Dataset schemas are often not JSON Schema: xLAM writes ``"type": "List[int]"`` or ``"str, optional"`` and puts the
properties directly under ``parameters``; BFCL writes ``"dict"``, ``"float"``, ``"tuple"``, ``"any"``; old schemas
mark required properties with ``"required": true`` inside the property. :func:`normalise_tool` maps all of these to
Draft 2020-12 JSON Schema (unknown type names become "any value", with a debug log) and the result is checked with
``check_schema``; a schema that still fails is replaced by ``{"type": "object"}`` with a warning, so one bad row
never stops training. A tool's response schema is taken from ``response_schema``, ``response``, ``returns`` or
``output_schema`` when it is a JSON object schema.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

logger = logging.getLogger(__name__)

_SIMPLE_TYPES = {
    "str": "string", "string": "string", "text": "string", "char": "string", "bytes": "string",
    "datetime": "string", "date": "string", "time": "string", "uuid": "string", "url": "string", "path": "string",
    "int": "integer", "integer": "integer", "long": "integer",
    "float": "number", "number": "number", "double": "number", "decimal": "number",
    "bool": "boolean", "boolean": "boolean",
    "list": "array", "array": "array", "tuple": "array", "set": "array", "sequence": "array", "iterable": "array",
    "dict": "object", "object": "object", "mapping": "object", "hashmap": "object", "map": "object",
    "none": "null", "null": "null", "nonetype": "null",
}  # fmt: skip
_ANY = {"any", "object_any", "typing.any", "callable", "function", "*", ""}
_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
_RESPONSE_KEYS = ("response_schema", "response", "returns", "output_schema")
_NESTED_KEYS = ("items", "additionalProperties", "not", "contains", "propertyNames")
_LIST_KEYS = ("anyOf", "oneOf", "allOf", "prefixItems")


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


# ---------------------------------------------------------------------------------------------- type strings


def _split_top(s: str) -> list[str]:
    """Split on commas that are not inside brackets: "int, List[str]" -> ["int", "List[str]"]."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return [p for p in parts if p]


def type_string_to_schema(text: str) -> tuple[dict, bool]:
    """Map a Python-ish type string to a JSON Schema fragment.

    Args:
        text: e.g. ``"List[int]"``, ``"str, optional"``, ``"Optional[Dict[str, Any]]"``, ``"int|float"``.

    Returns:
        ``(schema, optional)``; optional is True for ``", optional"`` and ``Optional[...]``.
    """
    s = text.strip()
    optional = False
    m = re.match(r"^(.*?)[,\s]+(optional|default.*)$", s, flags=re.IGNORECASE)
    if m and m.group(1):
        s, optional = m.group(1).strip(), True
    if "|" in s and "[" not in s:
        subs = [type_string_to_schema(p)[0] for p in s.split("|") if p.strip()]
        return _union(subs), optional
    m = re.match(r"^([\w.]+)\s*\[(.*)\]$", s)
    if m:
        head, inner = m.group(1).lower().split(".")[-1], m.group(2)
        args = _split_top(inner)
        if head == "optional":
            sub, _ = type_string_to_schema(inner)
            return sub, True
        if head == "union":
            return _union([type_string_to_schema(a)[0] for a in args]), optional
        if head == "literal":
            values = []
            for a in args:
                try:
                    values.append(json.loads(a.replace("'", '"')))
                except ValueError:
                    values.append(a.strip("'\""))
            return {"enum": values}, optional
        base = _SIMPLE_TYPES.get(head)
        if base == "array":
            if head == "tuple" and len(args) > 1 and "..." not in args:
                return {"type": "array", "prefixItems": [type_string_to_schema(a)[0] for a in args]}, optional
            item = type_string_to_schema(args[0])[0] if args else {}
            return ({"type": "array", "items": item} if item else {"type": "array"}), optional
        if base == "object":
            if len(args) == 2:
                val = type_string_to_schema(args[1])[0]
                return ({"type": "object", "additionalProperties": val} if val else {"type": "object"}), optional
            return {"type": "object"}, optional
        logger.debug("sgls schema: unknown generic type %r treated as any value", text)
        return {}, optional
    low = s.lower()
    if low in _SIMPLE_TYPES:
        return {"type": _SIMPLE_TYPES[low]}, optional
    if low in _ANY:
        return {}, optional
    logger.debug("sgls schema: unknown type %r treated as any value", text)
    return {}, optional


def _union(subs: list[dict]) -> dict:
    if any(not s for s in subs):
        return {}
    if all(set(s) == {"type"} and isinstance(s["type"], str) for s in subs):
        types = list(dict.fromkeys(s["type"] for s in subs))
        return {"type": types[0] if len(types) == 1 else types}
    return {"anyOf": subs}


# ---------------------------------------------------------------------------------------------- schemas


def normalise_schema(node: Any) -> tuple[Any, bool]:
    """Recursively turn a loose schema node into JSON Schema. Returns ``(schema, optional_hint)``."""
    if isinstance(node, str):
        return type_string_to_schema(node)
    if not isinstance(node, dict):
        return {}, False
    out = dict(node)
    optional = bool(out.pop("optional", False))
    if "type" in out:
        t = out["type"]
        if isinstance(t, str):
            if t not in _JSON_TYPES:
                sub, opt = type_string_to_schema(t)
                optional = optional or opt
                del out["type"]
                for k, v in sub.items():  # the string's own structure wins only where the node says nothing
                    out.setdefault(k, v)
        elif isinstance(t, list):
            types = [type_string_to_schema(x)[0].get("type") if x not in _JSON_TYPES else x for x in t]
            if any(x is None or isinstance(x, list) for x in types):
                del out["type"]
            else:
                out["type"] = list(dict.fromkeys(types))
        else:
            del out["type"]
    if isinstance(out.get("properties"), dict):
        props, required = {}, out.get("required")
        required = list(required) if isinstance(required, list) else []
        for name, sub in out["properties"].items():
            own_required = sub.get("required") if isinstance(sub, dict) else None
            if isinstance(own_required, bool):  # draft-3 style flag inside the property
                sub = {k: v for k, v in sub.items() if k != "required"}
                if own_required and name not in required:
                    required.append(name)
            props[name], _ = normalise_schema(sub)
        out["properties"] = props
        out.setdefault("type", "object")
        out["required"] = [r for r in required if r in props] if props else required
        if not out["required"]:
            del out["required"]
    elif "required" in out and not isinstance(out["required"], list):
        del out["required"]
    for key in _NESTED_KEYS:
        if isinstance(out.get(key), (dict, str)):
            out[key] = normalise_schema(out[key])[0]
    for key in _LIST_KEYS:
        if isinstance(out.get(key), list):
            out[key] = [normalise_schema(s)[0] for s in out[key]]
    if isinstance(out.get("items"), list):  # draft-4 tuple form
        out["prefixItems"] = [normalise_schema(s)[0] for s in out.pop("items")]
    if "enum" in out and not isinstance(out["enum"], list):
        del out["enum"]
    if "enum" in out and out.get("type") == "string":  # datasets list numbers for string enums
        out["enum"] = [v if isinstance(v, str) else str(v) for v in out["enum"]]
    return out, optional


def normalise_parameters(params: Any) -> dict:
    """The ``parameters`` of a function as a JSON Schema object schema.

    Accepts a JSON Schema object, or the xLAM form ``{"arg": {"type": "List[int]", "description": …}}`` (no
    ``type: object``), where an argument is required unless its type says optional or it has a default.
    """
    if not isinstance(params, dict) or not params:
        return {"type": "object", "properties": {}}
    if params.get("type") in ("object", "dict") or "properties" in params:
        schema, _ = normalise_schema({**params, "type": "object"})
        schema.setdefault("properties", {})
        return schema
    props, required = {}, []
    for name, sub in params.items():
        sub_schema, optional = normalise_schema(sub)
        if isinstance(sub, dict) and "default" in sub:
            optional = True
        if isinstance(sub, dict) and sub.get("required") is False:
            optional = True
        if not optional:
            required.append(name)
        props[name] = sub_schema
    out = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    return out


@dataclass
class NormalisedTool:
    """A tool with JSON-Schema-valid parameters and an optional response schema."""

    name: str
    description: str
    parameters: dict
    response_schema: dict | None = None
    fingerprint: str = ""
    validator: Any = field(default=None, repr=False, compare=False)
    response_validator: Any = field(default=None, repr=False, compare=False)

    def openai_schema(self) -> dict:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def _checked(schema: dict, what: str, forbid_extra: bool = False) -> tuple[dict, Any]:
    if forbid_extra and schema.get("type") == "object":
        schema = {**schema, "additionalProperties": schema.get("additionalProperties", False)}
    try:
        Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        logger.warning("sgls schema: %s is not valid JSON Schema after normalisation (%s); accepting any object",
                       what, e.message)  # fmt: skip
        schema = {"type": "object"}
    return schema, Draft202012Validator(schema)


def normalise_tool(raw: dict, *, forbid_extra_arguments: bool = False) -> NormalisedTool:
    """One tool schema (OpenAI ``{"type": "function", "function": …}``, bare function, or xLAM) -> NormalisedTool.

    Args:
        raw: the dataset's tool schema (a dict, or a JSON string of one).
        forbid_extra_arguments: add ``additionalProperties: false`` where the schema says nothing about it.
    """
    if isinstance(raw, str):
        raw = json.loads(raw)
    fn = raw.get("function", raw) if isinstance(raw.get("function"), dict) else raw
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"tool schema without a name: {canonical_json(raw)[:200]}")
    params = normalise_parameters(fn.get("parameters", fn.get("input_schema", {})))
    params, validator = _checked(params, f"parameters of {name!r}", forbid_extra_arguments)
    response_schema, response_validator = None, None
    for holder in (fn, raw):
        for key in _RESPONSE_KEYS:
            cand = holder.get(key)
            if isinstance(cand, dict) and cand:
                response_schema = normalise_schema(cand)[0]
                break
        if response_schema is not None:
            break
    if response_schema is not None:
        response_schema, response_validator = _checked(response_schema, f"response schema of {name!r}")
    return NormalisedTool(
        name=name,
        description=str(fn.get("description") or ""),
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


def load_tool(raw: dict | str, *, forbid_extra_arguments: bool = False) -> NormalisedTool:
    """:func:`normalise_tool` with a process-wide cache keyed by the raw schema's content (normalise once)."""
    key = (canonical_json(raw) if not isinstance(raw, str) else raw, forbid_extra_arguments)
    hit = _TOOL_CACHE.get(key)
    if hit is None:
        hit = normalise_tool(copy.deepcopy(raw) if isinstance(raw, dict) else raw,
                             forbid_extra_arguments=forbid_extra_arguments)  # fmt: skip
        _TOOL_CACHE.put(key, hit)
    return hit


# ---------------------------------------------------------------------------------------------- validation


@dataclass
class CallRejection:
    """A call refused before any LLM call, as a real API would refuse it (404 unknown tool, 400 bad arguments)."""

    status_code: int
    error_type: str
    message: str
    details: list[dict] = field(default_factory=list)

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
        return {"param": where, "problem": "wrong_type",
                "message": f"parameter '{where}' must be of type {want}, got {got} {_short(err.instance)}"}  # fmt: skip
    if v == "enum":
        return {"param": where, "problem": "not_in_enum",
                "message": f"parameter '{where}' must be one of {_short(err.validator_value, 300)}, "
                           f"got {_short(err.instance)}"}  # fmt: skip
    if v == "additionalProperties":
        props = (err.schema or {}).get("properties", {})
        extra = sorted(k for k in err.instance if k not in props) if isinstance(err.instance, dict) else []
        scope = f" in '{where}'" if where else ""
        accepted = ", ".join(sorted(props)) or "none"
        return {"param": ", ".join(extra), "problem": "unknown_parameter",
                "message": f"unknown parameter(s) {', '.join(repr(e) for e in extra)}{scope}; accepted: {accepted}"}  # fmt: skip
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
    s = json.dumps(x, ensure_ascii=False, default=str)
    return s if len(s) <= limit else s[:limit] + "..."


def validate_arguments(tool: NormalisedTool, arguments: Any) -> CallRejection | None:
    """Check a call's arguments against the tool's parameter schema; deterministic (errors sorted by path)."""
    if not isinstance(arguments, dict):
        return CallRejection(400, "invalid_request_error",
                             f"arguments of '{tool.name}' must be a JSON object, got {_json_type(arguments)}")  # fmt: skip
    errors = sorted(tool.validator.iter_errors(arguments), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
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
                    details.append({"param": param, "problem": "missing_required",
                                    "message": f"missing required parameter '{param}'"})  # fmt: skip
            continue
        d = _describe(e, tool.parameters)
        if (d["param"], d["problem"]) not in seen:
            seen.add((d["param"], d["problem"]))
            details.append(d)
    details = details[:10]
    msg = f"invalid arguments for '{tool.name}': " + "; ".join(d["message"] for d in details)
    return CallRejection(400, "invalid_request_error", msg, details)


class ToolSet:
    """The tools available to one sample, by name."""

    def __init__(self, tools: list[NormalisedTool]):
        self.tools = {t.name: t for t in tools}

    @classmethod
    def from_schemas(cls, schemas: list | str | None, *, forbid_extra_arguments: bool = False) -> "ToolSet":
        """Build from a list (or JSON string of a list) of tool schemas in any supported style."""
        if isinstance(schemas, str):
            schemas = json.loads(schemas)
        if isinstance(schemas, dict):
            schemas = [schemas]
        tools = []
        for raw in schemas or []:
            if hasattr(raw, "model_dump"):  # verl's OpenAIFunctionToolSchema
                raw = raw.model_dump(exclude_none=True)
            try:
                tools.append(load_tool(raw, forbid_extra_arguments=forbid_extra_arguments))
            except (ValueError, TypeError, AttributeError) as e:
                logger.warning("sgls schema: skipping an unreadable tool schema (%s)", e)
        return cls(tools)

    def get(self, name: str) -> NormalisedTool | None:
        return self.tools.get(name)

    def validate(self, name: str, arguments: Any) -> CallRejection | None:
        """None when the call is acceptable, else the rejection a real API server would send."""
        tool = self.tools.get(name)
        if tool is None:
            available = ", ".join(sorted(self.tools)) or "none"
            return CallRejection(404, "tool_not_found", f"unknown tool '{name}'; available tools: {available}")
        return validate_arguments(tool, arguments)
