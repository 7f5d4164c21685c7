"""slca_verl.cpu: verl's CPU platform, FSDP engines for device cpu, the hf_cpu rollout and the guarded patches.

What needs a fresh process (the platform is chosen once per process, by VERL_PLATFORM) runs in a subprocess; the
rollout server and the tiny-model helpers run in-process on a randomly initialised tiny Qwen3.
"""

import asyncio
import collections
import json
import os
import sys

import pytest
import subproc
import torch

from slca_verl.cpu import tiny_model


def run_python(code: str, platform: str | None = "cpu") -> dict:
    env = {k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"}
    if platform:
        env["VERL_PLATFORM"] = platform
    out = subproc.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


PROBE = """
import json, sys, verl
from verl.plugin.platform import get_platform
from verl.utils.device import get_device_name, get_device_id, get_nccl_backend, get_torch_device
from verl.workers.engine.base import EngineRegistry
from verl.workers.rollout.replica import get_rollout_replica_class
from verl.workers.rollout.base import get_rollout_class
import verl.utils.distributed as d, verl.workers.engine_workers as ew, verl.checkpoint_engine.base as cb
import verl.workers.engine.fsdp.transformer_impl as ti
from slca_verl.cpu import activate
print(json.dumps({
    "platform": type(get_platform()).__name__, "device": get_device_name(), "device_id": get_device_id(),
    "backend": get_nccl_backend(), "device_name": get_torch_device().get_device_name(),
    "mem": get_torch_device().max_memory_allocated(),
    "engine": EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__,
    "replica": get_rollout_replica_class("hf_cpu").__name__, "adapter": get_rollout_class("hf_cpu", "async").__name__,
    "rebound": ew.initialize_global_process_group_ray is d.initialize_global_process_group_ray
               is cb.initialize_global_process_group_ray,
    "patched": [getattr(f, "__slca_cpu_patch__", False) for f in (d.initialize_global_process_group_ray,
                d.initialize_global_process_group, ti.CPUOffloadPolicy)],
    "pin_memory": ti.CPUOffloadPolicy(pin_memory=True).pin_memory,
    "again": activate(),
}))
"""


@pytest.mark.slow
def test_verl_cpu_platform_resolves_every_cpu_piece_through_verls_own_lookups():
    got, _ = run_python(PROBE)
    assert got["platform"] == "PlatformCPU" and got["device"] == "cpu" and got["device_id"] == "cpu"
    assert got["backend"] == "gloo" and got["device_name"] == "cpu" and got["mem"] == 0
    assert got["engine"] == "CPUFSDPEngineWithLMHead"
    assert (got["replica"], got["adapter"]) == ("HFCPUReplica", "HFCPUServerAdapter")
    assert got["rebound"] and got["patched"] == [True, True, True] and got["pin_memory"] is False
    assert all(got["again"].values()), got["again"]  # activating twice is a no-op that still reports success


@pytest.mark.slow
def test_without_the_cpu_platform_nothing_of_slca_verl_cpu_is_imported_or_patched():
    got, _ = run_python(
        "import json, sys, verl, verl.utils.distributed as d; from verl.plugin.platform import PlatformRegistry;"
        "print(json.dumps({'mods': sorted(m for m in sys.modules if m.startswith('slca_verl.cpu')),"
        "'cpu': 'cpu' in PlatformRegistry.registered_names(),"
        "'patched': getattr(d.initialize_global_process_group_ray, '__slca_cpu_patch__', False)}))",
        platform=None,
    )
    # only the package itself (its __init__ imports nothing of verl) is loaded, to read VERL_PLATFORM
    assert got == {"mods": ["slca_verl.cpu"], "cpu": False, "patched": False}


@pytest.mark.slow
def test_patches_refuse_an_unknown_verl_version_and_say_which():
    got, err = run_python(
        "import json, verl; verl.__version__ = '9.9.9'; from slca_verl.cpu import patches;"
        "print(json.dumps(patches.apply()))",
        platform=None,
    )
    assert got and not any(got.values()), got
    assert "verl 9.9.9 is not one of" in err and "gloo_process_group" in err


@pytest.mark.slow
def test_a_gpu_rollout_on_the_cpu_platform_is_refused_naming_the_override():
    got, _ = run_python(
        "import json, verl; from verl.workers.rollout.replica import get_rollout_replica_class\n"
        "try:\n    get_rollout_replica_class('vllm'); print(json.dumps({'msg': 'loaded'}))\n"
        "except ValueError as e:\n    print(json.dumps({'msg': str(e)}))"
    )
    assert "actor_rollout_ref.rollout.name=vllm cannot run on verl's CPU platform" in got["msg"]
    assert "set actor_rollout_ref.rollout.name=hf_cpu" in got["msg"]


def test_settings_a_cpu_cannot_run_are_refused_naming_the_override():
    from types import SimpleNamespace

    from slca_verl.cpu.engine import cpu_setting_problems

    ok_model = SimpleNamespace(override_config={"attn_implementation": "sdpa"}, use_remove_padding=False)
    assert cpu_setting_problems(ok_model, SimpleNamespace(strategy="fsdp2")) == []
    problems = cpu_setting_problems(
        SimpleNamespace(override_config={}, use_remove_padding=True), SimpleNamespace(strategy="fsdp")
    )
    text = " ".join(problems)
    assert len(problems) == 3
    assert "actor_rollout_ref.actor.strategy=fsdp2" in text
    assert "+actor_rollout_ref.model.override_config.attn_implementation=sdpa" in text
    assert "actor_rollout_ref.model.use_remove_padding=false" in text


def test_a_cpu_engine_computes_in_fp32_where_the_config_leaves_verls_bf16_default(caplog):
    from verl.workers.config import FSDPEngineConfig

    from slca_verl.cpu.engine import cpu_compute_config
    from slca_verl.plan.precision import engine_precision

    unset = FSDPEngineConfig(strategy="fsdp2")
    assert engine_precision(unset).compute == "bf16"  # verl's default, on any device
    got = cpu_compute_config(unset, native_bf16=False)
    assert isinstance(got, FSDPEngineConfig) and engine_precision(got).compute == "fp32"
    assert engine_precision(cpu_compute_config({"strategy": "fsdp2"}, native_bf16=True)).compute == "fp32"
    explicit = FSDPEngineConfig(strategy="fsdp2", mixed_precision={"param_dtype": "bf16"})
    with caplog.at_level("WARNING", logger="slca_verl.cpu.engine"):
        assert cpu_compute_config(explicit, native_bf16=True) is explicit  # honoured, silently where bf16 is native
        assert not caplog.records
        assert cpu_compute_config(explicit, native_bf16=False) is explicit  # honoured, with the key to change
    assert "mixed_precision.param_dtype=fp32" in caplog.text and "no native bf16" in caplog.text


ENGINE_PROBE = """
import json, os, sys
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[3], RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
import torch.distributed as dist
import verl
from verl.trainer.config.config import CheckpointConfig
from verl.workers.config import FSDPEngineConfig, FSDPOptimizerConfig, HFModelConfig
from verl.workers.engine.base import EngineRegistry
from slca_verl.cpu import tiny_model
dist.init_process_group("gloo")
model = HFModelConfig(path=tiny_model.init_model(sys.argv[1], seed=0), override_config={"attn_implementation": "sdpa"},
                      use_remove_padding=False)
engine = EngineRegistry.new(model_type="language_model", backend="fsdp2", model_config=model,
                            engine_config=FSDPEngineConfig(strategy="fsdp2", mixed_precision=json.loads(sys.argv[2])),
                            optimizer_config=FSDPOptimizerConfig(lr=1e-3, total_training_steps=1),
                            checkpoint_config=CheckpointConfig())
engine.initialize()
print(json.dumps({"engine": type(engine).__name__, "compute": str(engine._autocast_dtype),
                  "master": str(next(engine.module.parameters()).dtype)}))
"""


@pytest.mark.slow
def test_verls_own_fsdp_engine_on_the_cpu_platform_computes_in_fp32_unless_told(tmp_path):
    """verl's engine, built through its EngineRegistry on the CPU platform (gloo, one rank): fp32 compute with the
    mixed-precision setting unset (verl alone would autocast to bf16), bf16 when the config asks for it."""
    import socket

    got = {}
    for name, mixed in (("unset", "null"), ("bf16", '{"param_dtype": "bf16"}')):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = str(s.getsockname()[1])
        env = {**os.environ, "VERL_PLATFORM": "cpu"}
        out = subproc.run(
            [sys.executable, "-c", ENGINE_PROBE, str(tmp_path / name), mixed, port],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        got[name] = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["unset"] == {"engine": "CPUFSDPEngineWithLMHead", "compute": "torch.float32", "master": "torch.float32"}
    assert got["bf16"]["compute"] == "torch.bfloat16" and got["bf16"]["master"] == "torch.float32"


# ---------------------------------------------------------------- the rollout server, in-process


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return tiny_model.init_model(str(tmp_path_factory.mktemp("tiny") / "init"), seed=0)


@pytest.fixture(scope="module")
def server(tiny_dir):
    from types import SimpleNamespace

    from slca_verl.cpu.rollout import HFRolloutServer

    cfg = SimpleNamespace(max_model_len=256, prompt_length=64, response_length=16)
    return HFRolloutServer(cfg, SimpleNamespace(local_path=tiny_dir, path=tiny_dir), replica_rank=0, seed=0)


def greedy(server, prompt, **params):
    out = asyncio.run(
        server.generate(
            request_id="r", prompt_ids=prompt, sampling_params={"temperature": 0, "logprobs": True, **params}
        )
    )
    return out


def test_server_generates_greedy_tokens_with_their_log_probs_and_weight_version(server):
    prompt = [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198]
    out = greedy(server, prompt)
    assert 1 <= len(out.token_ids) <= 16 and len(out.log_probs) == len(out.token_ids)
    # greedy: each token is the argmax of the model's next-token distribution, and its log-prob is that maximum
    ids = torch.tensor([prompt + out.token_ids])
    with torch.no_grad():
        logp = torch.log_softmax(server.model(input_ids=ids).logits[0].float(), -1)
    for k, tok in enumerate(out.token_ids):
        row = logp[len(prompt) - 1 + k]
        assert tok == int(row.argmax())
        assert out.log_probs[k] == pytest.approx(float(row[tok]), abs=1e-4)
    assert out.extra_fields["global_steps"] == server.global_steps and out.stop_reason == "completed"
    # a stop token ends generation right after it is written, and the budget caps the rest
    first = out.token_ids[0]
    assert greedy(server, prompt, stop_token_ids=[first]).token_ids == [first]
    assert len(greedy(server, prompt, max_tokens=3, ignore_eos=True).token_ids) == 3


def test_server_loads_the_actors_weights_and_reports_what_matched(server):
    prompt = [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198]
    before = greedy(server, prompt).log_probs
    state = {k: v.clone() for k, v in server.model.state_dict().items() if k != "lm_head.weight"}
    state["model.norm.weight"] = state["model.norm.weight"] * 3.0
    report = asyncio.run(server.load_weights(state, global_steps=7))
    assert report["missing"] == [] and report["unexpected"] == [] and report["global_steps"] == 7
    assert greedy(server, prompt).log_probs != before  # generation now uses the new weights
    assert asyncio.run(server.stats())["weight_syncs"] == report["weight_syncs"] >= 1
    assert greedy(server, prompt).extra_fields["global_steps"] == 7


def test_adapter_drains_the_weight_generator_on_every_rank_and_only_the_leader_sends():
    from slca_verl.cpu.rollout import HFCPUServerAdapter

    sent = []

    class Handle:
        class load_weights:  # noqa: N801 (Ray's method.remote(...) shape)
            @staticmethod
            def remote(state, steps):
                sent.append((sorted(state), steps, {k: v.dtype for k, v in state.items()}))
                fut = asyncio.get_running_loop().create_future()
                fut.set_result({})
                return fut

    for rank, expect_send in ((0, True), (1, False)):
        sent.clear()
        adapter = HFCPUServerAdapter.__new__(HFCPUServerAdapter)
        adapter.rollout_rank, adapter.replica_rank, adapter._server = rank, 0, Handle()
        drained = []

        def weights():
            for name in ("a", "b"):
                drained.append(name)
                yield name, torch.ones(2, dtype=torch.bfloat16)

        asyncio.run(adapter.update_weights(weights(), global_steps=3))
        assert drained == ["a", "b"]  # collective gathers inside the generator run on every rank
        assert sent == ([(["a", "b"], 3, {"a": torch.float32, "b": torch.float32})] if expect_send else [])
    with pytest.raises(NotImplementedError, match="named_tensors"):
        asyncio.run(adapter.update_weights(iter([]), wire_format="delta_flush"))


def test_sampling_respects_top_k_and_top_p():
    from slca_verl.cpu.rollout import sample_next

    logits = torch.tensor([0.0, 3.0, 2.9, -1.0])
    g = torch.Generator().manual_seed(0)
    assert {sample_next(logits, 1.0, 1.0, 1, g) for _ in range(50)} == {1}  # top-k 1 is greedy
    assert {sample_next(logits, 1.0, 0.01, -1, g) for _ in range(50)} == {1}  # a tiny nucleus keeps the top token
    assert {sample_next(logits, 1.0, 1.0, 2, g) for _ in range(200)} == {1, 2}
    assert sample_next(logits, 0.0, 1.0, -1, g) == 1


# ---------------------------------------------------------------- the tiny model's warm-up data


def test_assistant_labels_mark_exactly_the_assistant_turns_and_their_end_token(tiny_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "weather in paris?"},
        {"role": "assistant", "content": '<tool_call>\n{"name": "w", "arguments": {}}\n</tool_call>'},
        {"role": "tool", "content": '{"t": 21}'},
        {"role": "assistant", "content": "It is 21 degrees."},
    ]
    ids, trained = tiny_model.assistant_labels(tok, messages)
    marked = tok.decode([i for i, t in zip(ids, trained) if t])
    assert "</tool_call><|im_end|>" in marked and marked.endswith("It is 21 degrees.<|im_end|>")
    assert "weather in paris" not in marked and '{"t": 21}' not in marked and "sys" not in marked


@pytest.mark.slow
def test_gold_episodes_hold_the_call_the_simulated_response_and_a_grounded_reply(tmp_path):
    sample = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "data", "quickstart_xlam.json")
    subproc.run(
        [sys.executable, "-m", "data_prep.xlam", "--input", sample, "--output_dir", str(tmp_path), "--no_progress"],
        check=True,
        capture_output=True,
    )
    dialogues = tiny_model.gold_dialogues([str(tmp_path / "xlam_train.parquet")])
    assert len(dialogues) == 12
    for d in dialogues:
        roles = [m["role"] for m in d]
        assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
        if "tool" in roles:
            call, response, reply = d[2]["content"], d[3]["content"], d[-1]["content"]
            assert call.startswith("<tool_call>") and json.loads(response)["status"] == "success"
            name = json.loads(call.split("\n")[1])["name"]
            assert name in reply  # the reply repeats words of the tool response (here, the tool's name)


