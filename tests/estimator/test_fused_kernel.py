"""The fused C++ kernel of slca_grpo (slca_verl/fused.py) against the estimator's torch path and verl's
grpo_vectorized: same advantages, same statistics, same errors. tests/estimator/test_core_algos.py runs its
hand-computed cases through both paths as well."""

import numpy as np
import pytest
import torch
from conftest import make_batch
from hypothesis import given, settings
from hypothesis import strategies as st
from verl.trainer.ppo.core_algos import get_adv_estimator_fn

from slca_verl import core_algos, fused, handover, segments

TORCH = {"slca": {"kernel": "torch"}}


@pytest.fixture(scope="module", autouse=True)
def kernel():
    module = fused.load()
    if module is None:
        pytest.skip(
            "the fused kernel cannot be built on this machine (no C++ compiler or ninja); the torch path serves"
        )
    return module


def both(rewards, mask, index, ids=None):
    fn = get_adv_estimator_fn("slca_grpo")
    kw = dict(token_level_rewards=rewards, response_mask=mask, index=index, segment_ids=ids)
    return fn(**kw, config=None)[0], fn(**kw, config=TORCH)[0]


@pytest.mark.parametrize("seed,bs,L,turns,group", [(0, 64, 40, 4, 4), (1, 33, 97, 3, 8), (2, 8, 5, 2, 3)])
@pytest.mark.parametrize("explicit", [False, True])
def test_the_kernel_gives_the_torch_paths_advantages(seed, bs, L, turns, group, explicit):
    rewards, mask, index = make_batch(seed, bs, L, max_turns=turns, group_size=group, reward_at_ends=False)
    ids = None
    if explicit:  # some episodes end on a tool turn (no summary): only explicit ids can say so
        ids = segments.segment_ids_from_response_mask(mask)
        ids[::3] = torch.where(ids[::3] == segments.SUMMARY, torch.tensor(segments.TOOL, dtype=torch.int8), ids[::3])
    fast, slow = both(rewards, mask, index, ids)
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-6)
    assert bool(fast[mask == 0].eq(0).all())


@pytest.mark.parametrize("mask_dtype", [torch.int64, torch.int32, torch.bool, torch.float32])
def test_one_segment_per_response_is_bit_identical_to_verls_grpo_vectorized(mask_dtype):
    g = torch.Generator().manual_seed(3)
    mask = (torch.rand(48, 30, generator=g) > 0.2).to(torch.int64)
    mask[:, 0] = 1
    mask = torch.where(torch.arange(30) < torch.randint(5, 30, (48, 1), generator=g), torch.ones_like(mask), 0)
    rewards = torch.randn(48, 30, generator=g) * mask  # dense rewards on one run per response
    index = np.array([f"g{i // 6}" for i in range(48)], dtype=object)
    fast, _ = both(rewards, mask.to(mask_dtype), index)
    verl, _ = get_adv_estimator_fn("grpo_vectorized")(token_level_rewards=rewards, response_mask=mask, index=index)
    assert torch.equal(fast, verl)


def test_rewards_outside_both_segments_are_ignored_as_by_the_torch_path():
    rewards, mask, index = make_batch(4, 24, 20, max_turns=3, group_size=4)
    rewards = rewards + (mask == 0) * 5.0  # a reward on every observation / padding token
    fast, slow = both(rewards, mask, index)
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-6)


def test_bad_ids_and_non_finite_rewards_get_the_torch_paths_errors():
    rewards, mask, index = make_batch(6, 8, 12, max_turns=2, group_size=4)
    ids = segments.segment_ids_from_response_mask(mask)
    for bad, message in (
        (ids.masked_fill(mask == 0, segments.TOOL), "mark tokens with response_mask == 0"),
        (ids.masked_fill(mask == 1, 7), "explicit segment ids must be"),
    ):
        for config in (None, TORCH):
            with pytest.raises(ValueError, match=message):
                get_adv_estimator_fn("slca_grpo")(
                    token_level_rewards=rewards, response_mask=mask, index=index, segment_ids=bad, config=config
                )
    wide = ids.to(torch.int64)
    wide[0, mask[0].bool()] = 257  # would wrap to a valid id in int8
    with pytest.raises(ValueError, match="explicit segment ids must be"):
        both(rewards, mask, index, wide)
    nan = rewards.clone()
    nan[2, 0] = float("nan")
    with pytest.raises(ValueError, match=r"non-finite reward .* rows \[2\]"):
        both(nan, mask, index)


def test_the_segment_statistics_match_the_torch_paths():
    rewards, mask, index = make_batch(7, 40, 30, max_turns=4, group_size=5)
    stats = []
    for config in (None, TORCH):
        with handover.handed_over() as inputs:
            get_adv_estimator_fn("slca_grpo")(
                token_level_rewards=rewards, response_mask=mask, index=index, config=config
            )
        stats.append(inputs.metrics)
    assert stats[0].keys() == stats[1].keys() == set(core_algos.SEGMENT_METRICS)
    assert stats[0] == pytest.approx(stats[1], rel=1e-5, abs=1e-6)


