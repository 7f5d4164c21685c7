"""Writing a scorer's result: one JSON file and one markdown table, side by side."""

from __future__ import annotations

import json
import os
from typing import Any, Sequence


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 2) -> str:
    """A GitHub markdown table; floats are printed with ``digits`` decimals."""

    def cell(v: Any) -> str:
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_report(out_dir: str, name: str, result: dict, table: str) -> tuple[str, str]:
    """Write ``<out_dir>/<name>.json`` and ``<out_dir>/<name>.md``; returns both paths."""
    os.makedirs(out_dir, exist_ok=True)
    json_path, md_path = os.path.join(out_dir, f"{name}.json"), os.path.join(out_dir, f"{name}.md")
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, sort_keys=True, default=str)
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(table)
    return json_path, md_path


def read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