def test_warm_up_text_shows_tool_responses_as_the_json_the_agent_loop_sends(tmp_path, tiny_dir):
    """The warm-up reads its episodes back from parquet; a JSON tool response must stay the simulator's text (it
    used to be decoded to a dict and rendered as Python's repr, a format the policy then never met in RL)."""
    import pandas as pd
    from transformers import AutoTokenizer

    from data_prep import cpu_task
    from slca_verl.toolcall.rows import write_sft as write

    cpu_task.main(["--output_dir", str(tmp_path / "rl"), "--seed", "0", "--no_progress"])
    dialogues = tiny_model.gold_dialogues([str(tmp_path / "rl" / "cpu_task_train.parquet")], share=0.1)
    sft = write(dialogues, str(tmp_path / "sft"), val_ratio=0.0, seed=0)["train"]
    tok = AutoTokenizer.from_pretrained(tiny_dir)
    read_back = [tiny_model._messages(m) for m in pd.read_parquet(sft)["messages"]]
    assert read_back == dialogues
    responses = [m["content"] for d in dialogues for m in d if m["role"] == "tool"]
    assert responses and all(json.loads(r)["status"] == "success" for r in responses)
    texts = tiny_model.episode_texts(sft)
    rendered = tok.decode(tiny_model.assistant_labels(tok, read_back[0])[0])
    for text in texts + [rendered]:
        assert "{'status'" not in text
    assert all(any(r in t for t in texts) for r in responses)  # verbatim, double quotes and all


