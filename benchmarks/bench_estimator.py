"""Time slca_grpo against verl's own grpo_vectorized and grpo, measured in the same run.

    python benchmarks/bench_estimator.py                              # bs 1024, L 4096, seeds 0 1 2, one thread
    python benchmarks/bench_estimator.py --bs 256 4096 --L 2048 8192 --seeds 7 123456 --threads 2

Each response holds one to four assistant turns separated by observation gaps, then padding; rewards sit on the
last token of each turn (the layout slca_tool_agent writes). For every shape, each seed (any integer) builds one
batch, and the estimators are called in turn --repeats times on it. Prints a first line naming the machine (CPU,
cache sizes, torch threads; benchmarks/machine.py), then per shape each estimator's median and range (min-max) over
all seeds' calls, and the ratio slca_grpo / grpo_vectorized: the median and range of the ratios of calls made side
by side (the same repeat of the same seed).
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


def time_interleaved(fns: dict, repeats: int) -> dict[str, list[float]]:
    """Wall time of every call, in seconds, the functions called in turn within each repeat, so that every estimator
    meets the same allocator and cache state (a 2-core box's timings drift between blocks of runs)."""
    for fn in fns.values():
        fn()  # warm-up
    samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    return samples


def summary(xs: list[float], scale: float = 1.0, unit: str = "") -> str:
    """``median (min-max)`` of ``xs`` times ``scale``."""
    return f"{statistics.median(xs) * scale:.2f}{unit} ({min(xs) * scale:.2f}-{max(xs) * scale:.2f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bs", type=int, nargs="+", default=[1024])
    ap.add_argument("--L", type=int, nargs="+", default=[4096])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one batch per seed (any integers)")
    ap.add_argument("--repeats", type=int, default=7, help="timed calls of each estimator per seed")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    estimators = {name: get_adv_estimator_fn(name) for name in ("slca_grpo", "grpo_vectorized", "grpo")}
    print(describe())
    print(f"ms per call: median (min-max) over {len(args.seeds)} seeds {args.seeds} x {args.repeats} calls")
    header = f"{'bs':>6} {'L':>6} {'grpo':>22} {'grpo_vectorized':>22} {'slca_grpo':>22} {'slca / vectorized':>24}"
    print(header)
    print("-" * len(header))
    for L in args.L:
        for bs in args.bs:
            times = {name: [] for name in estimators}
            for seed in args.seeds:
                r, m, idx = make_inputs(bs, L, seed=seed)
                calls = {
                    "slca_grpo": lambda: estimators["slca_grpo"](token_level_rewards=r, response_mask=m, index=idx),
                    "grpo_vectorized": lambda: estimators["grpo_vectorized"](
                        token_level_rewards=r, response_mask=m, index=idx
                    ),
                    # verl's loop grpo writes into its scores: a fresh copy each call
                    "grpo": lambda: estimators["grpo"](token_level_rewards=r.clone(), response_mask=m, index=idx),
                }
                for name, xs in time_interleaved(calls, args.repeats).items():
                    times[name].extend(xs)
            ratios = [s / v for s, v in zip(times["slca_grpo"], times["grpo_vectorized"])]
            print(
                f"{bs:>6} {L:>6} {summary(times['grpo'], 1e3):>22} {summary(times['grpo_vectorized'], 1e3):>22} "
                f"{summary(times['slca_grpo'], 1e3):>22} {summary(ratios, unit='x'):>24}"
            )


if __name__ == "__main__":
    main()
