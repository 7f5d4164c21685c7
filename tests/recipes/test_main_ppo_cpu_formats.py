"""The CPU main job in another of verl's tool-call formats, switched by one setting (``TOOL_FORMAT``, which the
recipe turns into ``actor_rollout_ref.rollout.multi_turn.format`` and the warm-up's call format): the tiny model is
warmed up writing qwen3_coder's XML calls (``<function=…><parameter=…>``; ``TOOL_FORMAT=glm`` and the rest alike),
verl's own parser of that format reads them in verl's trainer, SGLS answers them, HierR scores the calls the loop
ran, and slca_grpo trains two steps on the segment ids. The format's tiny model is warmed up for 300 steps, not the
documented 800: the format is learned long before (the parse checks below hold), and each build costs ~3 minutes
instead of ~8 (CI's e2e tier builds it)."""

import os

import pytest
from main_ppo_helpers import STEPS, read_metrics, run_recipe

pytestmark = pytest.mark.e2e  # verl's main_ppo through the recipe (pytest.ini, tiers)


# qwen3_coder's XML calls through the whole trainer; glm's parser (like the other seven formats') reads calls written
# in its format through the real agent loop in the default tier (tests/agent_loop/test_agent_loop_formats.py): a second
# trainer run would repeat this one's plumbing (TOOL_FORMAT -> warm-up and multi_turn.format) at ~5 min of CI
@pytest.mark.parametrize("tool_format", ["qwen3_coder"])
def test_the_cpu_main_job_trains_in_another_tool_call_format(tool_format, tmp_path):
    proc, out_dir = run_recipe(
        str(tmp_path),
        TOOL_FORMAT=tool_format,
        VAL_BEFORE_TRAIN="false",
        TEST_FREQ="-1",
        WARMUP_STEPS="300",
        timeout=2400,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    assert f"actor_rollout_ref.rollout.multi_turn.format={tool_format}" in log
    metrics = read_metrics(out_dir)
    assert sorted(metrics) == list(range(1, STEPS + 1))
    for m in metrics.values():
        # the warm-up taught the format: the loop's parse found calls, nearly all of them runnable
        assert m["reward_extra/agent_tool_calls/mean"] > 0.5, m["reward_extra/agent_tool_calls/mean"]
        assert m["reward_extra/agent_malformed_calls/mean"] <= 0.25 * m["reward_extra/agent_tool_calls/mean"]
        # HierR scored those calls (not a hermes re-read of XML, which would find no call and score 0)
        assert m["reward_extra/num_calls/mean"] > 0.5 and m["reward_extra/r_tool/mean"] > 0.5
        assert m["slca/tool_tokens/mean"] > 0 and m["slca/summary_tokens/mean"] > 0
    assert os.path.isdir(os.path.join(out_dir, f"global_step_{STEPS}"))