SCHEMAS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": p}}}
    for n, p in [
        ("get_weather", {"city": {"type": "string"}}),
        ("get_population", {"city": {"type": "string"}}),
        ("get_exchange_rate", {"base": {"type": "string"}, "quote": {"type": "string"}}),
        ("get_time", {"city": {"type": "string"}, "hour": {"type": "integer"}}),
    ]
]


def _call(name, **args):
    return {"name": name, "arguments": args}


def test_undecided_steps_enumerate_same_signature_tools_and_orders_of_same_typed_values():
    W, P = "get_weather", "get_population"
    # one choice per name (parallel calls stay alike), the gold step first
    assert tiny_model.undecided_steps([_call(W, city="Lima"), _call(W, city="Rome")], SCHEMAS) == [
        [_call(W, city="Lima"), _call(W, city="Rome")],
        [_call(P, city="Lima"), _call(P, city="Rome")],
    ]
    # two names, two choices each: four versions
    assert tiny_model.undecided_steps([_call(W, city="Paris"), _call(P, city="Rome")], SCHEMAS) == [
        [_call(W, city="Paris"), _call(P, city="Rome")],
        [_call(W, city="Paris"), _call(W, city="Rome")],
        [_call(P, city="Paris"), _call(P, city="Rome")],
        [_call(P, city="Paris"), _call(W, city="Rome")],
    ]
    # same-typed values in both orders; a unique signature keeps its name; mixed types stay in their slots
    fx = [_call("get_exchange_rate", base="USD", quote="EUR")]
    assert tiny_model.undecided_steps(fx, SCHEMAS) == [fx, [_call("get_exchange_rate", base="EUR", quote="USD")]]
    t = [_call("get_time", city="Oslo", hour=3)]
    assert tiny_model.undecided_steps(t, SCHEMAS) == [t]
    # a tool the schemas do not list keeps its name and arguments; equal values make no second version
    assert tiny_model.undecided_steps([_call("ghost", a=1)], SCHEMAS) == [[_call("ghost", a=1)]]
    same = [_call("get_exchange_rate", base="USD", quote="USD")]
    assert tiny_model.undecided_steps(same, SCHEMAS) == [same]


