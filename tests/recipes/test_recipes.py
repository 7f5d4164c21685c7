"""Every recipe parses, composes with verl 0.9.1's own hydra configs and passes verl's validation on CPU; the baselines
differ from the SLCA run only where the estimator needs it; the serving scripts wait for health and publish URLs."""

import json
import os
import signal
import subprocess
import textwrap
import time

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECIPES = os.path.join(REPO, "recipes")
import compose_check  # noqa: E402
import subproc  # noqa: E402

RL_RECIPES = {
    "run_qwen7b_slca.sh": "slca_grpo",
    "run_qwen7b_grpo.sh": "grpo",
    "run_qwen7b_toolpo.sh": "slca_toolpo",
    "run_qwen7b_rltr.sh": "slca_rltr",
    "run_qwen7b_gdpo.sh": "slca_gdpo_v1",
    "run_qwen3b_slca.sh": "slca_grpo",
    "run_qwen7b_slca_1node.sh": "slca_grpo",
    "run_smoke_1gpu.sh": "slca_grpo",
    "run_cpu_tiny_slca.sh": "slca_grpo",
}
EXPECTED_LAYOUT = {
    "slca_grpo": "slca",
    "grpo": "scalar",
    "slca_toolpo": "toolpo",
    "slca_rltr": "rltr",
    "slca_gdpo_v1": "scalar",
}


