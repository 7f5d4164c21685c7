"""The row contract: the gold forms a row may carry, parquet cells back into Python values, SFT parquet files.

verl's RL rows and the SFT rows hold nested values; parquet hands them back as numpy arrays, and the project's own
columns (``extra_info.tool_schemas``, ground truth) as JSON text. Both readers apply the JSON bounds of
:mod:`slca_verl.toolcall.limits`.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

from slca_verl.toolcall import limits

#: the forms a row's gold calls may take (``reward_model.ground_truth.gold_format``): ``nested`` steps of parallel
#: calls, a ``flat`` list of calls, or tool ``names`` only; data_prep writes them, HierR scores by them
GOLD_FORMS = ("nested", "flat", "names")


def plain(obj: Any) -> Any:
    """numpy arrays / JSON strings from parquet -> Python lists and dicts (every JSON string is decoded)."""
    if hasattr(obj, "tolist"):
        obj = obj.tolist()
    if isinstance(obj, str):
        try:
            return limits.loads(obj)
        except json.JSONDecodeError:
            return obj
    if isinstance(obj, list):
        return [plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    return obj


def read_messages(cell: Any) -> list[dict]:
    """A parquet ``messages`` / ``prompt`` cell (an array, a list or its JSON text) as message dicts, contents kept
    verbatim; keys whose value is None (parquet's fill for a missing struct field) are dropped.

    Not :func:`plain`, which decodes every JSON string: a tool response or a user turn that is JSON text would
    become a dict, which the chat template renders as Python's repr (a format the agent loop never sends)."""
    if isinstance(cell, str):
        cell = limits.loads(cell)
    if hasattr(cell, "tolist"):
        cell = cell.tolist()
    return [{k: v for k, v in dict(m).items() if v is not None} for m in cell]


def write_sft(dialogues: list[list[dict]], output_dir: str, val_ratio: float, seed: int) -> dict[str, str]:
    """``sft_train.parquet`` (and ``sft_val.parquet`` when ``val_ratio`` > 0) with one ``messages`` column, the
    dialogues shuffled by ``seed`` before the split; returns the paths by split."""
    import pandas as pd

    os.makedirs(output_dir, exist_ok=True)
    order = list(range(len(dialogues)))
    random.Random(seed).shuffle(order)
    n_val = int(round(len(order) * val_ratio))
    splits = {"train": order[n_val:], "val": order[:n_val]} if n_val else {"train": order}
    paths = {}
    for split, idx in splits.items():
        paths[split] = os.path.join(output_dir, f"sft_{split}.parquet")
        pd.DataFrame({"messages": [dialogues[i] for i in sorted(idx)]}).to_parquet(paths[split])
    return paths
