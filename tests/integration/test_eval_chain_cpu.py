"""The eval chain on a checkpoint verl's trainer wrote, with the commands a GPU user runs (docs/eval.md, "On a CPU"):
two steps of ``recipes/run_cpu_tiny_slca.sh`` -> verl's FSDP checkpoint -> ``DEVICE=cpu recipes/eval_in_domain.sh``
(verl's validation on the held-out prompts), ``recipes/eval_bfcl.sh`` and ``recipes/eval_tau2.sh`` (the checkpoint
merged by verl's model_merger, widened for vLLM's CPU attention and served by vLLM), each writing its result files.

The tiny model's BFCL and tau^2 scores are near zero: what is tested is that every command runs on a trained
checkpoint and writes the keys docs/eval.md documents. The served model of the tier is tau^2's user simulator.
"""

import json
import os
import subprocess

import pytest
import subproc
from main_ppo_helpers import REPO, STEPS, run_recipe
from sgls_helpers import free_port
from test_tau2_mock import tau2_bin

from slca_verl.eval import bfcl_leaderboard

SEED = "0"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, vllm):
    """verl's actor checkpoint after two training steps of the CPU main job (validation off: not under test here).
    Needs the tier (``vllm``: skipped without it): its venv serves the policy, its server is tau^2's user."""
    root = str(tmp_path_factory.mktemp("chain"))
    proc, out_dir = run_recipe(root, SEED=SEED, VAL_BEFORE_TRAIN="false", TEST_FREQ="-1")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    ckpt = os.path.join(out_dir, f"global_step_{STEPS}")
    assert os.path.isdir(os.path.join(ckpt, "actor")), os.listdir(out_dir)
    return ckpt


def run_eval(script: str, ckpt: str, out_dir: str, **env) -> subprocess.CompletedProcess:
    env = {
        **{k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"},
        "DEVICE": "cpu",
        "OUT_DIR": out_dir,
        "PORT": str(free_port()),
        **env,
    }
    return subproc.run(
        ["bash", os.path.join(REPO, "recipes", script), ckpt],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )


def test_eval_in_domain_scores_the_trained_checkpoint_with_verls_validation(checkpoint, tmp_path):
    proc = run_eval("eval_in_domain.sh", checkpoint, str(tmp_path), SEED=SEED)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    result = json.loads((tmp_path / "in_domain.json").read_text())
    overall = result["overall"]
    assert overall["n"] > 0
    for key in ("name_f1", "arg_match", "process", "format_valid", "success@1"):
        assert 0.0 <= overall[key] <= 100.0, key
    assert (tmp_path / "in_domain.md").read_text().startswith("| set |")


def test_eval_bfcl_runs_bfcl_eval_on_every_offline_category_of_the_served_checkpoint(checkpoint, tmp_path, bfcl_python):
    """bfcl-eval's own generate (its multi-turn loop and executable backends included) and evaluate, one entry of
    each offline category, against the merged checkpoint on vLLM's CPU server."""
    proc = run_eval(
        "eval_bfcl.sh", checkpoint, str(tmp_path), LIMIT="1", MAX_TOKENS="64", BFCL_PYTHON=bfcl_python, LABEL="tiny"
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    # verl's model_merger wrote the HF model, the export widened it for vLLM's CPU attention
    merged = os.path.join(checkpoint, "actor", "merged_hf")
    assert os.path.isfile(os.path.join(merged, "config.json"))
    assert json.load(open(os.path.join(merged + "_vllm_cpu", "config.json")))["head_dim"] == 64
    result = json.loads((tmp_path / "bfcl_leaderboard.json").read_text())
    assert set(result["categories"]) == set(bfcl_leaderboard.OFFLINE_CATEGORIES)
    assert all(v["total_count"] == 1 for v in result["categories"].values())
    assert set(result["left_out"]) == set(bfcl_leaderboard.NEEDS_INTERNET)
    assert 0.0 <= result["overall_v4"] <= 1.0 and result["v3_style"]["value"] is not None
    # the multi-turn entries went through bfcl-eval's loop: one list of model outputs per user turn, none an error
    for path in (tmp_path / "bfcl" / "result").rglob("BFCL_v4_multi_turn_*_result.json"):
        entry = json.loads(path.read_text().splitlines()[0])
        assert isinstance(entry["result"], list) and all(isinstance(t, list) for t in entry["result"]), entry
    assert "POST /v1/completions" in (tmp_path / "policy_server.log").read_text()  # the served checkpoint answered
    assert (tmp_path / "summary.md").read_text().splitlines()[2].startswith("| tiny | not run | ")


@pytest.mark.skipif(tau2_bin() is None, reason="tau^2-bench not installed: bash scripts/tau2_setup.sh")
def test_eval_tau2_runs_the_mock_domain_with_the_checkpoint_as_agent(checkpoint, tmp_path, vllm):
    url, model = vllm
    proc = run_eval(
        "eval_tau2.sh",
        checkpoint,
        str(tmp_path),
        DOMAINS="mock",
        NUM_TRIALS="1",
        KS="1",
        TASK_IDS="create_task_1",
        MAX_STEPS="10",
        MAX_TOKENS="128",
        USER_BASE_URL=url,
        USER_MODEL=model,
        TAU2_BIN=tau2_bin(),
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    result = json.loads((tmp_path / "tau2.json").read_text())
    assert result["domains"]["mock"]["n_simulations"] == 1 and result["domains"]["mock"]["n_failed"] in (0, 1)
    assert 0.0 <= result["domains"]["mock"]["pass^1"] <= 1.0
    assert result["agent_model"] == "policy" and result["user_model"] == model
