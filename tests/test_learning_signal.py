"""The trainer path teaches the right thing: a group of scripted rollouts goes through the real slca_tool_agent, verl's
v1 post-processing into a real TransferQueue, the slca_sync advantage step and verl's own PPO loss; one optimiser
step on a tiny Qwen3 must make the correct tool call more likely and the well-judged replies more likely.

The group is built so that plumbing errors change the lesson, not only a number: the two rollouts with the correct
call wrote poor replies, the two with the wrong call wrote replies the judge rates highly. So

- segment-locked credit (correct): the call's argument token of the correct call goes up (r_tool is higher);
- tool advantages with the wrong sign, or tool tokens given the summary's advantage (misrouted segment ids), or the
  noisy total on every token (what GRPO does): the wrong call's argument goes up instead.

Each fault is injected in the test (never left in the code) and the same check must then fail.
"""

import asyncio
import functools

import pytest
import torch
from agent_loop_helpers import (
    WEATHER,
    RewardWorkerHandle,
    ScriptedServer,
    call,
    compose_config,
    make_loop,
    make_row,
    stand_in_worker,
)
from transfer_queue.metadata import KVBatchMeta

from slca_verl.agent_loop.reward import compute_score
from slca_verl.estimators.segments import SEGMENT_IDS_FIELD, SUMMARY, TOOL
from slca_verl.trainer import handover
from slca_verl.trainer.modes import SLCASyncTrainer

QUESTION = "LS what is the weather in Paris?"
GOLD = [[{"name": "get_weather", "arguments": {"city": "Paris"}}]]
GROUNDED = (
    "Here is what I found: success get_weather {city} completed given arguments, the weather "
    "in {city} is reported by the service."
)
#: (call city, reply): correct calls with poor replies, wrong calls with replies the offline judge rates highly
SCRIPTS = [
    ("Paris", "Nothing more to add here."),
    ("Paris", "I am not sure about it."),
    ("Lyon", GROUNDED.format(city="Lyon")),
    ("Lyon", GROUNDED.format(city="Lyon") + " Enjoy!"),
]


@pytest.fixture(scope="module")
def group_in_tq(transfer_queue, tok):
    """The four rollouts of one GRPO group, stored by verl's v1 post-processing; returns (keys, cfg)."""
    cfg = compose_config("algorithm.adv_estimator=slca_grpo", "trainer.v1.trainer_mode=slca_sync")

    async def run():
        from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

        handle = RewardWorkerHandle(cfg, tok, functools.partial(compute_score, judge="offline_proxy"))
        worker = stand_in_worker(cfg, tok, handle)
        postprocess = AgentLoopWorkerTQ.__ray_actor_class__._agent_loop_postprocess
        keys = []
        for i, (city, reply) in enumerate(SCRIPTS):
            server = ScriptedServer(tok, {QUESTION: [call("get_weather", city=city), reply]})
            row = make_row(QUESTION, [WEATHER], GOLD, "uid-learning", index=3)
            out = await make_loop(cfg, tok, server).run({"temperature": 1.0}, **row)
            await postprocess(worker, out, False, session_id=i, global_steps=1, **row)
            keys.append(f"uid-learning_{i}_0")
        return keys

    return asyncio.run(run()), cfg


def fetch(tq, keys, fields):
    data = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=fields)
    return data.to_padded_tensor()


def advantages_from_trainer(tq, keys, cfg, fault=None, monkeypatch=None):
    """slca_sync's advantage step on the stored group, optionally with one injected fault."""
    trainer = object.__new__(SLCASyncTrainer)
    trainer.config = cfg
    if fault == "tool_sign_flipped":  # the estimator's tool advantages come out negated
        from verl.trainer.ppo import core_algos

        fn = core_algos.ADV_ESTIMATOR_REGISTRY["slca_grpo"]

        def flipped(**kwargs):
            adv, ret = fn(**kwargs)
            tool = (handover.current_segment_ids() == TOOL)[:, : adv.shape[1]]
            adv = torch.where(tool, -adv, adv)
            return adv, adv

        monkeypatch.setitem(core_algos.ADV_ESTIMATOR_REGISTRY, "slca_grpo", flipped)
    if fault == "routed_to_summary":  # each row's tool advantage lands on its summary tokens and vice versa
        from verl.trainer.ppo import core_algos

        fn = core_algos.ADV_ESTIMATOR_REGISTRY["slca_grpo"]

        def misrouted(**kwargs):
            adv, ret = fn(**kwargs)
            ids = handover.current_segment_ids()[:, : adv.shape[1]]
            tool, summ = (ids == TOOL).float(), (ids == SUMMARY).float()
            a_tool = (adv * tool).sum(-1) / tool.sum(-1).clamp(min=1)
            a_sum = (adv * summ).sum(-1) / summ.sum(-1).clamp(min=1)
            adv = tool * a_sum[:, None] + summ * a_tool[:, None]
            return adv, adv

        monkeypatch.setitem(core_algos.ADV_ESTIMATOR_REGISTRY, "slca_grpo", misrouted)
    if fault == "grpo_total":  # the total on every token: plain GRPO through the same trainer (it sums rm_scores,
        # which the slca layout makes r_tool + r_sum = score)
        trainer.config = compose_config("algorithm.adv_estimator=grpo", "trainer.v1.trainer_mode=slca_sync")
    trainer._compute_advantage(KVBatchMeta(keys=keys, tags=[{}] * len(keys), partition_id="train"), metrics={})
    return fetch(tq, keys, ["advantages"])["advantages"]


