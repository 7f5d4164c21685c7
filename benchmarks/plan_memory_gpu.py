"""Check the plan check's memory model against a real allocation: one fp32-master AdamW step with bf16 compute.

    python benchmarks/plan_memory_gpu.py                       # on a GPU: every shape that fits it, ~2-6 min
    python benchmarks/plan_memory_gpu.py --shapes Qwen/Qwen2.5-1.5B-Instruct --tokens 4096 8192
    python benchmarks/plan_memory_gpu.py --device cpu --tiny   # the script itself, on a CPU (nothing measured)

For each model shape (random weights of that shape, built by transformers: nothing downloaded) and each micro-batch
size, it runs what verl's FSDP engine runs on one GPU for an update: fp32 weights, a bf16 autocast forward with
gradient checkpointing, the log-probs of the labels from bf16 logits (log-softmax, gather), their mean as the loss,
backward, one AdamW step; and prints torch's peak allocation beside :func:`slca_verl.plan.memory.phases`'s "SFT
step" prediction for one shard (without the reserve: CUDA contexts and NCCL are outside torch's allocator). The plan
check's estimates hold where ``measured / predicted`` is within 0.9-1.1; above 1.1 the model under-counts, and the
constants in slca_verl/plan/memory.py (activations, logits) are the ones to correct.

Output: one line per (shape, tokens) and a JSON list (``--out``, default stdout only). No GPU: ``--device cpu`` runs
the same steps on a tiny shape so the script is known to work; it measures nothing there.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from slca_verl.plan.memory import GIB, KNOWN_SHAPES, ModelShape, TrainLayout, phases

TINY = ModelShape("tiny", hidden=64, layers=2, intermediate=128, heads=4, kv_heads=2, vocab=1024, tied=True)


def build(shape: ModelShape, device: str):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        intermediate_size=shape.intermediate,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        vocab_size=shape.vocab,
        tie_word_embeddings=shape.tied,
        attn_implementation="sdpa",
        torch_dtype="float32",
    )
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    return model


def one_step(model, tokens: int, device: str) -> None:
    """One update of ``tokens`` tokens (one row): bf16 forward / backward on fp32 weights, AdamW."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), device=device)
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        logits = model(input_ids=ids).logits  # (1, T, V) bf16
        logp = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:, None])
        loss = -logp.mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def predicted_gib(shape: ModelShape, tokens: int) -> float:
    """The memory model's SFT step on one shard, minus its reserve (what torch's allocator can see)."""
    (sft,) = phases(
        TrainLayout(shape, shards=1, gpu_mem_gib=1e9, update_tokens=tokens, checkpointing=True, flash_ce=False)
    )
    return sft.total - sft.parts["reserve"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument(
        "--shapes",
        nargs="*",
        default=["Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-7B-Instruct"],
    )
    p.add_argument("--tokens", nargs="*", type=int, default=[4096, 8192])
    p.add_argument("--tiny", action="store_true", help="a tiny shape instead (a check of the script)")
    p.add_argument("--out", default=None, help="also write the results here (JSON)")
    args = p.parse_args(argv)
    shapes = [TINY] if args.tiny else [KNOWN_SHAPES[s] for s in args.shapes]
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("no CUDA device: run with --device cpu --tiny to check the script", file=sys.stderr)
        return 2
    total = torch.cuda.get_device_properties(0).total_memory / GIB if cuda else float("inf")
    results = []
    for shape in shapes:
        for tokens in args.tokens if not args.tiny else [64]:
            pred = predicted_gib(shape, tokens)
            if pred > 0.92 * total:
                print(f"{shape.name} T={tokens}: predicted {pred:.1f} GiB > this GPU's {total:.1f}: skipped")
                continue
            t0 = time.time()
            model = build(shape, args.device)
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            one_step(model, tokens, args.device)
            measured = torch.cuda.max_memory_allocated() / GIB if cuda else None
            del model
            if cuda:
                torch.cuda.empty_cache()
            row = {
                "shape": shape.name,
                "params": shape.params,
                "tokens": tokens,
                "predicted_gib": round(pred, 2),
                "measured_gib": None if measured is None else round(measured, 2),
                "ratio": None if measured is None else round(measured / pred, 3),
                "s": round(time.time() - t0, 1),
            }
            results.append(row)
            ratio = "" if measured is None else f" measured {measured:.1f} GiB, ratio {measured / pred:.2f}"
            print(f"{shape.name} T={tokens}: predicted {pred:.1f} GiB{ratio} ({row['s']} s)")
    text = json.dumps({"device": torch.cuda.get_device_name(0) if cuda else "cpu", "results": results}, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
