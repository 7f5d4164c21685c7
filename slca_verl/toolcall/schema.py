"""The project's one tool-schema normaliser: every dataset's parameter notation, as JSON Schema (Draft 2020-12).

    type_string_to_schema("List[int], optional")        # ({"type": "array", "items": {"type": "integer"}}, True)
    normalize_parameters({"n": {"type": "int", "default": 3}})           # {"type": "object", "properties": ...}
    normalize_parameters(params, strict=True)           # data preparation: SchemaError instead of a guess

The sources write parameter types in many dialects:

- xLAM: ``{"n": {"type": "List[int]", "description": ..., "default": 3}}`` with ``"str, optional"``,
  ``"Optional[int]"``, ``"Tuple[int, int]"``, ``"Dict[str, Any]"``, python type names, the properties directly
  under ``parameters``;
- ToolACE / BFCL: ``{"type": "dict", "properties": {...}}`` with ``"float"``, ``"tuple"``, ``"any"``, Java and
  JavaScript type names;
- hermes / glaive / Toucan: already JSON Schema (``"type": "object"``), sometimes with draft-3 ``"required": true``
  flags inside a property or draft-4 tuple ``items`` lists.

Data preparation (:mod:`data_prep.tool_schema`) and the simulator (:mod:`slca_verl.sgls.toolset`) both read schemas
through this module, so a row's tools mean the same thing when they are written and when calls are checked against
them; the simulator's re-normalisation of a prepared row is the identity. The two differ only in what they do with
what cannot be read:

- ``strict=True`` (data preparation): :class:`SchemaError` naming a report bucket (``tool_schema_unknown_type``,
  ``tool_schema_invalid``), or :class:`~slca_verl.toolcall.limits.RecordError` ``too_deep``; the row is rejected
  with that reason and counted;
- ``strict=False`` (the simulator, at rollout time): never raises; an unknown type name means "any value" (with a
  debug log), a keyword that cannot hold is dropped.

The choices where the dialects disagree, in one place:

- ``Optional[X]`` is X or null, and optional (Python's meaning); ``Union[...]`` with ``None`` likewise;
- ``callable`` / ``function`` values are strings (JSON can carry a function only as its name or source text);
- ``Tuple[a, b]`` is ``prefixItems`` (2020-12) with ``minItems`` = ``maxItems`` = its length; a homogeneous tuple
  is ``items`` with the same bounds; a draft-4 ``items`` list becomes ``prefixItems``;
- ``"int, str"`` (no optional / default mark) and ``"int|str"`` are unions;
- a ``required`` name with no property is dropped when the schema lists properties.
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any

from slca_verl.toolcall.limits import RecordError, loads

logger = logging.getLogger(__name__)

__all__ = [
    "SchemaError",
    "split_top_level",
    "type_string_to_schema",
    "normalize_schema",
    "normalize_parameters",
]

#: python / BFCL / ToolACE / Java / JavaScript type names -> JSON Schema type
TYPE_NAMES = {
    **dict.fromkeys(
        (
            "str",
            "string",
            "text",
            "char",
            "character",
            "bytes",
            "datetime",
            "date",
            "time",
            "timestamp",
            "uuid",
            "url",
            "uri",
            "path",
            "email",
            "callable",
            "function",
        ),
        "string",
    ),
    **dict.fromkeys(("int", "integer", "long", "short", "byte"), "integer"),
    **dict.fromkeys(("float", "double", "number", "decimal", "bigdecimal"), "number"),
    **dict.fromkeys(("bool", "boolean"), "boolean"),
    **dict.fromkeys(("list", "array", "arraylist", "sequence", "iterable", "tuple", "set"), "array"),
    **dict.fromkeys(("dict", "object", "map", "hashmap", "mapping"), "object"),
    **dict.fromkeys(("none", "null", "nonetype"), "null"),
}
#: names that allow any value
ANY_NAMES = {"any", "object_any", "object?", "*", ""}
JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
#: brackets a type string may nest ("List[Dict[str, List[int]]]" is 3); the parser recurses once per level
MAX_TYPE_NESTING = 32

_GENERIC = re.compile(r"([A-Za-z_*?][\w.?]*)\s*(?:\[(.*)\])?", re.S)  # matched against stripped text
# "int default 5", "str optional": the keyword after whitespace (each position is tested once, so linear time)
_SPACED_OPTIONAL = re.compile(r"\s(?=default\b|optional$)", re.IGNORECASE)
_BRACKETS = re.compile(r"[\[\]]")
_NESTED_KEYS = ("items", "additionalProperties", "not", "contains", "propertyNames")
_LIST_KEYS = ("anyOf", "oneOf", "allOf", "prefixItems")
_DEFS_KEYS = ("$defs", "definitions")


class SchemaError(ValueError):
    """A tool schema that cannot be turned into valid JSON Schema; ``reason`` names the report bucket."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def split_top_level(text: str, sep: str = ",", *, strict: bool = False) -> list[str]:
    """Split ``text`` on ``sep`` outside brackets and quotes (backslash escapes honoured), stripping each part:
    ``"Dict[str, int], optional"`` -> ["Dict[str, int]", "optional"]; ``'f(a=1), g(b=[1, 2])'`` -> two calls.

    Raises:
        ValueError: with ``strict``, unbalanced brackets or quotes.
    """
    parts, depth, quote, escape, start = [], 0, None, False, 0
    for i, ch in enumerate(text):
        if quote:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0 and strict:
                raise ValueError("unbalanced brackets")
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if strict and (depth != 0 or quote):
        raise ValueError("unbalanced brackets or quotes")
    parts.append(text[start:].strip())
    return parts


