"""The table of HierR's result keys: every row's keys, their order, types and empty values come from here.

verl needs the same ``reward_extra_info`` keys on every row, in every batch; a key added in one code path and not in
another breaks a step. So the keys are one table (:data:`COMPONENTS`), and every row HierR returns is built through
:func:`typed_row` (all the table's keys, nothing else, each of its type, non-finite floats as 0) or
:func:`empty_row` (each key's empty value, with a reason). Adding a component is one line here plus the code that
computes it; docs/rewards.md's key table is checked against this one (``tests/rewards/test_rewards_components.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Component:
    """One result key: its Python type (its empty value is ``kind()``: 0.0, 0 or "") and what it holds."""

    key: str
    kind: type
    meaning: str


COMPONENTS: tuple[Component, ...] = (
    Component("score", float, "the total, w_tool * r_tool + w_sum * r_sum (what plain GRPO sees)"),
    Component("r_tool", float, "execution reward (the tool segment's)"),
    Component("r_sum", float, "preference reward (the summary segment's)"),
    Component("fmt", float, "valid <tool_call> blocks / max(#open, #close tags)"),
    Component("name_f1", float, "multiset F1 of predicted vs gold tool names"),
    Component("key", float, "argument keys of the name-matched calls that match gold"),
    Component("value", float, "argument values of the name-matched calls loosely equal to gold"),
    Component("parallel", float, "the steps' parallel structure matches gold"),
    Component("no_call", int, "1 when gold calls existed and no call that parses was written"),
    Component("redundant_calls", int, "predicted calls beyond the gold name multiset"),
    Component("num_calls", int, "calls that parsed"),
    Component("num_gold_calls", int, "calls of the gold"),
    Component("num_tool_responses", int, "tool responses the environment returned"),
    Component("forged_tool_output", int, "tool-response runs the policy typed itself (decoded text)"),
    Component("format_valid", int, "balanced tags and every block valid"),
    Component("judge_rating", int, "the judge's 1..5 rating (0: not asked)"),
    Component("judge_failed", int, "1 when the judge failed"),
    Component("judge_used", int, "1 when the judge was asked"),
    Component("judge_noise", float, "the noise a NoisyJudge added (0 otherwise)"),
    Component("r_sum_clean", float, "the preference reward before that noise"),
    Component("success", int, "1[score / (w_tool + w_sum) >= success_tau]"),
    Component("toolpo_success", float, "ToolPO: all gold calls strictly matched, nothing extra"),
    Component("toolpo_action", float, "ToolPO: fraction of gold calls strictly matched"),
    Component("rltr_completion", float, "RLTR: all gold calls matched"),
    Component("rltr_repeat", float, "RLTR: the consecutive-repeat penalty"),
    Component("rltr_error", float, "RLTR: the invalid-block penalty"),
    Component("rltr_total", float, "RLTR: the planner reward (-1 for an invalid format)"),
    Component("gold_invalid", int, "1 when the ground truth could not be read"),
    Component("gold_format", str, "nested, flat or names; '' when the ground truth could not be read"),
    Component(
        "step_rewards",
        str,
        "JSON list: each tool turn's progress on the gold units (steps, or the calls "
        "of flat gold), extra_step_reward when it makes none (slca_grpo credit=turn; read by the slca_turns "
        "layout)",
    ),
    Component("reason", str, "'' when the input was fine, else what was wrong"),
)
RESULT_KEYS: tuple[str, ...] = tuple(c.key for c in COMPONENTS)
_KIND = {c.key: c.kind for c in COMPONENTS}


def empty_row(reason: str) -> dict:
    """Every key at its empty value, ``reason`` set (input that cannot be scored at all)."""
    row = {c.key: c.kind() for c in COMPONENTS}
    row["reason"] = reason
    return row


def typed_row(values: dict[str, Any]) -> dict:
    """``values`` in the table's order and types; a non-finite float becomes 0.0.

    Raises:
        KeyError: ``values`` lacks a key of the table or has one it does not list (a programming error in the
            code that computes the row, never a property of the data).
    """
    missing, extra = set(RESULT_KEYS) - set(values), set(values) - set(RESULT_KEYS)
    if missing or extra:
        raise KeyError(
            f"HierR row keys differ from the component table: missing {sorted(missing)}, "
            f"not in the table {sorted(extra)}"
        )
    row = {}
    for key in RESULT_KEYS:
        value = _KIND[key](values[key])
        row[key] = 0.0 if isinstance(value, float) and not math.isfinite(value) else value
    return row
