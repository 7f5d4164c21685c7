"""slca_grpo against hand-computed values, a plain reference loop, and verl's own grpo estimators."""

import logging
import math
import re

import numpy as np
import pytest
import torch
from conftest import make_batch
from reference import reference_slca
from verl.trainer.ppo.core_algos import get_adv_estimator_fn

from slca_verl.estimators import segments, slca_grpo
from slca_verl.estimators.slca_grpo import compute_slca_grpo_advantage
from slca_verl.trainer import handover

EPS = 1e-6


def zscore(values):
    """Hand formula: (x - mean) / (unbiased std + eps)."""
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return [(v - mean) / (std + EPS) for v in values]


def row(mask, rewards_at):
    m = torch.tensor(mask, dtype=torch.int64)
    r = torch.zeros(len(mask))
    for t, v in rewards_at.items():
        r[t] = v
    return r, m


@pytest.fixture
def two_groups():
    """Group a: two tool+summary rollouts and one summary-only; group b: a three-run rollout and an empty one."""
    rows = [
        row([1, 1, 0, 0, 1, 1, 1, 0, 0, 0], {1: 0.6, 6: 0.4}),
        row([1, 1, 1, 0, 0, 1, 1, 0, 0, 0], {2: 0.2, 6: 0.9}),
        row([1, 1, 1, 1, 0, 0, 0, 0, 0, 0], {3: 0.5}),
        row([1, 1, 0, 1, 1, 0, 1, 1, 1, 0], {1: 0.1, 4: 0.3, 8: 1.0}),
        row([0] * 10, {}),
    ]
    rewards = torch.stack([r for r, _ in rows])
    mask = torch.stack([m for _, m in rows])
    index = np.array(["a", "a", "a", "b", "b"], dtype=object)
    return rewards, mask, index


def test_two_groups_with_mixed_segment_presence_match_hand_computed_values(two_groups):
    rewards, mask, index = two_groups
    adv, ret = compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index, config=None)

    tool_a = zscore([0.6, 0.2])  # rollout 2 has no tool segment and takes no part
    sum_a = zscore([0.4, 0.9, 0.5])
    expected = torch.zeros(5, 10)
    expected[0, [0, 1]] = tool_a[0]
    expected[0, [4, 5, 6]] = sum_a[0]
    expected[1, [0, 1, 2]] = tool_a[1]
    expected[1, [5, 6]] = sum_a[1]
    expected[2, [0, 1, 2, 3]] = sum_a[2]
    # group b: only rollout 3 has segments, fewer than two rollouts per segment -> 0; rollout 4 is empty
    torch.testing.assert_close(adv, expected, rtol=1e-5, atol=1e-6)
    assert torch.equal(adv, ret)
    assert abs(tool_a[0] - 1 / math.sqrt(2)) < 1e-5  # sanity of the hand formula itself


def test_advantages_are_zero_on_observations_and_padding(two_groups):
    rewards, mask, index = two_groups
    adv, _ = compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index)
    assert torch.all(adv[mask == 0] == 0)


def test_lambdas_scale_each_segment_after_normalisation(two_groups):
    rewards, mask, index = two_groups
    base, _ = compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index)
    cfg = {"slca": {"lambda_tool": 0.5, "lambda_sum": 2.0}}
    scaled, _ = compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index, config=cfg)
    tool, summary = segments.segment_masks_from_response_mask(mask)
    torch.testing.assert_close(scaled[tool], 0.5 * base[tool])
    torch.testing.assert_close(scaled[summary], 2.0 * base[summary])


def test_without_std_normalisation_advantages_are_centred_rewards(two_groups):
    rewards, mask, index = two_groups
    adv, _ = compute_slca_grpo_advantage(
        token_level_rewards=rewards, response_mask=mask, index=index, config={"norm_adv_by_std_in_grpo": False}
    )
    assert adv[0, 0].item() == pytest.approx(0.6 - 0.4, abs=1e-6)
    assert adv[1, 5].item() == pytest.approx(0.9 - 0.6, abs=1e-6)


