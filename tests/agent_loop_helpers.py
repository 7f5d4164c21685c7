"""Shared pieces for the slca_tool_agent tests: the real Qwen3 tokenizer, verl's composed config, a scripted
server manager, dataset rows, and a stand-in for verl's v1 worker so its real post-processing can run on CPU."""

from __future__ import annotations

import asyncio
import json
import os
from collections import defaultdict

import verl
from verl.workers.rollout.replica import TokenOutput

VERL_CONFIG_DIR = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}
STOCK = {
    "type": "function",
    "function": {
        "name": "get_stock_price",
        "description": "Last price of a stock ticker.",
        "parameters": {"type": "object", "properties": {"ticker": {"type": "string"}}, "required": ["ticker"]},
    },
}


PARIS = [[{"name": "get_weather", "arguments": {"city": "Paris"}}]]
SUMMARY_TEXT = "It is 21 degrees and sunny in Paris today, with a light breeze."


def compose_config(*overrides):
    """verl's ppo_trainer config, composed by hydra as main_ppo does."""
    from hydra import compose, initialize_config_dir

    base = [
        "actor_rollout_ref.model.path=/nonexistent/model",
        "actor_rollout_ref.rollout.prompt_length=4096",
        "actor_rollout_ref.rollout.response_length=2048",
    ]
    with initialize_config_dir(config_dir=VERL_CONFIG_DIR, version_base=None):
        return compose(config_name="ppo_trainer", overrides=[*base, *overrides])


def call(name: str, **arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


class ScriptedServer:
    """verl's server manager, scripted: the n-th generate call of a trajectory returns the token ids of the n-th
    assistant text of the script whose key (a question) appears in the prompt. Records every decoded prompt."""

    def __init__(self, tokenizer, scripts: dict[str, list[str]]):
        self.tokenizer = tokenizer
        self.scripts = scripts
        self.turn = defaultdict(int)
        self.prompts: dict[str, list[str]] = defaultdict(list)

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        prompt = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        key = next(k for k in self.scripts if k in prompt)
        self.prompts[key].append(prompt)
        n = self.turn[request_id]
        self.turn[request_id] += 1
        text = self.scripts[key][n]
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [
            self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        ]
        return TokenOutput(token_ids=ids, num_preempted=0)


def make_row(question: str, tools, gold_calls, uid: str, *, tools_in_system: bool = False, index: int = 0) -> dict:
    """The keyword arguments verl hands an agent loop for one data_prep row (see docs/data_prep.md)."""
    tools_json = json.dumps(tools) if tools is not None else None
    system = "You are a helpful assistant."
    if tools_in_system and tools:
        system += "\n<tools>\n" + "\n".join(json.dumps(t) for t in tools) + "\n</tools>"
    names = [t["function"]["name"] for t in tools or []]
    extra_info = {"index": index, "split": "train", "original_turn_index": 0, "need_tools_kwargs": False}
    if tools_json is not None:
        extra_info["tool_schemas"] = tools_json
    row = {
        "raw_prompt": [{"role": "system", "content": system}, {"role": "user", "content": question}],
        "data_source": "unit_test",
        "agent_name": "slca_tool_agent",
        "reward_model": {
            "style": "rule",
            "ground_truth": {
                "allowed_tools": names,
                "gold_tool_calls": json.dumps(gold_calls),
                "question_content": question,
                "subset_name": "tool_call" if gold_calls else "irrelevant",
                "tool_schemas": tools_json or "",
            },
        },
        "extra_info": extra_info,
        "index": index,
        "uid": uid,
        "tools_kwargs": {},
        "interaction_kwargs": {},
    }
    if tools_json is not None:
        row["tools"] = tools_json
    return row


def make_loop(config, tokenizer, server, **kwargs):
    """An SLCAToolAgentLoop built the way AgentLoopWorker builds it (hydra passes these keyword arguments)."""
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from slca_verl.agent_loop import SLCAToolAgentLoop

    kwargs.setdefault("sgls", {"backend": "offline", "cache_scope": "group"})
    return SLCAToolAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        hf_model_type="qwen3",
        tools=ToolListWrap([]),
        **kwargs,
    )


class _Remote:
    def __init__(self, fn):
        self.fn = fn

    def remote(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


class RewardWorkerHandle:
    """Stands in for a RewardLoopWorker actor handle: ``await handle.compute_score.remote(data)``, answered by
    verl's real NaiveRewardManager with the given compute_score."""

    def __init__(self, config, tokenizer, compute_score):
        from verl.experimental.reward_loop.reward_manager.naive import (
            NaiveRewardManager,
        )

        self.manager = NaiveRewardManager(config, tokenizer, compute_score)
        self.compute_score = _Remote(self.manager.run_single)


def stand_in_worker(config, tokenizer, reward_handle):
    """An object carrying what ``AgentLoopWorkerTQ._agent_loop_postprocess`` uses, with verl's own methods."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    class Worker:
        _compute_score = AgentLoopWorker._compute_score
        _compute_teacher_logprobs = AgentLoopWorker._compute_teacher_logprobs
        _compute_multi_modal_inputs = AgentLoopWorker._compute_multi_modal_inputs
        _compute_position_ids = AgentLoopWorker._compute_position_ids
        _get_mm_processor_kwargs = AgentLoopWorker._get_mm_processor_kwargs

    worker = Worker()
    worker.config = config
    worker.rollout_config = config.actor_rollout_ref.rollout
    worker.tokenizer = tokenizer
    worker.processor = None
    worker.mm_processor_kwargs = {}
    worker.distillation_enabled = False
    worker.reward_loop_worker_handles = [reward_handle] if reward_handle is not None else None
    return worker


def runs(segment_ids) -> list[tuple[int, int, int]]:
    """``(kind, start, end)`` of each maximal run of equal ids."""
    out, start = [], 0
    ids = list(segment_ids)
    for p in range(1, len(ids) + 1):
        if p == len(ids) or ids[p] != ids[start]:
            out.append((int(ids[start]), start, p))
            start = p
    return out


async def rollout(cfg, tok, scripts, rows, **loop_kwargs):
    """Run every row through its own loop (as verl does), concurrently; return (outputs, server)."""
    server = ScriptedServer(tok, scripts)
    loop_kwargs.setdefault("max_parallel_calls", 4)
    response_length = loop_kwargs.pop("response_length", None)
    loops = [make_loop(cfg, tok, server, **loop_kwargs) for _ in rows]
    if response_length:
        for loop in loops:
            loop.response_length = response_length
    outs = await asyncio.gather(*(loop.run({"temperature": 1.0}, **row) for loop, row in zip(loops, rows)))
    return outs, server


async def reward_layout(out, row):
    """HierR through the reward entry point (as verl's reward worker calls it), then the output's layout."""
    extra_info = {**row["extra_info"], **out.extra_fields}
    from slca_verl.agent_loop.reward import compute_score

    reward = await compute_score(
        row["data_source"], "", row["reward_model"]["ground_truth"], extra_info, judge="offline_proxy"
    )
    out.reward_score = reward["score"]
    out.extra_fields["reward_extra_info"] = reward
    return reward, out.as_dict()