# ---------------------------------------------------------------------------------------------- type strings


def _bracket_nesting(text: str) -> int:
    depth = deepest = 0
    for m in _BRACKETS.finditer(text):
        depth += 1 if m.group() == "[" else -1
        deepest = max(deepest, depth)
    return deepest


def type_string_to_schema(text: str, *, strict: bool = False) -> tuple[dict, bool]:
    """A python-style type string as ``(JSON Schema fragment, optional)``.

    Args:
        text: e.g. ``"List[int]"``, ``"str, optional"``, ``"int default 5"``, ``"Optional[Dict[str, Any]]"``,
            ``"int|float"``, ``"Tuple[int, str]"``, ``"Literal['a', 'b']"``.
        strict: raise for what cannot be read instead of answering "any value".

    Returns:
        optional is True for a ``", optional"`` / ``", default …"`` mark, ``Optional[...]`` and unions with None.

    Raises:
        SchemaError: ``tool_schema_unknown_type`` (strict only): a name or shape this module does not know.
        RecordError: ``too_deep`` (strict only): brackets nested deeper than :data:`MAX_TYPE_NESTING`.
    """
    if _bracket_nesting(text) > MAX_TYPE_NESTING:
        if strict:
            raise RecordError("too_deep", f"type string nests more than {MAX_TYPE_NESTING} brackets: {text[:80]!r}")
        logger.debug("type string nested deeper than %d brackets treated as any value", MAX_TYPE_NESTING)
        return {}, False
    return _type(text, strict)


def _type(text: str, strict: bool) -> tuple[dict, bool]:
    parts = split_top_level(text.strip())
    head, marks = parts[0], [p.lower() for p in parts[1:]]
    optional = any(m.startswith(("optional", "default")) for m in marks)
    if len(parts) > 1 and not optional:  # "str, int": a union written with commas
        return _union_of(parts, strict)
    spaced = _SPACED_OPTIONAL.search(head)
    if spaced:
        head, optional = head[: spaced.start()].strip(), True
    bars = split_top_level(head, "|")
    if len(bars) > 1:
        schema, nullable = _union_of([b for b in bars if b], strict)
        return schema, optional or nullable
    schema, inner_optional = _head(head, strict)
    return schema, optional or inner_optional


def _union_of(members: list[str], strict: bool) -> tuple[dict, bool]:
    """A union and whether it is optional: a member is None, or optional itself (``Optional[int]|str``)."""
    read = [_type(m, strict) for m in members]
    return union([s for s, _ in read]), any(opt or s == {"type": "null"} for s, opt in read)


def union(members: list[dict]) -> dict:
    """The schema of "any of ``members``": one ``type`` list when every member is a bare type, else ``anyOf``;
    any value when a member allows any value (or there are none)."""
    if not members:
        return {}
    types: list[str] = []
    for m in members:
        if not m:
            return {}
        if set(m) != {"type"}:
            return {"anyOf": members}
        for t in m["type"] if isinstance(m["type"], list) else [m["type"]]:
            if t not in types:
                types.append(t)
    return {"type": types[0] if len(types) == 1 else types}


def _unknown(strict: bool, what: str) -> tuple[dict, bool]:
    if strict:
        raise SchemaError("tool_schema_unknown_type", what)
    logger.debug("%s: treated as any value", what)
    return {}, False


def _literal_values(args: list[str]) -> list[Any]:
    values = []
    for a in args:
        try:
            values.append(json.loads(a.replace("'", '"')))
        except ValueError:
            values.append(a.strip("'\""))
    return values


