"""Tool schemas: normalise every source's parameter notation into JSON Schema, and check gold calls against it.

The sources write parameter types in many dialects:

- xLAM: ``{"n": {"type": "List[int]", "description": ..., "default": 3}}`` with ``"str, optional"``,
  ``"Optional[int]"``, ``"Tuple[int, int]"``, ``"Dict[str, Any]"``, python type names;
- ToolACE / BFCL: ``{"type": "dict", "properties": {...}}`` with ``"float"``, ``"tuple"``, ``"any"``;
- hermes / glaive / Toucan: already JSON Schema (``"type": "object"``).

:func:`normalize_tool` turns any of them into the OpenAI tool form
``{"type": "function", "function": {"name", "description", "parameters"}}`` whose ``parameters`` is a JSON Schema
object that passes the JSON Schema meta-schema; ``required`` is inferred (xLAM) from ``", optional"``,
``Optional[...]`` or a ``default``. :func:`validate_call` checks one gold call against such a tool.

Anything that cannot be normalised raises :class:`SchemaError` (the row is then rejected with that reason); a
tool list or type string nested beyond :mod:`slca_verl.toolcall.limits`' bounds raises its ``too_deep`` ``RecordError``.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

import jsonschema
from jsonschema.validators import validator_for

from data_prep.calls import split_top_level
from slca_verl.toolcall import limits
from slca_verl.toolcall.limits import RecordError, loads, non_finite_path

__all__ = [
    "SchemaError",
    "type_to_schema",
    "normalize_parameters",
    "normalize_tool",
    "normalize_tools",
    "validate_call",
]

# python / BFCL / ToolACE / Java / JS type names -> JSON Schema type
_SCALARS = {
    "str": "string", "string": "string", "text": "string", "char": "string", "character": "string",
    "int": "integer", "integer": "integer", "long": "integer", "short": "integer", "byte": "integer",
    "float": "number", "double": "number", "number": "number", "decimal": "number", "bigdecimal": "number",
    "bool": "boolean", "boolean": "boolean",
    "list": "array", "array": "array", "arraylist": "array", "sequence": "array", "iterable": "array",
    "tuple": "array", "set": "array",
    "dict": "object", "object": "object", "map": "object", "hashmap": "object", "mapping": "object",
    "none": "null", "null": "null", "nonetype": "null",
}
# names whose values are strings in JSON (dates, paths, callables given by name)
_STRINGLIKE = {"datetime", "date", "time", "path", "url", "uri", "email", "callable", "function", "timestamp"}
_ANY = {"any", "typing.any", "object?", ""}
_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
# brackets a python-style type string may nest ("List[Dict[str, List[int]]]" is 3); the parser recurses per level
_MAX_TYPE_NESTING = 32
_BRACKETS = re.compile(r"[\[\]]")
# keys whose values are data, not subschemas: a {"$ref": ...} inside them is not a reference
_DATA_KEYS = {"enum", "const", "default", "examples"}


# Tool schemas are checked against the draft-07 meta-schema unless they name another "$schema": draft-07 is what
# the authors' Toucan schemas declare and what OpenAI-style tool schemas use, and its meta-schema check is ~5x
# faster than 2020-12's (which dominated the 60k-row benchmark).
DEFAULT_DRAFT = jsonschema.Draft7Validator


class SchemaError(ValueError):
    """A tool schema that cannot be turned into valid JSON Schema; ``reason`` names the report bucket."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _literal_values(args: list[str]) -> list[Any]:
    values = []
    for a in args:
        a = a.strip()
        try:
            values.append(json.loads(a.replace("'", '"')))
        except json.JSONDecodeError:
            values.append(a.strip("'\""))
    return values


@lru_cache(maxsize=4096)
def _parse_type_string(text: str) -> tuple[str, bool]:
    """Parse a python-style type string; returns (JSON Schema as canonical JSON, is_optional)."""
    schema, optional = _type_string_to_schema(text)
    return json.dumps(schema, sort_keys=True), optional


def _type_string_to_schema(text: str) -> tuple[dict, bool]:
    raw = text.strip()
    parts = split_top_level(raw)
    head, modifiers = parts[0], [p.lower() for p in parts[1:]]
    optional = any(m.startswith("optional") or m.startswith("default") for m in modifiers)
    if len(parts) > 1 and not optional:
        # "str, int" without an optional/default modifier: a union written with commas
        members = [_type_string_to_schema(p)[0] for p in parts]
        return _union(members), False
    schema, inner_optional = _head_to_schema(head)
    return schema, optional or inner_optional