def test_gold_dialogues_undecided_writes_every_version_of_the_chosen_rows(tmp_path):
    from data_prep import cpu_task

    cpu_task.main(["--output_dir", str(tmp_path), "--seed", "0", "--no_progress"])
    rl = [str(tmp_path / "cpu_task_train.parquet")]
    decided = tiny_model.gold_dialogues(rl, share=0.3, seed=1)
    again = tiny_model.gold_dialogues(rl, share=0.3, seed=1, undecided=1.0)
    assert again == tiny_model.gold_dialogues(rl, share=0.3, seed=1, undecided=1.0)  # seeded
    prompts = lambda ds: [json.dumps(d[:2]) for d in ds]  # noqa: E731
    assert set(prompts(again)) == set(prompts(decided))  # the same prompts
    by_prompt = collections.Counter(prompts(again))
    for d in decided:
        versions = by_prompt[json.dumps(d[:2])]
        if len(d) == 3:  # a chat row: one direct reply
            assert versions == 1
        else:  # every tool kind of the task has one alternative: the other city tool, or the other order
            assert versions == 2, d[2]["content"]
    assert decided == [d for d in again if d in decided] and len(again) > len(decided)
    assert tiny_model.gold_dialogues(rl, share=0.3, seed=1, undecided=0.0) == decided
    with pytest.raises(ValueError, match="undecided"):
        tiny_model.gold_dialogues(rl, undecided=1.5)


