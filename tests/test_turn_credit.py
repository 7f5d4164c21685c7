"""slca_grpo's per-turn credit (``algorithm.slca.credit=turn``): hand-computed groups with different stopping turns,
bit-for-bit equality with the segment mode on single-step episodes, and what a per-turn-index baseline gets wrong."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slca_verl.core_algos import collect_segment_stats, compute_slca_grpo_advantage
from slca_verl.segments import OBSERVATION, SUMMARY, TOOL

TURN = {"slca": {"credit": "turn"}}


def row(turn_rewards, summary_reward, turn_len=2, obs_len=1, sum_len=2):
    """(ids, rewards) of one response: each tool turn (its step reward on its last token) followed by a tool
    response, then the summary (its reward on its last token)."""
    ids, rew = [], []
    for r in turn_rewards:
        ids += [TOOL] * turn_len + [OBSERVATION] * obs_len
        rew += [0.0] * (turn_len - 1) + [r] + [0.0] * obs_len
    if summary_reward is not None:
        ids += [SUMMARY] * sum_len
        rew += [0.0] * (sum_len - 1) + [summary_reward]
    return ids, rew


def batch(rows, L=None):
    L = L or max(len(r[0]) for r in rows)
    ids = torch.tensor([r[0] + [OBSERVATION] * (L - len(r[0])) for r in rows])
    rewards = torch.tensor([r[1] + [0.0] * (L - len(r[1])) for r in rows], dtype=torch.float32)
    return ids, rewards, (ids != OBSERVATION).float()


def zscores(values):
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return [(v - mean) / (std + 1e-6) for v in values]


def test_a_group_with_different_stopping_turns_by_hand():
    # A: right step 1, wrong step 2; B: right step 1, then stops; C: wrong step 1, right step 2
    rows = [row([1.0, 0.0], 0.5), row([1.0], 1.0), row([0.0, 1.0], 0.0)]
    ids, rewards, mask = batch(rows)
    adv, ret = compute_slca_grpo_advantage(rewards, mask, np.array(["g"] * 3), TURN, segment_ids=ids)
    z1 = zscores([1.0, 1.0, 0.0])  # every row that called enters step 1's statistics ...
    z2 = zscores([0.0, 0.0, 1.0])  # ... and step 2's, B with 0: it did not take the step
    zs = zscores([0.5, 1.0, 0.0])  # the summary keeps SLCA's preference advantage
    # A: [t t o t t o s s], B: [t t o s s], C like A
    want = [[z1[0]] * 2 + [0] + [z2[0]] * 2 + [0] + [zs[0]] * 2,
            [z1[1]] * 2 + [0] + [zs[1] + z2[1], zs[1]] + [0] * 3,  # B's stopping credit on its decision token
            [z1[2]] * 2 + [0] + [z2[2]] * 2 + [0] + [zs[2]] * 2]  # fmt: skip
    assert torch.allclose(adv, torch.tensor(want), atol=1e-5)
    assert torch.equal(adv, ret)
    # the same first step gets the same credit whatever came after; not taking step 2 costs what failing it costs
    assert adv[0, 0] == adv[1, 0] > 0
    assert math.isclose(float(adv[1, 3] - adv[1, 4]), float(adv[0, 3]), rel_tol=1e-5) and adv[0, 3] < 0


def test_a_turn_advantage_depends_on_its_own_step_only():
    base = [row([1.0, 0.0, 1.0], 0.2), row([0.0, 1.0], 0.9), row([1.0, 1.0, 0.0], 0.4), row([0.5], 0.1)]
    changed = [row([1.0, 1.0, 0.0], 0.2)] + base[1:]  # only A's steps 2 and 3 differ
    out = []
    for rows in (base, changed):
        ids, rewards, mask = batch(rows)
        out.append(compute_slca_grpo_advantage(rewards, mask, np.array([0] * 4), TURN, segment_ids=ids)[0])
    assert torch.equal(out[0][:, :2], out[1][:, :2])  # step 1's credit of every row is unchanged
    assert not torch.equal(out[0][:, 3:5], out[1][:, 3:5])


def test_a_per_turn_index_baseline_would_not_charge_the_row_that_stopped():
    """MT-GRPO's baseline for turn k (the rows that reached k) leaves a row that skipped step 2 uncharged and
    charges the row that tried and failed: stopping pays. Ours charges both the same."""
    rows = [row([1.0, 0.0], 0.5), row([1.0], 0.5), row([1.0, 1.0], 0.5)]
    ids, rewards, mask = batch(rows)
    adv, _ = compute_slca_grpo_advantage(rewards, mask, np.array([0] * 3), TURN, segment_ids=ids)
    failed_step2, skipped_step2 = float(adv[0, 3]), float(adv[1, 3])  # A's step-2 tokens, B's decision token
    assert failed_step2 < 0 and math.isclose(failed_step2, skipped_step2, rel_tol=1e-5)
    reached = zscores([0.0, 1.0])  # the per-turn-index baseline over A and C only
    assert reached[0] < 0  # A charged there too, B (not in the set) not at all


@pytest.mark.parametrize("kernel", ["auto", "torch"])
@pytest.mark.parametrize("explicit_ids", [True, False])
def test_single_step_groups_get_the_segment_modes_advantages_bit_for_bit(kernel, explicit_ids):
    g = torch.Generator().manual_seed(0)
    rows = []
    for _ in range(48):
        n_tool = int(torch.randint(0, 2, (1,), generator=g)) if explicit_ids else 1
        r = torch.randn(2, generator=g).tolist()
        rows.append(row([r[0]] * n_tool, r[1], turn_len=3, sum_len=int(torch.randint(1, 6, (1,), generator=g))))
    # a multi-step group in the same batch must not change the single-step groups
    rows += [row([0.3, 0.8], 0.1), row([0.9], 0.7), row([0.2, 0.4, 0.6], 0.5), row([0.1, 0.0], 0.9)]
    ids, rewards, mask = batch(rows)
    index = np.array([i // 6 for i in range(48)] + [99] * 4)
    seg_ids = ids if explicit_ids else None
    segment, _ = compute_slca_grpo_advantage(rewards, mask, index, {"slca": {"kernel": kernel}}, segment_ids=seg_ids)
    turn, _ = compute_slca_grpo_advantage(rewards, mask, index, {"slca": {"kernel": kernel, "credit": "turn"}},
                                          segment_ids=seg_ids)  # fmt: skip
    assert torch.equal(turn[:48], segment[:48])
    assert not torch.equal(turn[48:], segment[48:])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.floats(-2, 2, width=32), min_size=0, max_size=3),
                          st.one_of(st.none(), st.floats(-2, 2, width=32))), min_size=1, max_size=6))
def test_any_group_gives_finite_advantages_only_on_trained_tokens(spec):
    rows = [row(turns, summ) for turns, summ in spec if turns or summ is not None] or [row([], 0.0)]
    ids, rewards, mask = batch(rows)
    adv, _ = compute_slca_grpo_advantage(rewards, mask, np.array([0] * len(rows)), TURN, segment_ids=ids)
    assert bool(torch.isfinite(adv).all())
    assert bool((adv[ids == OBSERVATION] == 0).all())


def test_per_turn_statistics_reach_the_step_logs_and_a_typo_fails_at_start_up():
    rows = [row([1.0, 0.0], 0.5), row([1.0], 1.0), row([0.0, 1.0], 0.0)]
    ids, rewards, mask = batch(rows)
    with collect_segment_stats() as stats:
        compute_slca_grpo_advantage(rewards, mask, np.array([0] * 3), TURN, segment_ids=ids)
    assert math.isclose(stats["slca/turns/mean"], 5 / 3, rel_tol=1e-6)
    assert math.isclose(stats["slca/turn2/reward_mean"], 0.5, rel_tol=1e-6)  # over A and C, the rows with a second turn
    assert math.isclose(stats["slca/turn1/reward_mean"], 2 / 3, rel_tol=1e-6)
    assert stats["slca/stop_adv/mean"] < 0  # B's stopping credit, averaged over the three rows
    # a single-step batch logs the same keys: turn 1's reward and advantage are the segment mode's r^tool and A^tool
    ids, rewards, mask = batch([row([1.0], 0.5), row([0.0], 0.5)])
    with collect_segment_stats() as stats:
        adv, _ = compute_slca_grpo_advantage(rewards, mask, np.array([0, 0]), TURN, segment_ids=ids)
    assert math.isclose(stats["slca/turn1/reward_mean"], 0.5, rel_tol=1e-6) and stats["slca/turns/mean"] == 1.0
    assert math.isclose(stats["slca/turn1/adv_mean"], float(adv[ids == TOOL].mean()), abs_tol=1e-6)
    assert float(adv[0][ids[0] == TOOL][0]) > 0 > float(adv[1][ids[1] == TOOL][0]) and stats["slca/stop_adv/mean"] == 0
    with pytest.raises(ValueError, match="algorithm.slca.credit"):
        compute_slca_grpo_advantage(rewards, mask, np.array([0] * 3), {"slca": {"credit": "turns"}}, segment_ids=ids)


# ---------------------------------------------------------------------------------------------- the trainer path

GOLD2 = [[{"name": "get_weather", "arguments": {"city": "Paris"}}], [{"name": "book", "arguments": {"city": "Paris"}}]]
GT2 = {"allowed_tools": ["get_weather", "book"], "gold_tool_calls": GOLD2, "question_content": "Weather, then book."}


def call(name, city):
    return f'<tool_call>\n{{"name": "{name}", "arguments": {{"city": "{city}"}}}}\n</tool_call>'


def test_hierr_scores_each_tool_turn_against_the_gold_step_it_answers():
    import json

    from slca_verl.rewards.hierr import score_trajectory_sync

    turns = [call("get_weather", "Paris"), call("book", "Lyon"), call("book", "Paris"), "Booked."]
    out = score_trajectory_sync(turns, ["{}", "{}", "{}"], GT2)
    # step 1 right (1.0); step 2 right tool, wrong city: 0.10 fmt + 0.25 name + 0.15 key + 0 value + 0.30 parallel;
    # a third call answers no gold step: reward_kwargs.extra_step_reward (default -0.25, what a wrong name costs)
    assert json.loads(out["step_rewards"]) == [1.0, 0.8, -0.25]
    flat = {**GT2, "gold_tool_calls": [c for s in GOLD2 for c in s], "gold_format": "flat"}
    broken = ["<tool_call>\nnot json\n</tool_call>", call("book", "Paris"), "Done."]
    assert json.loads(score_trajectory_sync(broken, ["err", "{}"], flat)["step_rewards"]) == [0.0, 1.0]  # validity
    none = {**GT2, "gold_tool_calls": []}
    assert json.loads(score_trajectory_sync([call("book", "Paris"), "Hi."], ["{}"], none)["step_rewards"]) == [0.0]


def test_the_turns_layout_puts_each_step_reward_on_its_turn():
    from slca_verl.reward_layout import get_layout

    ids = torch.tensor([TOOL, TOOL, OBSERVATION, TOOL, OBSERVATION, SUMMARY, SUMMARY], dtype=torch.int8)
    rm, dropped = get_layout("slca_turns")(ids, {"step_rewards": "[0.5, 0.25, 0.75]", "r_tool": 9.0, "r_sum": 0.4})
    assert rm.tolist() == [0.0, 0.5, 0.0, 0.25, 0.0, 0.0, pytest.approx(0.4)]
    assert dropped == 0.75  # a step reward with no turn to go to is counted, not placed
    # without step rewards (another reward, or an abstention decision token) it is the slca layout
    rm, _ = get_layout("slca_turns")(ids, {"step_rewards": "", "r_tool": 0.9, "r_sum": 0.4})
    assert rm.tolist() == [0.0, 0.0, 0.0, pytest.approx(0.9), 0.0, 0.0, pytest.approx(0.4)]