def test_group_of_one_and_equal_rewards_give_zeros_never_nan():
    rewards, mask = torch.zeros(4, 6), torch.zeros(4, 6, dtype=torch.int64)
    mask[:, :2] = 1
    mask[:, 3:5] = 1
    rewards[:, 1] = 0.7  # equal tool rewards in group "eq"
    rewards[:, 4] = 0.3  # equal summary rewards
    index = np.array(["eq", "eq", "eq", "alone"], dtype=object)
    adv, _ = compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index)
    assert torch.isfinite(adv).all()
    assert torch.count_nonzero(adv) == 0


def test_empty_responses_and_zero_length_batches_give_zeros():
    adv, _ = compute_slca_grpo_advantage(
        token_level_rewards=torch.zeros(3, 5), response_mask=torch.zeros(3, 5), index=np.array(["a", "a", "b"])
    )
    assert torch.count_nonzero(adv) == 0
    adv, _ = compute_slca_grpo_advantage(
        token_level_rewards=torch.zeros(2, 0), response_mask=torch.zeros(2, 0), index=np.array(["a", "a"])
    )
    assert adv.shape == (2, 0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_rewards_raise_an_error_naming_the_estimator(two_groups, bad):
    rewards, mask, index = two_groups
    rewards[1, 6] = bad
    with pytest.raises(ValueError, match="slca_grpo: non-finite reward .* rows \\[1\\]"):
        compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index)


def test_unknown_slca_config_keys_are_rejected(two_groups):
    rewards, mask, index = two_groups
    with pytest.raises(ValueError, match="unknown keys under algorithm.slca: \\['lamda_tool'\\]"):
        compute_slca_grpo_advantage(
            token_level_rewards=rewards, response_mask=mask, index=index, config={"slca": {"lamda_tool": 2.0}}
        )


@pytest.mark.parametrize(
    "settings,message",
    [
        ({"epsilon": 0}, "algorithm.slca.epsilon=0 must be > 0"),
        ({"epsilon": -1e-6}, "algorithm.slca.epsilon=-1e-06 must be > 0"),
        ({"lambda_tool": float("nan")}, "algorithm.slca.lambda_tool=nan must be finite"),
        ({"lambda_sum": float("inf")}, "algorithm.slca.lambda_sum=inf must be finite"),
        ({"lambda_tool": "abc"}, "algorithm.slca.lambda_tool='abc' is not a number"),
        ({"lambda_sum": True}, "algorithm.slca.lambda_sum=True is not a number"),
    ],
)
def test_bad_slca_settings_fail_naming_the_key(two_groups, settings, message):
    rewards, mask, index = two_groups
    with pytest.raises(ValueError, match=re.escape(message)):
        compute_slca_grpo_advantage(
            token_level_rewards=rewards, response_mask=mask, index=index, config={"slca": settings}
        )


def test_integer_rewards_give_float_advantages_not_truncated_ones(two_groups):
    rewards, mask, index = two_groups
    ints = (rewards * 4).round().to(torch.int64)
    adv, _ = compute_slca_grpo_advantage(token_level_rewards=ints, response_mask=mask, index=index)
    ref, _ = compute_slca_grpo_advantage(token_level_rewards=ints.float(), response_mask=mask, index=index)
    assert adv.dtype == torch.float32 and torch.equal(adv, ref) and bool((adv != 0).any())


def test_explicit_ids_handle_an_episode_cut_on_a_tool_turn():
    """Row 1 was cut by the turn limit: two tool turns and no summary. Runs alone would call its last turn a
    summary; explicit ids keep it a tool turn and leave it out of the summary normalisation."""
    T, S, OBS = segments.TOOL, segments.SUMMARY, segments.OBSERVATION
    ids = torch.tensor(
        [
            [T, T, OBS, S, S, OBS],
            [T, T, OBS, T, T, OBS],
            [T, OBS, OBS, S, OBS, OBS],
        ],
        dtype=torch.int8,
    )
    mask = (ids != OBS).long()
    rewards = torch.zeros(3, 6)
    rewards[0, 1], rewards[0, 4] = 1.0, 0.2
    rewards[1, 1], rewards[1, 4] = 0.0, 0.0  # tool reward 0.0 sits on the end of the last tool turn
    rewards[1, 4] = 0.5
    rewards[2, 0], rewards[2, 3] = 0.3, 0.8
    index = np.array(["g", "g", "g"], dtype=object)
    adv, _ = compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index, segment_ids=ids)
    tool = zscore([1.0, 0.5, 0.3])
    summ = zscore([0.2, 0.8])
    expected = torch.tensor(
        [
            [tool[0], tool[0], 0, summ[0], summ[0], 0],
            [tool[1], tool[1], 0, tool[1], tool[1], 0],
            [tool[2], 0, 0, summ[1], 0, 0],
        ]
    )
    torch.testing.assert_close(adv, expected, rtol=1e-5, atol=1e-6)

    # the same tensors through the trainer's hand-over (context variable) give the same result
    with handover.handed_over(segment_ids=ids):
        via_context, _ = compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index)
    assert torch.equal(via_context, adv)
    assert handover.current() is None