def recipe_args(name: str, out_dir: str, **env) -> list[str]:
    """The hydra overrides a recipe would launch with (DRY_RUN=args), with its run config written under out_dir."""
    proc = subproc.run(
        ["bash", os.path.join(RECIPES, name)],
        capture_output=True,
        env={**os.environ, "DRY_RUN": "args", "OUTPUT_DIR": out_dir, "SERVICES_DIR": out_dir, **env},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return [a.decode() for a in proc.stdout.split(b"\0") if a]


def as_dict(overrides):
    return dict(o.split("=", 1) for o in overrides)


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    """Every recipe's overrides, composed and checked once: {recipe: (overrides, cfg, summary)}."""
    out = {}
    for name in [*RL_RECIPES, "run_qwen7b_sft.sh"]:
        args = recipe_args(name, str(tmp_path_factory.mktemp(name.replace(".", "_"))))
        config = compose_check.SFT if "sft" in name else compose_check.PPO
        cfg, summary = compose_check.check(config, args)
        out[name] = (args, cfg, summary)
    return out


def test_every_shell_script_passes_bash_n():
    scripts = sorted(f for f in os.listdir(RECIPES) if f.endswith(".sh"))
    assert len(scripts) >= 11
    for script in scripts:
        proc = subproc.run(["bash", "-n", os.path.join(RECIPES, script)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}: {proc.stderr}"


def test_training_recipes_follow_verls_shape():
    for name in [*RL_RECIPES, "run_qwen7b_sft.sh"]:
        text = open(os.path.join(RECIPES, name)).read()
        assert "set -xeuo pipefail" in text, name
    main = open(os.path.join(RECIPES, "run_qwen7b_slca.sh")).read()
    assert "MAIN=(python3 -m)" in main and '"${MAIN[@]}" verl.trainer.main_ppo "${OVERRIDES[@]}" "$@"' in main
    assert "torchrun" in open(os.path.join(RECIPES, "run_qwen7b_sft.sh")).read()


@pytest.mark.parametrize("name", [*RL_RECIPES, "run_qwen7b_sft.sh"])
def test_every_recipe_composes_against_verl_config_and_passes_its_validation(composed, name):
    _, cfg, summary = composed[name]
    if name in RL_RECIPES:
        estimator = RL_RECIPES[name]
        assert summary["adv_estimator"] == estimator
        assert summary["reward_layout"] == EXPECTED_LAYOUT[estimator]
        assert summary["agent_loop"] == "slca_tool_agent"
        assert summary["use_v1"] is True  # every method in the same (v1) trainer, gdpo included as gdpo_v1
        assert cfg.reward.custom_reward_function.path == "pkg://slca_verl.agent_loop.reward"
    else:
        assert summary["messages_key"] == "messages"


def test_the_7b_slca_recipe_carries_the_papers_settings(composed):
    _, cfg, summary = composed["run_qwen7b_slca.sh"]
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert (cfg.data.train_batch_size, rollout.n, actor.optim.lr, actor.ppo_mini_batch_size) == (128, 16, 1e-6, 32)
    assert actor.use_kl_loss and actor.kl_loss_coef == 0.001 and actor.kl_loss_type == "low_var_kl"
    assert cfg.algorithm.use_kl_in_reward is False and actor.entropy_coeff == 0
    assert actor.policy_loss.loss_mode == "vanilla" and actor.loss_agg_mode == "token-mean"
    assert (cfg.data.max_prompt_length, cfg.data.max_response_length) == (24576, 8192)
    assert (cfg.trainer.total_epochs, cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (5, 4, 8)
    mt = rollout.multi_turn
    assert (mt.max_assistant_turns, mt.max_user_turns, mt.max_parallel_calls, mt.format) == (10, 6, 20, "hermes")
    assert rollout.name == "vllm" and rollout.mode == "async"
    assert summary["trainer_mode"] == "slca_sync"
    assert (cfg.algorithm.slca.lambda_tool, cfg.algorithm.slca.lambda_sum) == (1.0, 1.0)


def test_the_7b_slca_recipe_carries_the_authors_launcher_settings(composed):
    args, cfg, _ = composed["run_qwen7b_slca.sh"]
    overrides = as_dict(args)
    rollout, trainer = cfg.actor_rollout_ref.rollout, cfg.trainer
    # tool responses: 2,048 characters (verl counts characters), cut in the middle, in verl's config and in the run's
    # agent loop YAML (whose keyword arguments win over rollout.multi_turn)
    assert overrides["actor_rollout_ref.rollout.multi_turn.max_tool_response_length"] == "2048"
    assert rollout.multi_turn.max_tool_response_length == 2048
    (entry,) = yaml.safe_load(open(rollout.agent.agent_loop_config_path))
    assert (entry["max_tool_response_length"], entry["tool_response_truncate_side"]) == (2048, "middle")
    assert (entry["max_assistant_turns"], entry["max_user_turns"], entry["max_parallel_calls"]) == (10, 6, 20)
    # vLLM engine settings
    assert rollout.gpu_memory_utilization == 0.82
    assert rollout.enable_prefix_caching and rollout.enable_chunked_prefill
    assert rollout.enforce_eager and rollout.free_cache_engine
    assert (rollout.max_model_len, rollout.max_num_seqs, rollout.tensor_model_parallel_size) == (32768, 32, 1)
    assert rollout.log_prob_micro_batch_size_per_gpu == 128
    assert cfg.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu == 128
    assert cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 1
    # checkpoints and resuming
    assert (trainer.max_actor_ckpt_to_keep, trainer.max_critic_ckpt_to_keep) == (8, 8)
    assert trainer.resume_mode == "auto" and trainer.resume_from_path is None
    assert (trainer.save_freq, trainer.test_freq, trainer.val_before_train) == (10, 10, True)
    # the judge: the authors' per-request timeout and retries, room for gpt-oss's reasoning
    kwargs = cfg.reward.custom_reward_function.reward_kwargs
    assert (kwargs.judge_timeout_s, kwargs.judge_max_retries, kwargs.judge_max_tokens) == (540, 3, 8192)


def test_the_recipes_multi_turn_limits_reach_the_run_agent_loop_yaml(tmp_path):
    args = as_dict(
        recipe_args(
            "run_qwen7b_slca.sh",
            str(tmp_path),
            MAX_TOOL_RESPONSE_CHARS="4096",
            MAX_ASSISTANT_TURNS="3",
            RESUME_MODE="resume_path",
            RESUME_FROM_PATH="/ckpt/global_step_20",
        )
    )
    (entry,) = yaml.safe_load(open(args["actor_rollout_ref.rollout.agent.agent_loop_config_path"]))
    assert (entry["max_tool_response_length"], entry["max_assistant_turns"]) == (4096, 3)
    assert args["actor_rollout_ref.rollout.multi_turn.max_tool_response_length"] == "4096"
    assert (args["trainer.resume_mode"], args["trainer.resume_from_path"]) == ("resume_path", "/ckpt/global_step_20")


@pytest.mark.parametrize(
    "baseline", ["run_qwen7b_grpo.sh", "run_qwen7b_toolpo.sh", "run_qwen7b_rltr.sh", "run_qwen7b_gdpo.sh"]
)
def test_a_baseline_differs_from_the_slca_run_only_where_its_estimator_needs_it(composed, baseline):
    slca, other = as_dict(composed["run_qwen7b_slca.sh"][0]), as_dict(composed[baseline][0])
    allowed = {
        "algorithm.adv_estimator",
        "+algorithm.slca.lambda_tool",
        "+algorithm.slca.lambda_sum",
        "+algorithm.toolpo.lambda_action",
        "+algorithm.gdpo_reward_keys",
        "trainer.v1.trainer_mode",
        "trainer.use_v1",
        "trainer.experiment_name",
        "trainer.default_local_dir",
        "actor_rollout_ref.rollout.agent.agent_loop_config_path",
        "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH",
        "hydra.run.dir",  # the run's own dir
    }
    differing = {k for k in slca.keys() | other.keys() if slca.get(k) != other.get(k)}
    assert differing <= allowed, differing - allowed
    budget = [
        "data.train_batch_size",
        "actor_rollout_ref.rollout.n",
        "trainer.total_epochs",
        "trainer.nnodes",
        "data.max_response_length",
        "actor_rollout_ref.actor.optim.lr",
        "data.train_files",
    ]
    assert [other[k] for k in budget] == [slca[k] for k in budget]


def test_the_run_agent_loop_yaml_points_sgls_at_the_served_urls(tmp_path):
    args = as_dict(recipe_args("run_qwen7b_toolpo.sh", str(tmp_path), SGLS_URLS="http://a:1/v1,http://b:2/v1"))
    (entry,) = yaml.safe_load(open(args["actor_rollout_ref.rollout.agent.agent_loop_config_path"]))
    assert entry["reward_layout"] == "toolpo"
    assert entry["sgls"]["backend"] == "openai" and entry["sgls"]["base_urls"] == ["http://a:1/v1", "http://b:2/v1"]
    assert entry["sgls"]["temperature"] == 0.6 and entry["sgls"]["cache_scope"] == "group"  # template kept


def test_served_urls_reach_training_through_the_services_dir(tmp_path):
    (tmp_path / "sgls_urls").write_text("http://10.0.0.5:8000/v1,http://10.0.0.6:8000/v1\n")
    (tmp_path / "judge_urls").write_text("http://10.0.0.7:8016/v1\n")
    args = as_dict(recipe_args("run_qwen7b_slca.sh", str(tmp_path)))
    assert args["+reward.custom_reward_function.reward_kwargs.judge_base_urls"] == "[http://10.0.0.7:8016/v1]"
    (entry,) = yaml.safe_load(open(args["actor_rollout_ref.rollout.agent.agent_loop_config_path"]))
    assert entry["sgls"]["base_urls"] == ["http://10.0.0.5:8000/v1", "http://10.0.0.6:8000/v1"]


def test_the_smoke_recipe_needs_no_servers_and_fits_one_gpu(composed):
    args, cfg, _ = composed["run_smoke_1gpu.sh"]
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node, cfg.trainer.total_training_steps) == (1, 1, 2)
    assert as_dict(args)["+reward.custom_reward_function.reward_kwargs.judge"] == "offline_proxy"
    (entry,) = yaml.safe_load(open(cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path))
    assert entry["sgls"]["backend"] == "offline"


@pytest.mark.parametrize("estimator", ["slca_grpo", "grpo"])
def test_abstention_fix_switches_on_both_fixes_and_still_composes(tmp_path, estimator):
    args = recipe_args("run_qwen7b_slca.sh", str(tmp_path), ABSTENTION_FIX="1", ADV_ESTIMATOR=estimator)
    judged = "+reward.custom_reward_function.reward_kwargs.judge_direct_replies=true"
    assert judged in args  # the reward side, for every estimator
    assert ("+algorithm.slca.abstention_credit=true" in args) is (estimator == "slca_grpo")
    cfg, summary = compose_check.check(compose_check.PPO, args)
    assert summary["adv_estimator"] == estimator
    default = recipe_args("run_qwen7b_slca.sh", str(tmp_path / "default"), ADV_ESTIMATOR=estimator)
    assert sorted(set(args) - set(default)) == sorted(a for a in args if "abstention" in a or "direct_replies" in a)


@pytest.mark.slow
def test_dry_run_mode_runs_the_composer_end_to_end(tmp_path):
    proc = subproc.run(
        ["bash", os.path.join(RECIPES, "run_qwen7b_rltr.sh")],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "DRY_RUN": "1", "OUTPUT_DIR": str(tmp_path), "SERVICES_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OK: ppo_trainer composed" in proc.stderr and "'adv_estimator': 'slca_rltr'" in proc.stderr


@pytest.mark.parametrize(
    "bad,message",
    [
        (["+algorithm.slca.lamda_tool=2"], "unknown keys under algorithm.slca"),
        (["algorithm.adv_estimator=no_such_estimator"], "no_such_estimator"),
        (["trainer.v1.trainer_mode=sync"], r"slca_gdpo_v1 gets its reward components from an slca_\* trainer mode"),
        (["algorithm.adv_estimator=gdpo", "trainer.use_v1=false"], r"gdpo needs \+algorithm.gdpo_reward_keys"),
        (["actor_rollout_ref.rollout.multi_turn.format=hermez"], "multi_turn.format='hermez' is not a tool-call"),
    ],
)
def test_the_composer_rejects_typos_unregistered_names_and_unsupported_combinations(composed, bad, message):
    base = composed["run_qwen7b_gdpo.sh" if "trainer_mode" in bad[0] else "run_qwen7b_slca.sh"][0]
    with pytest.raises(Exception, match=message):
        compose_check.check(compose_check.PPO, [*base, *bad])


def test_the_slca_recipe_composes_with_another_tool_call_format_by_one_override(composed):
    base = composed["run_qwen7b_slca.sh"][0]
    override = "actor_rollout_ref.rollout.multi_turn.format=qwen3_coder"
    cfg, summary = compose_check.check(compose_check.PPO, [*base, override])
    assert cfg.actor_rollout_ref.rollout.multi_turn.format == "qwen3_coder"
    assert summary["agent_loop"] == "slca_tool_agent"


def test_the_slca_recipe_composes_per_turn_credit_by_one_override(composed):
    base = composed["run_qwen7b_slca.sh"][0]
    cfg, summary = compose_check.check(compose_check.PPO, [*base, "+algorithm.slca.credit=turn"])
    assert cfg.algorithm.slca.credit == "turn" and summary["reward_layout"] == "slca_turns"
    with pytest.raises(ValueError, match="algorithm.slca.credit"):
        compose_check.check(compose_check.PPO, [*base, "+algorithm.slca.credit=turns"])


@pytest.mark.parametrize("mode", ["sync", "colocate_async", "separate_async"])
def test_the_slca_recipe_composes_in_every_v1_mode_by_one_override_and_warns_without_the_hand_over(
    composed, mode, caplog
):
    base = composed["run_qwen7b_slca.sh"][0]
    _, summary = compose_check.check(compose_check.PPO, [*base, f"trainer.v1.trainer_mode=slca_{mode}"])
    assert summary["trainer_mode"] == f"slca_{mode}" and "hands no segment ids" not in caplog.text
    _, summary = compose_check.check(compose_check.PPO, [*base, f"trainer.v1.trainer_mode={mode}"])
    assert f"trainer.v1.trainer_mode={mode} hands no segment ids to slca_grpo" in caplog.text


@pytest.mark.parametrize("estimator", ["slca_gigpo", "slca_mt_grpo"])
def test_the_slca_recipe_runs_the_per_turn_comparators_with_per_turn_step_rewards(tmp_path, estimator):
    args = recipe_args("run_qwen7b_slca.sh", str(tmp_path), ADV_ESTIMATOR=estimator)
    assert f"algorithm.adv_estimator={estimator}" in args and "trainer.v1.trainer_mode=slca_sync" in args
    layout = yaml.safe_load(open(tmp_path / "config" / "agent_loop.yaml"))[0]["reward_layout"]
    assert layout == "slca_turns"


@pytest.mark.parametrize("old", ["toolpo", "rltr", "gdpo_v1", "gigpo", "mt_grpo"])
def test_the_slca_recipe_takes_an_old_estimator_name_as_its_slca_name_saying_it_is_deprecated(tmp_path, old):
    env = {"DRY_RUN": "args", "OUTPUT_DIR": str(tmp_path), "SERVICES_DIR": str(tmp_path), "ADV_ESTIMATOR": old}
    proc = subproc.run(
        ["bash", os.path.join(RECIPES, "run_qwen7b_slca.sh")],
        capture_output=True,
        env={**os.environ, **env},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert f"algorithm.adv_estimator=slca_{old}" in [a.decode() for a in proc.stdout.split(b"\0")]
    assert f"ADV_ESTIMATOR={old} is deprecated and will be removed in the next release" in proc.stderr.decode()


def test_the_composer_rejects_a_layout_that_does_not_match_the_estimator(composed):
    base = composed["run_qwen7b_toolpo.sh"][0]
    message = (
        "adv_estimator=slca_toolpo reads the 'toolpo' reward layout; the agent loop 'slca_tool_agent' writes 'slca'"
    )
    with pytest.raises(ValueError, match=message):
        compose_check.check(
            compose_check.PPO,
            [
                *base,
                "algorithm.adv_estimator=slca_toolpo",
                *[
                    a
                    for a in composed["run_qwen7b_slca.sh"][0]
                    if a.startswith("actor_rollout_ref.rollout.agent.agent_loop_config_path")
                ],
            ],
        )


FAKE_VLLM = textwrap.dedent(
    """\
    #!/usr/bin/env python3
    # stands in for `vllm serve MODEL --port P ...`: healthy after HEALTH_DELAY_S, records its pid, argv, GPUs and
    # key; with PROGRESS_S it logs a line that often until healthy (a server still loading)
    import http.server, json, os, sys, threading, time
    port = int(sys.argv[sys.argv.index("--port") + 1])
    d = os.environ["SERVICES_DIR"]
    open(os.path.join(d, f"fake_{port}.pid"), "w").write(str(os.getpid()))
    open(os.path.join(d, f"fake_{port}.argv"), "w").write(" ".join(sys.argv[1:]))
    json.dump({"gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "key": os.environ.get("VLLM_API_KEY")},
              open(os.path.join(d, f"fake_{port}.env"), "w"))
    ready = time.time() + float(os.environ.get("HEALTH_DELAY_S", "0.5"))
    def progress():
        while time.time() < ready:
            print(f"Loading safetensors checkpoint shards: {time.time():.1f}", flush=True)
            time.sleep(float(os.environ["PROGRESS_S"]))
    if os.environ.get("PROGRESS_S"):
        threading.Thread(target=progress, daemon=True).start()
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" and time.time() > ready else 503)
            self.end_headers()
        def log_message(self, *a):
            pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


FAKE_HF = '#!/usr/bin/env bash\necho "$@" >> "${SERVICES_DIR}/hf_calls"\n'


def serve_env(tmp_path, port, **over):
    """The environment of a serve script run against the stand-in vllm and hf (written into tmp_path)."""
    for name, text in (("vllm", FAKE_VLLM), ("hf", FAKE_HF)):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    env = {
        **os.environ,
        "VLLM_BIN": str(tmp_path / "vllm"),
        "HF_BIN": str(tmp_path / "hf"),
        "SERVICES_DIR": str(tmp_path),
        "PORT": str(port),
        "ADVERTISE_HOST": "127.0.0.1",
        "HOST": "127.0.0.1",
        "DETACH": "1",
        "POLL_S": "0.2",
        "HEALTH_TIMEOUT_S": "30",
    }
    env.pop("NUM_GPUS", None)
    return {**env, **over}


def stop_fakes(tmp_path):
    for pid_file in tmp_path.glob("fake_*.pid"):
        try:
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass


def serve(script, env):
    return subproc.run(["bash", os.path.join(RECIPES, script)], capture_output=True, text=True, env=env, timeout=60)


def free_port_pair():
    import socket

    with socket.socket() as a, socket.socket() as b:
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", a.getsockname()[1] + 1))
        return a.getsockname()[1]


def test_serve_script_starts_replicas_waits_for_health_and_publishes_their_urls(tmp_path):
    port = free_port_pair()
    env = serve_env(tmp_path, port, REPLICAS="2", GPUS_PER_REPLICA="1")
    start = time.monotonic()
    try:
        proc = serve("serve_sgls.sh", env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        urls = f"http://127.0.0.1:{port}/v1,http://127.0.0.1:{port + 1}/v1"
        assert (tmp_path / "sgls_urls").read_text().strip() == urls
        assert proc.stdout.strip().splitlines()[-1] == urls
        argv = (tmp_path / f"fake_{port}.argv").read_text()
        assert argv.startswith("serve Qwen/Qwen3-235B-A22B-Instruct-2507 --served-model-name Qwen3-235B-A22B-Instruct")
        assert time.monotonic() - start >= 0.5  # it waited for /health, not just for the port
        # the model was fetched with `hf download` first (huggingface-cli now refuses in favour of hf)
        assert (tmp_path / "hf_calls").read_text() == "download Qwen/Qwen3-235B-A22B-Instruct-2507\n"
        # every replica demands one key, generated into SERVICES_DIR/api_key (0600), never on a command line or
        # in the `set -x` trace
        key_file = tmp_path / "api_key"
        assert oct(key_file.stat().st_mode & 0o777) == "0o600"
        key = key_file.read_text().strip()
        assert len(key) > 30
        seen = [json.load(open(tmp_path / f"fake_{p}.env")) for p in (port, port + 1)]
        assert [s["key"] for s in seen] == [key, key] and [s["gpus"] for s in seen] == ["0", "1"]
        assert key not in proc.stdout + proc.stderr and key not in argv
    finally:
        stop_fakes(tmp_path)


def test_the_simulator_and_the_judge_on_one_node_take_disjoint_gpus_and_a_collision_fails_loudly(tmp_path):
    port = free_port_pair()
    try:
        sgls = serve("serve_sgls.sh", serve_env(tmp_path, port, GPUS_PER_REPLICA="4"))
        assert sgls.returncode == 0, sgls.stderr[-2000:]
        key = (tmp_path / "api_key").read_text()
        judge = serve("serve_judge.sh", serve_env(tmp_path, port + 1))  # default: after the simulator's GPUs
        assert judge.returncode == 0, judge.stderr[-2000:]
        gpus = [json.load(open(tmp_path / f"fake_{p}.env"))["gpus"] for p in (port, port + 1)]
        assert gpus == ["0,1,2,3", "4,5"]
        assert (tmp_path / "api_key").read_text() == key  # one key per SERVICES_DIR, made once
        port2 = free_port_pair()
        clash = serve("serve_judge.sh", serve_env(tmp_path, port2, FIRST_GPU="3"))
        assert clash.returncode != 0 and "GPU 3 is already taken by sgls" in clash.stderr
        full = serve("serve_judge.sh", serve_env(tmp_path, port2, NUM_GPUS="6"))  # GPUs 6,7 do not exist
        assert full.returncode != 0 and "has 6" in full.stderr
        assert not (tmp_path / f"fake_{port2}.pid").exists()  # nothing was started
        # the claim comes before the download: the judge was fetched once (its own start), not by the failed ones,
        # and without the repository's original/ and metal/ copies of the weights
        calls = (tmp_path / "hf_calls").read_text().splitlines()
        assert calls.count("download openai/gpt-oss-120b --exclude original/* --exclude metal/*") == 1, calls
        stopped = subproc.run(
            ["bash", os.path.join(RECIPES, "serve_stop.sh")],
            capture_output=True,
            text=True,
            env={**os.environ, "SERVICES_DIR": str(tmp_path)},
            timeout=120,
        )
        assert stopped.returncode == 0 and "sgls: stopped" in stopped.stdout and "judge: stopped" in stopped.stdout
        for p in (port, port + 1):
            pid = int((tmp_path / f"fake_{p}.pid").read_text())
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        assert not (tmp_path / "sgls_gpus").exists() and not (tmp_path / "judge_urls").exists()
    finally:
        stop_fakes(tmp_path)


@pytest.mark.slow
def test_a_slow_first_start_that_keeps_logging_survives_and_a_silent_one_is_called_stuck(tmp_path):
    port = free_port_pair()
    try:  # loading for 5 s, logging every 0.3 s: survives a 2 s stall limit (the old fixed wait killed it)
        slow = serve(
            "serve_judge.sh",
            serve_env(tmp_path, port, HEALTH_DELAY_S="5", PROGRESS_S="0.3", HEALTH_STALL_S="2", HEALTH_TIMEOUT_S="0"),
        )
        assert slow.returncode == 0, slow.stderr[-2000:]
        assert (tmp_path / "judge_urls").read_text().strip() == f"http://127.0.0.1:{port}/v1"
    finally:
        stop_fakes(tmp_path)
    port = free_port_pair()
    stuck = serve(
        "serve_judge.sh", serve_env(tmp_path, port, HEALTH_DELAY_S="60", HEALTH_STALL_S="2", HEALTH_TIMEOUT_S="0")
    )
    assert stuck.returncode != 0 and "silent for 2 s" in stuck.stderr
    bad = serve("serve_judge.sh", serve_env(tmp_path, free_port_pair(), HEALTH_STALL_S="1.5"))
    assert bad.returncode != 0 and "whole seconds" in bad.stderr
    pid = int((tmp_path / f"fake_{port}.pid").read_text())
    time.sleep(0.5)
    alive = subproc.alive(pid)
    stop_fakes(tmp_path)
    assert not alive, "a stuck replica must be stopped"


def test_a_key_file_others_can_read_is_refused_and_api_key_file_none_serves_open(tmp_path):
    port = free_port_pair()
    (tmp_path / "api_key").write_text("sk-mine\n")
    (tmp_path / "api_key").chmod(0o644)
    try:
        loose = serve("serve_judge.sh", serve_env(tmp_path, port))
        assert loose.returncode != 0 and "chmod 600" in loose.stderr and "sk-mine" not in loose.stderr
        (tmp_path / "api_key").chmod(0o600)
        mine = serve("serve_judge.sh", serve_env(tmp_path, port))  # the user's own key is kept
        assert mine.returncode == 0 and json.load(open(tmp_path / f"fake_{port}.env"))["key"] == "sk-mine"
        stop_fakes(tmp_path)
        port = free_port_pair()
        open_ = serve("serve_judge.sh", serve_env(tmp_path, port, API_KEY_FILE="none"))
        assert open_.returncode == 0 and "WARNING: API_KEY_FILE=none" in open_.stderr
        assert json.load(open(tmp_path / f"fake_{port}.env"))["key"] is None
    finally:
        stop_fakes(tmp_path)


def test_serve_script_fails_with_the_replicas_log_dir_when_a_server_dies(tmp_path):
    env = serve_env(tmp_path, free_port_pair(), POLL_S="0.1", HEALTH_TIMEOUT_S="20", DETACH="0")
    (tmp_path / "vllm").write_text("#!/usr/bin/env bash\necho 'CUDA out of memory' >&2\nexit 1\n")
    proc = subproc.run(
        ["bash", os.path.join(RECIPES, "serve_judge.sh")], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode != 0
    assert "exited; see" in proc.stderr and not (tmp_path / "judge_urls").exists()
    assert "CUDA out of memory" in (tmp_path / "judge_0.log").read_text()


def test_the_in_domain_eval_command_composes_a_validation_only_run(tmp_path):
    proc = subproc.run(
        ["bash", os.path.join(RECIPES, "eval_in_domain.sh"), str(tmp_path / "ckpt" / "global_step_5")],
        capture_output=True,
        timeout=60,
        env={**os.environ, "DRY_RUN": "args", "OUT_DIR": str(tmp_path / "ev"), "SERVICES_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    args = [a.decode() for a in proc.stdout.split(b"\0") if a]
    cfg, _ = compose_check.check(compose_check.PPO, args)
    assert cfg.trainer.val_only is True and cfg.trainer.validation_data_dir == str(tmp_path / "ev" / "val_generations")
    assert cfg.actor_rollout_ref.model.path == str(tmp_path / "ckpt" / "global_step_5")


def test_the_in_domain_eval_on_a_cpu_is_a_validation_only_run_of_the_cpu_recipe(tmp_path):
    """DEVICE=cpu: the same eval command validates through the CPU recipe (its platform, rollout, the seed's
    held-out prompts) instead of the 7B recipe's GPU settings."""
    proc = subproc.run(
        ["bash", os.path.join(RECIPES, "eval_in_domain.sh"), str(tmp_path / "ckpt" / "global_step_5")],
        capture_output=True,
        timeout=60,
        env={
            **os.environ,
            "DRY_RUN": "args",
            "DEVICE": "cpu",
            "SEED": "7",
            "OUT_DIR": str(tmp_path / "ev"),
            "CACHE_DIR": str(tmp_path / "cache"),
        },
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    args = [a.decode() for a in proc.stdout.split(b"\0") if a]
    cfg, _ = compose_check.check(compose_check.PPO, args)
    assert cfg.trainer.val_only is True and cfg.trainer.device == "cpu"
    assert cfg.actor_rollout_ref.rollout.name == "hf_cpu"
    assert cfg.actor_rollout_ref.model.path == str(tmp_path / "ckpt" / "global_step_5")
    assert "_seed7_" in cfg.data.val_files and cfg.data.val_files.endswith("cpu_task_val.parquet")
    assert not (tmp_path / "cache").exists()  # a dry run builds nothing
    # the dry run says which rows it would use, where they came from, and that they are not there
    said = proc.stderr.decode()
    assert f"eval_in_domain: held-out rows {cfg.data.val_files}" in said
    assert "from the cached CPU task data of SEED=7; MISSING: " + cfg.data.val_files in said


def write_run(tmp_path, name="cpu_tiny_slca_grpo_seed5", step=20, config_dir=None):
    """A run folder as the CPU main job leaves it: global_step_N/actor and the config verl saved for the run
    (data files that exist), in the run's hydra folder (or in ``config_dir``)."""
    run = tmp_path / "out"
    (run / f"global_step_{step}" / "actor").mkdir(parents=True)
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for f in ("train.parquet", "val.parquet"):
        (data / f).write_bytes(b"PAR1")
    cfg = {
        "data": {"train_files": str(data / "train.parquet"), "val_files": str(data / "val.parquet")},
        "trainer": {"experiment_name": name, "default_local_dir": str(run)},
    }
    hydra = config_dir or run / "hydra" / "2026-12-05_10-00-00"
    (hydra / ".hydra").mkdir(parents=True)
    (hydra / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    return run / f"global_step_{step}", data


def eval_args(ckpt, tmp_path, **env) -> subprocess.CompletedProcess:
    return subproc.run(
        ["bash", os.path.join(RECIPES, "eval_in_domain.sh"), str(ckpt)],
        capture_output=True,
        timeout=60,
        env={
            **{k: v for k, v in os.environ.items() if k not in ("NNODES", "N_GPUS_PER_NODE", "RAY_ADDRESS", "DEVICE")},
            "OUT_DIR": str(tmp_path / "ev"),
            "SERVICES_DIR": str(tmp_path),
            **env,
        },
    )


def test_the_in_domain_eval_on_gpus_takes_the_layout_the_run_trained_on(tmp_path):
    """docs/gpu.md's `bash recipes/eval_in_domain.sh CK` used to call the 7B recipe with its 4 nodes and no
    RAY_ADDRESS, and exit 2 on any machine. It now takes the run's own layout from the config verl saved; on a
    cluster RAY_ADDRESS joins it, and NNODES / N_GPUS_PER_NODE override."""
    ckpt, _ = write_run(tmp_path, name="qwen2_5_7b_slca_grpo")
    config = next((tmp_path / "out" / "hydra").glob("*/.hydra/config.yaml"))
    cfg = yaml.safe_load(config.read_text())
    cfg["trainer"].update(nnodes=1, n_gpus_per_node=8)
    config.write_text(yaml.safe_dump(cfg))
    one = eval_args(ckpt, tmp_path, DRY_RUN="args")
    assert one.returncode == 0, one.stderr.decode()[-2000:]
    got = as_dict(a.decode() for a in one.stdout.split(b"\0") if a)
    assert (got["trainer.nnodes"], got["trainer.n_gpus_per_node"]) == ("1", "8")
    cfg["trainer"].update(nnodes=4)
    config.write_text(yaml.safe_dump(cfg))
    alone = eval_args(ckpt, tmp_path, DRY_RUN="0")  # 4 nodes, no cluster: stops before anything, naming the fix
    said = alone.stderr.decode()
    assert alone.returncode == 2 and "NNODES=4 (the run's layout) needs its Ray cluster: RAY_ADDRESS=auto" in said
    assert "model_merger" not in said and not (ckpt / "actor" / "merged_hf").exists()  # stopped before merging
    joined = eval_args(ckpt, tmp_path, DRY_RUN="args", RAY_ADDRESS="auto")
    got = as_dict(a.decode() for a in joined.stdout.split(b"\0") if a)
    assert got["trainer.nnodes"] == "4" and got["+ray_kwargs.ray_init.address"] == "auto"
    mine = eval_args(ckpt, tmp_path, DRY_RUN="args", NNODES="1", N_GPUS_PER_NODE="2")
    got = as_dict(a.decode() for a in mine.stdout.split(b"\0") if a)
    assert (got["trainer.nnodes"], got["trainer.n_gpus_per_node"]) == ("1", "2")


def test_the_in_domain_eval_on_a_cpu_reads_the_held_out_rows_from_the_runs_saved_config(tmp_path):
    """No SEED, no CACHE_DIR: the rows come from the config verl saved for the run that wrote the checkpoint."""
    ckpt, data = write_run(tmp_path)
    proc = subproc.run(
        ["bash", os.path.join(RECIPES, "eval_in_domain.sh"), str(ckpt)],
        capture_output=True,
        timeout=60,
        env={
            **{k: v for k, v in os.environ.items() if k not in ("SEED", "VAL_FILES", "TRAIN_FILES")},
            "DRY_RUN": "args",
            "DEVICE": "cpu",
            "OUT_DIR": str(tmp_path / "ev"),
            "CACHE_DIR": str(tmp_path / "cache"),
        },
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    args = [a.decode() for a in proc.stdout.split(b"\0") if a]
    cfg, _ = compose_check.check(compose_check.PPO, args)
    assert cfg.data.val_files == str(data / "val.parquet") and cfg.data.train_files == str(data / "train.parquet")
    assert cfg.actor_rollout_ref.model.path == str(ckpt) and cfg.trainer.val_only is True
    assert "from the run's config " + str(ckpt.parent / "hydra") in proc.stderr.decode()
    assert not (tmp_path / "cache").exists()


def test_the_in_domain_eval_stops_at_start_naming_what_is_missing_and_builds_nothing(tmp_path):
    """A real run (not a dry one) of a checkpoint without a saved run config stops before anything starts: without
    SEED it asks for the rows; with a SEED whose data is not cached it names the file. The CPU task's model is never
    built to find them (that took 21 min)."""
    ckpt = tmp_path / "out" / "global_step_20"
    (ckpt / "actor").mkdir(parents=True)
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("SEED", "VAL_FILES", "TRAIN_FILES", "DRY_RUN")},
        "DEVICE": "cpu",
        "OUT_DIR": str(tmp_path / "ev"),
        "CACHE_DIR": str(tmp_path / "cache"),
    }
    run = [["bash", os.path.join(RECIPES, "eval_in_domain.sh"), str(ckpt)]]
    no_seed = subproc.run(*run, capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert no_seed.returncode == 2, no_seed.stderr[-2000:]
    assert "no config of the run that wrote" in no_seed.stderr and "VAL_FILES=" in no_seed.stderr
    seed = subproc.run(*run, capture_output=True, text=True, timeout=60, cwd=tmp_path, env={**env, "SEED": "5"})
    assert seed.returncode == 2, seed.stderr[-2000:]
    assert "stopping before anything starts" in seed.stderr
    assert str(tmp_path / "cache") in seed.stderr and "_seed5_" in seed.stderr and "cpu_task_val.parquet" in seed.stderr
    given = subproc.run(
        *run,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**env, "VAL_FILES": str(tmp_path / "nope.parquet")},
    )
    assert given.returncode == 2 and "MISSING: " + str(tmp_path / "nope.parquet") in given.stderr
    assert not (tmp_path / "cache").exists() and not (tmp_path / "ev" / "run").exists()


def test_the_run_context_names_the_eval_folder_and_label_after_the_experiment_and_step(tmp_path):
    ckpt, data = write_run(tmp_path)
    got = subproc.run(
        [
            "bash",
            "-c",
            'source "$1/eval_lib.sh"; run_context "$2"; printf "%s\n" "$OUT_DIR" "$LABEL"',
            "_",
            RECIPES,
            str(ckpt / "actor" / "merged_hf"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **{k: v for k, v in os.environ.items() if k not in ("OUT_DIR", "LABEL")},
            "RECIPES_DIR": RECIPES,
            "REPO_ROOT": REPO,
        },
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.splitlines() == [
        os.path.join(REPO, "eval", "cpu_tiny_slca_grpo_seed5_step20"),
        "cpu_tiny_slca_grpo_seed5 step 20",
    ]


def test_the_run_context_finds_a_runs_config_where_hydra_left_it_before_the_recipes_moved_it(tmp_path):
    """Runs made before hydra.run.dir: the config in <cwd>/outputs/<date>/<time>/ whose default_local_dir is the
    run; a config of another run there is not taken."""
    import run_context

    other_run, _ = write_run(tmp_path / "other", name="other_run", config_dir=tmp_path / "outputs" / "d" / "t1")
    ckpt, data = write_run(tmp_path / "mine", config_dir=tmp_path / "outputs" / "d" / "t0")
    ctx = run_context.context(str(ckpt), search_roots=[str(tmp_path)])
    assert ctx["RUN_CONFIG"] == str(tmp_path / "outputs" / "d" / "t0" / ".hydra" / "config.yaml")
    assert (ctx["RUN_NAME"], ctx["RUN_STEP"], ctx["RUN_VAL_FILES"]) == (
        "cpu_tiny_slca_grpo_seed5",
        "20",
        str(data / "val.parquet"),
    )
    bare = run_context.context(str(tmp_path / "hf_model"), search_roots=[str(tmp_path)])
    assert (bare["RUN_CONFIG"], bare["RUN_NAME"], bare["RUN_STEP"], bare["RUN_VAL_FILES"]) == ("", "hf_model", "", "")


def test_the_cpu_recipe_builds_nothing_for_a_given_model_and_given_data(tmp_path):
    """eval_in_domain.sh hands the CPU recipe a checkpoint and its run's rows: the recipe goes straight to verl's
    trainer (here a stand-in python3 that records its calls) without building the task's model or data."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "python3.log"
    (bin_dir / "python3").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    (bin_dir / "python3").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "DRY_RUN": "0",
        "CACHE_DIR": str(tmp_path / "c"),
        "OUTPUT_DIR": str(tmp_path / "run"),
        "SERVICES_DIR": str(tmp_path),
    }
    given = {
        "MODEL_PATH": str(tmp_path / "ck"),
        "TRAIN_FILES": str(tmp_path / "t.parquet"),
        "VAL_FILES": str(tmp_path / "v.parquet"),
    }
    proc = subproc.run(
        ["bash", os.path.join(RECIPES, "run_cpu_tiny_slca.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, **given},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    calls = log.read_text()
    # (through recipes/verl_startup.py, which runs the module as python -m does)
    assert "verl_startup.py verl.trainer.main_ppo" in calls and "tiny_model" not in calls and "data_prep" not in calls
    assert f"data.val_files={tmp_path / 'v.parquet'}" in calls and f"hydra.run.dir={tmp_path / 'run'}/hydra/" in calls
    # without them the recipe builds the seed's task (here: the stand-in's first call), as before
    log.unlink()
    subproc.run(
        ["bash", os.path.join(RECIPES, "run_cpu_tiny_slca.sh")], capture_output=True, text=True, timeout=60, env=env
    )
    assert log.read_text().splitlines()[0].startswith(f"{RECIPES}/verl_startup.py data_prep.cpu_task")


def test_hydras_run_folder_goes_under_output_dir_in_every_training_recipe(composed):
    """hydra.run.dir (verl's main_ppo and SFT trainer are hydra apps that otherwise write ./outputs/<date>/<time>):
    every recipe puts it under its OUTPUT_DIR, and hydra accepts the override (composed with hydra's own config)."""
    for name, (args, _, _) in composed.items():
        out_dir = as_dict(args)["trainer.default_local_dir"]
        run_dir = as_dict(args)["hydra.run.dir"]
        assert run_dir.startswith(out_dir + "/hydra/"), (name, run_dir)
        config = compose_check.SFT if "sft" in name else compose_check.PPO
        assert compose_check.hydra_run_dir(config, args) == run_dir


def test_the_cpu_recipe_is_the_7b_recipe_with_device_model_sizes_and_services_changed(composed):
    """run_cpu_tiny_slca.sh goes through run_qwen7b_slca.sh: the same method keys, the CPU platform's settings."""
    big, cpu = as_dict(composed["run_qwen7b_slca.sh"][0]), as_dict(composed["run_cpu_tiny_slca.sh"][0])
    method = [
        "algorithm.adv_estimator",
        "trainer.v1.trainer_mode",
        "actor_rollout_ref.rollout.agent.default_agent_loop",
        "reward.custom_reward_function.path",
        "actor_rollout_ref.actor.policy_loss.loss_mode",
        "actor_rollout_ref.actor.kl_loss_type",
        "actor_rollout_ref.actor.kl_loss_coef",
        "algorithm.use_kl_in_reward",
        "+algorithm.slca.lambda_tool",
        "+algorithm.slca.lambda_sum",
        "actor_rollout_ref.rollout.multi_turn.format",
    ]
    assert [cpu[k] for k in method] == [big[k] for k in method]
    assert cpu["trainer.device"] == "cpu" and cpu["actor_rollout_ref.rollout.name"] == "hf_cpu"
    assert cpu["actor_rollout_ref.actor.strategy"] == cpu["actor_rollout_ref.ref.strategy"] == "fsdp2"
    assert cpu["+actor_rollout_ref.model.override_config.attn_implementation"] == "sdpa"
    assert cpu["actor_rollout_ref.model.use_remove_padding"] == "false"
    assert cpu["+reward.custom_reward_function.reward_kwargs.judge"] == "offline_proxy"
    assert "trainer.device" not in big and big["actor_rollout_ref.rollout.name"] == "vllm"


@pytest.mark.parametrize(
    "name, env",
    [
        ("run_cpu_tiny_slca.sh", {}),
        ("run_qwen7b_slca.sh", {"DEVICE": "cpu"}),
        ("run_qwen7b_grpo.sh", {"DEVICE": "cpu"}),
        ("run_qwen7b_sft.sh", {"DEVICE": "cpu"}),
    ],
)
def test_every_cpu_run_trains_and_computes_in_fp32_whatever_the_processor(tmp_path, name, env):
    """verl's FSDP engine computes in bf16 unless its config says otherwise, and a CPU without AVX512-BF16 / AMX
    runs bf16 matmuls through a naive kernel (~90x fp32's time): every CPU recipe's composed config names fp32 for
    the weights and the compute of each engine it trains or scores with (the CPU engine's own fp32 default aside)."""
    from slca_verl.plan.precision import EnginePrecision, engine_precision

    sft = "sft" in name
    cfg = compose_check.compose(
        compose_check.SFT if sft else compose_check.PPO, recipe_args(name, str(tmp_path), **env)
    )
    engines = (
        {"engine": cfg.engine}
        if sft
        else {
            "actor_rollout_ref.actor.fsdp_config": cfg.actor_rollout_ref.actor.fsdp_config,
            "actor_rollout_ref.ref.fsdp_config": cfg.actor_rollout_ref.ref.fsdp_config,
        }
    )
    fp32 = EnginePrecision(master="fp32", compute="fp32")
    assert {key: engine_precision(c) for key, c in engines.items()} == {key: fp32 for key in engines}


# grpo's variant (another reward layout, the same writes) runs in the e2e tier: ~15 s of the default tier's budget
@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["slca_grpo", pytest.param("grpo", marks=pytest.mark.e2e)])
def test_a_dry_run_of_the_cpu_and_7b_recipes_writes_nothing_into_the_checkout(tmp_path, estimator):
    def untracked():
        out = subproc.run(
            ["git", "status", "--porcelain", "--untracked-files=all", "--ignored"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        # __pycache__, and the setup scripts' markers that .ci/run may write meanwhile (its venvs set up in the
        # background while this tier runs: .tau2_bin, .bfcl_python)
        setup = (".tau2_bin", ".bfcl_python")
        return {line for line in out.splitlines() if "__pycache__" not in line and not line.endswith(setup)}

    before = untracked()
    for recipe in ("run_cpu_tiny_slca.sh", "run_qwen7b_slca.sh"):
        proc = subproc.run(
            ["bash", os.path.join(RECIPES, recipe)],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "DRY_RUN": "1", "ADV_ESTIMATOR": estimator, "CACHE_DIR": str(tmp_path / "cache")},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "OK: ppo_trainer composed" in proc.stderr
    assert untracked() == before
    assert not (tmp_path / "cache").exists()  # a dry run does not build the tiny model either


def recipe_run(name: str, out_dir: str, **env) -> subprocess.CompletedProcess:
    return subproc.run(
        ["bash", os.path.join(RECIPES, name)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DRY_RUN": "args", "OUTPUT_DIR": out_dir, "SERVICES_DIR": out_dir, **env},
    )


def test_attn_sdpa_runs_actor_and_reference_without_flash_attn_and_composes(tmp_path):
    """ATTN=sdpa: the alternative to building flash-attn 2.8.3 (docs/gpu.md, "1. Install")."""
    key = "+actor_rollout_ref.model.override_config.attn_implementation"
    default = as_dict(recipe_args("run_qwen7b_slca.sh", str(tmp_path / "fa")))
    assert key not in default and default["actor_rollout_ref.model.use_remove_padding"] == "true"
    args = recipe_args("run_qwen7b_slca.sh", str(tmp_path / "sdpa"), ATTN="sdpa")
    cfg, summary = compose_check.check(compose_check.PPO, args)
    assert summary["adv_estimator"] == "slca_grpo"
    model = cfg.actor_rollout_ref.model  # one model block: the actor and the reference both build from it
    assert model.override_config.attn_implementation == "sdpa" and model.use_remove_padding is False
    assert cfg.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu == 2
    assert cfg.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu == 2
    assert cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 1
    sdpa = as_dict(args)
    assert {k for k in set(sdpa) | set(default) if sdpa.get(k) != default.get(k)} == {
        key,
        "actor_rollout_ref.model.use_remove_padding",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
        "actor_rollout_ref.rollout.agent.agent_loop_config_path",
        "trainer.default_local_dir",
        "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH",
        "hydra.run.dir",  # the run's own dir
        # padded rows: micro-batches by row count, not by a token cap (which would pack 8 rows of 32k tokens)
        "actor_rollout_ref.actor.use_dynamic_bsz",
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz",
    }
    dynamic = "actor_rollout_ref.actor.use_dynamic_bsz"
    assert (default[dynamic], sdpa[dynamic]) == ("true", "false")
    assert as_dict(recipe_args("run_smoke_1gpu.sh", str(tmp_path / "smoke"), ATTN="sdpa"))[key] == "sdpa"
    bad = recipe_run("run_qwen7b_slca.sh", str(tmp_path / "bad"), ATTN="flash")
    assert bad.returncode == 2 and "unknown ATTN=flash" in bad.stderr
    cpu = recipe_run("run_qwen7b_slca.sh", str(tmp_path / "cpu"), DEVICE="cpu", ATTN="flash_attention_2")
    assert cpu.returncode == 2 and "DEVICE=cpu needs ATTN=sdpa" in cpu.stderr


def test_the_served_api_key_file_reaches_sgls_and_the_judge_as_a_path_never_as_the_key(tmp_path):
    secret = "sk-slca-recipe-test-key-0123456789"
    (tmp_path / "api_key").write_text(secret + "\n")
    (tmp_path / "api_key").chmod(0o600)
    proc = recipe_run("run_qwen7b_slca.sh", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    args = as_dict(a for a in proc.stdout.split("\0") if a)
    assert args["+reward.custom_reward_function.reward_kwargs.judge_api_key_file"] == str(tmp_path / "api_key")
    yaml_text = open(args["actor_rollout_ref.rollout.agent.agent_loop_config_path"]).read()
    (entry,) = yaml.safe_load(yaml_text)
    assert entry["sgls"]["api_key_file"] == str(tmp_path / "api_key") and entry["sgls"]["api_key"] is None
    assert secret not in proc.stdout + proc.stderr + yaml_text
    compose_check.check(compose_check.PPO, [a for a in proc.stdout.split("\0") if a])
    none = as_dict(recipe_args("run_qwen7b_slca.sh", str(tmp_path / "n"), API_KEY_FILE="none"))
    assert "+reward.custom_reward_function.reward_kwargs.judge_api_key_file" not in none
    offline = as_dict(recipe_args("run_smoke_1gpu.sh", str(tmp_path)))  # no servers: no key sent anywhere
    assert "+reward.custom_reward_function.reward_kwargs.judge_api_key_file" not in offline


def test_build_only_finds_a_built_model_prints_its_dir_and_starts_no_trainer(tmp_path):
    """BUILD_ONLY=1 (what benchmarks run before they read a seed's data): a TINY_DIR that holds a model is
    reused, its path printed, and the recipe stops before verl's trainer (no OUTPUT_DIR is created)."""
    tiny = tmp_path / "tiny"
    (tiny / "model").mkdir(parents=True)
    (tiny / "model" / "config.json").write_text("{}")
    out = tmp_path / "run"
    proc = subproc.run(
        ["bash", os.path.join(RECIPES, "run_cpu_tiny_slca.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BUILD_ONLY": "1", "TINY_DIR": str(tiny), "OUTPUT_DIR": str(out), "SEED": "3"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(tiny)
    assert not out.exists()


def test_the_one_node_recipe_trains_on_four_gpus_beside_a_smaller_simulator_and_judge(composed, tmp_path):
    args, cfg, _ = composed["run_qwen7b_slca_1node.sh"]
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (1, 4)
    assert as_dict(args)["+reward.custom_reward_function.reward_kwargs.judge_model"] == "gpt-oss-20b"
    (entry,) = yaml.safe_load(open(as_dict(args)["actor_rollout_ref.rollout.agent.agent_loop_config_path"]))
    assert entry["sgls"]["model"] == "Qwen3-30B-A3B-Instruct-2507"
    paper = as_dict(composed["run_qwen7b_slca.sh"][0])  # the algorithm is the 7B recipe's
    for key in (
        "data.train_batch_size",
        "actor_rollout_ref.rollout.n",
        "actor_rollout_ref.actor.optim.lr",
        "data.max_response_length",
        "actor_rollout_ref.actor.kl_loss_coef",
    ):
        assert as_dict(args)[key] == paper[key], key


def test_attn_sdpa_reaches_the_sft_recipe_and_cpu_runs_it_on_verls_cpu_platform(tmp_path):
    default = as_dict(recipe_args("run_qwen7b_sft.sh", str(tmp_path / "fa")))
    assert default["model.use_remove_padding"] == "true" and "+model.override_config.attn_implementation" not in default
    assert default["data.custom_cls.path"] == "pkg://slca_verl.sft_dataset"
    sdpa = recipe_args("run_qwen7b_sft.sh", str(tmp_path / "sdpa"), ATTN="sdpa")
    args = as_dict(sdpa)
    assert args["+model.override_config.attn_implementation"] == "sdpa" and args["model.use_remove_padding"] == "false"
    cfg, _ = compose_check.check(compose_check.SFT, sdpa)
    assert cfg.model.override_config.attn_implementation == "sdpa"
    cpu = as_dict(recipe_args("run_qwen7b_sft.sh", str(tmp_path / "cpu"), DEVICE="cpu"))
    assert cpu["trainer.device"] == "cpu" and cpu["engine.strategy"] == "fsdp2"
    assert cpu["+model.override_config.attn_implementation"] == "sdpa"
    bad = recipe_run("run_qwen7b_sft.sh", str(tmp_path / "bad"), DEVICE="cpu", ATTN="flash_attention_2")
    assert bad.returncode == 2 and "DEVICE=cpu needs ATTN=sdpa" in bad.stderr


def test_several_nodes_join_the_cluster_and_forward_the_run_s_variables_but_no_secret(tmp_path):
    args = recipe_args(
        "run_qwen7b_slca.sh",
        str(tmp_path),
        RAY_ADDRESS="auto",
        WANDB_MODE="offline",
        HF_HOME="/data/hf,cache",
        WANDB_API_KEY="sk-secret",
    )
    env_vars = {a.split("=", 1)[0].rsplit(".", 1)[1]: a.split("=", 1)[1] for a in args if ".env_vars." in a}
    assert env_vars["WANDB_MODE"] == "'offline'" and env_vars["HF_HOME"] == "'/data/hf,cache'"  # quoted for hydra
    assert env_vars["VERL_FILE_LOGGER_PATH"] == f"'{tmp_path}/metrics.jsonl'"
    assert "WANDB_API_KEY" not in env_vars and not any("sk-secret" in a for a in args)
    assert "+ray_kwargs.ray_init.address=auto" in args
    cfg, _ = compose_check.check(compose_check.PPO, args)
    assert cfg.ray_kwargs.ray_init.runtime_env.env_vars.HF_HOME == "/data/hf,cache"
    alone = recipe_run("run_qwen7b_slca.sh", str(tmp_path / "alone"), DRY_RUN="0", NNODES="4")
    assert alone.returncode == 2 and "NNODES=4 needs a Ray cluster" in alone.stderr


@pytest.mark.slow  # two dry runs of the CPU recipe
def test_the_cpu_recipe_trains_the_multi_step_task_with_its_own_data_and_model(tmp_path):
    """TASK=cpu_chain: the seed's chain rows and a model of their own (another cache key than the one-call task's),
    per-turn credit by the same one override; a dry run builds nothing."""
    base = {"CACHE_DIR": str(tmp_path / "cache"), "SEED": "7"}
    chain = recipe_args("run_cpu_tiny_slca.sh", str(tmp_path / "c"), TASK="cpu_chain", **base)
    one_call = recipe_args("run_cpu_tiny_slca.sh", str(tmp_path / "t"), **base)
    cfg, _ = compose_check.check(compose_check.PPO, [*chain, "+algorithm.slca.credit=turn"])
    assert cfg.data.train_files.endswith("cpu_chain_train.parquet") and "_cpu_chain_seed7_" in cfg.data.train_files
    assert cfg.data.val_files.endswith("cpu_chain_val.parquet")
    assert cfg.actor_rollout_ref.model.path.startswith(str(tmp_path / "cache" / "tiny_qwen3_cpu_chain_seed7_"))
    other = as_dict(one_call)["actor_rollout_ref.model.path"]
    assert "_cpu_task_seed7_" in other and other.rsplit("_", 1)[1] != cfg.actor_rollout_ref.model.path.rsplit("_", 1)[1]
    assert cfg.algorithm.slca.credit == "turn" and cfg.actor_rollout_ref.rollout.multi_turn.max_assistant_turns >= 3
    assert not (tmp_path / "cache").exists()


def test_the_cpu_recipe_validates_on_the_wider_held_out_set_sampled_when_asked(tmp_path, composed):
    """VAL_PROMPTS / VAL_N / VAL_TEMPERATURE / OFFLINE_JUDGE: the main runs' settings (docs/reproduction_cpu.md) —
    the held-out rows of data_prep.cpu_task_val in OUTPUT_DIR, k samples a prompt at a temperature, the reply's
    rater; unset, greedy on the task's own split with the grounding proxy as before. The model and training rows are
    the default's (same cache key); a dry run writes nothing."""
    base = {"CACHE_DIR": str(tmp_path / "cache"), "SEED": "7"}
    out = tmp_path / "wide"
    wide = recipe_args(
        "run_cpu_tiny_slca.sh",
        str(out),
        VAL_PROMPTS="123",
        VAL_N="4",
        VAL_TEMPERATURE="1",
        OFFLINE_JUDGE="offline_length",
        **base,
    )
    plain = as_dict(recipe_args("run_cpu_tiny_slca.sh", str(tmp_path / "plain"), **base))
    cfg, _ = compose_check.check(compose_check.PPO, wide)
    assert cfg.data.val_files == str(out / "val_data" / "cpu_task_val.parquet")
    assert cfg.data.train_files == plain["data.train_files"]
    assert cfg.actor_rollout_ref.model.path == plain["actor_rollout_ref.model.path"]
    val = cfg.actor_rollout_ref.rollout.val_kwargs
    assert (val.n, val.do_sample, val.temperature) == (4, True, 1)
    assert plain["data.val_files"].endswith("/data/cpu_task_val.parquet")
    # OFFLINE_JUDGE: the reply's rater (the length judge reads no call); unset, the grounding proxy as before
    assert cfg.reward.custom_reward_function.reward_kwargs.judge == "offline_length"
    assert plain["+reward.custom_reward_function.reward_kwargs.judge"] == "offline_proxy"
    for recipe in ("run_cpu_tiny_slca.sh", "run_qwen7b_slca.sh"):  # unset: greedy, one sample, as before
        kw = as_dict(composed[recipe][0])
        assert [kw[f"actor_rollout_ref.rollout.val_kwargs.{k}"] for k in ("n", "do_sample", "temperature")] == [
            "1",
            "false",
            "0",
        ]
    assert not (out / "val_data").exists() and not (tmp_path / "cache").exists()
    proc = subproc.run(
        ["bash", os.path.join(RECIPES, "run_cpu_tiny_slca.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, "DRY_RUN": "args", "OUTPUT_DIR": str(out), **base, "TASK": "cpu_chain", "VAL_PROMPTS": "50"},
        timeout=60,
    )
    assert proc.returncode == 2 and "VAL_PROMPTS=50 needs TASK=cpu_task" in proc.stderr


def test_the_wide_chain_task_gets_its_own_model_and_rows_and_the_size_knobs_need_the_chain_task(tmp_path):
    """CHAIN_CITIES / CHAIN_PHRASINGS / CHAIN_VAL_SHARE / CHAIN_VAL_OTHER (data_prep.cpu_chain's size): other rows,
    so another cached model (its name says the size); the defaults keep the narrow task's name; on another task the
    knobs fail at start-up, naming themselves."""
    base = {"CACHE_DIR": str(tmp_path / "cache"), "SEED": "7", "TASK": "cpu_chain"}
    size = {"CHAIN_CITIES": "26", "CHAIN_PHRASINGS": "4", "CHAIN_VAL_SHARE": "0.5", "CHAIN_VAL_OTHER": "1"}
    wide = as_dict(recipe_args("run_cpu_tiny_slca.sh", str(tmp_path / "wide"), **base, **size))
    narrow = as_dict(recipe_args("run_cpu_tiny_slca.sh", str(tmp_path / "narrow"), **base))
    explicit = as_dict(
        recipe_args(
            "run_cpu_tiny_slca.sh",
            str(tmp_path / "explicit"),
            **base,
            **{"CHAIN_CITIES": "12", "CHAIN_PHRASINGS": "2", "CHAIN_VAL_SHARE": "0.25", "CHAIN_VAL_OTHER": "4"},
        )
    )
    model = "actor_rollout_ref.model.path"
    assert "/tiny_qwen3_cpu_chain_c26p4v0.5o1_seed7_" in wide[model]
    assert "/tiny_qwen3_cpu_chain_seed7_" in narrow[model] and explicit[model] == narrow[model]
    assert wide["data.train_files"] != narrow["data.train_files"]
    proc = subprocess.run(
        ["bash", os.path.join(RECIPES, "run_cpu_tiny_slca.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, "DRY_RUN": "args", "OUTPUT_DIR": str(tmp_path / "x"), **base, "TASK": "cpu_task", **size},
        timeout=60,
    )
    assert proc.returncode == 2 and "CHAIN_CITIES" in proc.stderr and "need TASK=cpu_chain" in proc.stderr
