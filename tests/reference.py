"""A plain, token-by-token reference of SLCA-GRPO (docs/method.md), for agreement tests of the vectorised code."""

import math

import torch

EPS = 1e-6


def reference_slca(rewards, mask, index, lambda_tool=1.0, lambda_sum=1.0, norm=True, ids=None):
    """Plain Python, token by token, from docs/method.md: runs of mask ones, last run = summary, or explicit ``ids``
    (1 = tool, 2 = summary) when given."""
    bs, L = mask.shape
    seg = [[0] * L for _ in range(bs)]
    seg_reward = [{} for _ in range(bs)]
    for i in range(bs):
        runs, t = [], 0
        while t < L:
            if mask[i, t]:
                s = t
                while t < L and mask[i, t]:
                    t += 1
                runs.append((s, t))
            else:
                t += 1
        for k, (s, e) in enumerate(runs):
            for t in range(s, e):
                if ids is not None:
                    kind = {1: "tool", 2: "sum"}.get(int(ids[i, t]), 0)
                else:
                    kind = "sum" if k == len(runs) - 1 else "tool"
                seg[i][t] = kind
                if kind:
                    seg_reward[i][kind] = seg_reward[i].get(kind, 0.0) + float(rewards[i, t])
    adv = torch.zeros(bs, L, dtype=torch.float64)
    for kind, lam in (("tool", lambda_tool), ("sum", lambda_sum)):
        groups = {}
        for i in range(bs):
            if kind in seg_reward[i]:
                groups.setdefault(index[i], []).append(i)
        for members in groups.values():
            if len(members) < 2:
                continue
            vals = [seg_reward[i][kind] for i in members]
            mean = sum(vals) / len(vals)
            std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
            for i, v in zip(members, vals):
                a = lam * ((v - mean) / (std + EPS) if norm else v - mean)
                for t in range(L):
                    if seg[i][t] == kind:
                        adv[i, t] = a
    return adv