def one_ppo_step(tok, prompts, responses, mask, advantages):
    """One step of verl's vanilla PPO loss (token-mean) on a fresh tiny Qwen3; returns (model before, after)."""
    import copy

    from transformers import Qwen3Config, Qwen3ForCausalLM
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.workers.config import FSDPActorConfig

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        tie_word_embeddings=True,
    )
    model = Qwen3ForCausalLM(config)
    before = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    logp = response_log_probs(model, prompts, responses)
    loss, _ = get_policy_loss_fn("vanilla")(
        old_log_prob=logp.detach(),
        log_prob=logp,
        advantages=advantages,
        response_mask=mask,
        loss_agg_mode="token-mean",
        config=FSDPActorConfig(strategy="fsdp", ppo_micro_batch_size_per_gpu=1, rollout_n=1, clip_ratio=0.2),
    )
    opt.zero_grad()
    loss.backward()
    opt.step()
    return before, model


def response_log_probs(model, prompts, responses):
    """log π(response token | prompt, earlier tokens), (bs, L), teacher-forced on prompt + response."""
    out = []
    for p, r in zip(prompts, responses):
        hidden = model.model(input_ids=torch.tensor([p + r])).last_hidden_state[0, len(p) - 1 : -1]
        logits = model.lm_head(hidden)  # only the response positions: Qwen3's vocabulary is 151,936 wide
        out.append(torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(r)[:, None])[:, 0])
    return torch.nn.utils.rnn.pad_sequence(out, batch_first=True)


def lesson(transfer_queue, tok, group_in_tq, fault=None, monkeypatch=None):
    """(shift of log P(correct city) - log P(wrong city) at the argument position, summary log-prob shifts)."""
    keys, cfg = group_in_tq
    adv = advantages_from_trainer(transfer_queue, keys, cfg, fault, monkeypatch)
    data = transfer_queue.kv_batch_get(
        keys=keys, partition_id="train", select_fields=["prompts", "responses", "response_mask", SEGMENT_IDS_FIELD]
    )
    prompts = [t.tolist() for t in data["prompts"].unbind()]
    responses = [t.tolist() for t in data["responses"].unbind()]
    padded = data.select("response_mask", SEGMENT_IDS_FIELD).to_padded_tensor()
    mask = padded["response_mask"].float()
    L = max(len(r) for r in responses)
    adv = torch.nn.functional.pad(adv, (0, L - adv.shape[1]))[:, : mask.shape[1]]
    assert prompts[0] == prompts[2]
    pos = next(i for i, (a, b) in enumerate(zip(responses[0], responses[2])) if a != b)  # the city token
    paris, lyon = responses[0][pos], responses[2][pos]
    before, after = one_ppo_step(tok, prompts, responses, mask, adv)

    def city_margin(model):
        with torch.no_grad():
            hidden = model.model(input_ids=torch.tensor([prompts[0] + responses[0][:pos]])).last_hidden_state[0, -1]
            lp = torch.log_softmax(model.lm_head(hidden).float(), -1)
        return float(lp[paris] - lp[lyon])

    with torch.no_grad():
        summary = (padded[SEGMENT_IDS_FIELD] == SUMMARY).float()
        lp0, lp1 = response_log_probs(before, prompts, responses), response_log_probs(after, prompts, responses)
        n = min(lp0.shape[1], summary.shape[1])
        reply_shift = ((lp1 - lp0)[:, :n] * summary[:, :n]).sum(-1)
    return city_margin(after) - city_margin(before), reply_shift, adv


def test_segment_locked_credit_makes_the_correct_call_and_the_better_replies_more_likely(
    transfer_queue, tok, group_in_tq
):
    margin, reply_shift, adv = lesson(transfer_queue, tok, group_in_tq)
    assert margin > 0.01  # log P(Paris) - log P(Lyon) at the argument position grew
    assert reply_shift[2] > 0 and reply_shift[3] > 0  # the replies the judge rated highly became more likely
    assert reply_shift[0] < 0 and reply_shift[1] < 0


@pytest.mark.parametrize("fault", ["tool_sign_flipped", "routed_to_summary", "grpo_total"])
def test_the_same_check_fails_when_the_trainer_path_is_broken(transfer_queue, tok, group_in_tq, fault, monkeypatch):
    margin, _, _ = lesson(transfer_queue, tok, group_in_tq, fault, monkeypatch)
    assert margin < 0  # the wrong city is what the step teaches
