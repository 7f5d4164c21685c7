"""The CPU engine's per-token log-probabilities against verl's own, on one micro-batch: forward and backward.

    python benchmarks/cpu_log_probs.py                          # a 575-token row, Qwen's 151,936-token vocabulary
    python benchmarks/cpu_log_probs.py --rows 4 --tokens 300 --vocab 1024 --repeats 5 --seeds 0 1 2

What verl's SFT and RL updates on a CPU spend beside the model itself: from the LM head's logits ``(rows, tokens,
vocab)`` to the nested per-token log-probabilities, and the backward into the logits. verl's own path is
``FSDPEngineWithLMHead.prepare_model_outputs`` (padded rows: narrow, unbind, cat, then a row-by-row logsumexp without
flash-attn); ours is ``slca_verl.cpu.engine.padded_model_outputs`` (one cross entropy over the padded logits). Both
get the same micro-batch built by verl's own ``prepare_model_inputs``; the script checks they agree before timing.

Output: the machine, then per seed the median seconds of each path and the ratio verl / ours, then the median and
range of the ratio over the seeds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/machine.py
from machine import describe  # noqa: E402


def batch_and_args(rows: int, tokens: int, vocab: int, seed: int):
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    g = torch.Generator().manual_seed(seed)
    lengths = [tokens - (i * tokens) // (4 * rows) for i in range(rows)]  # rows of unequal length: padding
    td = TensorDict(
        {
            "input_ids": torch.nested.as_nested_tensor(
                [torch.randint(0, vocab, (n,), generator=g) for n in lengths], layout=torch.jagged
            ),
            "position_ids": torch.nested.as_nested_tensor([torch.arange(n) for n in lengths], layout=torch.jagged),
        },
        batch_size=[rows],
    )
    tu.assign_non_tensor(td, use_remove_padding=False, temperature=1.0)
    engine = SimpleNamespace(pad_to_length=False, engine_config=SimpleNamespace(entropy_checkpointing=False))
    _, output_args = FSDPEngineWithLMHead.prepare_model_inputs(engine, td)
    logits = torch.randn(rows, max(lengths), vocab, generator=g)
    return engine, td, output_args, logits


def run_once(path, engine, td, output_args, logits) -> tuple[float, torch.Tensor, torch.Tensor]:
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    from slca_verl.cpu.engine import padded_model_outputs

    x = logits.clone().requires_grad_(True)
    t0 = time.perf_counter()
    if path == "verl":
        out = FSDPEngineWithLMHead.prepare_model_outputs(engine, SimpleNamespace(logits=x), output_args, td, None)
    else:
        out = padded_model_outputs(SimpleNamespace(logits=x), output_args, td)
    values = out["log_probs"].values()
    values.sum().backward()
    return time.perf_counter() - t0, values.detach(), x.grad


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--tokens", type=int, default=575)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    print(describe())
    print(f"rows {a.rows}, tokens {a.tokens} (longest), vocabulary {a.vocab}; forward + backward, {a.repeats} repeats")
    ratios = []
    for seed in a.seeds:
        engine, td, output_args, logits = batch_and_args(a.rows, a.tokens, a.vocab, seed)
        times = {"verl": [], "ours": []}
        for _ in range(a.repeats):
            for path in ("verl", "ours"):  # interleaved: both see the same machine load
                took, values, grad = run_once(path, engine, td, output_args, logits)
                times[path].append(took)
                if path == "verl":
                    ref_values, ref_grad = values, grad
                else:
                    torch.testing.assert_close(values, ref_values, rtol=1e-5, atol=1e-5)
                    torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-6)
        verl_s, ours_s = statistics.median(times["verl"]), statistics.median(times["ours"])
        ratios.append(verl_s / ours_s)
        print(f"seed {seed}: verl {verl_s:.3f} s, ours {ours_s:.3f} s, verl / ours {ratios[-1]:.2f}x")
    print(
        f"verl / ours over {len(ratios)} seeds: median {statistics.median(ratios):.2f}x "
        f"[{min(ratios):.2f}, {max(ratios):.2f}]"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