def _union(members: list[dict]) -> dict:
    types: list[str] = []
    for m in members:
        if not m:
            return {}
        if set(m) != {"type"}:
            return {"anyOf": members}
        ts = m["type"] if isinstance(m["type"], list) else [m["type"]]
        types.extend(t for t in ts if t not in types)
    return {"type": types[0] if len(types) == 1 else types}


def _head_to_schema(head: str) -> tuple[dict, bool]:
    """``List[int]`` -> {"type": "array", "items": {"type": "integer"}}; returns (schema, optional)."""
    m = re.fullmatch(r"\s*([A-Za-z_][\w.]*)\s*(?:\[(.*)\])?\s*", head, flags=re.S)
    if not m:
        raise SchemaError("tool_schema_unknown_type", f"cannot parse type {head!r}")
    name, inner = m.group(1), m.group(2)
    key = name.lower().rsplit(".", 1)[-1]  # typing.List, datetime.date
    args = split_top_level(inner) if inner is not None and inner.strip() else []
    if key == "optional":
        if len(args) != 1:
            raise SchemaError("tool_schema_unknown_type", f"Optional takes one argument: {head!r}")
        return _allow_null(_type_string_to_schema(args[0])[0]), True
    if key == "union":
        members = [_type_string_to_schema(a)[0] for a in args]
        nullable = any(m == {"type": "null"} for m in members)
        return _union(members), nullable
    if key == "literal":
        values = _literal_values(args)
        return {"enum": values}, False
    if key in _ANY:
        return {}, False
    if key in _STRINGLIKE:
        return {"type": "string"}, False
    if key not in _SCALARS:
        raise SchemaError("tool_schema_unknown_type", f"unknown type {head!r}")
    jtype = _SCALARS[key]
    schema: dict[str, Any] = {"type": jtype}
    if jtype == "array" and args:
        items = [_type_string_to_schema(a)[0] for a in args if a != "..."]
        if key == "tuple" and len(items) > 1 and "..." not in args and len(set(map(json.dumps, items))) > 1:
            schema["items"] = items  # draft-07 tuple form (positional item schemas)
        elif items and items[0]:
            schema["items"] = items[0]
        if key == "tuple" and "..." not in args and len(args) > 1:
            schema.update(minItems=len(args), maxItems=len(args))
    if key == "set":
        schema["uniqueItems"] = True
    if jtype == "object" and len(args) == 2:
        value_schema = _type_string_to_schema(args[1])[0]
        if value_schema:
            schema["additionalProperties"] = value_schema
    return schema, False