def test_explicit_ids_that_disagree_with_the_mask_are_rejected():
    mask = torch.tensor([[1, 1, 0]])
    with pytest.raises(ValueError, match="response_mask == 0"):
        compute_slca_grpo_advantage(
            token_level_rewards=torch.zeros(1, 3),
            response_mask=mask,
            index=np.array(["a"]),
            segment_ids=torch.tensor([[1, 2, 2]], dtype=torch.int8),
        )
    with pytest.raises(ValueError, match="shape"):
        compute_slca_grpo_advantage(
            token_level_rewards=torch.zeros(1, 3),
            response_mask=mask,
            index=np.array(["a"]),
            segment_ids=torch.tensor([[1, 2]], dtype=torch.int8),
        )


def test_scalar_reward_on_the_last_token_warns_once_naming_the_agent_loop(two_groups, caplog, monkeypatch):
    rewards, mask, index = two_groups
    scalar = torch.zeros_like(rewards)
    last = (mask.cumsum(-1) == mask.sum(-1, keepdim=True)) & (mask == 1)  # last trained token of each row
    scalar[last] = rewards.sum(-1).repeat_interleave(last.sum(-1))
    monkeypatch.setattr(slca_grpo, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="slca_verl.estimators.slca_grpo"):
        compute_slca_grpo_advantage(token_level_rewards=scalar, response_mask=mask, index=index)
        compute_slca_grpo_advantage(token_level_rewards=scalar, response_mask=mask, index=index)
    warnings = [r for r in caplog.records if "every tool-segment reward" in r.getMessage()]
    assert len(warnings) == 1
    assert "slca_tool_agent" in warnings[0].getMessage()

    caplog.clear()
    monkeypatch.setattr(slca_grpo, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="slca_verl.estimators.slca_grpo"):
        compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index)
    assert not [r for r in caplog.records if "every tool-segment reward" in r.getMessage()]


# ---------------------------------------------------------------------------------------------------------------
# agreement with verl's grpo and with a plain loop


@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_single_segment_responses_equal_verl_grpo(seed, norm):
    rewards, mask, index = make_batch(seed, bs=32, L=40, max_turns=1, group_size=4, reward_at_ends=False)
    mask[:, 0] = 1  # no empty rows: verl's grpo gives an empty row its group's z-score times an all-zero mask anyway
    rewards = rewards * mask
    cfg = {"norm_adv_by_std_in_grpo": norm}
    ours, _ = get_adv_estimator_fn("slca_grpo")(
        token_level_rewards=rewards, response_mask=mask, index=index, config=cfg
    )
    vec, _ = get_adv_estimator_fn("grpo_vectorized")(
        token_level_rewards=rewards, response_mask=mask, index=index, norm_adv_by_std_in_grpo=norm
    )
    loop, _ = get_adv_estimator_fn("grpo")(
        token_level_rewards=rewards.clone(), response_mask=mask, index=index, norm_adv_by_std_in_grpo=norm
    )
    assert torch.equal(ours, vec.to(ours.dtype))
    torch.testing.assert_close(ours, loop.to(ours.dtype), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "seed,bs,L,turns,group", [(0, 16, 24, 4, 4), (1, 24, 50, 3, 8), (2, 9, 13, 2, 3), (3, 40, 64, 4, 5)]
)
@pytest.mark.parametrize("reward_at_ends", [True, False])
def test_vectorised_estimator_matches_a_plain_reference_loop(seed, bs, L, turns, group, reward_at_ends):
    rewards, mask, index = make_batch(seed, bs, L, max_turns=turns, group_size=group, reward_at_ends=reward_at_ends)
    cfg = {"slca": {"lambda_tool": 0.7, "lambda_sum": 1.3}}
    ours, _ = compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index, config=cfg)
    ref = reference_slca(rewards, mask, index, 0.7, 1.3)
    torch.testing.assert_close(ours.double(), ref, rtol=1e-4, atol=1e-5)
    assert torch.count_nonzero(ref) > 0  # the batches exercise non-trivial groups


