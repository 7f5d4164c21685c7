"""A run on several nodes: the variables its workers need reach every node through verl's own ray_init.runtime_env.

A Ray cluster of two nodes on this machine (``ray start --head``, ``ray start --address``), each started from an
environment without the variable, as a second machine would be. verl's own ``run_ppo`` (the entry of
``python -m verl.trainer.main_ppo``) joins it with the 7B recipe's overrides and starts a task runner that asks every
node for the variable. Ray does not forward the driver's environment: without the recipe's forwarding, no node has it.
"""

import json
import os
import secrets
import socket
import subprocess
import sys

import pytest
import subproc
from main_ppo_helpers import REPO

pytestmark = pytest.mark.e2e

PROBE = """
import json, os, sys
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
sys.path.insert(0, os.path.join(sys.argv[1], "recipes"))
import compose_check
from verl.trainer.main_ppo import run_ppo
OUT = json.loads(%r)  # a literal: a worker that re-runs this module sees Ray's sys.argv, not ours

def node_env(name):
    return ray.get_runtime_context().get_node_id(), os.environ.get(name)

@ray.remote(num_cpus=0)
class Probe:
    def run(self, config):
        ask = ray.remote(num_cpus=0)(node_env)
        seen = [ray.get(ask.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                        .remote("SLCA_PROBE_VAR")) for n in ray.nodes() if n["Alive"]]
        with open(OUT, "w") as f:
            json.dump(seen, f)

run_ppo(compose_check.compose("ppo_trainer", json.load(open(sys.argv[2]))), task_runner_class=Probe)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``ray start`` twice on this machine, from an environment without SLCA_PROBE_VAR; stopped by its temp dir."""
    port, tmp = _free_port(), f"/tmp/slca-test-ray-{os.getpid()}"
    token = tmp_path_factory.mktemp("ray") / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {k: v for k, v in os.environ.items() if k not in ("SLCA_PROBE_VAR", "RAY_ADDRESS")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))  # every node and the driver: one token
    common = [
        "--num-cpus",
        "4",
        "--num-gpus",
        "1",
        "--temp-dir",
        tmp,
        "--disable-usage-stats",
        "--node-ip-address",
        "127.0.0.1",
    ]
    try:
        subproc.run(
            ["ray", "start", "--head", "--port", str(port), "--include-dashboard", "false", *common],
            env=env,
            check=True,
            capture_output=True,
            timeout=180,
        )
        subproc.run(
            ["ray", "start", "--address", f"127.0.0.1:{port}", *common],
            env=env,
            check=True,
            capture_output=True,
            timeout=180,
        )
        yield f"127.0.0.1:{port}", token
    finally:
        subprocess.run(["pkill", "-KILL", "-f", tmp], check=False)  # every process of this cluster, no other Ray


def run_with(cluster, overrides: list[str], tmp_path) -> list[list]:
    (tmp_path / "overrides.json").write_text(json.dumps(overrides))
    address, token = cluster
    env = {
        **os.environ,
        "SLCA_PROBE_VAR": "from-the-launching-shell",
        "RAY_ADDRESS": address,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
    }
    probe = PROBE % json.dumps(str(tmp_path / "seen.json"))  # no '%' elsewhere in PROBE
    args = [sys.executable, "-c", probe, REPO, str(tmp_path / "overrides.json")]
    proc = subproc.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads((tmp_path / "seen.json").read_text())


def recipe_overrides(tmp_path, cluster) -> list[str]:
    env = {
        **os.environ,
        "DRY_RUN": "args",
        "OUTPUT_DIR": str(tmp_path),
        "SERVICES_DIR": str(tmp_path),
        "RAY_ADDRESS": cluster[0],
        "NNODES": "2",
        "N_GPUS_PER_NODE": "1",
        "SLCA_PROBE_VAR": "from-the-launching-shell",
        "FORWARD_ENV": "VERL_FILE_LOGGER_PATH SLCA_PROBE_VAR",
    }
    proc = subproc.run(
        ["bash", os.path.join(REPO, "recipes", "run_qwen7b_slca.sh")], env=env, capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return [a.decode() for a in proc.stdout.split(b"\0") if a]


def test_the_recipes_forwarded_variable_reaches_every_node(cluster, tmp_path):
    overrides = recipe_overrides(tmp_path, cluster)
    assert f"+ray_kwargs.ray_init.address={cluster[0]}" in overrides
    seen = run_with(cluster, overrides, tmp_path)
    assert len({node for node, _ in seen}) == 2
    assert [value for _, value in seen] == ["from-the-launching-shell"] * 2


def test_without_the_forwarding_no_node_has_it(cluster, tmp_path):
    overrides = [o for o in recipe_overrides(tmp_path, cluster) if ".runtime_env.env_vars." not in o]
    seen = run_with(cluster, overrides, tmp_path)
    assert len(seen) == 2 and [value for _, value in seen] == [None, None]
