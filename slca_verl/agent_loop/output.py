"""``SLCAAgentLoopOutput``: verl's ``AgentLoopOutput`` that carries per-token segment ids and lays out the reward.

verl's v1 rollout (``AgentLoopWorkerTQ._agent_loop_postprocess``) computes the reward first, then stores
``output.as_dict()`` in TransferQueue. This subclass's ``as_dict`` adds

    slca_segment_ids   (response_length,) int8   OBSERVATION=0 / TOOL=1 / SUMMARY=2 per response token
    rm_scores          (response_length,) float32   the reward components placed by a reward layout
                       (``slca``: r_tool at the end of the tool segment, r_sum at the end of the summary)

so ``slca_sync`` can fetch the ids and ``slca_grpo`` recovers each component by summing over its segment.

A failed judgment is not a zero: with the ``slca`` layout, a rollout whose judge call failed (HierR's
``judge_failed`` = 1: timeout, transport error, no rating) has its summary tokens written as OBSERVATION, so its
summary takes no part in its group's statistics and gets no advantage (its tool segment is unaffected);
``extra_fields["slca_summary_masked"]`` = 1 marks it, and ``reward_extra/judge_failed/mean`` (logged by ``slca_sync``)
is how often it happened.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

from slca_verl.estimators.segments import OBSERVATION, SEGMENT_IDS_FIELD, SUMMARY
from slca_verl.trainer.reward_layout import LAYOUT_REGISTRY, finite_number, get_layout

logger = logging.getLogger(__name__)

#: Modules that register further reward layouts when imported (looked up only for an unknown layout name).
LAYOUT_MODULES = ("slca_verl.estimators.baselines",)


def resolve_layout(name: str):
    """The reward layout ``name``; imports :data:`LAYOUT_MODULES` first when it is not registered yet."""
    if name not in LAYOUT_REGISTRY:
        for module in LAYOUT_MODULES:
            try:
                importlib.import_module(module)
            except ImportError:
                pass
    return get_layout(name)


def segment_ids_for_turns(response_mask: list[int], turns: list[tuple[int, int, int]]) -> list[int]:
    """Per-token segment ids from the assistant turns' token spans.

    Args:
        response_mask: the final (possibly truncated) response mask, length L.
        turns: ``(start, end, kind)`` per assistant turn, positions in the response, kind TOOL or SUMMARY. Spans may
            run past L (cut by the response length); tokens with mask 0 inside a span (boundary tokens) stay
            OBSERVATION.

    Returns:
        list of L ints in {OBSERVATION, TOOL, SUMMARY}; non-zero exactly where response_mask is 1 inside a span.
    """
    L = len(response_mask)
    ids = [OBSERVATION] * L
    for start, end, kind in turns:
        for p in range(max(0, start), min(end, L)):
            if response_mask[p]:
                ids[p] = kind
    return ids


class SLCAAgentLoopOutput(AgentLoopOutput):
    """Agent-loop output with explicit segment ids and a segment-level reward layout.

    Example::

        out = SLCAAgentLoopOutput(prompt_ids=[1], response_ids=[5, 6, 7], response_mask=[1, 0, 1],
                                  metrics={}, segment_ids=[1, 0, 2])
        out.reward_score = 1.5
        out.extra_fields["reward_extra_info"] = {"score": 1.5, "r_tool": 0.9, "r_sum": 0.6}
        out.as_dict()["rm_scores"]   # tensor([0.9, 0.0, 0.6])
    """

    segment_ids: list[int] = []
    """One segment id per response token (same length as response_mask)."""
    reward_layout: str = "slca"
    """Name of the reward layout (slca_verl.trainer.reward_layout) applied to the reward in ``as_dict``."""

    def as_dict(self) -> dict[str, Any]:
        output = super().as_dict()
        output.pop("segment_ids", None)
        output.pop("reward_layout", None)
        ids = torch.tensor(self.segment_ids, dtype=torch.int8)
        if ids.shape != output["response_mask"].shape:
            raise ValueError(
                f"slca_tool_agent: {len(self.segment_ids)} segment ids for {output['response_mask'].shape[0]} "
                "response tokens; the agent loop must write one id per response token"
            )
        if self.reward_score is not None:
            ids, masked = self.scored_segment_ids(ids)
            rm_scores, dropped = self.layout_reward(ids)
            output["rm_scores"] = rm_scores
            output["extra_fields"]["slca_reward_dropped"] = dropped
            output["extra_fields"]["slca_summary_masked"] = int(masked)
        output[SEGMENT_IDS_FIELD] = ids
        return output

    def scored_segment_ids(self, ids: torch.Tensor) -> tuple[torch.Tensor, bool]:
        """``(ids, masked)``: with the ``slca`` layout and a failed judgment, the summary tokens become OBSERVATION
        (no preference reward, no advantage, outside the group's summary statistics); otherwise ``ids`` as given."""
        info = self.extra_fields.get("reward_extra_info") or {}
        failed = finite_number(info.get("judge_failed", 0)) != 0
        if self.reward_layout not in ("slca", "slca_turns") or not failed or not bool((ids == SUMMARY).any()):
            return ids, False
        return torch.where(ids == SUMMARY, torch.full_like(ids, OBSERVATION), ids), True

    def layout_reward(self, ids: torch.Tensor | None = None) -> tuple[torch.Tensor, float]:
        """``(rm_scores (L,) float32, dropped)`` for the computed reward, by ``reward_layout``, over ``ids`` (the
        output's own segment ids when None).

        Raises:
            ValueError: the layout needs components (e.g. r_tool, r_sum) that the reward did not return.
        """
        info = dict(self.extra_fields.get("reward_extra_info") or {})
        reward = {**info, "score": float(self.reward_score)}
        try:
            ids = torch.tensor(self.segment_ids, dtype=torch.int8) if ids is None else ids
            return resolve_layout(self.reward_layout)(ids, reward)
        except KeyError as e:
            raise ValueError(
                f"slca_tool_agent: reward layout '{self.reward_layout}' needs the reward component {e} in the "
                f"reward's extra info, which has {sorted(info)}. Use the HierR reward "
                "(reward.custom_reward_function.path=pkg://slca_verl.agent_loop.reward, name=compute_score) or set "
                "reward_layout: scalar in the agent loop YAML."
            ) from None
