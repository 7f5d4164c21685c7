"""Rewards the paper's baselines need, computed on the same parsed rollout as HierR (docs/method.md).

ToolPO (A_global from the success reward on every token, λ·A_action added on tool tokens)::

    toolpo_action  = Σ_g C(g) / |G|        C(g) = 1 if a distinct predicted call has g's name, every gold key,
                                           and loosely-equal values (greedy one-to-one); 1 - 1[calls] when |G| = 0
    toolpo_success = 1[ every gold call matched  ∧  #calls == |G|  ∧  format fully valid ]

RLTR (planner-only reward; summary tokens get no advantage)::

    rltr_completion = 1[ every gold call matched ]          (vacuously 1 when |G| = 0)
    rltr_repeat     = -0.1 * #(calls identical to the call right before them)
    rltr_error      = -0.2 * (max(#open, #close) - #valid blocks)
    rltr_total      = -1                                  if the format is not fully valid (RLTR Eq. 3)
                    = no_call_penalty                     if gold calls exist and none was made
                    = rltr_completion + rltr_repeat + rltr_error   otherwise

Both papers score success / completeness with an LLM checker; the authors' re-implementation used one too. Here
both are the rule-based stand-ins above (the gold calls are known), named as such in docs/rewards.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from slca_verl.rewards.execution import count_strict_matches
from slca_verl.rewards.parsing import ParsedCalls, ToolCall


@dataclass(frozen=True)
class RLTRWeights:
    repeat_penalty: float = 0.1
    error_penalty: float = 0.2
    invalid_format: float = -1.0


def _canonical(call: ToolCall) -> str:
    return call.name + "\x00" + json.dumps(call.arguments, sort_keys=True, default=str)


def consecutive_repeats(calls: list[ToolCall]) -> int:
    """Number of calls identical (name and arguments) to the call right before them."""
    keys = [_canonical(c) for c in calls]
    return sum(a == b for a, b in zip(keys, keys[1:]))


def baseline_rewards(
    parsed: ParsedCalls, gold: list[ToolCall], *, no_call: bool, no_call_penalty: float, rltr: RLTRWeights
) -> dict[str, float]:
    """ToolPO and RLTR terms for one rollout (see module docstring)."""
    pred = parsed.calls
    hits = count_strict_matches(pred, gold)
    if gold:
        action = hits / len(gold)
    else:
        action = 0.0 if pred else 1.0
    all_matched = hits == len(gold)
    success = float(all_matched and len(pred) == len(gold) and parsed.fully_valid and not no_call)

    completion = 0.0 if no_call else float(all_matched)
    repeat = 0.0 - rltr.repeat_penalty * consecutive_repeats(pred)
    error = 0.0 - rltr.error_penalty * (parsed.tag_denominator - parsed.valid_blocks)
    if not parsed.fully_valid:
        total = rltr.invalid_format
    elif no_call:
        total = no_call_penalty
    else:
        total = completion + repeat + error
    return {
        "toolpo_success": success,
        "toolpo_action": action,
        "rltr_completion": completion,
        "rltr_repeat": repeat,
        "rltr_error": error,
        "rltr_total": total,
    }
