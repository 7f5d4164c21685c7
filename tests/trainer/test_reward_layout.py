"""Reward layouts put each component where its estimator sums it up."""

import numpy as np
import pytest
import torch

from slca_verl.estimators.segments import OBSERVATION as O
from slca_verl.estimators.segments import SUMMARY as S
from slca_verl.estimators.segments import TOOL as T
from slca_verl.estimators.slca_grpo import compute_slca_grpo_advantage
from slca_verl.trainer.reward_layout import get_layout


def ids(*xs):
    return torch.tensor(xs, dtype=torch.int8)


def test_slca_layout_puts_execution_reward_at_tool_end_and_preference_at_summary_end():
    seg = ids(T, T, O, O, T, O, S, S, S, O)
    rm, dropped = get_layout("slca")(seg, {"r_tool": 0.8, "r_sum": 0.5, "score": 1.3})
    assert rm.tolist() == pytest.approx([0, 0, 0, 0, 0.8, 0, 0, 0, 0.5, 0])
    assert dropped == 0.0
    assert rm.sum().item() == pytest.approx(1.3)


def test_slca_layout_drops_components_without_a_segment_and_reports_them():
    rm, dropped = get_layout("slca")(ids(S, S, S), {"r_tool": 0.7, "r_sum": 0.25, "score": 0.95})
    assert rm.tolist() == pytest.approx([0, 0, 0.25]) and dropped == pytest.approx(0.7)
    rm, dropped = get_layout("slca")(ids(T, T, O, O), {"r_tool": 0.4, "r_sum": 0.0, "score": 0.4})
    assert rm.tolist() == pytest.approx([0, 0.4, 0, 0]) and dropped == 0.0


def test_scalar_layout_uses_the_last_trained_token_not_a_trailing_observation():
    rm, dropped = get_layout("scalar")(ids(T, T, O, O), {"score": 0.9})
    assert rm.tolist() == pytest.approx([0, 0.9, 0, 0]) and dropped == 0.0


def test_unknown_layout_names_the_registered_ones():
    with pytest.raises(ValueError, match="registered: .*'scalar'.*'slca'"):
        get_layout("nope")


def test_slca_grpo_recovers_the_components_the_layout_placed():
    """Two rollouts of one group: slca_grpo's tool advantage follows r_tool alone, summary follows r_sum alone."""
    seg = torch.stack([ids(T, T, O, S, S), ids(T, T, O, S, S)])
    rewards = [{"r_tool": 1.0, "r_sum": 0.0}, {"r_tool": 0.0, "r_sum": 1.0}]
    rm = torch.stack([get_layout("slca")(seg[i], rewards[i])[0] for i in range(2)])
    adv, _ = compute_slca_grpo_advantage(
        token_level_rewards=rm, response_mask=(seg != O).long(), index=np.array(["g", "g"]), segment_ids=seg
    )
    assert adv[0, 0] > 0 > adv[1, 0]  # better tool calls -> positive tool advantage
    assert adv[0, 3] < 0 < adv[1, 3]  # better summary -> positive summary advantage


def test_a_penalty_without_a_summary_lands_on_the_last_trained_token_and_nothing_else_moves():
    """A rollout whose last turn only looks like a call has no summary segment: its no-call penalty (-0.5 in r_sum)
    goes to the last trained token instead of being dropped; a zero or positive r_sum without a summary is still
    not placed (the authors' rule)."""
    ids = torch.tensor([1, 1, 0, 0, 1, 1, 0])  # tool, observation, tool (the marked last turn), padding
    layout = get_layout("slca")
    rm, dropped = layout(ids, {"r_tool": 0.0, "r_sum": -0.5, "score": -0.5})
    assert rm.tolist() == [0, 0, 0, 0, 0, -0.5, 0] and dropped == 0.0
    rm, dropped = layout(ids, {"r_tool": 0.4, "r_sum": 0.25, "score": 0.65})
    assert rm.tolist() == pytest.approx([0, 0, 0, 0, 0, 0.4, 0]) and dropped == pytest.approx(0.25)
    with_summary = torch.tensor([1, 1, 0, 2, 2, 0, 0])
    rm, dropped = layout(with_summary, {"r_tool": 0.0, "r_sum": -0.5, "score": -0.5})
    assert rm.tolist() == [0, 0, 0, 0, -0.5, 0, 0] and dropped == 0.0
    rm, _ = get_layout("slca_turns")(ids, {"r_tool": 0.0, "r_sum": -0.5, "score": -0.5, "step_rewards": "[0.1, 0.2]"})
    assert rm.tolist() == pytest.approx([0, 0.1, 0, 0, 0, 0.2 - 0.5, 0])