def _allow_null(schema: dict) -> dict:
    if not schema:
        return schema
    t = schema.get("type")
    if isinstance(t, str) and set(schema) <= {"type", "items", "additionalProperties", "uniqueItems"}:
        return {**schema, "type": [t, "null"]}
    if isinstance(t, list) and "null" not in t:
        return {**schema, "type": t + ["null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _bracket_nesting(text: str) -> int:
    depth = deepest = 0
    for m in _BRACKETS.finditer(text):
        depth += 1 if m.group() == "[" else -1
        deepest = max(deepest, depth)
    return deepest


def type_to_schema(type_value: Any) -> tuple[dict, bool]:
    """Any source's ``type`` value -> (JSON Schema fragment, optional flag).

    >>> type_to_schema("List[int]")
    ({'items': {'type': 'integer'}, 'type': 'array'}, False)
    >>> type_to_schema("str, optional")
    ({'type': 'string'}, True)
    """
    if type_value is None:
        return {}, False
    if isinstance(type_value, list):
        members = [type_to_schema(t)[0] for t in type_value]
        return _union(members), any(m == {"type": "null"} for m in members)
    if not isinstance(type_value, str):
        raise SchemaError("tool_schema_invalid", f"type must be a string, got {type(type_value).__name__}")
    if _bracket_nesting(type_value) > _MAX_TYPE_NESTING:
        raise RecordError("too_deep", f"type string nests more than {_MAX_TYPE_NESTING} brackets: {type_value[:80]!r}")
    canonical, optional = _parse_type_string(type_value)
    return json.loads(canonical), optional


def _normalize_property(spec: Any, path: str) -> tuple[dict, bool]:
    """One property spec (any dialect) -> (JSON Schema, optional)."""
    if isinstance(spec, str):  # {"x": "int"} shorthand
        return type_to_schema(spec)
    if not isinstance(spec, dict):
        raise SchemaError("tool_schema_invalid", f"property {path} is a {type(spec).__name__}, not an object")
    out: dict[str, Any] = {}
    optional = False
    for key, value in spec.items():
        if key == "type":
            if isinstance(value, str) and value in _JSON_TYPES:
                out["type"] = value
            else:
                fragment, optional = type_to_schema(value)
                out.update({k: v for k, v in fragment.items() if k not in out or k == "type"})
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {k: _normalize_property(v, f"{path}.{k}")[0] for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _normalize_property(value, f"{path}.{key}")[0]
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            out[key] = [_normalize_property(v, f"{path}.{key}")[0] for v in value]
        elif key == "optional":
            optional = bool(value)
        elif key == "required" and isinstance(value, bool):  # {"required": true} on a property
            optional = optional or not value
        else:
            out[key] = value
    if "default" in spec:
        optional = True
    if (
        out.get("type") == "object"
        and isinstance(out.get("properties"), dict)
        and isinstance(out.get("required"), list)
    ):
        # sources list required names that have no property; keep only the ones that exist
        out["required"] = [r for r in out["required"] if r in out["properties"]]
        if not out["required"]:
            del out["required"]
    if "enum" in out and not isinstance(out["enum"], list):
        raise SchemaError("tool_schema_invalid", f"enum of {path} is not a list")
    return out, optional


def normalize_parameters(params: Any) -> dict:
    """Any dialect of a tool's parameters -> a JSON Schema object (``type: object``, ``properties``, ``required``)."""
    if params is None or params == {} or params == []:
        return {"type": "object", "properties": {}}
    if isinstance(params, str):
        try:
            params = loads(params, "parameters")
        except json.JSONDecodeError as exc:
            raise SchemaError("tool_schema_invalid", f"parameters is a non-JSON string: {exc}") from None
    if not isinstance(params, dict):
        raise SchemaError("tool_schema_invalid", f"parameters is a {type(params).__name__}, not an object")
    is_schema = "properties" in params or params.get("type") in ("object", "dict")
    if is_schema:
        schema, _ = _normalize_property(params, "parameters")
        if schema.get("type") not in (None, "object"):
            raise SchemaError("tool_schema_invalid", f"parameters has type {schema.get('type')!r}, not object")
        schema["type"] = "object"
        schema.setdefault("properties", {})
        if not isinstance(schema["properties"], dict):
            raise SchemaError("tool_schema_invalid", "parameters.properties is not an object")
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise SchemaError("tool_schema_invalid", "parameters.required is not a list of names")
        return schema
    # xLAM dialect: {param: {"type": "str, optional", "description": ..., "default": ...}}
    properties, required = {}, []
    for name, spec in params.items():
        prop, optional = _normalize_property(spec, f"parameters.{name}")
        properties[name] = prop
        if not optional:
            required.append(name)
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


@lru_cache(maxsize=16384)
def _check_meta(canonical: str) -> str | None:
    schema = json.loads(canonical)
    try:
        validator_for(schema, default=DEFAULT_DRAFT).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return exc.message
    return None


def normalize_tool(tool: Any) -> dict:
    """One tool in any dialect (bare function, OpenAI tool, JSON string) -> OpenAI tool with a checked schema.

    Raises :class:`SchemaError` when the name is missing or the result fails the JSON Schema meta-schema.
    """
    if isinstance(tool, str):
        try:
            tool = loads(tool, "tool")
        except json.JSONDecodeError as exc:
            raise SchemaError("tools_unparseable", f"tool is not JSON: {exc}") from None
    if not isinstance(tool, dict):
        raise SchemaError("tool_schema_invalid", f"tool is a {type(tool).__name__}, not an object")
    fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    name = fn.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SchemaError("tool_schema_invalid", "tool has no name")
    description = fn.get("description") or ""
    if not isinstance(description, str):
        description = json.dumps(description, ensure_ascii=False)
    params = fn.get("parameters", fn.get("arguments", fn.get("input_schema")))
    schema = normalize_parameters(params)
    error = _check_meta(json.dumps(schema, sort_keys=True))
    if error is not None:
        raise SchemaError("tool_schema_invalid", f"{name}: fails the JSON Schema meta-schema: {error}")
    where = non_finite_path(schema)
    if where is not None:
        raise SchemaError("non_finite_number",
                          f"{name}: parameters at {where or '(root)'}: NaN or infinity is not JSON")
    dangling = _dangling_ref(schema)
    if dangling is not None:
        raise SchemaError("tool_schema_invalid", f"{name}: $ref {dangling[:120]!r} does not point inside the schema")
    return {"type": "function", "function": {"name": name.strip(), "description": description, "parameters": schema}}


_MISSING = object()


def _resolve_local(root: Any, ref: str) -> Any:
    """What a local ``$ref`` (``#`` or a JSON pointer ``#/a/b``) points at in ``root``, else ``_MISSING``.
    Remote and anchor refs are ``_MISSING``: nothing is fetched, so they could never be resolved."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return _MISSING
    node = root
    for token in ref[2:].split("/"):
        token = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return _MISSING
    return node


def _dangling_ref(schema: dict) -> str | None:
    """The first ``$ref`` of ``schema`` that does not resolve inside it (validating a call would raise on it)."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and _resolve_local(schema, ref) is _MISSING:
                return ref
            stack.extend(v for k, v in node.items() if k not in _DATA_KEYS)
        elif isinstance(node, list):
            stack.extend(node)
    return None


@lru_cache(maxsize=65536)
def _normalize_tool_cached(canonical: str) -> dict:
    return normalize_tool(json.loads(canonical))


def normalize_tools(tools: Any) -> list[dict]:
    """A tool list (list or JSON string) -> OpenAI tools; rejects unparseable lists and duplicate names.

    Tools repeat across rows, so results are cached: treat the returned dicts as read-only.
    """
    if isinstance(tools, str):
        try:
            tools = loads(tools, "tool list") if tools.strip() else []
        except json.JSONDecodeError as exc:
            raise SchemaError("tools_unparseable", f"tool list is not JSON: {exc}") from None
    if isinstance(tools, dict):
        tools = [tools]
    if not isinstance(tools, list):
        raise SchemaError("tools_unparseable", f"tool list is a {type(tools).__name__}")
    out = [_normalize_tool_cached(json.dumps(t, sort_keys=True)) if isinstance(t, dict) else normalize_tool(t)
           for t in tools]
    names = [t["function"]["name"] for t in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SchemaError("tool_name_duplicate", f"tool names repeat: {dupes}")
    return out


@lru_cache(maxsize=16384)
def _validator(canonical: str):
    schema = json.loads(canonical)
    cls = validator_for(schema, default=DEFAULT_DRAFT)
    return cls(schema)


def validate_call(call: Any, tools_by_name: dict[str, dict]) -> tuple[str, str] | None:
    """Check one gold call ``{"name", "arguments"}`` against the row's tools.

    Returns None when valid, else ``(reason, detail)`` with reason one of ``gold_call_malformed``,
    ``gold_call_unknown_tool``, ``gold_call_unknown_argument``, ``gold_call_schema_mismatch``, or
    ``tool_schema_invalid`` / ``too_deep`` when ``jsonschema`` cannot apply the schema at all.
    ``tools_by_name`` maps a name to the ``parameters`` schema (as canonical JSON string).
    """
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return "gold_call_malformed", f"call is not an object with a string name: {str(call)[:120]}"
    args = call.get("arguments", {})
    if not isinstance(args, dict):
        return "gold_call_malformed", f"{call['name']}: arguments is a {type(args).__name__}, not an object"
    canonical = tools_by_name.get(call["name"])
    if canonical is None:
        return "gold_call_unknown_tool", f"{call['name']!r} is not among the row's tools"
    validator = _validator(canonical)
    props = validator.schema.get("properties", {})
    extra = [k for k in args if k not in props]
    if extra and (props or validator.schema.get("additionalProperties") is False):
        return "gold_call_unknown_argument", f"{call['name']}: arguments {extra} are not in the schema"
    try:
        error = next(iter(validator.iter_errors(args)), None)
    except RecursionError:
        return "too_deep", f"{call['name']}: validating the call recursed too deep (a $ref cycle?)"
    except Exception as exc:  # noqa: BLE001 - e.g. a "pattern" that is not a regex: the schema cannot be used
        if limits.is_integer_too_long(exc):  # jsonschema's message repr()s the value; the call is at fault
            return "integer_too_long", limits.integer_too_long(f"{call['name']} arguments").detail
        return "tool_schema_invalid", f"{call['name']}: the schema cannot be applied: {type(exc).__name__}: {exc}"
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "(root)"
        return "gold_call_schema_mismatch", f"{call['name']}: {where}: {error.message[:200]}"
    return None


def tools_index(tools: list[dict]) -> dict[str, str]:
    """name -> canonical JSON of its parameters schema, the form :func:`validate_call` takes."""
    return {t["function"]["name"]: json.dumps(t["function"]["parameters"], sort_keys=True) for t in tools}
