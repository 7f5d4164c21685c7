"""Local Hugging Face dataset folders as ``--input``, read through the ``datasets`` library (a snapshot's JSON files
through :mod:`data_prep.readers`, see below); nothing is downloaded.

Recognised folders (:func:`detect`):

- ``save_to_disk``: ``Dataset.save_to_disk`` output (``state.json`` + ``*.arrow``), read with
  ``datasets.load_from_disk`` (memory-mapped);
- ``dataset_dict``: ``DatasetDict.save_to_disk`` output (``dataset_dict.json`` + one folder per split): the
  ``train`` split, or the only one; point ``--input`` at ``DIR/<split>`` for another;
- ``arrow_cache``: a ``datasets`` cache folder (``dataset_info.json`` + ``<name>-<split>[-NNNNN-of-NNNNN].arrow``),
  its ``train`` arrow files (or all of them when none is named ``train``) read with ``Dataset.from_file``;
- ``snapshot``: a Hub repository snapshot (``hf download --local-dir`` or
  ``~/.cache/huggingface/hub/datasets--<owner>--<name>/snapshots/<rev>``) whose ``.parquet`` / ``.json`` / ``.jsonl``
  files lie in sub-folders. Parquet files are read with ``load_dataset("parquet", data_files=[...], streaming=True)``
  so no arrow copy is written; point ``--input`` at one config's folder when configs differ in columns.
  ``.json`` / ``.jsonl`` files are *not* read through ``datasets``: each is read, in name order, by the project's
  own reader (:func:`data_prep.readers.read_records`), so they give exactly the records the same files give as a
  plain ``--input``. ``datasets``' JSON loader (pyarrow's JSON reader) infers one arrow type per column, and what
  a row holds does not survive that: an integer past Python's 4300-digit limit becomes ``inf`` (then rejected as
  "NaN or infinity" instead of ``integer_too_long``), and ends the whole run (``ValueError: Value is too big!``)
  when the column also holds another type; integers past int64, or in a column with a float, become floats
  (silently rounded); objects are unified, so a gold call's arguments gain ``None`` for every key another row's
  arguments have; a line that is not JSON or not UTF-8 fails the whole file. The project's reader keeps every
  line as it is, or as a counted rejection (``integer_too_long``, ``malformed_record``, ``not_utf8``,
  ``too_deep``). Falling back to it only when ``datasets`` raises would still let the silent changes through, and
  a pre-scan would mean parsing every file twice; so JSON files take the project's reader always, one file in
  memory at a time (as for a plain ``--input``).

A plain folder with data files at its top level is left to ``data_prep.readers`` (same records, no ``datasets``).
:func:`missing_input` is the error every reader raises for a path that does not exist: it says where the data is
expected and how to get it there, since nothing is fetched at run time.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from typing import Any, Iterator

from data_prep.files import read_file

__all__ = ["detect", "load", "read_hf_records", "iter_hf_batches", "count_rows", "missing_input", "DATA_EXTS"]

DATA_EXTS = (".parquet", ".json", ".jsonl")


def missing_input(path: str) -> FileNotFoundError:
    """The error for an ``--input`` that does not exist: where the data is expected, and how to put it there."""
    where = os.path.abspath(path)
    hint = ""
    if re.fullmatch(r"[\w.-]+/[\w.-]+", path) and not path.endswith(DATA_EXTS):
        hint = (
            f" {path!r} looks like a Hub dataset id: nothing is downloaded at run time, so fetch it first, e.g. "
            f"`hf download --repo-type dataset {path} --local-dir data/{path.split('/')[1]}`, "
            "and pass that folder."
        )
    return FileNotFoundError(
        f"input not found: expected the data at {where} (a .parquet/.json/.jsonl file, a folder of them, or a local "
        f"Hugging Face dataset folder: save_to_disk output, a datasets cache folder or a Hub snapshot).{hint}"
    )


def _data_files(folder: str) -> list[str]:
    found = [p for ext in DATA_EXTS for p in glob.glob(os.path.join(folder, "**", f"*{ext}"), recursive=True)]
    return sorted(
        p for p in found if not os.path.basename(p).startswith(".") and os.sep + "." not in os.path.relpath(p, folder)
    )  # skip .cache/, .huggingface/ metadata


def detect(path: str) -> str | None:
    """Which kind of Hugging Face folder ``path`` is, or None (a file, or a plain folder of data files)."""
    if not os.path.isdir(path):
        return None
    names = set(os.listdir(path))
    if "dataset_dict.json" in names:
        return "dataset_dict"
    if "state.json" in names and any(n.endswith(".arrow") for n in names):
        return "save_to_disk"
    if any(n.endswith(".arrow") for n in names):
        return "arrow_cache"
    if any(n.endswith(DATA_EXTS) for n in names):
        return None  # plain folder: data_prep.readers reads it
    if _data_files(path):
        return "snapshot"
    return None


def _json_files(path: str) -> list[str] | None:
    """The data files of a snapshot holding ``.json`` / ``.jsonl`` files only (read by the project's reader, see
    the module docstring), else None (parquet, or parquet mixed with JSON, which :func:`load` refuses)."""
    if detect(path) != "snapshot":
        return None
    files = _data_files(path)
    return files if files and not any(f.endswith(".parquet") for f in files) else None


def _arrow_files(folder: str) -> list[str]:
    files = sorted(glob.glob(os.path.join(folder, "*.arrow")))
    train = [f for f in files if "-train" in os.path.basename(f)]
    return train or files


def load(path: str):
    """The ``datasets`` object for a recognised folder: a ``Dataset`` (or an ``IterableDataset`` for a parquet
    snapshot). A snapshot of JSON files has none: :func:`read_hf_records`, :func:`count_rows` and
    :func:`iter_hf_batches` read them with the project's reader (see the module docstring)."""
    import datasets

    kind = detect(path)
    if kind == "save_to_disk":
        return datasets.load_from_disk(path)
    if kind == "dataset_dict":
        splits = datasets.load_from_disk(path)
        if "train" in splits:
            return splits["train"]
        if len(splits) == 1:
            return next(iter(splits.values()))
        raise ValueError(f"{path} holds the splits {sorted(splits)}: pass --input {os.path.join(path, '<split>')}")
    if kind == "arrow_cache":
        return datasets.concatenate_datasets([datasets.Dataset.from_file(f) for f in _arrow_files(path)])
    if kind == "snapshot":
        files = _data_files(path)
        formats = {"parquet" if f.endswith(".parquet") else "json" for f in files}
        folders = sorted({os.path.relpath(os.path.dirname(f), path) for f in files})
        if len(formats) > 1 or (formats == {"parquet"} and len(_parquet_schemas(files)) > 1):
            raise ValueError(
                f"{path} holds configs with different files or columns ({', '.join(folders)}): "
                "pass --input at one config's folder"
            )
        if formats == {"json"}:
            raise ValueError(
                f"{path} holds JSON files, which are not read through datasets (it rewrites values "
                "pyarrow cannot type): read them with data_prep.readers.read_records"
            )
        config = datasets.DownloadConfig(local_files_only=True)
        return datasets.load_dataset("parquet", data_files=files, split="train", streaming=True, download_config=config)
    raise ValueError(f"{path} is not a Hugging Face dataset folder")


