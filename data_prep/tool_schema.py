"""Tool schemas: normalise every source's parameter notation into JSON Schema, and check gold calls against it.

The sources write parameter types in many dialects:

- xLAM: ``{"n": {"type": "List[int]", "description": ..., "default": 3}}`` with ``"str, optional"``,
  ``"Optional[int]"``, ``"Tuple[int, int]"``, ``"Dict[str, Any]"``, python type names;
- ToolACE / BFCL: ``{"type": "dict", "properties": {...}}`` with ``"float"``, ``"tuple"``, ``"any"``;
- hermes / glaive / Toucan: already JSON Schema (``"type": "object"``).

The dialects are read by the library's one normaliser (:mod:`slca_verl.toolcall.schema`, where the choices between
them are listed) in strict mode, the same code the simulator reads the written rows with.

:func:`normalize_tool` turns any of them into the OpenAI tool form
``{"type": "function", "function": {"name", "description", "parameters"}}`` whose ``parameters`` is a JSON Schema
object that passes the JSON Schema meta-schema; ``required`` is inferred (xLAM) from ``", optional"``,
``Optional[...]`` or a ``default``. :func:`validate_call` checks one gold call against such a tool.

Anything that cannot be normalised raises :class:`SchemaError` (the row is then rejected with that reason); a
tool list or type string nested beyond :mod:`slca_verl.toolcall.limits`' bounds raises its ``too_deep`` ``RecordError``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

import jsonschema
from jsonschema.validators import validator_for

from slca_verl.toolcall import limits
from slca_verl.toolcall import schema as toolcall_schema
from slca_verl.toolcall.limits import loads, non_finite_path
from slca_verl.toolcall.schema import SchemaError, type_string_to_schema

__all__ = [
    "SchemaError",
    "type_to_schema",
    "normalize_parameters",
    "normalize_tool",
    "normalize_tools",
    "validate_call",
]

# keys whose values are data, not subschemas: a {"$ref": ...} inside them is not a reference
_DATA_KEYS = {"enum", "const", "default", "examples"}

# Tool schemas are checked with Draft 2020-12 unless they name another "$schema": the normaliser writes 2020-12
# (``prefixItems`` for tuples), and the simulator checks calls with it, so a gold call is checked here as the
# simulator will check the policy's.
DEFAULT_DRAFT = jsonschema.Draft202012Validator


def type_to_schema(type_value: Any) -> tuple[dict, bool]:
    """Any source's ``type`` value -> (JSON Schema fragment, optional flag); strict: an unknown name raises.

    >>> type_to_schema("List[int]")
    ({'type': 'array', 'items': {'type': 'integer'}}, False)
    >>> type_to_schema("str, optional")
    ({'type': 'string'}, True)
    """
    if type_value is None:
        return {}, False
    if isinstance(type_value, str):
        return type_string_to_schema(type_value, strict=True)
    return toolcall_schema.normalize_schema({"type": type_value}, strict=True, path="a property")


def normalize_parameters(params: Any) -> dict:
    """Any dialect of a tool's parameters -> a JSON Schema object (``type: object``, ``properties``, ``required``),
    by the library's normaliser in strict mode (:func:`slca_verl.toolcall.schema.normalize_parameters`)."""
    return toolcall_schema.normalize_parameters(params, strict=True)


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
        raise SchemaError(
            "non_finite_number", f"{name}: parameters at {where or '(root)'}: NaN or infinity is not JSON"
        )
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
    out = [
        _normalize_tool_cached(json.dumps(t, sort_keys=True)) if isinstance(t, dict) else normalize_tool(t)
        for t in tools
    ]
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
            return "integer_too_long", limits.integer_too_long(f"gold call {call['name']} arguments").detail
        return "tool_schema_invalid", f"{call['name']}: the schema cannot be applied: {type(exc).__name__}: {exc}"
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "(root)"
        return "gold_call_schema_mismatch", f"{call['name']}: {where}: {error.message[:200]}"
    return None


def tools_index(tools: list[dict]) -> dict[str, str]:
    """name -> canonical JSON of its parameters schema, the form :func:`validate_call` takes."""
    return {t["function"]["name"]: json.dumps(t["function"]["parameters"], sort_keys=True) for t in tools}