def test_integer_rewards_give_float_advantages_on_both_paths():
    rewards, mask, index = make_batch(8, 16, 10, max_turns=2, group_size=4)
    fast, slow = both((rewards * 10).round().to(torch.int64), mask, index)
    assert fast.dtype == slow.dtype == torch.float32 and torch.count_nonzero(fast) > 0
    torch.testing.assert_close(fast, slow)


@pytest.mark.parametrize("mask_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("explicit", [False, True])
def test_a_half_precision_mask_gives_the_float32_masks_advantages(mask_dtype, explicit):
    # before: RuntimeError "slca_pass1" not implemented for 'Half' (the kernel dispatches bool, ints, float32/64)
    rewards, mask, index = make_batch(10, 24, 18, max_turns=3, group_size=4, reward_at_ends=False)
    ids = segments.segment_ids_from_response_mask(mask) if explicit else None
    fast32, slow32 = both(rewards, mask.to(torch.float32), index, ids)
    fast, slow = both(rewards, mask.to(mask_dtype), index, ids)
    assert fast.dtype == slow.dtype == torch.float32  # verl's grpo_vectorized dtype for these inputs
    assert torch.equal(fast, fast32) and torch.equal(slow, slow32) and torch.count_nonzero(fast) > 0


def test_the_kernel_never_truncates_a_fractional_id_into_a_valid_one():
    rewards, mask, index = make_batch(11, 8, 12, max_turns=2, group_size=4)
    ids = segments.segment_ids_from_response_mask(mask).to(torch.float32)
    row, token = 3, int(mask[3].nonzero()[0])
    ids[row, token] = 1.5  # int8(1.5) == 1, a tool token
    with pytest.raises(ValueError, match=rf"segment id 1.5 at row {row}, token {token} is not a whole number"):
        both(rewards, mask, index, ids)


def test_float32_overflow_of_finite_rewards_gives_the_torch_paths_advantages():
    rewards, mask, index = make_batch(12, 16, 10, max_turns=3, group_size=4, reward_at_ends=False)
    rewards = rewards.sign() * 3e38 * (mask != 0)  # every trained token ±3e38: the row sums overflow float32
    fast, slow = both(rewards, mask, index)
    assert bool(torch.isfinite(fast).all()) and torch.count_nonzero(fast) > 0
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-6)


@st.composite
def batches(draw):
    groups = draw(st.integers(1, 4))
    L = draw(st.integers(1, 16))
    rows, masks, index, ids = [], [], [], []
    for g in range(groups):
        for _ in range(draw(st.integers(1, 5))):
            m = draw(st.lists(st.booleans(), min_size=L, max_size=L))
            kinds = draw(st.lists(st.sampled_from([1, 2]), min_size=L, max_size=L))
            masks.append([float(x) for x in m])
            ids.append([k if x else 0 for k, x in zip(kinds, m)])
            rows.append([draw(st.floats(-1e3, 1e3, allow_nan=False)) if x else 0.0 for x in m])
            index.append(f"g{g}")
    return (torch.tensor(rows), torch.tensor(masks), np.array(index, dtype=object), torch.tensor(ids, dtype=torch.int8))


@settings(max_examples=150, deadline=None)
@given(batches(), st.booleans())
def test_random_batches_agree_with_the_torch_path(batch, explicit):
    rewards, mask, index, ids = batch
    fast, slow = both(rewards, mask, index, ids if explicit else None)
    torch.testing.assert_close(fast, slow, rtol=1e-4, atol=1e-4)


def test_a_kernel_that_cannot_be_built_falls_back_to_the_torch_path_with_one_warning(tmp_path, monkeypatch, caplog):
    broken = tmp_path / "fused.cpp"
    broken.write_text("this is not C++\n")
    monkeypatch.setattr(fused, "_SOURCE", str(broken))
    monkeypatch.setattr(fused, "_NAME", "slca_fused_cpu_broken_test")
    monkeypatch.setattr(fused, "_STATE", {})
    rewards, mask, index = make_batch(9, 12, 10, max_turns=2, group_size=4)
    with caplog.at_level("WARNING", logger="slca_verl.fused"):
        adv, _ = get_adv_estimator_fn("slca_grpo")(token_level_rewards=rewards, response_mask=mask, index=index)
        again, _ = get_adv_estimator_fn("slca_grpo")(token_level_rewards=rewards, response_mask=mask, index=index)
    warnings = [r for r in caplog.records if "could not be built" in r.getMessage()]
    assert len(warnings) == 1 and "using the torch path" in warnings[0].getMessage()
    _, slow = both(rewards, mask, index)
    assert torch.equal(adv, slow) and torch.equal(again, slow)