def _parquet_schemas(files: list[str]) -> set[tuple[str, ...]]:
    """The distinct column lists of the first file of each folder (configs of one snapshot may differ)."""
    import pyarrow.parquet as pq

    first = {}
    for f in files:
        first.setdefault(os.path.dirname(f), f)
    return {tuple(pq.read_schema(f).names) for f in first.values()}


class _Records(Sequence):
    """A memory-mapped ``Dataset`` as the read-only sequence of dict records the pipeline iterates."""

    def __init__(self, dataset):
        self._ds = dataset

    def __len__(self) -> int:
        return len(self._ds)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return _Records(self._ds.select(range(*i.indices(len(self._ds)))))
        return self._ds[i]

    def __iter__(self) -> Iterator[dict]:
        return iter(self._ds)


def read_hf_records(path: str) -> Sequence[Any]:
    """Every record of a recognised folder (``data_prep.readers.read_records`` calls this for them); a JSON
    snapshot's unreadable lines or items come back as :class:`data_prep.readers.Unreadable`, as from a plain file."""
    json_files = _json_files(path)
    if json_files is not None:
        return [record for f in json_files for record in read_file(f)]
    ds = load(path)
    if hasattr(ds, "__len__"):
        return _Records(ds)
    return list(ds)  # a streamed snapshot: materialised, as data_prep.readers does with plain files


def count_rows(path: str) -> int:
    """How many records a recognised folder holds: from the parquet metadata, without reading them; a JSON
    snapshot's files are read (one at a time) by the project's reader, so the count is exactly the number of records
    :func:`iter_hf_batches` yields, unreadable lines included."""
    json_files = _json_files(path)
    if json_files is not None:
        return sum(len(read_file(f)) for f in json_files)
    ds = load(path)
    if hasattr(ds, "__len__"):
        return len(ds)
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in _data_files(path))


def iter_hf_batches(path: str, batch_size: int, columns: Sequence[str] | None = None) -> Iterator[list[dict]]:
    """The records of a recognised folder in lists of ``batch_size``, only ``columns`` (those present) kept.

    A JSON snapshot's records come from the project's reader one file at a time: keys outside ``columns`` are
    dropped from objects, missing ones stay missing, and anything else (an :class:`data_prep.readers.Unreadable`,
    a line that is not an object) is passed on whole for the pipeline to reject."""
    json_files = _json_files(path)
    if json_files is not None:
        yield from _json_batches(json_files, batch_size, columns)
        return
    ds = load(path)
    present = list(ds.column_names or []) if getattr(ds, "column_names", None) else None
    keep = [c for c in columns if present is None or c in present] if columns else None
    if keep is not None and present is not None:
        ds = ds.select_columns(keep)
    batch: list[dict] = []
    for record in ds:
        batch.append(record if keep is None or present is not None else {k: record.get(k) for k in keep})
        if len(batch) >= batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def _json_batches(files: list[str], batch_size: int, columns: Sequence[str] | None) -> Iterator[list[Any]]:
    keep = set(columns) if columns else None
    batch: list[Any] = []
    for f in files:
        for record in read_file(f):
            if keep is not None and isinstance(record, dict):
                record = {k: v for k, v in record.items() if k in keep}
            batch.append(record)
            if len(batch) >= batch_size:
                yield batch
                batch = []
    if batch:
        yield batch
