"""examples/quickstart.py end to end, shortened to two steps: data prep -> slca_tool_agent -> SGLS -> HierR ->
slca_grpo -> verl's PPO loss on the tiny policy."""

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def quickstart():
    import quickstart

    return quickstart


def test_quickstart_runs_two_steps_through_the_whole_pipeline_and_trains_the_policy(quickstart, tmp_path, capsys):
    png = tmp_path / "qs.png"
    out = quickstart.main(["--steps", "2", "--n", "4", "--plot", str(png)])
    printed = capsys.readouterr().out
    assert "data_prep.xlam: 12 rows" in printed
    assert len(out["history"]) == 2
    # every trajectory asked the policy twice through verl's server-manager interface: the call, then the reply
    assert out["generate_calls"] == 2 * 2 * 12 * 4
    for h in out["history"]:
        assert h["tool_tokens"] > 0 and h["summary_tokens"] > 0  # the agent loop wrote both segments
        assert 0.0 <= h["r_tool"] <= 1.0
        # SGLS's group cache answers identical calls of a group once, so fewer backend calls than trajectories
        assert 0.0 < h["sim_calls_per_traj"] < 1.0
        assert h["cache_hits"] > 0
    assert out["param_change"] > 0.0  # slca_grpo's advantages reached the tiny policy through verl's loss
    assert png.exists() and png.stat().st_size > 1000
