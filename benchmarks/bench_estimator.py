"""Time slca_grpo against verl's own grpo and grpo_vectorized, measured in the same run.

    python benchmarks/bench_estimator.py                    # bs in {256, 1024, 4096}, L in {2048, 8192}
    python benchmarks/bench_estimator.py --bs 256 --L 2048  # one shape

Each response holds one to four assistant turns separated by observation gaps, then padding; rewards sit on the
last token of each turn (the layout slca_tool_agent writes). Prints the median of --repeats timed calls per
estimator (called in turn within each repeat) and the ratios slca_grpo / grpo_vectorized and slca_grpo / grpo,
after a first line naming the machine (CPU, cache sizes, torch threads; benchmarks/machine.py) and a second naming
the slca_grpo implementation timed (the fused C++ kernel and its instruction set, or the torch path). The column
``slca(torch)`` is the torch path (``algorithm.slca.kernel=torch``), timed in the same loop.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch
import verl  # noqa: F401  (loads the slca_verl plugin)
from verl.trainer.ppo.core_algos import get_adv_estimator_fn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/machine.py, also when imported
from machine import describe  # noqa: E402


def make_inputs(bs: int, L: int, group: int = 16, seed: int = 0):
    """(token_level_rewards float32, response_mask int64, index) with 1-4 turns per row, built with numpy."""
    rng = np.random.default_rng(seed)
    mask = np.zeros((bs, L), dtype=np.int64)
    rewards = np.zeros((bs, L), dtype=np.float32)
    turns = rng.integers(1, 5, size=bs)
    used = rng.uniform(0.3, 1.0, size=bs) * L  # response length before padding
    for i in range(bs):
        k = int(turns[i])
        # 2k-1 pieces: turn, obs, turn, obs, ..., turn
        cuts = np.sort(rng.uniform(0, used[i], size=2 * k - 2)).astype(int)
        bounds = np.concatenate([[0], cuts, [int(used[i])]])
        for j in range(k):
            s, e = bounds[2 * j], bounds[2 * j + 1]
            if e > s:
                mask[i, s:e] = 1
                rewards[i, e - 1] = rng.uniform()
    index = np.array([f"uid{i // group}" for i in range(bs)], dtype=object)
    return torch.from_numpy(rewards), torch.from_numpy(mask), index


def time_interleaved(fns: dict, repeats: int) -> dict:
    """Median wall time per function, the functions called in turn within each repeat, so that every estimator
    meets the same allocator and cache state (a 2-core box's timings drift between blocks of runs)."""
    for fn in fns.values():
        fn()  # warm-up
    samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    return {name: statistics.median(xs) for name, xs in samples.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bs", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--L", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    slca = get_adv_estimator_fn("slca_grpo")
    vec = get_adv_estimator_fn("grpo_vectorized")
    loop = get_adv_estimator_fn("grpo")
    from slca_verl import fused

    print(describe())
    module = fused.load()
    print(f"slca_grpo: {'fused kernel ' + module.__name__ if module else 'torch path (the kernel could not be built)'}")
    print(f"median of {args.repeats} runs, ms")
    torch_path = {"slca": {"kernel": "torch"}}
    header = (
        f"{'bs':>6} {'L':>6} {'grpo':>10} {'grpo_vec':>10} {'slca_grpo':>10} {'slca(torch)':>12} "
        f"{'slca/vec':>9} {'slca/grpo':>10}"
    )
    print(header)
    print("-" * len(header))
    for L in args.L:
        for bs in args.bs:
            r, m, idx = make_inputs(bs, L)
            t = time_interleaved(
                {
                    "slca": lambda: slca(token_level_rewards=r, response_mask=m, index=idx, config=None),
                    "slca_torch": lambda: slca(token_level_rewards=r, response_mask=m, index=idx, config=torch_path),
                    "vec": lambda: vec(token_level_rewards=r, response_mask=m, index=idx),
                    "loop": lambda: loop(token_level_rewards=r.clone(), response_mask=m, index=idx),
                },
                args.repeats,
            )
            t_slca, t_vec, t_loop = t["slca"], t["vec"], t["loop"]
            print(
                f"{bs:>6} {L:>6} {t_loop * 1e3:>10.1f} {t_vec * 1e3:>10.1f} {t_slca * 1e3:>10.1f} "
                f"{t['slca_torch'] * 1e3:>12.1f} "
                f"{t_slca / t_vec:>8.2f}x {t_slca / t_loop:>9.2f}x"
            )


if __name__ == "__main__":
    main()