def last_run_start(mask: torch.Tensor) -> torch.Tensor:
    """0-based start of each row's last run of ones (L for a row without ones), from the estimator's summary mask."""
    _, summary = segments.segment_masks_from_response_mask(mask)
    return torch.where(summary.any(-1), segments.first_true(summary), mask.shape[1])


def test_segment_ids_from_mask_label_runs():
    mask = torch.tensor([[0, 1, 1, 0, 1, 0, 1, 1], [1, 1, 1, 0, 0, 0, 0, 0], [0] * 8])
    ids = segments.segment_ids_from_response_mask(mask)
    assert ids.tolist() == [[0, 1, 1, 0, 1, 0, 2, 2], [2, 2, 2, 0, 0, 0, 0, 0], [0] * 8]
    assert last_run_start(mask).tolist() == [6, 0, 8]


def test_runs_and_explicit_ids_with_episodes_cut_on_a_tool_turn_match_the_reference():
    """Groups of 7 rows; every fourth episode ends on a tool turn, which only explicit ids can say."""
    rewards, mask, index = make_batch(5, bs=30, L=24, max_turns=3, group_size=7)
    ids = segments.segment_ids_from_response_mask(mask)
    ids[::4] = torch.where(ids[::4] == segments.SUMMARY, torch.tensor(segments.TOOL, dtype=torch.int8), ids[::4])
    runs, _ = compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index)
    explicit, _ = compute_slca_grpo_advantage(
        token_level_rewards=rewards, response_mask=mask, index=index, segment_ids=ids
    )
    torch.testing.assert_close(runs.double(), reference_slca(rewards, mask, index), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(explicit.double(), reference_slca(rewards, mask, index, ids=ids), rtol=1e-4, atol=1e-5)


def test_a_segment_with_zero_advantage_stays_exactly_zero_beside_a_nonzero_one():
    """Equal tool rewards and different summary rewards: tool tokens get exactly 0, not a rounding residue."""
    mask = torch.tensor([[1, 1, 0, 1, 1]] * 3)
    rewards = torch.zeros(3, 5)
    rewards[:, 1] = 0.7  # the same execution reward for all three
    rewards[:, 4] = torch.tensor([0.1, 0.35, 0.9])
    adv, _ = compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=np.array(["g"] * 3))
    assert torch.equal(adv[:, :3], torch.zeros(3, 3))
    expected = torch.tensor(zscore([0.1, 0.35, 0.9]), dtype=torch.float32)
    torch.testing.assert_close(adv[:, 3], expected)
    torch.testing.assert_close(adv[:, 4], expected)


def test_segment_statistics_are_collected_when_asked(two_groups):
    rewards, mask, index = two_groups
    with handover.handed_over() as inputs:
        compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index)
    stats = inputs.metrics
    assert set(stats) == set(slca_grpo.SEGMENT_METRICS)
    # tool segments: rows 0, 1 (group a) and 3 (alone in group b -> advantage 0)
    assert stats["slca/has_tool/frac"] == pytest.approx(3 / 5)
    assert stats["slca/reward_tool/mean"] == pytest.approx((0.6 + 0.2 + 0.4) / 3)
    assert stats["slca/adv_tool/mean"] == pytest.approx(0.0, abs=1e-6)
    assert stats["slca/adv_tool/zero_frac"] == pytest.approx(1 / 3)
    # summaries: rows 0-3 (row 4 is empty)
    assert stats["slca/has_summary/frac"] == pytest.approx(4 / 5)
    assert stats["slca/reward_summary/mean"] == pytest.approx((0.4 + 0.9 + 0.5 + 1.0) / 4)
    z = zscore([0.4, 0.9, 0.5])
    assert stats["slca/adv_summary/std"] == pytest.approx(math.sqrt(sum(x * x for x in z) / 4), rel=1e-5)
    # outside the block nothing is collected
    with handover.handed_over() as other:
        pass
    compute_slca_grpo_advantage(token_level_rewards=rewards, response_mask=mask, index=index)
    assert other.metrics == {}


