"""HierR: the hierarchical reward of SLCA-GRPO for one rollout, with every part it was made of.

DESIGN §2::

    R_tool = Σ_c w_c * c,   c ∈ {fmt, name_f1, key, value, parallel}                (slca_verl.rewards.execution)
    R_sum  = (rating - 1) / 4 from the judge; 0 without a tool response, with a reply under 10 characters,
             or when the judge fails (counted in ``judge_failed``). With ``judge_direct_replies`` a reply
             written without any call on a row whose gold has no calls is judged too (the judge sees no tool
             response and rates whether the reply answers or declines appropriately)
    score  = w_tool * R_tool + w_sum * R_sum                                         (both weights 1.0)

    no-call penalty: gold calls exist and the assistant wrote no <tool_call> tag →
        score = -0.5, R_tool = 0, R_sum = -0.5 (the penalty goes to the summary segment)
    any other negative total (negative weights) is routed the same way: R_tool = 0, R_sum = score.

    success = 1[score / (w_tool + w_sum) >= tau]                                     (tau = 0.9)

    gold that cannot be read (a call without a name, arguments that are not an object, a step that is not a list,
    no gold_tool_calls, a ground truth that is not a dict): every component 0, gold_invalid = 1 and the reason, so
    the row teaches nothing instead of being scored as an irrelevance row.

The final reply judged is the text of the last assistant turn, after ``<think>`` stripping, when that turn wrote
no tool call (an episode cut on a tool-call turn has no summary). Tool-call tags are counted in assistant turns only,
so text inside tool responses can never count as a call.

Example (the agent loop knows its turns, so it skips re-parsing decoded text)::

    out = await score_trajectory(
        ['<tool_call>\\n{"name": "weather", "arguments": {"city": "Paris"}}\\n</tool_call>', "It is 21 °C in Paris."],
        ['{"temp_c": 21}'],
        {"allowed_tools": ["weather"], "gold_tool_calls": [[{"name": "weather", "arguments": {"city": "paris"}}]],
         "question_content": "Weather in Paris?"},
        judge=OfflineProxyJudge(),
    )
    out["score"], out["r_tool"], out["r_sum"]
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

from slca_verl.rewards.baselines import RLTRWeights, baseline_rewards
from slca_verl.rewards.execution import (
    ExecutionWeights,
    execution_components,
    execution_reward,
    unmeasured_components,
)
from slca_verl.rewards.judge import Judge, Verdict
from slca_verl.rewards.parsing import (
    OPEN_TAG,
    CLOSE_TAG,
    parse_ground_truth,
    parse_tool_calls,
    split_decoded_response,
    strip_think,
)

logger = logging.getLogger(__name__)

# Every row carries exactly these keys (verl needs the same reward_extra_info keys on every row).
RESULT_KEYS = (
    "score", "r_tool", "r_sum",
    "fmt", "name_f1", "key", "value", "parallel",
    "no_call", "redundant_calls", "num_calls", "num_gold_calls", "num_tool_responses", "format_valid",
    "judge_rating", "judge_failed", "judge_used", "success",
    "toolpo_success", "toolpo_action",
    "rltr_completion", "rltr_repeat", "rltr_error", "rltr_total",
    "gold_invalid", "gold_format", "reason",
)  # fmt: skip


@dataclass(frozen=True)
class HierRConfig:
    """Every knob of HierR; defaults are the paper's."""

    weights: ExecutionWeights = field(default_factory=ExecutionWeights)
    w_tool: float = 1.0
    w_sum: float = 1.0
    no_call_penalty: float = -0.5
    min_reply_chars: int = 10
    success_tau: float = 0.9
    accept_string_arguments: bool = False
    judge_direct_replies: bool = False
    rltr: RLTRWeights = field(default_factory=RLTRWeights)

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> "HierRConfig":
        """Build from flat keys (verl's ``reward_kwargs``): ``w_tool``, ``no_call_penalty``, …, ``weights={fmt:…}``,
        ``rltr={repeat_penalty:…}``. Unknown top-level keys are ignored (they belong to the judge or to verl).

        Raises:
            ValueError: a value of the wrong type or not finite, or an unknown key under ``weights`` / ``rltr``,
                naming ``reward_kwargs.<key>`` (such a value used to make every row an "internal error" scored 0).
        """
        simple = {f.name for f in fields(cls)} - {"weights", "rltr"}
        out = {k: _checked_setting(k, kwargs[k], cls.__dataclass_fields__[k].default)
               for k in simple if k in kwargs and kwargs[k] is not None}  # fmt: skip
        for key, sub_cls in (("weights", ExecutionWeights), ("rltr", RLTRWeights)):
            if not kwargs.get(key):
                continue
            given = kwargs[key]
            if not isinstance(given, dict):
                raise ValueError(f"HierR: reward_kwargs.{key} must be a mapping, got {given!r}")
            known = {f.name: f.default for f in fields(sub_cls)}
            unknown = sorted(set(given) - set(known))
            if unknown:
                raise ValueError(f"HierR: unknown keys under reward_kwargs.{key}: {unknown}; known: {sorted(known)}")
            out[key] = sub_cls(**{k: _checked_setting(f"{key}.{k}", v, known[k]) for k, v in given.items()})
        return cls(**out)


