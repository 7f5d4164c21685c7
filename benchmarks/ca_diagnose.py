"""Why does SLCA-GRPO not beat GRPO on the noise-free judge? Ablations of ``credit_assignment.run`` at one sigma.

    python benchmarks/ca_diagnose.py --sigma 0 --seeds 5        # writes docs/results/credit_assignment_diagnose.json

Variants (each against the same seeds, steps to the tool-accuracy threshold, median [min, max]):
  grpo                      the baseline
  slca_grpo                 the method
  slca_grpo lambda_sum=0    no summary gradient at all: tool tokens learn from r_tool alone
  grpo loss_on=tool         GRPO's trajectory advantage, but only tool tokens are trained
  slca_grpo loss_on=tool    SLCA's tool advantage, only tool tokens trained (= lambda_sum 0 up to token-mean scaling)
"""

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import credit_assignment as CA  # noqa: E402

VARIANTS = {
    "grpo": dict(method="grpo"),
    "slca_grpo": dict(method="slca_grpo"),
    "slca_grpo lambda_sum=0": dict(method="slca_grpo", lambda_sum=0.0),
    "grpo loss_on=tool": dict(method="grpo", loss_on="tool"),
    "slca_grpo loss_on=tool": dict(method="slca_grpo", loss_on="tool"),
}


def _one(job):
    name, kw, sigma, seed, steps = job
    r = CA.run(CA.RunConfig(sigma=sigma, seed=seed, steps=steps, **kw))
    return name, r["steps_to_threshold"], r["final_tool_acc"], r["final_summary_q"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sigma", type=float, default=0.0)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    jobs = [(n, VARIANTS[n], args.sigma, k, args.steps) for k in range(args.seeds) for n in args.variants]
    with mp.get_context("fork").Pool(2) as pool:
        rows = pool.map(_one, jobs, chunksize=1)
    out = {}
    for n in args.variants:
        st = [r[1] for r in rows if r[0] == n]
        out[n] = {
            "steps_to_threshold": st,
            "median": statistics.median(st),
            "final_tool_acc": [r[2] for r in rows if r[0] == n],
            "final_summary_q": [r[3] for r in rows if r[0] == n],
        }
        print(
            f"{n:28s} steps {statistics.median(st):6.1f} [{min(st)}, {max(st)}]  "
            f"final acc {statistics.median(out[n]['final_tool_acc']):.2f}  "
            f"summary q {statistics.median(out[n]['final_summary_q']):.2f}"
        )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = args.out or os.path.join(root, "docs", "results", f"credit_assignment_diagnose_sigma{args.sigma:g}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"args": vars(args), "variants": out}, f, indent=1)


if __name__ == "__main__":
    main()
