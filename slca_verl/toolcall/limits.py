"""Bounds on what one record may hold, so a hostile record becomes a counted rejection instead of a crash.

- **Nesting.** The schema normaliser, ``jsonschema`` and ``copy.deepcopy`` recurse once (or more) per level, so a
  value nested a few hundred levels deep would end the run with a ``RecursionError``. Every record, and every
  value the converters decode from text inside a record (JSON strings, python literals), is checked against
  :data:`MAX_DEPTH` containers first, without recursion; deeper is rejected as ``too_deep``. A value too deep for
  the parser itself (``json`` and ``ast`` stop near the interpreter's recursion limit) gets the same reason.
- **Text.** A lone surrogate (``"\\ud800"`` in JSON) is a valid Python string that UTF-8, hence parquet, cannot
  store; :func:`has_lone_surrogate` finds one so the row is rejected as ``invalid_unicode``.
- **Numbers.** Python's ``json`` reads ``NaN`` / ``Infinity`` and ``ast`` reads ``1e999`` as a float; written into
  gold calls or tool schemas they would make rows that strict JSON readers refuse, so they are rejected as
  ``non_finite_number`` (:func:`non_finite_path` finds one). An integer longer than Python's int-string limit
  (``sys.get_int_max_str_digits()``, 4300 digits) cannot be read (``json`` raises ``ValueError``, ``ast`` a
  ``SyntaxError``) nor written: ``integer_too_long`` (:func:`is_integer_too_long`, :func:`integer_too_long`).
"""

from __future__ import annotations

import ast
import json
import math
import sys
from typing import Any, Iterable

__all__ = [
    "MAX_DEPTH",
    "RecordError",
    "nesting_exceeds",
    "check_nesting",
    "non_finite_path",
    "has_lone_surrogate",
    "loads",
    "raw_decode",
    "literal_eval",
    "is_integer_too_long",
    "integer_too_long",
]

#: Containers (lists, dicts, tuples) one record may nest. 100 leaves room for tool schemas ~45 object levels
#: deep, far beyond real tools, while the recursive code downstream stays well inside Python's recursion limit.
MAX_DEPTH = 100


class RecordError(Exception):
    """A record that breaks a bound; ``reason`` names the report bucket.

    Deliberately not a ``ValueError``: parsers that catch ``ValueError`` to try another notation must not turn
    "too deep" into "try the next parser".
    """

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


_CONTAINERS = (dict, list, tuple)


def is_integer_too_long(exc: BaseException) -> bool:
    """Whether ``exc`` is Python refusing an integer past its int-string limit (reading or writing one)."""
    return isinstance(exc, (ValueError, SyntaxError)) and "Exceeds the limit" in str(exc) and "digits" in str(exc)


def integer_too_long(what: str) -> RecordError:
    """The ``integer_too_long`` rejection for ``what`` (e.g. "xlam answers", "gold_tool_calls")."""
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
    return RecordError(
        "integer_too_long",
        f"{what} holds an integer of more than {limit} digits, past Python's "
        "int-string limit (sys.get_int_max_str_digits), so it cannot be read",
    )


def nesting_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests more than ``limit`` containers deep (level by level, no recursion: any depth is safe
    to ask about, and it stops at the first level past the limit)."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list = []
        for node in level:
            below.extend(c for c in (node.values() if isinstance(node, dict) else node) if isinstance(c, _CONTAINERS))
        level = below
    return False


def check_nesting(value: Any, what: str) -> Any:
    """``value`` itself, or :class:`RecordError` ``too_deep`` naming ``what`` when it nests beyond the bound."""
    if nesting_exceeds(value):
        raise RecordError("too_deep", f"{what} nests more than {MAX_DEPTH} levels deep")
    return value


def non_finite_path(value: Any) -> str | None:
    """Where the first NaN / infinite float in ``value`` sits (``"a/0/b"``; ``""`` for ``value`` itself), else None."""
    try:
        json.dumps(value, allow_nan=False)  # C speed, and the common answer: nothing to find
        return None
    except ValueError:
        pass  # a non-finite float somewhere: walk to name where
    except TypeError:
        return None  # not JSON at all; the caller's own serialisation reports that
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return path
        if isinstance(node, dict):
            stack.extend((v, f"{path}/{k}" if path else str(k)) for k, v in node.items())
        elif isinstance(node, (list, tuple)):
            stack.extend((v, f"{path}/{i}" if path else str(i)) for i, v in enumerate(node))
    return None


def has_lone_surrogate(texts: Iterable[str]) -> bool:
    """Whether a string holds a lone surrogate (U+D800-U+DFFF), which UTF-8 cannot encode."""
    for text in texts:
        if not text.isascii():  # O(1): ASCII-only strings skip the encode
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def _may_nest_too_deep(text: str, brackets: str = "[{") -> bool:
    """False when ``text`` has too few opening brackets to nest past the bound (no walk needed), the usual case."""
    return sum(text.count(b) for b in brackets) > MAX_DEPTH


def _json_bounded(decode, what: str):
    """``decode()`` (a ``json`` call) with the parser's own limits turned into :class:`RecordError`: too deep for
    its recursion, or an integer longer than Python's int-string limit; a syntax error stays a JSONDecodeError."""
    try:
        return decode()
    except RecursionError:
        raise RecordError("too_deep", f"{what} nests deeper than the JSON parser allows") from None
    except ValueError as exc:
        if not isinstance(exc, json.JSONDecodeError) and is_integer_too_long(exc):
            raise integer_too_long(what) from None
        raise


def loads(text: str, what: str = "JSON text") -> Any:
    """``json.loads`` whose result is bounded: too deep for the parser or for :data:`MAX_DEPTH` raises
    :class:`RecordError` ``too_deep``; a syntax error stays a ``json.JSONDecodeError``."""
    value = _json_bounded(lambda: json.loads(text), what)
    return check_nesting(value, what) if _may_nest_too_deep(text) else value


def raw_decode(decoder: json.JSONDecoder, text: str, index: int, what: str = "JSON text") -> tuple[Any, int]:
    """``decoder.raw_decode(text, index)`` with the bounds of :func:`loads`."""
    value, end = _json_bounded(lambda: decoder.raw_decode(text, index), what)
    return (check_nesting(value, what) if _may_nest_too_deep(text[index:end]) else value), end


def literal_eval(text: str, what: str = "python literal") -> Any:
    """``ast.literal_eval`` with the bounds of :func:`loads`; other failures stay ``ValueError`` / ``SyntaxError``."""
    try:
        value = ast.literal_eval(text)
    except (RecursionError, MemoryError):
        raise RecordError("too_deep", f"{what} nests deeper than the python parser allows") from None
    except (SyntaxError, ValueError) as exc:
        if "too many nested" in str(getattr(exc, "msg", "")):
            raise RecordError("too_deep", f"{what} nests deeper than the python parser allows") from None
        if is_integer_too_long(exc):
            raise integer_too_long(what) from None
        raise
    return check_nesting(value, what) if _may_nest_too_deep(text, "[{(") else value