def _checked_setting(key: str, value: Any, default: Any) -> Any:
    """``value`` as the type of ``default`` (an int is a valid float), or a ValueError naming the key."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"HierR: reward_kwargs.{key}={value!r} must be true or false")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"HierR: reward_kwargs.{key}={value!r} must be a number")
    if isinstance(default, int):
        if value != int(value):
            raise ValueError(f"HierR: reward_kwargs.{key}={value!r} must be an integer")
        return int(value)
    if not math.isfinite(value):
        raise ValueError(f"HierR: reward_kwargs.{key}={value!r} must be finite")
    return float(value)


def empty_result(reason: str) -> dict:
    """All-zero row with a reason (for input that cannot be scored at all)."""
    row = {k: 0.0 for k in RESULT_KEYS}
    row.update({k: 0 for k in ("no_call", "redundant_calls", "num_calls", "num_gold_calls", "num_tool_responses",
                               "format_valid", "judge_rating", "judge_failed", "judge_used", "success",
                               "gold_invalid")})
    row["gold_format"] = ""
    row["reason"] = reason
    return row


def final_reply(assistant_texts: list[str]) -> str:
    """The summary candidate: the last assistant turn, ``<think>`` stripped, if it wrote no tool call; else ""."""
    if not assistant_texts:
        return ""
    last = strip_think(assistant_texts[-1])
    if OPEN_TAG in last or CLOSE_TAG in last:
        return ""
    return last.strip()


async def score_trajectory(
    assistant_texts: list[str],
    tool_responses: list[str],
    ground_truth: Any,
    *,
    judge: Judge | None = None,
    config: HierRConfig | None = None,
    question: str | None = None,
) -> dict:
    """HierR reward of one rollout given its pieces (see the module docstring for the formulas).

    Args:
        assistant_texts: the assistant turns in order (raw text, ``<think>`` allowed).
        tool_responses: every tool response text in order (flat).
        ground_truth: the authors' dict (or its JSON string; numpy arrays tolerated).
        judge: preference judge; None gives R_sum = 0 (``judge_used`` = 0).
        config: weights and penalties.
        question: overrides ``ground_truth["question_content"]`` for the judge.

    Returns:
        dict with the keys of :data:`RESULT_KEYS`, all JSON-serialisable scalars; ``reason`` is "" when the input was
        fine, else what was wrong (bad ground truth, invalid tool-call blocks, judge failure).
    """
    try:
        return await _score(assistant_texts, tool_responses, ground_truth, judge, config or HierRConfig(), question)
    except Exception as e:  # last line of defence: a reward must never raise inside a training step
        logger.exception("HierR could not score a rollout")
        return empty_result(f"internal error: {type(e).__name__}: {str(e)[:200]}")


async def _score(assistant_texts, tool_responses, ground_truth, judge, cfg: HierRConfig, question) -> dict:
    assistant_texts = [t if isinstance(t, str) else str(t) for t in (assistant_texts or [])]
    tool_responses = [t if isinstance(t, str) else str(t) for t in (tool_responses or [])]
    gt = parse_ground_truth(ground_truth)
    reasons = list(gt.reasons)
    if gt.reasons and gt.reasons[0].startswith("ground_truth is a"):
        return {**empty_result(reasons[0]), "gold_invalid": 1}
    if gt.gold_errors:  # scoring it as an irrelevance row would reward not calling: 0 for every rollout instead
        return {**empty_result("unreadable gold: " + "; ".join(gt.gold_errors[:3])[:400]), "gold_invalid": 1}

    text = "\n".join(strip_think(t) for t in assistant_texts)
    parsed = parse_tool_calls(text, gt.allowed_tools, accept_string_arguments=cfg.accept_string_arguments)
    reasons += parsed.errors[:3] + ([f"… {len(parsed.errors) - 3} more invalid blocks"] if len(parsed.errors) > 3 else [])
    gold = gt.gold_calls
    pred = parsed.calls
    # only an opening tag starts a call: a lone </tool_call> is no call (it used to dodge the no-call penalty)
    no_call = bool(gold) and parsed.open_tags == 0

    comps = execution_components(parsed, gt.gold_steps)
    unmeasured = unmeasured_components(gt.gold_format, len(gold))
    comps.update({c: 0.0 for c in unmeasured})  # reported as 0: the gold cannot tell (docs/rewards.md, gold forms)
    baselines = baseline_rewards(parsed, gold, no_call=no_call, no_call_penalty=cfg.no_call_penalty, rltr=cfg.rltr)
    overlap = sum((Counter(p.name for p in pred) & Counter(g.name for g in gold)).values())

    verdict, judge_used = Verdict(0), 0
    reply = final_reply(assistant_texts)
    if no_call:
        comps = {k: 0.0 for k in comps}
        r_tool, r_sum, score = 0.0, cfg.no_call_penalty, cfg.no_call_penalty
    else:
        r_tool = execution_reward(comps, cfg.weights, unmeasured)
        # judge_direct_replies: on an irrelevance row a reply without any call is judged too (docs/rewards.md)
        direct = cfg.judge_direct_replies and not gold and parsed.open_tags == 0 and not tool_responses
        if judge is not None and (tool_responses or direct) and len(reply) >= cfg.min_reply_chars:
            judge_used = 1
            verdict = await judge.rate(question if question is not None else gt.question, tool_responses, reply)
            if verdict.failed:
                reasons.append(verdict.reason)
        r_sum = verdict.r_sum
        score = cfg.w_tool * r_tool + cfg.w_sum * r_sum
        if score < 0:  # DESIGN §2: a negative total goes to the summary segment
            r_tool, r_sum = 0.0, score
    norm = cfg.w_tool + cfg.w_sum
    row = {
        "score": float(score),
        "r_tool": float(r_tool),
        "r_sum": float(r_sum),
        **{k: float(v) for k, v in comps.items()},
        "no_call": int(no_call),
        "redundant_calls": int(len(pred) - overlap),
        "num_calls": len(pred),
        "num_gold_calls": len(gold),
        "num_tool_responses": len(tool_responses),
        "format_valid": int(parsed.fully_valid),
        "judge_rating": int(verdict.rating),
        "judge_failed": int(verdict.failed),
        "judge_used": judge_used,
        "success": int(norm > 0 and score / norm >= cfg.success_tau - 1e-12),
        **{k: float(v) for k, v in baselines.items()},
        "gold_invalid": 0,
        "gold_format": gt.gold_format,
        "reason": "; ".join(dict.fromkeys(r for r in reasons if r))[:500],
    }
    for k, v in row.items():
        if isinstance(v, float) and not math.isfinite(v):
            row[k] = 0.0
    assert tuple(row) == RESULT_KEYS, "HierR result keys drifted from RESULT_KEYS"
    return row


async def score_decoded(solution_str: str, ground_truth: Any, *, judge: Judge | None = None,
                        config: HierRConfig | None = None, question: str | None = None) -> dict:
    """HierR reward of a decoded multi-turn response (assistant turns and rendered tool responses in one string)."""
    traj = split_decoded_response(solution_str)
    return await score_trajectory(
        traj.assistant_texts, traj.tool_responses, ground_truth, judge=judge, config=config, question=question
    )


def score_trajectory_sync(*args, **kwargs) -> dict:
    """:func:`score_trajectory` for code without an event loop (scripts, benchmarks)."""
    return asyncio.run(score_trajectory(*args, **kwargs))
