"""The conversion pipeline every source shares: convert -> check -> de-duplicate -> decontaminate -> split -> write.

Per-record parsing is python (each record is JSON with its own schemas); everything after it runs on a pandas
frame: duplicate keys with ``DataFrame.duplicated``, exact decontamination with ``Series.map`` over a dict,
the split with one seeded permutation of the source-record ids, and the parquet through one pyarrow table per
split. All turns of one source dialogue land in the same split, so validation never sees a training dialogue.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from data_prep.calls import CallParseError
from data_prep.conversion_report import Report
from data_prep.decontam import Decontaminator, dedup_key, normalize_question
from data_prep.readers import Unreadable
from data_prep.row_builder import Candidate, Rejection, build_row, check_candidate, row_problem
from data_prep.tool_schema import SchemaError
from slca_verl.toolcall.limits import MAX_DEPTH, RecordError, is_integer_too_long, nesting_exceeds

logger = logging.getLogger(__name__)

__all__ = ["Options", "convert_records", "run"]

ConvertFn = Callable[[Any, int], Iterable[Candidate | Rejection]]


@dataclass
class Options:
    """What every ``python -m data_prep.<source>`` accepts (see ``data_prep.cli``)."""

    output_dir: str
    name: str
    seed: int = 0
    val_ratio: float = 0.0
    split_name: str = "train"
    val_split_name: str = "val"
    dedup: str = "exact"  # exact | question | none
    decontaminate_with: dict[str, list[str]] = field(default_factory=dict)
    decontam_ngram: int = 13
    system_prompt: str = "hermes"
    progress: bool = True
    max_records: int = -1

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["decontaminate_with"] = {k: len(v) for k, v in self.decontaminate_with.items()}
        return d


# A converter raising one of these met a record of the wrong shape: the row is rejected as malformed_record
# (or under the exception's own ``reason``, which SchemaError and RecordError carry).
_MALFORMED = (SchemaError, CallParseError, KeyError, TypeError, ValueError, AttributeError, IndexError)


def _rejection_for(exc: BaseException, index: int) -> Rejection:
    if isinstance(exc, RecursionError):
        # backstop: every record is depth-checked first, so this means a recursion the bound does not cover
        return Rejection("too_deep", f"recursion limit reached while converting: {exc}", index)
    if isinstance(exc, RecordError):
        return Rejection(exc.reason, exc.detail, index)
    if is_integer_too_long(exc):  # e.g. json.dumps of a gold call holding such an int, while building the row
        return Rejection("integer_too_long", f"{exc}", index)
    if isinstance(exc, _MALFORMED):
        reason = getattr(exc, "reason", None) or (
            "gold_call_unparseable" if isinstance(exc, CallParseError) else "malformed_record"
        )
        return Rejection(reason, getattr(exc, "detail", None) or str(exc), index)
    # a converter bug met by this record: counted and logged, and the run goes on
    logger.warning("record %d: unexpected %s while converting", index, type(exc).__name__, exc_info=exc)
    return Rejection("unexpected_error", f"{type(exc).__name__}: {exc}", index)


def convert_one(record: Any, index: int, convert: ConvertFn) -> list[Candidate | Rejection]:
    """The converter's outputs for one record, or the one rejection saying why there are none."""
    if isinstance(record, Unreadable):
        return [Rejection(record.reason, record.detail, index)]
    if nesting_exceeds(record):
        return [Rejection("too_deep", f"the record nests more than {MAX_DEPTH} levels deep", index)]
    try:
        return list(convert(record, index))
    except Exception as exc:  # noqa: BLE001 - one bad record never ends the run; see _rejection_for
        return [_rejection_for(exc, index)]


def row_or_rejection(candidate: Candidate, system_prompt: str) -> dict | Rejection:
    try:
        problem = check_candidate(candidate)
        if problem is not None:
            return problem
        row = build_row(candidate, system_prompt)
        return row_problem(row, candidate.record_index) or row
    except Exception as exc:  # noqa: BLE001 - e.g. a schema jsonschema cannot apply to the gold call
        return _rejection_for(exc, candidate.record_index)


def convert_records(
    records: Sequence[Any], convert: ConvertFn, report: Report, system_prompt: str = "hermes", progress: bool = True
) -> pd.DataFrame:
    """Run the source's converter over every record; returns one frame row per checked candidate.

    Nothing a record holds ends the run: an unreadable or too-deep record, a converter error and a candidate that
    fails its checks all become one counted rejection. Columns: ``row`` (the parquet row dict), ``record_index``,
    ``question_norm``.
    """
    rows, record_ids, questions, pinned = [], [], [], []
    for i, record in enumerate(
        tqdm(records, desc=f"{report.source}", unit="rec", disable=not progress, mininterval=1.0)
    ):
        report.count_record()
        for out in convert_one(record, i, convert):
            report.count_row()
            if isinstance(out, Candidate):
                row = row_or_rejection(out, system_prompt)
                if isinstance(row, dict):
                    rows.append(row)
                    record_ids.append(out.record_index)
                    questions.append(normalize_question(out.question))
                    pinned.append(out.split)
                    continue
                out = row
            report.reject(out.reason, out.detail, out.record_index)
    return pd.DataFrame(
        {
            "row": rows,
            "record_index": np.asarray(record_ids, dtype=np.int64),
            "question_norm": questions,
            "pinned_split": pd.Series(pinned, dtype=object),
        }
    )


