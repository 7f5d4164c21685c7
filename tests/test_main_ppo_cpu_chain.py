"""The multi-step CPU task in verl's trainer: ``TASK=cpu_chain bash recipes/run_cpu_tiny_slca.sh`` with per-turn
credit runs verl's own ``main_ppo`` for two steps on a tiny Qwen3 warmed up on the chain's gold episodes (a shorter
warm-up than the documented runs': the plumbing is under test here, the learning in benchmarks/cpu_reproduction.py).

What must hold: rollouts make a second tool turn (the estimator sees turn 2), the offline simulator in the run answers
``find_station`` with the station data preparation put in the gold's second call (otherwise no rollout could ever
match it), and verl's validation reports the three row kinds apart.
"""

import glob
import json
import math
import re

import pytest
from main_ppo_helpers import read_metrics, run_recipe

from data_prep import cpu_chain

pytestmark = pytest.mark.e2e  # verl's main_ppo through the recipe (pytest.ini, tiers)

CALL_THEN_ANSWER = re.compile(
    r'"name": "find_station", "arguments": \{"city": "([A-Za-z]+)"\}\}\s*</tool_call>.*?\{"station": "([A-Za-z]+)"\}',
    re.S,
)


@pytest.fixture(scope="module")
def chain_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("cpu_chain")
    dump = root / "rollouts"
    args = ("+algorithm.slca.credit=turn", f"trainer.rollout_data_dir={dump}")
    proc, out_dir = run_recipe(str(root), args=args, TASK="cpu_chain", SEED="0", WARMUP_STEPS="300")
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    rollouts = [json.loads(line) for path in sorted(glob.glob(str(dump / "*.jsonl"))) for line in open(path)]
    return read_metrics(out_dir), rollouts


def test_verl_validates_the_chain_one_call_and_chat_rows_apart(chain_run):
    metrics, _ = chain_run
    assert sorted(metrics) == [0, 1, 2]
    for source in ("cpu_chain", "cpu_chain_single", "cpu_chain_chat"):
        assert 0.0 <= metrics[0][f"val-aux/{source}/toolpo_success/mean@1"] <= 1.0


def test_rollouts_make_a_second_tool_turn_and_it_gets_its_own_credit(chain_run):
    metrics, _ = chain_run
    for step in (1, 2):
        m = metrics[step]
        assert m["slca/turns/mean"] > 1.0  # the chain rows went on after their first call
        for key in ("slca/turn1/reward_mean", "slca/turn2/reward_mean", "slca/turn2/adv_mean", "slca/stop_adv/mean"):
            assert math.isfinite(m[key]), key


def test_the_runs_simulator_answers_find_station_with_the_gold_station(chain_run):
    _, rollouts = chain_run
    assert len(rollouts) == 2 * 8 * 4  # verl's dump of both steps' rollouts (8 prompts x 4)
    expected = cpu_chain.stations(0)  # what data preparation wrote into the gold's second calls
    seen = [m.groups() for r in rollouts for m in CALL_THEN_ANSWER.finditer(r["output"])]
    assert len(seen) >= 8, [r["output"][:300] for r in rollouts[:3]]
    assert all(expected.get(city) == station for city, station in seen if city in expected), seen
    assert any(city in expected for city, _ in seen)
