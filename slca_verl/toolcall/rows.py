"""The row contract: the gold forms a row may carry, parquet cells back into Python values, SFT parquet files.

verl's RL rows and the SFT rows hold nested values; parquet and verl's ``non_tensor_batch`` hand them back as numpy
arrays, Hydra's ``reward_kwargs`` as OmegaConf containers, and the project's own columns
(``extra_info.tool_schemas``, ground truth) as JSON text. :func:`plain` is the project's one helper that turns any of
them into plain Python values; it and :func:`read_messages` apply the JSON bounds of
:mod:`slca_verl.toolcall.limits`.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from slca_verl.toolcall import limits

#: the forms a row's gold calls may take (``reward_model.ground_truth.gold_format``): ``nested`` steps of parallel
#: calls, a ``flat`` list of calls, or tool ``names`` only; data_prep writes them, HierR scores by them
GOLD_FORMS = ("nested", "flat", "names")


#: what :func:`plain` may do with a string (its ``json_text`` argument)
JSON_TEXT = ("keep", "any", "containers")


def plain(obj: Any, *, json_text: str = "keep") -> Any:
    """``obj`` as plain Python values, recursively: numpy arrays and scalars (anything with a ``tolist``) become
    lists and Python scalars, OmegaConf containers resolved dicts and lists, tuples lists, dict keys strings; None
    and other values stay as they are.

    Args:
        json_text: which strings are JSON text to decode; the callers differ here on purpose:

            - ``"keep"`` (HierR, the agent loop, ``reward_kwargs``): none. A string argument ``"42"`` or a tool
              response that is JSON text stays the string the policy or the tool wrote.
            - ``"any"`` (reading a prepared row's cells: SFT data, the CPU model's warm-up): every string is tried
              as JSON once, within the bounds of :func:`limits.loads` (too deep raises its ``RecordError``); the
              decoded value is returned as decoded, and a string that is not JSON stays.
            - ``"containers"`` (evaluation's key that matches a dumped row to its parquet row, which may hold the
              gold calls as JSON text or decoded): a string that opens an array or an object is decoded (within the
              same bounds) and recursed into; any other string, or one that does not decode, stays.
    """
    if json_text not in JSON_TEXT:
        raise ValueError(f"plain: json_text must be one of {JSON_TEXT}, got {json_text!r}")
    return _plain(obj, json_text)


def _plain(obj: Any, json_text: str) -> Any:
    if isinstance(obj, (DictConfig, ListConfig)):
        obj = OmegaConf.to_container(obj, resolve=True)
    tolist = getattr(obj, "tolist", None)
    if callable(tolist):
        obj = tolist()
    if isinstance(obj, dict):
        return {str(k): _plain(v, json_text) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v, json_text) for v in obj]
    if not isinstance(obj, str) or json_text == "keep":
        return obj
    if json_text == "any":
        try:
            return limits.loads(obj)
        except json.JSONDecodeError:
            return obj
    if not obj.startswith(("[", "{")):
        return obj
    try:
        return _plain(limits.loads(obj), json_text)
    except (ValueError, limits.RecordError):
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
