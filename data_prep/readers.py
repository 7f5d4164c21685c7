"""Read a local copy of a dataset: a parquet, JSON or JSON-lines file (:mod:`data_prep.files`), a folder of those
files, or a local Hugging Face dataset folder (:mod:`data_prep.hf_local`).

A record that cannot be read is kept as an :class:`Unreadable` (reason and detail) so the pipeline rejects it under
that reason instead of the reader dropping it; a file that cannot be read at all raises :class:`InputError` naming
the file and where (:mod:`data_prep.files` says how each format is read).
"""

from __future__ import annotations

import os
from typing import Any

from data_prep import hf_local
from data_prep.files import EXTENSIONS, InputError, Unreadable, read_file, read_json_lines

__all__ = ["read_records", "read_json_lines", "InputError", "Unreadable"]


def read_records(path: str) -> list[Any]:
    """All records of ``path`` (a file, or every supported file in a folder, in name order).

    Raises ``FileNotFoundError`` for a missing path and :class:`InputError` for a file that cannot be read at all.
    A local Hugging Face dataset folder is read through ``datasets`` (``data_prep.hf_local``).
    """
    if hf_local.detect(path):
        return hf_local.read_hf_records(path)
    if os.path.isdir(path):
        files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(EXTENSIONS))
        if not files:
            raise FileNotFoundError(f"no .parquet/.json/.jsonl file in {path}")
        return [r for f in files for r in read_file(f)]
    if not os.path.exists(path):
        raise hf_local.missing_input(path)
    return read_file(path)
