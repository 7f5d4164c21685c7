"""slca_tool_agent through verl's v1 rollout post-processing into a real TransferQueue, then slca_sync's advantages.

The reward is computed inside the rollout as in production: ``AgentLoopWorkerTQ._agent_loop_postprocess`` (verl's
own code) asks a reward worker, here verl's real NaiveRewardManager running ``slca_verl.agent_loop.reward``.
"""

import asyncio
import functools

import pytest
import torch
from agent_loop_helpers import (
    PARIS,
    STOCK,
    SUMMARY_TEXT,
    WEATHER,
    RewardWorkerHandle,
    ScriptedServer,
    call,
    compose_config,
    make_loop,
    make_row,
    runs,
    stand_in_worker,
)
from reference import reference_slca

from slca_verl.agent_loop.reward import compute_score
from slca_verl.estimators.segments import OBSERVATION, SEGMENT_IDS_FIELD, SUMMARY, TOOL
from slca_verl.trainer.modes import SLCASyncTrainer

# One GRPO group (same uid): tool+summary, two tool turns+summary, no call, and one cut by the turn limit.
GROUP = {
    "TQ weather once?": [call("get_weather", city="Paris"), SUMMARY_TEXT],
    "TQ weather then stock?": [call("get_weather", city="Paris"), call("get_stock_price", ticker="AAPL"), SUMMARY_TEXT],
    "TQ no call?": ["It is probably sunny in Paris."],
    "TQ cut by turns?": [call("get_weather", city="Lyon"), call("get_weather", city="Paris"), "unused"],
}


async def run_group_into_transfer_queue(cfg, tok, uid):
    server = ScriptedServer(tok, GROUP)
    handle = RewardWorkerHandle(cfg, tok, functools.partial(compute_score, judge="offline_proxy"))
    worker = stand_in_worker(cfg, tok, handle)
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

    postprocess = AgentLoopWorkerTQ.__ray_actor_class__._agent_loop_postprocess
    keys, rows = [], []
    for session_id, question in enumerate(GROUP):
        row = make_row(question, [WEATHER, STOCK], PARIS, uid, index=7)
        limit = {"max_assistant_turns": 2} if "cut" in question else {}
        loop = make_loop(cfg, tok, server, max_parallel_calls=4, **limit)
        out = await loop.run({"temperature": 1.0}, **row)
        await postprocess(worker, out, False, session_id=session_id, global_steps=1, **row)
        keys.append(f"{uid}_{session_id}_0")
        rows.append(row)
    return keys


def test_v1_postprocess_stores_segment_ids_and_a_segment_reward_layout_that_slca_sync_uses(transfer_queue, tok):
    from transfer_queue.metadata import KVBatchMeta

    cfg = compose_config("algorithm.adv_estimator=slca_grpo", "trainer.v1.trainer_mode=slca_sync")
    keys = asyncio.run(run_group_into_transfer_queue(cfg, tok, "uid-tq-group"))
    fields = ["responses", "response_mask", "rm_scores", SEGMENT_IDS_FIELD, "extra_fields"]
    data = transfer_queue.kv_batch_get(keys=keys, partition_id="train", select_fields=fields)
    assert set(fields) <= set(data.keys())  # TransferQueue drops a field some rows lack: every row has all
    extra = list(data["extra_fields"])
    padded = data.select(*fields[:4]).to_padded_tensor()
    lengths = data["responses"].offsets().diff().tolist()
    ids_all, mask_all, rm_all = padded[SEGMENT_IDS_FIELD], padded["response_mask"], padded["rm_scores"]

    kinds_by_row = []
    for i, (_question, script) in enumerate(GROUP.items()):
        n = lengths[i]
        ids, mask, rm = ids_all[i, :n], mask_all[i, :n], rm_all[i, :n]
        assert ids.dtype == torch.int8
        assert torch.equal(ids != OBSERVATION, mask.bool())
        # token for token: each trained run decodes to the scripted turn
        trained = [(k, tok.decode(padded["responses"][i, s:e].tolist())) for k, s, e in runs(ids.tolist()) if k]
        assert [t for _, t in trained] == [t + "<|im_end|>" for t in script[: len(trained)]]
        kinds_by_row.append([k for k, _ in trained])
        # the reward computed inside the rollout, laid out by segment
        info = extra[i]["reward_extra_info"]
        dropped = extra[i]["slca_reward_dropped"]
        assert rm.sum().item() + dropped == pytest.approx(info["score"], abs=1e-6)
        if TOOL in ids.tolist():
            assert rm[max(p for p in range(n) if ids[p] == TOOL)].item() == pytest.approx(info["r_tool"], abs=1e-6)
        if SUMMARY in ids.tolist():
            assert rm[max(p for p in range(n) if ids[p] == SUMMARY)].item() == pytest.approx(info["r_sum"], abs=1e-6)
        assert extra[i]["slca_agent_metrics"]["turns"] == len(trained)
        assert info["agent_tool_calls"] == extra[i]["slca_agent_metrics"]["tool_calls"]
    assert kinds_by_row == [[TOOL, SUMMARY], [TOOL, TOOL, SUMMARY], [SUMMARY], [TOOL, TOOL]]
    assert extra[2]["reward_extra_info"]["no_call"] == 1

    # the slca_sync trainer fetches the ids from TransferQueue and hands them to slca_grpo
    meta = KVBatchMeta(keys=keys, tags=[{}] * len(keys), partition_id="train")
    trainer = object.__new__(SLCASyncTrainer)
    trainer.config = cfg
    trainer._compute_advantage(meta, metrics={})
    adv = transfer_queue.kv_batch_get(keys=keys, partition_id="train", select_fields=["advantages"])
    adv = adv.to_padded_tensor()["advantages"]
    L = adv.shape[1]

    def pad(t):
        return torch.nn.functional.pad(t, (0, L - t.shape[1]))

    index = ["uid-tq-group"] * len(keys)
    expected = reference_slca(pad(rm_all), pad(mask_all), index, ids=pad(ids_all.long()))
    torch.testing.assert_close(adv.double(), expected, rtol=1e-4, atol=1e-5)
    assert torch.count_nonzero(expected) > 0
    # the turn-limited row keeps its last turn as tool: response_mask runs would have called it the summary
    assert not torch.allclose(expected, reference_slca(pad(rm_all), pad(mask_all), index), atol=1e-3)
