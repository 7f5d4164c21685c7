"""SLCA-GRPO in verl's asynchronous v1 trainer, for real: ``bash recipes/run_cpu_tiny_slca.sh`` with
``trainer.v1.trainer_mode=slca_colocate_async`` runs verl's own ``main_ppo`` in its colocated asynchronous mode
(rollouts of the next batch start before the update, warm-up batches, partial-rollout client) for two steps, with
per-turn credit (``credit=turn``) on top of the segment-locked estimator, on the tiny Qwen3 of the sync run's seed.
It is also the trainer test of per-turn credit (the slca_turns layout, HierR's step rewards through TransferQueue):
a sync run of the same two steps used to repeat it.

``separate_async`` cannot run on a CPU (verl asserts a non-naive weight-transfer backend, and each of the ones it
registers — nccl, hccl, nixl, mooncake, kimi — is a GPU or RDMA transport): its hand-over is tested with a real
TransferQueue in tests/test_verl_integration.py. The learning test in this mode, with and without injected faults,
is ``pytest -m e2e tests/test_main_ppo_cpu.py --v1-mode=colocate_async [--inject-fault=sign]`` (docs/trainer_modes.md).
"""

import math

import pytest
from main_ppo_helpers import read_metrics, run_recipe

from slca_verl.core_algos import SEGMENT_METRICS

pytestmark = pytest.mark.e2e  # verl's main_ppo through the recipe (pytest.ini, tiers)


@pytest.fixture(scope="module")
def async_run(tmp_path_factory):
    args = ("trainer.v1.trainer_mode=slca_colocate_async", "+algorithm.slca.credit=turn")
    proc, out_dir = run_recipe(str(tmp_path_factory.mktemp("cpu_async")), args=args)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    metrics = read_metrics(out_dir)
    metrics.pop(0, None)  # verl's validation before training
    return metrics, log


def test_verl_ran_its_colocated_async_trainer_with_the_hand_over(async_run):
    metrics, _ = async_run
    assert sorted(metrics) == [1, 2]
    # verl's asynchronous mode ran: its warm-up batch was submitted one step ahead, so step 2 trained on rollouts
    # of prompts submitted at step 1 (verl's staleness 1; the sync mode's is 0 at every step)
    assert metrics[1]["training/off_policy/trajectory_staleness/max"] == 0
    assert metrics[2]["training/off_policy/trajectory_staleness/max"] == 1
    for m in metrics.values():
        # the estimator's metrics reached the step logs: the hand-over ran in this mode
        assert set(SEGMENT_METRICS) <= set(m)
        assert {"slca/turns/mean", "slca/turn1/adv_mean", "slca/truncated/frac"} <= set(m)
        assert {"reward_extra/r_tool/mean", "reward_extra/agent_tool_tokens/mean"} <= set(m)
        # verl's own async bookkeeping is there too (staleness of the batch's trajectories)
        assert "training/off_policy/trajectory_staleness/max" in m


def test_segment_ids_reaching_the_estimator_are_the_agent_loops(async_run):
    """The agent loop's per-trajectory token counts (reward_extra/agent_*) equal the estimator's counts of the ids
    it received from TransferQueue (slca/*). Under credit=turn the loop does not relabel a direct reply's first
    token (the per-turn mode credits that decision itself), so the counts match one to one."""
    metrics, _ = async_run
    for m in metrics.values():
        assert m["slca/tool_tokens/mean"] == pytest.approx(m["reward_extra/agent_tool_tokens/mean"], abs=1e-6)
        assert m["slca/summary_tokens/mean"] == pytest.approx(m["reward_extra/agent_summary_tokens/mean"], abs=1e-6)
        assert m["slca/has_tool/frac"] == pytest.approx(m["reward_extra/agent_has_tool_segment/mean"], abs=1e-6)
        assert m["slca/tool_tokens/mean"] > 0


def test_the_update_trained_on_finite_per_turn_advantages(async_run):
    metrics, _ = async_run
    for m in metrics.values():
        assert m["slca/turns/mean"] >= 1.0  # rows with a tool segment made at least one call
        # HierR's step reward of the first turn (its progress, or extra_step_reward without any), placed on that turn
        # by the slca_turns layout and read back by the estimator through TransferQueue and the hand-over
        assert m["slca/turn1/reward_mean"] != 0 and math.isfinite(m["slca/turn1/reward_mean"])
        for key in ("actor/pg_loss", "slca/turn1/adv_mean", "slca/adv_summary/std"):
            assert m[key] == m[key], key  # not NaN
