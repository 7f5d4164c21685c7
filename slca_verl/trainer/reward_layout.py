"""Reward layouts: where a trajectory's reward components go in the token-level ``rm_scores``.

verl's estimators see only ``token_level_rewards`` (bs, L). A layout places the components of one reward dict on
response tokens so that an estimator can recover them by summing over segments:

``slca`` (for ``slca_grpo``, the default)
    execution reward ``r_tool`` on the last token of the tool segment, preference reward ``r_sum`` (which carries
    the no-call penalty) on the last token of the summary segment. Whenever both segments exist, the row sums to
    ``score`` (what plain ``grpo`` would see). Faithful to the authors, a component whose segment is absent is not
    placed: a rollout without tool calls contributes no execution reward, one cut before its summary no preference
    reward (the dropped amount is returned so the agent loop can report it). One exception: a negative ``r_sum``
    (the no-call penalty, or a negative total) with no summary segment lands on the last trained token, so a
    rollout whose last turn only looks like a call attempt cannot shed the penalty.
``slca_turns`` (for ``slca_grpo`` with ``algorithm.slca.credit=turn``)
    each tool turn's step reward (HierR's ``step_rewards``) on that turn's last token, ``r_sum`` as in ``slca``.
``scalar`` (for ``grpo``, ``grpo_vectorized``, ``gdpo`` ...)
    ``score`` on the last trained token, as verl's own agent loop does (verl puts it on the very last response token,
    which after a cut can be an observation token with response_mask 0; the last trained token is the one the
    policy produced).

Other estimators register their own layouts with :func:`register_layout`.

A layout is ``fn(segment_ids, reward) -> (rm_scores, dropped)`` with ``segment_ids`` a 1-D int tensor of length L
(:mod:`slca_verl.estimators.segments` ids), ``reward`` the reward dict, ``rm_scores`` a float32 tensor of length L and
``dropped`` the sum of components that had no segment to go to.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

import torch

from slca_verl.estimators.segments import SUMMARY, TOOL

LayoutFn = Callable[[torch.Tensor, dict], "tuple[torch.Tensor, float]"]
LAYOUT_REGISTRY: dict[str, LayoutFn] = {}


def finite_number(value: Any) -> float:
    """A value of a reward's extra info (int, bool, float, numpy or torch scalar, numeric string) as a finite float;
    anything that is not a finite number is 0.0 (a bad value must never fail a reward or a step)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def register_layout(name: str) -> Callable[[LayoutFn], LayoutFn]:
    """Register a reward layout under ``name`` (idempotent for the same function)."""

    def decorator(fn: LayoutFn) -> LayoutFn:
        existing = LAYOUT_REGISTRY.get(name)
        if existing is not None and existing is not fn and existing.__qualname__ != fn.__qualname__:
            raise ValueError(f"reward layout '{name}' is already registered to {existing.__qualname__}")
        LAYOUT_REGISTRY[name] = fn
        return fn

    return decorator


def get_layout(name: str) -> LayoutFn:
    try:
        return LAYOUT_REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown reward layout '{name}'; registered: {sorted(LAYOUT_REGISTRY)}") from None


def _hits(segment_ids: torch.Tensor, value: int | None) -> torch.Tensor:
    return ((segment_ids != 0) if value is None else (segment_ids == value)).nonzero()


def first_index(segment_ids: torch.Tensor, value: int | None = None) -> int | None:
    """Index of the first token with id ``value`` (or of the first trained token when None); None if absent."""
    idx = _hits(segment_ids, value)
    return int(idx[0]) if len(idx) else None


def last_index(segment_ids: torch.Tensor, value: int | None = None) -> int | None:
    """Index of the last token with id ``value`` (or of the last trained token when None); None if absent."""
    idx = _hits(segment_ids, value)
    return int(idx[-1]) if len(idx) else None


def place(rm_scores: torch.Tensor, index: int | None, amount: float) -> float:
    """Add ``amount`` at ``index``; return what could not be placed (``amount`` when index is None)."""
    if index is None:
        return float(amount)
    rm_scores[index] += float(amount)
    return 0.0


def summary_index(segment_ids: torch.Tensor, r_sum: float) -> int | None:
    """Where ``r_sum`` goes: the summary's last token; without a summary, a negative ``r_sum`` (a penalty) goes to
    the last trained token and anything else nowhere (None)."""
    index = last_index(segment_ids, SUMMARY)
    return last_index(segment_ids) if index is None and float(r_sum) < 0 else index


@register_layout("slca")
def slca_layout(segment_ids: torch.Tensor, reward: dict) -> tuple[torch.Tensor, float]:
    """r_tool -> end of the tool segment, r_sum -> end of the summary segment (a penalty without one: the last
    trained token)."""
    rm = torch.zeros(len(segment_ids), dtype=torch.float32)
    dropped = place(rm, last_index(segment_ids, TOOL), reward["r_tool"])
    dropped += place(rm, summary_index(segment_ids, reward["r_sum"]), reward["r_sum"])
    return rm, dropped


def tool_runs(segment_ids: torch.Tensor) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of TOOL ids, in order: the tool turns (every tool turn is followed by its tool
    response, so two turns never touch)."""
    tool = (segment_ids == TOOL).to(torch.int8)
    edges = torch.diff(torch.cat([torch.zeros(1, dtype=torch.int8), tool, torch.zeros(1, dtype=torch.int8)]))
    starts, ends = (edges == 1).nonzero().flatten().tolist(), (edges == -1).nonzero().flatten().tolist()
    return list(zip(starts, ends))


def step_reward_list(reward: dict) -> list[float] | None:
    """HierR's ``step_rewards`` (a JSON list) as finite floats; None when the reward has none or it is unreadable."""
    raw = reward.get("step_rewards")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else None
        except ValueError:
            return None
    if not isinstance(raw, (list, tuple)) or not raw:
        return None
    return [finite_number(v) for v in raw]


def credit_layout(layout: str, credit: Any) -> str:
    """The layout the agent loop writes: ``slca`` becomes ``slca_turns`` under ``algorithm.slca.credit=turn`` (the
    per-turn mode reads each turn's step reward on that turn); any other layout is kept."""
    return "slca_turns" if layout == "slca" and credit == "turn" else layout


@register_layout("slca_turns")
def slca_turns_layout(segment_ids: torch.Tensor, reward: dict) -> tuple[torch.Tensor, float]:
    """For ``slca_grpo``'s ``credit=turn``: HierR's ``step_rewards[k]`` -> the last token of tool turn k, r_sum -> the
    end of the summary. Without step rewards (a reward that has none, a rollout whose only tool token is the
    abstention decision) this is the ``slca`` layout; step rewards beyond the rollout's tool turns are dropped (and
    counted)."""
    steps = step_reward_list(reward)
    runs = tool_runs(segment_ids)
    if steps is None or not runs:
        return slca_layout(segment_ids, reward)
    rm = torch.zeros(len(segment_ids), dtype=torch.float32)
    dropped = sum(steps[len(runs) :])
    for (_, end), r in zip(runs, steps):
        place(rm, end - 1, r)
    dropped += place(rm, summary_index(segment_ids, reward["r_sum"]), reward["r_sum"])
    return rm, float(dropped)


@register_layout("scalar")
def scalar_layout(segment_ids: torch.Tensor, reward: dict) -> tuple[torch.Tensor, float]:
    """score -> the last trained token."""
    rm = torch.zeros(len(segment_ids), dtype=torch.float32)
    return rm, place(rm, last_index(segment_ids), reward["score"])