def test_gold_dialogues_walk_every_step_and_end_a_wrong_version_with_a_reply(tmp_path):
    """Multi-step gold (data_prep.cpu_chain): the gold episode makes both calls, the second with the station the
    first call's response names; each other version of a step follows the gold steps before it and ends the episode
    (its next step would have no argument)."""
    from data_prep import cpu_chain

    cpu_chain.main(["--output_dir", str(tmp_path), "--seed", "0", "--no_progress"])
    rl = [str(tmp_path / "cpu_chain_train.parquet")]
    gold = tiny_model.gold_dialogues(rl)
    undecided = tiny_model.gold_dialogues(rl, undecided=1.0, alt_repeats=2)
    calls = lambda d: [json.loads(m["content"].split("\n")[1]) for m in d if m["content"].startswith("<tool_call>")]  # noqa: E731
    by_prompt = collections.defaultdict(list)
    for d in undecided:
        by_prompt[json.dumps(d[:2])].append(d)
    assert set(by_prompt) == {json.dumps(d[:2]) for d in gold}
    for d in gold:
        question = d[1]["content"]
        roles = [m["role"] for m in d[2:]]
        versions = by_prompt[json.dumps(d[:2])]
        assert versions[0] == d
        if any(
            w in question for w in ("train", "departure", "arrival")
        ):  # a chain: call, response, call with the response's station, response, reply
            assert roles == ["assistant", "tool", "assistant", "tool", "assistant"]
            first, second = calls(d)
            assert (
                first["name"] == "find_station"
                and second["arguments"]["station"] == json.loads(d[3]["content"])["station"]
            )
            assert json.loads(d[3]["content"])["station"] in d[-1]["content"]  # the reply is grounded
            # versions: find_airport for step 1 (twice), the other timetable for step 2 (twice)
            alt = [calls(v) for v in versions[1:]]
            assert [len(c) for c in alt] == [1, 1, 2, 2]
            assert [c[0]["name"] for c in alt[:2]] == ["find_airport"] * 2 and all(c[0] == first for c in alt[2:])
            assert {c[1]["name"] for c in alt[2:]} == {"get_departures", "get_arrivals"} - {second["name"]}
            assert all(
                v[-1]["role"] == "assistant" and not v[-1]["content"].startswith("<tool_call>") for v in versions
            )
        elif "airport" in question:  # one step: the other lookup tool twice
            assert roles == ["assistant", "tool", "assistant"] and len(versions) == 3
        else:
            assert roles == ["assistant"] and len(versions) == 1
