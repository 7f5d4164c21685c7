"""Read one file of a dataset: parquet or JSON (a list, one value, or JSON lines); :mod:`data_prep.readers` reads
folders (plain ones and local Hugging Face datasets) with it.

A record that cannot be read is kept as an :class:`Unreadable` (reason and detail) so the pipeline rejects it
under that reason instead of the reader dropping it: a JSON-lines line that does not parse (``malformed_record``)
or is not UTF-8 (``not_utf8``), a value nested deeper than the JSON parser allows (``too_deep``). A file that
cannot be read at all raises :class:`InputError` naming the file and where: a ``.json`` document that is not UTF-8
(byte offset) or has a syntax error (line and column), a broken parquet file.

A ``.json`` file is read as one document; only when that fails *and* its first non-blank line is a complete JSON
value on its own is it read as JSON lines. A top-level array holds the records (so does a ``data`` / ``rows`` /
``records`` array of a top-level object); any other top-level value (an object, a number, ``null``, a string) is
one record. A UTF-8 byte-order mark is accepted.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from typing import Any

from slca_verl.toolcall import limits

__all__ = ["read_file", "read_json_lines", "InputError", "Unreadable", "EXTENSIONS"]

EXTENSIONS = (".parquet", ".json", ".jsonl")
_TOO_DEEP = "nests deeper than the JSON parser allows"


class InputError(ValueError):
    """A file that cannot be read at all; the message names the file and where it goes wrong."""


@dataclass(frozen=True)
class Unreadable:
    """A record the reader could not turn into a value; the pipeline rejects it as ``reason``."""

    reason: str
    detail: str


def _utf8(data: bytes, path: str) -> str:
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 at byte offset {bom + exc.start} ({exc.reason})") from None


def _parse_line(line: str, where: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        return Unreadable("malformed_record", f"{where}: {exc}: {line[:200]}")
    except ValueError as exc:  # an integer of more than 4300 digits (sys.get_int_max_str_digits)
        return Unreadable(
            "integer_too_long" if limits.is_integer_too_long(exc) else "malformed_record", f"{where}: {exc}"
        )
    except RecursionError:
        return Unreadable("too_deep", f"{where}: {_TOO_DEEP}")


def _json_lines(data: bytes, path: str) -> list[Any]:
    """One record per non-blank line; a line that is not UTF-8 or not JSON is an :class:`Unreadable`.

    Lines are split on ``\\n`` only (``str.splitlines`` would also split inside strings holding U+2028 and the like).
    """
    offset = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    records: list[Any] = []
    for number, raw in enumerate(data[offset:].split(b"\n"), start=1):
        start, offset = offset, offset + len(raw) + 1
        if not raw.strip():
            continue
        where = f"{path} line {number}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            records.append(Unreadable("not_utf8", f"{where}: not UTF-8 at byte offset {start + exc.start}"))
            continue
        records.append(_parse_line(line, where))
    return records


def read_json_lines(path: str) -> list[Any]:
    """The records of a JSON-lines file (unreadable lines as :class:`Unreadable`)."""
    with open(path, "rb") as f:
        return _json_lines(f.read(), path)


def _first_line_is_a_value(text: str) -> bool:
    line = next((line for line in text.split("\n") if line.strip()), "")
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    except (RecursionError, ValueError):
        return True  # a complete line too deep (or with too long a number) to read: rejected on its own
    return True


_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WS = re.compile(r"\s*")


def _end_of_value(text: str, start: int) -> int:
    """Index just past the value starting at ``text[start]``, scanned without parsing it (for a value too deep, or
    with too long a number, to parse): a number, or a bracketed value whose strings are skipped whole."""
    number = _NUMBER.match(text, start)
    if number:
        return number.end()
    depth = 0
    for m in _STRING_OR_BRACKET.finditer(text, start):
        token = m.group()
        if token in "[{":
            depth += 1
        elif token in "]}":
            depth -= 1
            if depth == 0:
                return m.end()
    raise InputError("unterminated value")


def _syntax_error(path: str, exc: json.JSONDecodeError) -> InputError:
    return InputError(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")


def _array_items(text: str, path: str) -> list[Any]:
    """The items of a top-level JSON array one by one, so an item too deep to parse is one :class:`Unreadable`."""
    decoder = json.JSONDecoder()
    i = _WS.match(text).end() + 1  # past "["
    i = _WS.match(text, i).end()
    items: list[Any] = []
    if text.startswith("]", i):
        return items
    while True:
        try:
            value, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise _syntax_error(path, exc) from None
        except (RecursionError, ValueError) as exc:
            try:
                end = _end_of_value(text, i)
            except InputError:
                raise InputError(f"{path}: item {len(items)} is never closed") from None
            where = f"{path} item {len(items)} (line {text.count(chr(10), 0, i) + 1})"
            value = (
                Unreadable("too_deep", f"{where}: {_TOO_DEEP}")
                if isinstance(exc, RecursionError)
                else Unreadable(
                    "integer_too_long" if limits.is_integer_too_long(exc) else "malformed_record", f"{where}: {exc}"
                )
            )
            i = end
        items.append(value)
        i = _WS.match(text, i).end()
        if text.startswith(",", i):
            i = _WS.match(text, i + 1).end()
        elif text.startswith("]", i) and not text[i + 1 :].strip():
            return items
        else:
            line = text.count("\n", 0, i) + 1
            raise InputError(f"{path}: not JSON: expected ',' or ']' at line {line}")


def _records_of(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ("data", "rows", "records"):
            if isinstance(value.get(key), list):
                return value[key]
    return [value]  # an object, a number, null or a string is one record (never iterated)


def _read_json(data: bytes, path: str) -> list[Any]:
    text = _utf8(data, path)
    try:
        return _records_of(json.loads(text))
    except json.JSONDecodeError as exc:
        if _first_line_is_a_value(text):
            return _json_lines(data, path)
        raise _syntax_error(path, exc) from None
    except (RecursionError, ValueError) as exc:  # too deep, or an integer of more than 4300 digits
        if text.lstrip().startswith("["):
            return _array_items(text, path)
        if _first_line_is_a_value(text):
            return _json_lines(data, path)
        why = _TOO_DEEP if isinstance(exc, RecursionError) else f"cannot be read: {exc}"
        raise InputError(f"{path}: the top-level value {why}") from None


def _read_parquet(path: str) -> list[Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{path}: not a readable parquet file: {exc}") from None


def read_file(path: str) -> list[Any]:
    """The records of one .parquet, .json or .jsonl file (:class:`InputError` for any other)."""
    if path.endswith(".parquet"):
        return _read_parquet(path)
    if not path.endswith((".json", ".jsonl")):
        raise InputError(f"unsupported input {path!r}: expected .parquet, .json or .jsonl")
    with open(path, "rb") as f:
        data = f.read()
    return _read_json(data, path) if path.endswith(".json") else _json_lines(data, path)
