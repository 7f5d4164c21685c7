"""Read a local copy of a dataset: parquet, JSON (a list or JSON lines) or a folder of those files.

A JSON-lines line that does not parse is kept as ``{"__unreadable__": line}`` so the converter rejects it
with a reason instead of the reader dropping it.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["read_records", "UNREADABLE"]

UNREADABLE = "__unreadable__"
_EXTS = (".parquet", ".json", ".jsonl")


def _read_json_lines(text: str) -> list[Any]:
    records = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            records.append({UNREADABLE: f"{exc}: {line[:200]}"})
    return records


def _read_file(path: str) -> list[Any]:
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return _read_json_lines(text)
        if isinstance(data, dict):
            for key in ("data", "rows", "records"):
                if isinstance(data.get(key), list):
                    return data[key]
            return [data]
        return data
    if path.endswith(".jsonl"):
        return _read_json_lines(text)
    raise ValueError(f"unsupported input {path!r}: expected .parquet, .json or .jsonl")


def read_records(path: str) -> list[Any]:
    """All records of ``path`` (a file, or every supported file in a folder, in name order).

    A local Hugging Face dataset folder is read through ``datasets`` (``data_prep.hf_local``).
    """
    from data_prep import hf_local  # which imports datasets only for such a folder

    if hf_local.detect(path):
        return hf_local.read_hf_records(path)
    if os.path.isdir(path):
        files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(_EXTS))
        if not files:
            raise FileNotFoundError(f"no .parquet/.json/.jsonl file in {path}")
        return [r for f in files for r in _read_file(f)]
    if not os.path.exists(path):
        raise hf_local.missing_input(path)
    return _read_file(path)
