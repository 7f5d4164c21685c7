"""Bad batches and settings for the estimators through verl's own registry (issue 14): each gets an error that says
what is wrong, or a finite, correct result. Random batches (hypothesis) agree with the plain reference loop."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import reference_slca
from verl.trainer.ppo.core_algos import get_adv_estimator_fn

ESTIMATORS = ("slca_grpo", "toolpo", "rltr")


def run(name, rewards, mask, index, config=None):
    return get_adv_estimator_fn(name)(token_level_rewards=rewards, response_mask=mask, index=index, config=config)


def uids(*labels):
    return np.array(labels, dtype=object)


@pytest.mark.parametrize("name", ESTIMATORS)
@pytest.mark.parametrize(
    "rewards, mask, index, message",
    [
        (torch.zeros(4, 5), torch.ones(4, 6), uids(*"aabb"), "token_level_rewards has shape (4, 5) and response_mask (4, 6)"),
        (torch.zeros(4), torch.ones(4), uids(*"aabb"), "both must be (batch_size, response_length)"),
        (torch.zeros(4, 5), torch.ones(4, 5), uids(*"aab"), "index (the uid of each response) has 3 entries for 4"),
        (torch.zeros(4, 5), torch.ones(4, 5), uids("a", "a", None, None), "the uid of rows [2, 3] is None or NaN"),
        (torch.zeros(4, 5), torch.ones(4, 5), np.array([0.0, 0.0, np.nan, 1.0]), "the uid of rows [2] is None or NaN"),
    ],
)
def test_a_malformed_batch_is_an_error_that_says_what_is_wrong(name, rewards, mask, index, message):
    with pytest.raises(ValueError) as err:
        run(name, rewards, mask, index)
    assert str(err.value).startswith(name) and message in str(err.value)


@pytest.mark.parametrize(
    "key, value, message",
    [("lambda_tool", "abc", "algorithm.slca.lambda_tool='abc' is not a number"),
     ("lambda_sum", float("nan"), "must be finite"),
     ("epsilon", 0, "algorithm.slca.epsilon=0 must be > 0"),
     ("lambda_tool", True, "is not a number"),
     ("kernel", "cuda", "algorithm.slca.kernel='cuda' must be one of ['auto', 'torch']"),
     ("abstention_credit", 1, "algorithm.slca.abstention_credit=1 must be true or false")],
)  # fmt: skip
def test_a_bad_setting_fails_naming_the_key(key, value, message):
    with pytest.raises(ValueError, match=None) as err:
        run("slca_grpo", torch.zeros(2, 3), torch.ones(2, 3), uids("a", "a"), {"slca": {key: value}})
    assert message in str(err.value)


def test_rewards_whose_squares_overflow_float32_still_get_their_advantages():
    # one group of two summaries: r = ±1e20. mean 0, unbiased std sqrt(2e40) = 1.414e20 (float32's max is 3.4e38,
    # so its squared deviations overflow): A = ±1/sqrt(2). verl's grpo_vectorized gives 0 here.
    rewards = torch.tensor([[1e20, 0.0], [-1e20, 0.0], [3.0, 0.0], [5.0, 0.0]])
    mask = torch.tensor([[1.0, 0.0]] * 4)
    adv, _ = run("slca_grpo", rewards, mask, uids(*"aabb"))
    expected = 1 / math.sqrt(2)
    assert adv[:, 0].tolist() == pytest.approx([expected, -expected, -expected, expected], rel=1e-5)
    assert adv.dtype == torch.float32 and bool(torch.isfinite(adv).all()) and adv[:, 1].eq(0).all()


def test_ordinary_rewards_never_take_the_float64_path_so_grpo_agreement_stays_bit_exact():
    g = torch.Generator().manual_seed(0)
    rewards = torch.randn(64, 1, generator=g) * 1e6
    mask = torch.ones(64, 1)
    index = uids(*[str(i // 8) for i in range(64)])
    ours, _ = run("slca_grpo", rewards, mask, index)
    verl, _ = run("grpo_vectorized", rewards, mask, index)
    assert torch.equal(ours, verl)


@st.composite
def batches(draw):
    """(rewards, mask, index): 1-4 groups of 1-5 responses, each a few turns of trained tokens between observations,
    rewards on any trained token, magnitudes from 1e-3 to 1e30."""
    groups = draw(st.integers(1, 4))
    sizes = [draw(st.integers(1, 5)) for _ in range(groups)]
    L = draw(st.integers(1, 12))
    scale = draw(st.sampled_from([1e-3, 1.0, 1e6, 1e30]))
    rows, masks, index = [], [], []
    for g, n in enumerate(sizes):
        for _ in range(n):
            m = draw(st.lists(st.booleans(), min_size=L, max_size=L))
            r = draw(st.lists(st.floats(-1, 1, allow_nan=False), min_size=L, max_size=L))
            masks.append([float(x) for x in m])
            rows.append([v * scale if x else 0.0 for v, x in zip(r, m)])
            index.append(f"g{g}")
    return torch.tensor(rows), torch.tensor(masks), uids(*index)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_random_batches_give_finite_advantages_that_agree_with_the_reference(batch):
    rewards, mask, index = batch
    adv, _ = run("slca_grpo", rewards, mask, index)
    assert bool(torch.isfinite(adv).all())
    assert bool(adv[mask == 0].eq(0).all())  # observations and padding never get credit
    ref = reference_slca(rewards.double(), mask, index)
    torch.testing.assert_close(adv.double(), ref, rtol=1e-4, atol=1e-4)
