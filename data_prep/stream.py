"""The pipeline of ``data_prep.pipeline`` for inputs too large to hold: records in batches, rows out in chunks.

Same steps and the same report as :func:`data_prep.pipeline.run` (convert -> check -> de-duplicate ->
decontaminate -> split -> write), done per batch with bounded memory:

- records come from an iterator of batches (``pyarrow.parquet.ParquetFile.iter_batches`` or a ``datasets``
  folder) and are dropped once converted;
- rows go to one ``pyarrow.parquet.ParquetWriter`` per split, flushed every ``chunk_rows`` rows or
  ``chunk_bytes`` of text, so at most one chunk per split is held;
- de-duplication keeps an 8-byte digest per written row (about 60 bytes of memory each with the set's overhead),
  the only state that grows with the output;
- the split is drawn up front from the number of records (known from the parquet metadata): a seeded permutation
  puts ``ceil(val_ratio * records)`` of them, all their turns, in val, as the in-memory pipeline does (there
  the count is over records that yield a row, here over all records read).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import sys
import time
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from data_prep.conversion_report import Report
from data_prep.decontam import Decontaminator, dedup_key, normalize_question
from data_prep.pipeline import ConvertFn, Options, convert_one, row_or_rejection
from data_prep.row_builder import Candidate, Rejection

logger = logging.getLogger(__name__)

__all__ = ["run_streaming", "progress_enabled"]


def progress_enabled(wanted: bool, stream=None) -> bool:
    """A progress bar only when asked for and the terminal is a TTY (no bar in logs or CI)."""
    stream = sys.stderr if stream is None else stream
    return bool(wanted and getattr(stream, "isatty", lambda: False)())


class _SplitWriter:
    """Rows of one split, written in chunks to ``path``; ``extra_info.index`` counts across chunks."""

    def __init__(self, split: str, path: str, chunk_rows: int, chunk_bytes: int):
        self.split, self.path = split, path
        self.chunk_rows, self.chunk_bytes = chunk_rows, chunk_bytes
        self.rows: list[dict] = []
        self.size = 0
        self.written = 0
        self.writer: pq.ParquetWriter | None = None
        self.schema: pa.Schema | None = None

    def add(self, row: dict) -> None:
        row["extra_info"]["index"] = self.written + len(self.rows)
        row["extra_info"]["split"] = self.split
        self.rows.append(row)
        self.size += 3 * len(row["tools"]) + sum(len(m["content"]) for m in row["prompt"])
        if len(self.rows) >= self.chunk_rows or self.size >= self.chunk_bytes:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        if self.writer is None:  # the first chunk fixes the schema; later chunks are cast to it
            table = pa.Table.from_pylist(self.rows)
            self.schema = table.schema
            self.writer = pq.ParquetWriter(self.path, self.schema)
        else:
            table = pa.Table.from_pylist(self.rows, schema=self.schema)
        self.writer.write_table(table)
        self.written += len(self.rows)
        self.rows, self.size = [], 0

    def close(self) -> None:
        self.flush()
        if self.writer is not None:
            self.writer.close()


def _digest(row: dict, mode: str) -> int:
    return int.from_bytes(hashlib.blake2b(dedup_key(row, mode).encode(), digest_size=8).digest(), "little")


def run_streaming(
    source: str,
    input_path: str,
    batches: Iterable[list[Any]],
    total_records: int,
    convert: ConvertFn,
    opts: Options,
    notes: dict[str, Any] | None = None,
    late_notes: Callable[[], dict[str, Any]] | None = None,
    chunk_rows: int = 2000,
    chunk_bytes: int = 64 << 20,
) -> Report:
    """Convert the records of ``batches`` (``total_records`` in all) and write parquet + report in chunks.

    ``late_notes()`` is called once every record is converted, for counts the converter kept (its report notes).
    """
    start = time.perf_counter()
    report = Report(source=source, input_path=input_path, options=opts.as_dict())
    report.notes.update(notes or {})
    if opts.max_records >= 0 and total_records > opts.max_records:
        report.notes["records_not_read_because_of_max_records"] = total_records - opts.max_records
        total_records = opts.max_records
    val = np.zeros(total_records, dtype=bool)
    if opts.val_ratio > 0 and total_records:
        n_val = min(total_records, math.ceil(opts.val_ratio * total_records))
        val[np.random.default_rng(opts.seed).permutation(total_records)[:n_val]] = True
    decontaminator = Decontaminator(opts.decontaminate_with, opts.decontam_ngram) if opts.decontaminate_with else None
    removed = dict.fromkeys(decontaminator.sources if decontaminator else [], 0)

    os.makedirs(opts.output_dir, exist_ok=True)
    writers = {
        split: _SplitWriter(
            split, os.path.join(opts.output_dir, f"{opts.name}_{split}.parquet"), chunk_rows, chunk_bytes
        )
        for split in (opts.split_name, opts.val_split_name)
    }
    seen: set[int] = set()
    bar = tqdm(total=total_records, desc=source, unit="rec", disable=not opts.progress, mininterval=1.0)
    index = 0
    try:
        for record in _records(batches, total_records):
            report.count_record()
            for out in convert_one(record, index, convert):  # the in-memory pipeline's guards, record by record
                report.count_row()
                row = row_or_rejection(out, opts.system_prompt) if isinstance(out, Candidate) else out
                if isinstance(row, Rejection):
                    report.reject(row.reason, row.detail, row.record_index)
                    continue
                if opts.dedup != "none":
                    key = _digest(row, opts.dedup)
                    if key in seen:
                        report.reject(
                            "duplicate",
                            "same prompt, tools and gold as an earlier row"
                            if opts.dedup == "exact"
                            else "same question and tools as an earlier row",
                            index,
                        )
                        continue
                    seen.add(key)
                if decontaminator is not None:
                    hit = decontaminator.match(normalize_question(out.question))
                    if hit is not None:
                        removed[hit] += 1
                        report.reject(f"contaminated_{hit}", f"question matches a {hit} question", index)
                        continue
                split = opts.val_split_name if val[index] else opts.split_name
                writers[split].add(row)
                report.count_written(row)
            index += 1
            bar.update(1)
    finally:
        bar.close()
        for w in writers.values():
            w.close()
    if decontaminator is not None:
        report.notes["decontamination"] = {
            s: {"reference_questions": decontaminator.sizes[s], "rows_removed": n} for s, n in removed.items()
        }
    if late_notes is not None:
        report.notes.update(late_notes())
    written: dict[str, int] = {}
    for split, w in writers.items():
        if w.written:
            report.outputs[split] = w.path
            written[split] = w.written
        elif split == opts.split_name:
            logger.warning("%s: no row left for split %s", source, split)
            written[split] = 0
    report.close(written, os.path.join(opts.output_dir, f"{opts.name}_report.json"), time.perf_counter() - start)
    return report


def _records(batches: Iterable[list[Any]], limit: int) -> Iterator[Any]:
    n = 0
    for batch in batches:
        for record in batch:
            if n >= limit:
                return
            yield record
            n += 1
