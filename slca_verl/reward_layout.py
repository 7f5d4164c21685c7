"""Reward layouts: where a trajectory's reward components go in the token-level ``rm_scores``.

verl's estimators see only ``token_level_rewards`` (bs, L). A layout places the components of one reward dict on
response tokens so that an estimator can recover them by summing over segments:

``slca`` (for ``slca_grpo``, the default)
    execution reward ``r_tool`` on the last token of the tool segment, preference reward ``r_sum`` (which carries
    the no-call penalty) on the last token of the summary segment. Whenever both segments exist, the row sums to
    ``score`` (what plain ``grpo`` would see). Faithful to the authors, a component whose segment is absent is not
    placed: a rollout without tool calls contributes no execution reward, one cut before its summary no preference
    reward (the dropped amount is returned so the agent loop can report it).
``scalar`` (for ``grpo``, ``grpo_vectorized``, ``gdpo`` ...)
    ``score`` on the last trained token, as verl's own agent loop does (verl puts it on the very last response token,
    which after a cut can be an observation token with response_mask 0; the last trained token is the one the
    policy produced).

Other estimators register their own layouts with :func:`register_layout`.

A layout is ``fn(segment_ids, reward) -> (rm_scores, dropped)`` with ``segment_ids`` a 1-D int tensor of length L
(:mod:`slca_verl.segments` ids), ``reward`` the reward dict, ``rm_scores`` a float32 tensor of length L and
``dropped`` the sum of components that had no segment to go to.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from slca_verl.segments import SUMMARY, TOOL

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


@register_layout("slca")
def slca_layout(segment_ids: torch.Tensor, reward: dict) -> tuple[torch.Tensor, float]:
    """r_tool -> end of the tool segment, r_sum -> end of the summary segment."""
    rm = torch.zeros(len(segment_ids), dtype=torch.float32)
    dropped = place(rm, last_index(segment_ids, TOOL), reward["r_tool"])
    dropped += place(rm, last_index(segment_ids, SUMMARY), reward["r_sum"])
    return rm, dropped


@register_layout("scalar")
def scalar_layout(segment_ids: torch.Tensor, reward: dict) -> tuple[torch.Tensor, float]:
    """score -> the last trained token."""
    rm = torch.zeros(len(segment_ids), dtype=torch.float32)
    return rm, place(rm, last_index(segment_ids), reward["score"])
