"""HierR for ``slca_tool_agent`` rollouts: ``compute_score`` for ``reward.custom_reward_function``.

    reward.custom_reward_function.path=pkg://slca_verl.agent_loop.reward
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.judge=llm ...      # the same reward_kwargs as slca_verl.rewards

The agent loop already knows its assistant turns and tool responses and passes them in
``extra_fields["slca_trajectory"]``, which verl's reward managers merge into ``extra_info``, with its tool-call format
and, for every format but hermes, the calls it parsed and ran in each turn. This function scores those pieces with
:func:`slca_verl.rewards.score_trajectory` instead of re-splitting decoded text; rows from other
agent loops fall back to :func:`slca_verl.rewards.compute_score`. The agent's per-trajectory metrics are added as
``agent_<key>`` (0 for rows without them), so verl aggregates them with the other reward keys (same keys on every
row). The function keeps the name ``compute_score``: it is the default of ``reward.custom_reward_function.name`` in
verl's trainer config, and the same entry point as :func:`slca_verl.rewards.compute_score` for other agent loops.
"""

from __future__ import annotations

from typing import Any

from slca_verl.agent_loop.loop import METRIC_KEYS
from slca_verl.rewards import compute_score as decoded_compute_score
from slca_verl.rewards.compute_score import get_judge
from slca_verl.rewards.hierr import HierRConfig, empty_result, score_trajectory
from slca_verl.toolcall.rows import plain
from slca_verl.trainer.reward_layout import finite_number

TRAJECTORY_KEY = "slca_trajectory"
METRICS_KEY = "slca_agent_metrics"


async def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, **kwargs
) -> dict:
    """HierR of one rollout from the agent loop's structured pieces (decoded text when they are absent).

    Returns:
        HierR's dict (``score``, ``r_tool``, ``r_sum``, …) plus ``agent_<metric>`` for every agent metric.
    """
    extra_info = extra_info if isinstance(extra_info, dict) else {}
    pieces = extra_info.get(TRAJECTORY_KEY)
    if isinstance(pieces, dict):
        kwargs = {k: plain(v) for k, v in kwargs.items()}
        ground_truth = plain(ground_truth)
        if ground_truth is None:
            result = empty_result("ground_truth is None")
        else:
            result = await score_trajectory(
                list(pieces.get("assistant_texts") or []),
                list(pieces.get("tool_responses") or []),
                ground_truth,
                judge=get_judge(kwargs),
                config=HierRConfig.from_kwargs(kwargs),
                call_format=pieces.get("format"),  # the loop's multi_turn.format, and below what it parsed and ran
                parsed_turns=pieces.get("parsed_turns"),
            )
    else:
        result = await decoded_compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
    metrics = extra_info.get(METRICS_KEY) if isinstance(extra_info.get(METRICS_KEY), dict) else {}
    result.update({f"agent_{k}": _count(metrics.get(k, 0)) for k in METRIC_KEYS})
    return result


def _count(value: Any) -> int:
    """A metric as an int; anything that is not a finite number counts as 0 (a metric must never fail a reward)."""
    return int(finite_number(value))
