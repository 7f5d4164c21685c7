"""HierR execution (process) reward: how well the predicted tool calls match the gold calls.

docs/method.md, as the authors' code computes it::

    R_tool = w_fmt*fmt + w_name*nameF1 + w_key*key + w_value*value + w_par*parallel   (default 0.10/0.25/0.15/0.20/0.30)

    fmt      = valid <tool_call> blocks / max(#open tags, #close tags)          (0 without tags)
    nameF1   = 2*|P ∩ G| / (|P| + |G|) over the multisets of tool names       (1 when both empty, 0 when one is)
    key      = mean over gold calls with arguments of Jaccard(keys(pred), keys(gold)) of the matched pred call
    value    = mean over gold calls with arguments of #(shared keys with loosely-equal values) / #keys(gold)
    parallel = 1[#calls in the first valid predicted block == #calls in the first gold step]
               (formats other than hermes write one call per block: there a turn's calls are the step)

Gold that does not carry a component's information leaves it unmeasured (HierR's ``gold_format``): names-only
gold has no arguments, so key and value are not scored; flat gold with more than one call has no step structure,
so parallel is not scored. Then R_tool = Σ_{c measured} w_c * c / Σ_{c measured} w_c (still in [0, 1]), and the
unmeasured components are reported as 0. Nested gold measures everything (the formula above, unchanged).

Matching for key/value is greedy in gold order: each gold call takes the unused predicted call with the same name
that maximises key+value (a strictly positive sum is needed to take it). key = value = 1 when no gold call has
arguments; key = value = 0 when gold calls have arguments and there is no predicted call.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from slca_verl.rewards.parsing import ParsedCalls, ToolCall

_BOOL_STRINGS = {"true": True, "false": False, "1": True, "0": False}


@dataclass(frozen=True)
class ExecutionWeights:
    """Weights of the five execution components (they sum to 1 by default, so R_tool is in [0, 1])."""

    fmt: float = 0.10
    name: float = 0.25
    key: float = 0.15
    value: float = 0.20
    parallel: float = 0.30


def loose_equal(pred: Any, gold: Any) -> bool:
    """Loose value equality, tried in order:

    1. both None → equal; one None → not equal;
    2. ``str(x).strip().lower()`` equal (so "Paris " == "paris", True == "true");
    3. both parse as floats within 1e-9 (10 == "10" == 10.0);
    4. both are boolean strings ("true"/"false"/"1"/"0") with the same truth value;
    5. both lists/dicts with the same key-sorted JSON.
    """
    if pred is None or gold is None:
        return pred is None and gold is None
    ps, gs = _lower(pred), _lower(gold)
    if ps == gs:
        return True
    try:
        pf, gf = float(pred), float(gold)
        if abs(pf - gf) < 1e-9:
            return True
    except (TypeError, ValueError, OverflowError):
        pass
    if ps in _BOOL_STRINGS and gs in _BOOL_STRINGS:
        return _BOOL_STRINGS[ps] == _BOOL_STRINGS[gs]
    if isinstance(pred, (list, dict)) and isinstance(gold, (list, dict)):
        try:
            return json.dumps(pred, sort_keys=True) == json.dumps(gold, sort_keys=True)
        except (TypeError, ValueError):
            return False
    return False


def loose_key(x: Any) -> Any:
    """A hashable stand-in for :func:`loose_equal`, so equal values can be counted in a dict (linear time where
    pairwise ``loose_equal`` is quadratic):

    - None → None;
    - lists and dicts → their key-sorted JSON (rule 5);
    - anything else → t = ``str(x).strip().lower()`` (rule 2), then "true" / "1" → 1.0 and "false" / "0" → 0.0
      (rule 4), text that parses as a finite number → that number rounded to 9 decimals (rule 3), else t.

    Values that are ``loose_equal`` get the same key, except two numbers within 1e-9 of each other on either side of
    a rounding edge, and a list beside the text of its own ``str``; the key also makes "true" and "1.0" alike (both
    are 1), which ``loose_equal`` alone, not being transitive, does not.
    """
    if x is None:
        return None
    if isinstance(x, (list, dict)):
        try:
            return ("json", json.dumps(x, sort_keys=True))
        except (TypeError, ValueError):
            return ("text", _lower(x))
    text = _lower(x)
    if text in _BOOL_STRINGS:
        return float(_BOOL_STRINGS[text])
    try:
        number = float(text)
    except (ValueError, OverflowError):
        return text
    return round(number, 9) if math.isfinite(number) else text


def _lower(x: Any) -> str:
    try:
        return str(x).strip().lower()
    except Exception:  # a pathological __str__ must not break a reward
        return repr(type(x))


def format_score(parsed: ParsedCalls) -> float:
    """fmt = valid blocks / max(#open, #close); 0 when there is no tag."""
    denom = parsed.tag_denominator
    return parsed.valid_blocks / denom if denom else 0.0


def name_f1(pred_names: list[str], gold_names: list[str]) -> float:
    """Multiset F1 of tool names: 2*|P ∩ G| / (|P| + |G|); 1.0 when both are empty."""
    if not pred_names and not gold_names:
        return 1.0
    overlap = sum((Counter(pred_names) & Counter(gold_names)).values())
    return 2.0 * overlap / (len(pred_names) + len(gold_names))


def _key_value(pred_args: dict, gold_args: dict) -> tuple[float, float]:
    """(Jaccard of key sets, #shared keys with loosely-equal values / #gold keys) for one pair of calls."""
    pk, gk = set(pred_args), set(gold_args)
    key = len(pk & gk) / len(pk | gk)  # gold_args is non-empty, so the union is too
    value = sum(loose_equal(pred_args[k], gold_args[k]) for k in pk & gk) / len(gk)
    return key, value


def key_value_scores(pred: list[ToolCall], gold: list[ToolCall]) -> tuple[float, float]:
    """Greedy key / value scores (see module docstring). Returns (key, value), both in [0, 1]."""
    gold_with_args = [g for g in gold if g.arguments]
    if not gold_with_args:
        return 1.0, 1.0
    used: set[int] = set()
    key_sum = value_sum = 0.0
    for g in gold_with_args:
        best, best_idx = (0.0, 0.0), -1
        for i, p in enumerate(pred):
            if i in used or p.name != g.name:
                continue
            kv = _key_value(p.arguments, g.arguments)
            if sum(kv) > sum(best):
                best, best_idx = kv, i
        if best_idx >= 0:
            used.add(best_idx)
        key_sum += best[0]
        value_sum += best[1]
    n = len(gold_with_args)
    return key_sum / n, value_sum / n


def parallel_score(pred_blocks: list[list[ToolCall]], gold_steps: list[list[ToolCall]]) -> float:
    """1 if the first valid predicted block has as many calls as the first gold step (0 == 0 counts)."""
    n_pred = len(pred_blocks[0]) if pred_blocks else 0
    n_gold = len(gold_steps[0]) if gold_steps else 0
    return 1.0 if n_pred == n_gold else 0.0


def strict_call_match(pred: ToolCall, gold: ToolCall) -> bool:
    """ToolPO's C(call): same name, every gold key present, every gold value loosely equal."""
    return pred.name == gold.name and all(
        k in pred.arguments and loose_equal(pred.arguments[k], v) for k, v in gold.arguments.items()
    )


def count_strict_matches(pred: list[ToolCall], gold: list[ToolCall]) -> int:
    """Greedy one-to-one count of gold calls that have a strictly matching predicted call."""
    used: set[int] = set()
    hits = 0
    for g in gold:
        for i, p in enumerate(pred):
            if i not in used and strict_call_match(p, g):
                used.add(i)
                hits += 1
                break
    return hits


def unmeasured_components(gold_format: str, num_gold_calls: int) -> frozenset[str]:
    """Components the gold cannot measure: key/value for names-only gold, parallel for multi-call flat or
    names-only gold (no step structure; a single call is one step either way)."""
    out = set()
    if gold_format == "names":
        out |= {"key", "value"}
    if gold_format in ("flat", "names") and num_gold_calls > 1:
        out.add("parallel")
    return frozenset(out)


def execution_components(parsed: ParsedCalls, gold_steps: list[list[ToolCall]]) -> dict[str, float]:
    """The five components ``fmt, name_f1, key, value, parallel``, each in [0, 1]."""
    pred, gold = parsed.calls, [c for s in gold_steps for c in s]
    key, value = key_value_scores(pred, gold)
    return {
        "fmt": format_score(parsed),
        "name_f1": name_f1([c.name for c in pred], [c.name for c in gold]),
        "key": key,
        "value": value,
        "parallel": parallel_score(parsed.blocks if parsed.steps is None else parsed.steps, gold_steps),
    }


_WEIGHT_OF = {"fmt": "fmt", "name_f1": "name", "key": "key", "value": "value", "parallel": "parallel"}


def execution_reward(
    components: dict[str, float], weights: ExecutionWeights, unmeasured: frozenset[str] = frozenset()
) -> float:
    """R_tool = Σ_c w_c * component_c, or over the measured components only, renormalised (module docstring)."""
    measured = [c for c in _WEIGHT_OF if c not in unmeasured]
    r = sum(getattr(weights, _WEIGHT_OF[c]) * components[c] for c in measured)
    if unmeasured:  # renormalise over what the gold can measure (nested gold: the plain weighted sum)
        total = sum(getattr(weights, _WEIGHT_OF[c]) for c in measured)
        r = r / total if total else 0.0
    return r if math.isfinite(r) else 0.0
