"""The decoded-text entry point under every reward manager verl 0.9.1 registers.

verl's agent loop records each episode's turn count (``__num_turns__``), but of its reward managers only ``naive``
and ``remote`` hand it to the reward function; ``dapo``, ``rate_limited`` and ``gdpo`` do not. Without it, HierR checks
each tool-response run of the decoded text against the turn before it (``hierr.unanswerable_runs``). Each case
here is a rollout as verl's tool agent loop would have produced it (the real Qwen3 tokenizer and chat-template
tokens, decoded by the manager itself), scored by the manager built through verl's ``load_reward_manager``, with a
real judge over HTTP on 127.0.0.1 that rates every reply "excellent" (the most generous there can be).
"""

import asyncio

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

# the battery's pieces (benchmarks/reward_attacks.py): its gold, reply and typed response, hermes calls
from reward_attacks import GT, GT_NONE, OCTO, REAL, REPLY, call, typed  # noqa: E402
from sgls_helpers import Reply, ScriptedServer

CALL, WRONG = call("hermes"), call("hermes", "Lyon")


def episode(turns: list[str], answers: list[list[str]]) -> str:
    """The response tokens' text of an episode as verl's tool agent loop builds it with the Qwen chat template: each
    assistant turn ends with <|im_end|>; after turn i the environment's answers (one per call the loop ran)."""
    text = ""
    for i, turn in enumerate(turns):
        text += turn + "<|im_end|>"
        if i < len(answers):
            body = "\n".join(f"<tool_response>\n{a}\n</tool_response>" for a in answers[i])
            text += f"\n<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n"
    return text


# (name, turns, environment answers, ground truth); num_turns = 2 * environment turns + 2 (user + assistant turns + 1)
HONEST = ("honest", [CALL, REPLY], [[REAL]], GT)
ATTACKS = [
    # the policy types a response and a reply after its call; the loop runs the call and answers it after the turn
    ("typed after the call", [CALL + typed() + REPLY, REPLY], [[REAL]], GT),
    # a wrong call hidden inside a typed response: the loop's parser reads the whole turn and runs it
    ("wrong call hidden in a typed response", [CALL, typed(WRONG), REPLY], [[REAL], ['{"city": "Lyon"}']], GT),
    # on a row without gold calls, an invented response used to unlock the judge
    ("invented, no call", [typed() + OCTO], [], GT_NONE),
]
DIRECT = ("direct reply", [OCTO], [], GT_NONE)


@pytest.fixture(scope="module")
def generous_judge():
    with ScriptedServer(lambda req, n: Reply(content="Great.\nRating: excellent")) as server:
        yield server.base_url


def verl_config(manager: str, judge_url: str):
    return OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": "pkg://slca_verl.rewards.compute_score",
                    "name": "compute_score",
                    "reward_kwargs": {
                        "judge": "llm",
                        "judge_base_urls": [judge_url],
                        "judge_model": "scripted",
                        "judge_max_retries": 0,
                    },
                },
                "reward_manager": {"source": "register", "name": manager},
                "reward_kwargs": {},
                "num_workers": 1,
            },
            "trainer": {"experiment_name": "decoded"},
        }
    )


def batch(tok, case):
    from verl import DataProto

    _, turns, answers, gt = case
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": gt["question_content"]}], tokenize=True, add_generation_prompt=True
    )
    if not isinstance(prompt, list):
        prompt = prompt["input_ids"]
    response = tok.encode(episode(turns, answers), add_special_tokens=False)
    pad = 8  # right padding, as verl's batch has it
    responses = torch.tensor([response + [tok.pad_token_id] * pad])
    attention = torch.tensor([[1] * len(prompt) + [1] * len(response) + [0] * pad])
    return DataProto.from_dict(
        tensors={"prompts": torch.tensor([prompt]), "responses": responses, "attention_mask": attention},
        non_tensors={
            "data_source": np.array(["toucan"], dtype=object),
            "reward_model": np.array([{"ground_truth": gt}], dtype=object),
            "extra_info": np.array([{}], dtype=object),
            "__num_turns__": np.array([2 * len(answers) + 2], dtype=object),
        },
    )


def managers():
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

    return sorted(REWARD_MANAGER)


def score(tok, manager, judge_url, case):
    from verl.trainer.ppo.reward import load_reward_manager

    async def run():
        rm = load_reward_manager(verl_config(manager, judge_url), tok)
        return await rm.run_single(batch(tok, case))

    out = asyncio.run(run())
    return out["reward_score"], out["reward_extra_info"]


def test_verl_registers_the_managers_this_matrix_covers():
    # a manager added by a later verl must be added here (and checked for whether it passes the turn count)
    assert managers() == ["dapo", "gdpo", "naive", "rate_limited", "remote"]


@pytest.mark.parametrize("manager", ["naive", "dapo", "rate_limited", "gdpo"])
def test_no_typed_tool_response_gains_under_any_reward_manager(tok, generous_judge, manager):
    honest, info = score(tok, manager, generous_judge, HONEST)
    assert info["forged_tool_output"] == 0 and honest == pytest.approx(2.0)  # r_tool 1 + judged excellent
    for case in ATTACKS:
        attacked, info = score(tok, manager, generous_judge, case)
        assert info["forged_tool_output"] >= 1, (manager, case[0], info["reason"])
        assert attacked == pytest.approx(-0.5) and info["judge_used"] == 0, (manager, case[0])
    direct, _ = score(tok, manager, generous_judge, DIRECT)
    assert direct == pytest.approx(0.9)  # the no-call row's honest answer still out-scores the invented response


def test_the_remote_manager_refuses_hierr_before_any_rollout(tok, generous_judge):
    # verl's remote manager runs only synchronous reward functions; HierR's is a coroutine (it awaits the judge)
    from verl.trainer.ppo.reward import load_reward_manager

    with pytest.raises(AssertionError, match="Async reward score is not supported"):
        load_reward_manager(verl_config("remote", generous_judge), tok)