def _reject_mask(frame: pd.DataFrame, mask: pd.Series, reason: str, report: Report, detail: str) -> pd.DataFrame:
    n = int(mask.sum())
    if n:
        for rec in frame.loc[mask, "record_index"].head(5):
            report.reject(reason, detail, int(rec), n=0)
        report.rejected[reason] += n
    return frame.loc[~mask]


def deduplicate(frame: pd.DataFrame, mode: str, report: Report) -> pd.DataFrame:
    if mode == "none" or frame.empty:
        return frame
    keys = frame["row"].map(lambda r: dedup_key(r, mode))
    return _reject_mask(
        frame,
        keys.duplicated(keep="first"),
        "duplicate",
        report,
        f"same {'prompt, tools and gold' if mode == 'exact' else 'question and tools'} as an earlier row",
    )


def decontaminate(frame: pd.DataFrame, decontaminator: Decontaminator | None, report: Report) -> pd.DataFrame:
    if decontaminator is None or frame.empty:
        return frame
    hits = frame["question_norm"].map(decontaminator.exact.get)  # vectorised exact match
    if decontaminator.ngram > 0 and decontaminator.grams:
        todo = hits.isna()
        hits.loc[todo] = frame.loc[todo, "question_norm"].map(decontaminator.match)
    for source in decontaminator.sources:
        mask = hits == source
        report.notes.setdefault("decontamination", {})[source] = {
            "reference_questions": decontaminator.sizes[source],
            "rows_removed": int(mask.sum()),
        }
        frame = _reject_mask(frame, mask, f"contaminated_{source}", report, f"question matches a {source} question")
        hits = hits.loc[frame.index]
    return frame


def assign_splits(frame: pd.DataFrame, opts: Options) -> pd.Series:
    """Seeded split by source record: ``ceil(val_ratio * records)`` records (all their turns) go to val. Rows whose
    source pinned a split (``Candidate.split``: "train" or "val", a held-out set built by construction) keep it."""
    split = pd.Series(opts.split_name, index=frame.index, dtype=object)
    pins = frame["pinned_split"] if "pinned_split" in frame else pd.Series(None, index=frame.index, dtype=object)
    pinned = pins.notna()
    split[pinned & (pins == "val")] = opts.val_split_name
    free = frame.loc[~pinned]
    if opts.val_ratio <= 0 or free.empty:
        return split
    frame = free
    records = np.unique(frame["record_index"].to_numpy())
    n_val = min(len(records), math.ceil(opts.val_ratio * len(records)))
    rng = np.random.default_rng(opts.seed)
    val_records = rng.permutation(records)[:n_val]
    split.loc[frame.index[frame["record_index"].isin(val_records).to_numpy()]] = opts.val_split_name
    return split


def write_split(rows: list[dict], split: str, path: str) -> None:
    for i, row in enumerate(rows):
        row["extra_info"]["index"] = i
        row["extra_info"]["split"] = split
    pq.write_table(pa.Table.from_pylist(rows), path)


def run(
    source: str,
    input_path: str,
    records: Sequence[Any],
    convert: ConvertFn,
    opts: Options,
    notes: dict[str, Any] | None = None,
) -> Report:
    """Convert ``records`` with ``convert`` and write ``<name>_<split>.parquet`` + ``<name>_report.json``."""
    start = time.perf_counter()
    report = Report(source=source, input_path=input_path, options=opts.as_dict())
    report.notes.update(notes or {})
    if opts.max_records >= 0:
        skipped = max(0, len(records) - opts.max_records)
        report.notes["records_not_read_because_of_max_records"] = skipped
        records = records[: opts.max_records]
    frame = convert_records(records, convert, report, opts.system_prompt, opts.progress)
    frame = deduplicate(frame, opts.dedup, report)
    decontaminator = Decontaminator(opts.decontaminate_with, opts.decontam_ngram) if opts.decontaminate_with else None
    frame = decontaminate(frame, decontaminator, report)
    frame = frame.assign(split=assign_splits(frame, opts))

    os.makedirs(opts.output_dir, exist_ok=True)
    written: dict[str, int] = {}
    for split in [opts.split_name, opts.val_split_name]:
        rows = frame.loc[frame["split"] == split, "row"].tolist()
        if not rows and split == opts.val_split_name:
            continue
        path = os.path.join(opts.output_dir, f"{opts.name}_{split}.parquet")
        write_split(rows, split, path) if rows else logger.warning("%s: no row left for split %s", source, split)
        if rows:
            report.outputs[split] = path
        written[split] = len(rows)
        for row in rows:
            report.count_written(row)
    report.close(written, os.path.join(opts.output_dir, f"{opts.name}_report.json"), time.perf_counter() - start)
    return report