def test_every_segment_metric_is_documented_in_the_method_page():
    import os

    from slca_verl.estimators.slca_grpo import SEGMENT_METRICS

    page = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "method.md"), encoding="utf-8").read()
    table = page[page.index("## Metrics") :]
    assert [k for k in SEGMENT_METRICS if f"`{k}`" not in table] == []


# ---------------------------------------------------------------------------------------------------------------
# mask and id dtypes, rewards off the segments, bad ids


def slca(rewards, mask, index, ids=None, config=None):
    fn = get_adv_estimator_fn("slca_grpo")
    return fn(token_level_rewards=rewards, response_mask=mask, index=index, segment_ids=ids, config=config)[0]


@pytest.mark.parametrize("mask_dtype", [torch.int64, torch.int32, torch.bool, torch.float32])
def test_one_segment_per_response_is_bit_identical_to_verls_grpo_vectorized(mask_dtype):
    g = torch.Generator().manual_seed(3)
    mask = (torch.rand(48, 30, generator=g) > 0.2).to(torch.int64)
    mask[:, 0] = 1
    mask = torch.where(torch.arange(30) < torch.randint(5, 30, (48, 1), generator=g), torch.ones_like(mask), 0)
    rewards = torch.randn(48, 30, generator=g) * mask  # dense rewards on one run per response
    index = np.array([f"g{i // 6}" for i in range(48)], dtype=object)
    verl, _ = get_adv_estimator_fn("grpo_vectorized")(token_level_rewards=rewards, response_mask=mask, index=index)
    assert torch.equal(slca(rewards, mask.to(mask_dtype), index), verl)


def test_rewards_outside_both_segments_are_ignored():
    rewards, mask, index = make_batch(4, 24, 20, max_turns=3, group_size=4)
    off_segments = rewards + (mask == 0) * 5.0  # a reward on every observation / padding token
    assert torch.equal(slca(off_segments, mask, index), slca(rewards, mask, index))


def test_bad_ids_and_non_finite_rewards_are_errors_that_say_what_is_wrong():
    rewards, mask, index = make_batch(6, 8, 12, max_turns=2, group_size=4)
    ids = segments.segment_ids_from_response_mask(mask)
    for bad, message in (
        (ids.masked_fill(mask == 0, segments.TOOL), "mark tokens with response_mask == 0"),
        (ids.masked_fill(mask == 1, 7), "explicit segment ids must be"),
    ):
        with pytest.raises(ValueError, match=message):
            slca(rewards, mask, index, bad)
    wide = ids.to(torch.int64)
    wide[0, mask[0].bool()] = 257  # int8(257) would be 1, a valid id
    with pytest.raises(ValueError, match="explicit segment ids must be"):
        slca(rewards, mask, index, wide)
    nan = rewards.clone()
    nan[2, 0] = float("nan")
    with pytest.raises(ValueError, match=r"non-finite reward .* rows \[2\]"):
        slca(nan, mask, index)


@pytest.mark.parametrize("mask_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("explicit", [False, True])
def test_a_half_precision_mask_gives_the_float32_masks_advantages(mask_dtype, explicit):
    rewards, mask, index = make_batch(10, 24, 18, max_turns=3, group_size=4, reward_at_ends=False)
    ids = segments.segment_ids_from_response_mask(mask) if explicit else None
    adv = slca(rewards, mask.to(mask_dtype), index, ids)
    assert adv.dtype == torch.float32  # verl's grpo_vectorized dtype for these inputs
    assert torch.equal(adv, slca(rewards, mask.to(torch.float32), index, ids)) and torch.count_nonzero(adv) > 0


def test_the_retired_kernel_setting_is_accepted_with_one_warning_and_changes_nothing(two_groups, caplog, monkeypatch):
    rewards, mask, index = two_groups
    monkeypatch.setattr(slca_grpo, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="slca_verl.estimators.slca_grpo"):
        for kernel in ("torch", "auto"):
            adv = slca(rewards, mask, index, config={"slca": {"kernel": kernel}})
            assert torch.equal(adv, slca(rewards, mask, index))
    warnings = [r.getMessage() for r in caplog.records if "algorithm.slca.kernel" in r.getMessage()]
    assert len(warnings) == 1 and "no longer does anything" in warnings[0]
