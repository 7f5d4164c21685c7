"""The conversion report: every row that came in is either written or rejected under a named reason.

Written as ``<name>_report.json`` next to the parquet files and summarised in the log. Its invariant,
checked before writing: ``rows_in == rows_written + rows_rejected``, and ``rows_rejected`` is the sum of
``rejected_by_reason``. A "row" is one candidate RL sample: a multi-turn dialogue yields one per user turn, and
a record rejected before it could be split (unreadable JSON, bad tool list) counts as one row.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter, defaultdict
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["Report", "MAX_EXAMPLES_PER_REASON"]

MAX_EXAMPLES_PER_REASON = 5


class Report:
    """Counts in / written / rejected (per reason, with a few examples) for one conversion run.

    Example::

        report = Report(source="xlam", input_path="xlam.json")
        report.count_record()
        report.count_row()
        report.reject("gold_call_unknown_tool", "'f' is not among the row's tools", record_index=0)
        report.finish(written_by_split={"train": 0})
        report.write("out/xlam_report.json")
    """

    def __init__(self, source: str, input_path: str, options: dict[str, Any] | None = None):
        self.source = source
        self.input_path = input_path
        self.options = dict(options or {})
        self.records_in = 0
        self.rows_in = 0
        self.rejected: Counter[str] = Counter()
        self.examples: dict[str, list[dict]] = defaultdict(list)
        self.written_by_split: dict[str, int] = {}
        self.written_by_subset: Counter[str] = Counter()
        self.written_by_data_source: Counter[str] = Counter()
        self.notes: dict[str, Any] = {}
        self.outputs: dict[str, str] = {}
        self.elapsed_s: float | None = None

    def count_record(self, n: int = 1) -> None:
        self.records_in += n

    def count_row(self, n: int = 1) -> None:
        self.rows_in += n

    def reject(self, reason: str, detail: str = "", record_index: int | None = None, n: int = 1) -> None:
        self.rejected[reason] += n
        if len(self.examples[reason]) < MAX_EXAMPLES_PER_REASON:
            self.examples[reason].append({"record_index": record_index, "detail": detail[:300]})

    @property
    def rows_written(self) -> int:
        return sum(self.written_by_split.values())

    @property
    def rows_rejected(self) -> int:
        return sum(self.rejected.values())

    def count_written(self, row: dict[str, Any]) -> None:
        """Count one written row by subset, data source and (for the sources that record it) gold form."""
        gt = row["reward_model"]["ground_truth"]
        self.written_by_subset[gt["subset_name"]] += 1
        self.written_by_data_source[row["data_source"]] += 1
        gold_format = gt.get("gold_format")
        if gold_format is not None:
            counts = self.notes.setdefault("gold_format", {})
            counts[gold_format] = counts.get(gold_format, 0) + 1

    def close(self, written_by_split: dict[str, int], path: str, elapsed_s: float) -> None:
        """:meth:`finish`, then write the report to ``path`` and log its summary."""
        self.finish(written_by_split)
        self.elapsed_s = round(elapsed_s, 3)
        self.write(path)
        self.log_summary()

    def finish(self, written_by_split: dict[str, int]) -> None:
        """Record what was written and check that every row is accounted for."""
        self.written_by_split = dict(written_by_split)
        if self.rows_in != self.rows_written + self.rows_rejected:
            raise AssertionError(
                f"report does not balance: rows_in={self.rows_in} != written {self.rows_written} "
                f"+ rejected {self.rows_rejected} ({dict(self.rejected)})"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "input": self.input_path,
            "records_in": self.records_in,
            "rows_in": self.rows_in,
            "rows_written": self.rows_written,
            "rows_rejected": self.rows_rejected,
            "rejected_by_reason": dict(sorted(self.rejected.items())),
            "written_by_split": self.written_by_split,
            "written_by_subset": dict(sorted(self.written_by_subset.items())),
            "written_by_data_source": dict(sorted(self.written_by_data_source.items())),
            "examples_by_reason": {k: v for k, v in sorted(self.examples.items())},
            "notes": self.notes,
            "options": self.options,
            "outputs": self.outputs,
            "elapsed_s": self.elapsed_s,
        }

    def write(self, path: str) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        # a detail quoting the record may hold a lone surrogate; it is written as its JSON escape instead of failing
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
            json.dump(self.to_dict(), f, indent=2, ensure_ascii=False, default=str)
        self.outputs.setdefault("report", path)

    def log_summary(self) -> None:
        logger.info(
            "%s: %d records -> %d rows in, %d written %s, %d rejected",
            self.source,
            self.records_in,
            self.rows_in,
            self.rows_written,
            self.written_by_split,
            self.rows_rejected,
        )
        for reason, n in sorted(self.rejected.items(), key=lambda kv: -kv[1]):
            example = self.examples[reason][0]["detail"] if self.examples[reason] else ""
            logger.info("  rejected %-28s %7d  e.g. %s", reason, n, example[:120])