def _head(head: str, strict: bool) -> tuple[dict, bool]:
    """``List[int]`` -> {"type": "array", "items": {"type": "integer"}}; returns (schema, optional)."""
    head = head.strip()
    m = _GENERIC.fullmatch(head)
    if not m:
        return _unknown(strict, f"cannot parse type {head[:120]!r}")
    name, inner = m.group(1), m.group(2)
    key = name.lower().rsplit(".", 1)[-1]  # typing.List, datetime.date
    args = split_top_level(inner) if inner is not None and inner.strip() else []
    if key == "optional":
        if len(args) != 1 and strict:
            raise SchemaError("tool_schema_unknown_type", f"Optional takes one argument: {head[:120]!r}")
        return allow_null(_union_of(args, strict)[0] if len(args) != 1 else _type(args[0], strict)[0]), True
    if key == "union":
        return _union_of(args, strict)
    if key == "literal":
        return {"enum": _literal_values(args)}, False
    if key in ANY_NAMES:
        return {}, False
    if key not in TYPE_NAMES:
        return _unknown(strict, f"unknown type {head[:120]!r}")
    jtype = TYPE_NAMES[key]
    schema: dict[str, Any] = {"type": jtype}
    if jtype == "array" and args:
        fixed = key == "tuple" and "..." not in args
        items = [_type(a, strict)[0] for a in args if a != "..."]
        if fixed and len(items) > 1 and len({json.dumps(i, sort_keys=True) for i in items}) > 1:
            schema["prefixItems"] = items  # positional item schemas
        elif items and items[0]:
            schema["items"] = items[0]
        if fixed and len(args) > 1:
            schema.update(minItems=len(args), maxItems=len(args))
    if key == "set":
        schema["uniqueItems"] = True
    if jtype == "object" and args:
        read = [_type(a, strict)[0] for a in args]  # every argument read, so strict mode refuses Dict[Frobnicator]
        if len(read) == 2 and read[1]:
            schema["additionalProperties"] = read[1]
    return schema, False


def allow_null(schema: dict) -> dict:
    """``schema`` or null (any value stays any value)."""
    if not schema:
        return schema
    t = schema.get("type")
    if isinstance(t, str) and set(schema) <= {"type", "items", "additionalProperties", "uniqueItems"}:
        return {**schema, "type": [t, "null"]}
    if isinstance(t, list):
        return schema if "null" in t else {**schema, "type": t + ["null"]}
    return {"anyOf": [schema, {"type": "null"}]}


# ---------------------------------------------------------------------------------------------- schema nodes


def _invalid(strict: bool, detail: str) -> None:
    """Raise ``tool_schema_invalid`` in strict mode; in tolerant mode the caller drops what was wrong."""
    if strict:
        raise SchemaError("tool_schema_invalid", detail)


def _required_names(value: Any) -> list[str]:
    """A ``required`` keyword as a list of names: strings from a list, or the keys whose value is true of an object
    (``{"city": true}``, a form some datasets use)."""
    if isinstance(value, dict):
        return [k for k, v in value.items() if isinstance(k, str) and v is True]
    if isinstance(value, list):
        return list(dict.fromkeys(r for r in value if isinstance(r, str)))
    return []


