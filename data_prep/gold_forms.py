"""The three layouts of ``gold_tool_calls`` the authors' pipeline wrote, read into one nested form.

=========  ===========================================  ==============================================
form       as written by the authors                    what the row gets (``gold_tool_calls``)
=========  ===========================================  ==============================================
``nested`` v2: ``[[call, ...], ...]`` steps of parallel  unchanged
           calls (``convert_toucan_to_verl_v2.py``)
``flat``   v1: ``[call, call, ...]``                     one step holding every call: ``[[call, ...]]``
           (``convert_toucan_to_verl.py``)
``names``  ``["tool_a", "tool_a", "tool_b"]``            one step of ``{"name": n, "arguments": {}}``
           (the released RL parquet's tool-call rows)    per name
=========  ===========================================  ==============================================

Flat and names-only gold have no step structure, which is what the authors' reward does with a flat list too:
it scores it as a single step. A names-only call has no arguments, so there is nothing to check them against;
``reward_model.ground_truth.gold_format`` records the form on every Toucan row so the reward can score names
only (``names``) and leave the parallel term out where the steps are unknown (``flat`` with more than one call).
``[]`` (a turn answered without a call) is the same in every layout and counts as ``nested``: it loses nothing.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from data_prep.conversion_report import Report
from slca_verl.toolcall import limits
from slca_verl.toolcall.rows import GOLD_FORMS

logger = logging.getLogger(__name__)

__all__ = [
    "GOLD_FORMS",
    "LOSSES",
    "read_gold",
    "add_gold_forms_argument",
    "parse_gold_forms",
    "rejection_reason",
    "warn_lossy_forms",
]

#: what a row of each lossy form cannot give the reward
LOSSES = {
    "flat": "parallel structure (all calls become one step)",
    "names": "arguments (names only; argument keys and values cannot be scored)",
}


def _call(c: dict) -> dict:
    args = c.get("arguments", c.get("parameters", {}))
    return {"name": c.get("name"), "arguments": limits.loads(args, "arguments") if isinstance(args, str) else args}


def read_gold(value: Any) -> tuple[str, list[list[dict]]] | None:
    """``gold_tool_calls`` (list or JSON text) -> ``(form, nested steps)``; None when it is none of the forms.

    Raises ``json.JSONDecodeError`` when the text (or a call's arguments text) is not JSON, and
    :class:`slca_verl.toolcall.limits.RecordError` (``too_deep``) when it nests too deep.

    >>> read_gold('["a", "b"]')
    ('names', [[{'name': 'a', 'arguments': {}}, {'name': 'b', 'arguments': {}}]])
    """
    gold = limits.loads(value, "gold_tool_calls") if isinstance(value, str) else value
    if gold is None or (isinstance(gold, list) and not gold):
        return "nested", []
    if not isinstance(gold, list):
        return None
    if all(isinstance(step, list) and all(isinstance(c, dict) for c in step) for step in gold):
        return "nested", [[_call(c) for c in step] for step in gold]
    if all(isinstance(c, dict) for c in gold):
        return "flat", [[_call(c) for c in gold]]
    if all(isinstance(n, str) for n in gold):
        return "names", [[{"name": n, "arguments": {}} for n in gold]]
    return None


def add_gold_forms_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gold_forms",
        type=parse_gold_forms,
        default=",".join(GOLD_FORMS),
        help="gold layouts to keep, comma separated (default: nested,flat,names); a row whose gold "
        "is in a form not listed is rejected as gold_<form>_rejected",
    )


def parse_gold_forms(text: str) -> frozenset[str]:
    forms = frozenset(f.strip() for f in text.split(",") if f.strip())
    unknown = sorted(forms - set(GOLD_FORMS))
    if unknown or not forms:
        raise argparse.ArgumentTypeError(f"--gold_forms takes a comma-separated subset of {GOLD_FORMS}, got {text!r}")
    return forms


def rejection_reason(form: str) -> str:
    """The report bucket of a row whose gold form was not asked for: ``gold_flat_rejected`` etc."""
    return f"gold_{form}_rejected"


def warn_lossy_forms(report: Report) -> None:
    """One warning when rows with flat or names-only gold were written, saying what their reward lacks."""
    counts = report.notes.get("gold_format") or {}
    lossy = {form: counts.get(form, 0) for form in LOSSES if counts.get(form, 0)}
    if not lossy:
        return
    logger.warning(
        "%s: kept %s rows whose gold is not nested (%s); their reward lacks %s. Rows by gold form: %s. "
        "Pass --gold_forms nested to reject them instead.",
        report.source,
        sum(lossy.values()),
        ", ".join(f"{n} {form}" for form, n in lossy.items()),
        "; ".join(f"{form}: {LOSSES[form]}" for form in lossy),
        counts,
    )