def _non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def normalize_schema(node: Any, *, strict: bool = False, path: str = "parameters") -> tuple[Any, bool]:
    """One schema node of any dialect, recursively, as JSON Schema; returns ``(schema, optional)``.

    ``optional`` comes from the node itself: an optional type string, ``"optional": true``, ``"required": false``
    or a ``default``. In tolerant mode keywords holding a non-finite number (``"maximum": Infinity``) are dropped;
    in strict mode they stay for the caller to report. Callers bound the nesting first.

    Raises:
        SchemaError: (strict only) a node that is not an object or a type string, a ``type`` that is neither a
            string nor a list of them, an ``enum`` that is not a list, an unknown type name.
    """
    if isinstance(node, str):  # {"x": "int"} shorthand
        return type_string_to_schema(node, strict=strict)
    if isinstance(node, bool) and not strict:
        return {}, False
    if not isinstance(node, dict):
        _invalid(strict, f"property {path} is a {type(node).__name__}, not an object")
        return {}, False
    out = dict(node) if strict else {k: v for k, v in node.items() if not _non_finite(v)}
    optional = bool(out.pop("optional", False)) or "default" in node
    if isinstance(out.get("required"), bool):  # a draft-3 flag on the property itself
        optional = optional or not out.pop("required")
    if "type" in out:
        t = out.pop("type")
        if isinstance(t, str) and t in JSON_TYPES:
            out["type"] = t
        elif isinstance(t, (str, list)) and all(isinstance(x, str) for x in (t if isinstance(t, list) else [t])):
            fragment, opt = (
                type_string_to_schema(t, strict=strict) if isinstance(t, str) else _union_of_names(t, strict)
            )
            optional = optional or opt
            for k, v in fragment.items():  # the string's own structure counts only where the node says nothing
                if k == "type" or k not in out:
                    out[k] = v
        else:
            _invalid(strict, f"type of {path} must be a string, got {type(t).__name__}")
    if "required" in out:
        required = out["required"]
        if not (
            isinstance(required, dict) or (isinstance(required, list) and all(isinstance(r, str) for r in required))
        ):
            _invalid(strict, f"{path}.required is not a list of names")
        out["required"] = _required_names(required)
    if isinstance(out.get("properties"), dict):
        props, required = {}, list(out.get("required", []))
        for name, sub in out["properties"].items():
            if isinstance(sub, dict) and isinstance(sub.get("required"), bool) and sub["required"]:
                required.append(name)  # {"city": {"type": "string", "required": true}}
            props[name] = normalize_schema(sub, strict=strict, path=f"{path}.{name}")[0]
        out["properties"] = props
        out.setdefault("type", "object")
        out["required"] = list(dict.fromkeys(r for r in required if r in props)) if props else required
        if not out["required"]:
            del out["required"]
    elif "properties" in out:
        _invalid(strict, f"{path}.properties is not an object")
        del out["properties"]
    for key in _NESTED_KEYS:
        if isinstance(out.get(key), (dict, str)):
            out[key] = normalize_schema(out[key], strict=strict, path=f"{path}.{key}")[0]
    for key in _DEFS_KEYS:
        if isinstance(out.get(key), dict):
            out[key] = {k: normalize_schema(v, strict=strict, path=f"{path}.{key}.{k}")[0] for k, v in out[key].items()}
    if isinstance(out.get("items"), list):  # the draft-4 tuple form
        out["prefixItems"] = out.pop("items")
    for key in _LIST_KEYS:
        if isinstance(out.get(key), list):
            out[key] = [normalize_schema(s, strict=strict, path=f"{path}.{key}")[0] for s in out[key]]
    if "enum" in out:
        if not isinstance(out["enum"], list):
            _invalid(strict, f"enum of {path} is not a list")
            del out["enum"]
        else:
            if not strict:  # NaN / Infinity members could only be answered with non-JSON
                out["enum"] = [v for v in out["enum"] if not _non_finite(v)]
            if out.get("type") == "string":  # datasets list numbers for string enums
                out["enum"] = [v if isinstance(v, str) else str(v) for v in out["enum"]]
            if not out["enum"]:
                del out["enum"]
    return out, optional


def _union_of_names(names: list[str], strict: bool) -> tuple[dict, bool]:
    schemas = [{"type": n} if n in JSON_TYPES else type_string_to_schema(n, strict=strict)[0] for n in names]
    return union(schemas), "null" in names or any(s == {"type": "null"} for s in schemas)


def normalize_parameters(params: Any, *, strict: bool = False) -> dict:
    """A function's ``parameters`` (any dialect) as a JSON Schema object schema (``type``, ``properties``,
    ``required``).

    Accepts a JSON Schema object (``"type": "object"`` / ``"dict"`` or ``properties``), a JSON string of one, or the
    xLAM form ``{"arg": {"type": "List[int]", …}}``, where an argument is required unless its type says optional,
    it has a default or ``"required": false``.

    Raises:
        SchemaError: (strict only) parameters that are not an object, a non-JSON string, a schema of another type
            than object, or any error of :func:`normalize_schema`.
    """
    if isinstance(params, str):
        try:
            params = loads(params, "parameters") if params.strip() else {}
        except json.JSONDecodeError as exc:
            _invalid(strict, f"parameters is a non-JSON string: {exc}")
            params = {}
    if params is None or params == [] or (isinstance(params, dict) and not params):
        return {"type": "object", "properties": {}}
    if not isinstance(params, dict):
        _invalid(strict, f"parameters is a {type(params).__name__}, not an object")
        return {"type": "object", "properties": {}}
    if "properties" in params or params.get("type") in ("object", "dict"):
        schema, _ = normalize_schema(params, strict=strict)
        if schema.get("type") not in (None, "object"):
            _invalid(strict, f"parameters has type {schema.get('type')!r}, not object")
        schema["type"] = "object"
        schema.setdefault("properties", {})
        return schema
    properties, required = {}, []
    for name, spec in params.items():
        properties[name], optional = normalize_schema(spec, strict=strict, path=f"parameters.{name}")
        if not optional:
            required.append(name)
    return {"type": "object", "properties": properties, **({"required": required} if required else {})}
