"""Per-turn execution credit for ``slca_grpo`` (``+algorithm.slca.credit=turn``): each tool turn its own advantage.

``slca_grpo`` gives every tool token of a trajectory one execution advantage A^tool, so in a multi-step episode a
right first call and a wrong second call share one number. With ``credit=turn`` each assistant tool turn k (a
maximal run of tool-segment tokens; the agent loop answers every tool turn with a tool response, so runs and turns
coincide) is credited with its own step reward r_{i,k} (the rewards on its tokens: the ``slca_turns`` reward layout
puts HierR's per-step score on the turn's last token), against a baseline that does not depend on when the
trajectory stopped. docs/method.md ("Per-turn credit") derives it; in short, for group g and the rows
P_g = {i in g : K_i >= 1} that made at least one tool turn (K_i turns; the rows ``slca_grpo`` normalises A^tool over)::

    r~_{i,k} = r_{i,k} for k <= K_i, else 0            (a step not taken earns nothing)
    z_{i,k}  = (r~_{i,k} - mean_{j in P_g} r~_{j,k}) / (std_{j in P_g} r~_{j,k} + eps)     (0 if |P_g| < 2)
    A_{i,k}  = lambda_tool * z_{i,k}                    on the tokens of turn k <= K_i
    S_i      = lambda_tool * sum_{k > K_i} z_{i,k}      on the decision token: the first summary token (the policy
                                                        chose to reply instead of calling again), or, without a
                                                        summary, the tokens of the last tool turn

Every row of P_g enters every turn index's statistics (padded with 0 past its last turn), so the baseline of turn k
is the group's mean achievement at step k, the same number for a row that stopped before k as for one that went on.
A per-turn-index baseline (mean over the rows that reached turn k, MT-GRPO style) instead compares a failed attempt
at step k only with other attempts, and never charges the rows that did not try: stopping early escapes the
comparison, and the turn count drifts below the gold's. On a group whose rows all make one tool turn (single-step
episodes) the formulas are ``slca_grpo``'s, and so are the advantages, bit for bit.

Shapes: ``rewards``, ``response_mask``, ``tool``, ``summary`` (bs, L); per-row vectors (bs,); per-turn (bs, H) with
H the batch's largest turn count.
"""

from __future__ import annotations

import torch

#: Per-turn statistics of a ``credit=turn`` call (added to core_algos.SEGMENT_METRICS' in the step logs), for
#: turns k = 1..3 (rows with at least k turns):
TURN_METRICS = {
    "slca/turns/mean": "tool turns per response (over responses with a tool segment)",
    "slca/turn{k}/reward_mean": "mean step reward r_{i,k} of turn k",
    "slca/turn{k}/adv_mean": "mean per-turn advantage A_{i,k} of turn k",
    "slca/stop_adv/mean": "mean stopping credit S_i over responses with a tool segment",
}
LOGGED_TURNS = 3


def turn_index(tool: torch.Tensor) -> torch.Tensor:
    """(bs, L) long: k >= 1 on the tokens of the k-th run of tool tokens of each row, 0 elsewhere."""
    t = tool.bool()
    starts = t.clone()
    starts[:, 1:] &= ~t[:, :-1]
    return torch.cumsum(starts.long(), dim=-1) * t.long()


def turn_rewards(rewards: torch.Tensor, turn: torch.Tensor, horizon: int) -> torch.Tensor:
    """(bs, H) float: r_{i,k} = sum of ``rewards`` over the tokens of turn k (0 for turns a row did not make)."""
    out = torch.zeros(rewards.shape[0], horizon + 1, dtype=rewards.dtype, device=rewards.device)
    out.scatter_add_(1, turn, rewards * (turn > 0).to(rewards.dtype))
    return out[:, 1:]


def per_turn_advantages(segment_adv, rewards, tool, summary, gidx, num_groups, zscore, epsilon, norm_by_std,
                        lambda_tool, record=None) -> torch.Tensor:  # fmt: skip
    """``slca_grpo``'s advantages with per-turn execution credit in the groups that have multi-turn responses.

    Args:
        segment_adv: (bs, L) the segment mode's advantages (A^tool on tool tokens, A^sum on the summary).
        rewards: (bs, L) float token-level rewards.
        tool, summary: (bs, L) bool segment masks.
        gidx, num_groups: group ids in [0, G) and G.
        zscore: ``core_algos.group_zscore`` (the arithmetic of ``slca_grpo``'s A^tool).
        record: called with the per-turn statistics (:data:`TURN_METRICS`), if given.

    Returns:
        (bs, L): in a group whose responses make at most one tool turn, ``segment_adv`` itself (there the formulas
        are ``slca_grpo``'s); elsewhere A_{i,k} on the tokens of turn k, A^sum on the summary, and S_i added on the
        decision token.
    """
    turn = turn_index(tool)  # (bs, L)
    n_turns = turn.amax(dim=-1) if turn.numel() else torch.zeros(turn.shape[0], dtype=torch.long)  # (bs,) K_i
    horizon = int(n_turns.max()) if n_turns.numel() else 0
    r = turn_rewards(rewards.to(torch.float32), turn, max(horizon, 1))  # (bs, H), 0 past K_i: the padded r~
    if horizon <= 1:  # single-step groups only: the segment mode's advantages, its A^tool the turn's advantage
        if record is not None:
            t = tool.to(torch.float32)
            a_one = (segment_adv.float() * t).sum(-1, keepdim=True) / t.sum(-1, keepdim=True).clamp_min(1.0)
            record(_turn_stats(r, a_one, n_turns, n_turns > 0, torch.zeros_like(r[:, 0])))
        return segment_adv
    bs = r.shape[0]
    has_tool = n_turns > 0
    cols = torch.arange(horizon, device=r.device)
    z = zscore(r.reshape(-1), has_tool.repeat_interleave(horizon), (gidx.unsqueeze(1) * horizon + cols).reshape(-1),
               num_groups * horizon, epsilon, norm_by_std).reshape(bs, horizon)  # fmt: skip
    a_turn = lambda_tool * z  # (bs, H)
    s = torch.where(cols.unsqueeze(0) < n_turns.unsqueeze(1), torch.zeros_like(a_turn), a_turn).sum(dim=-1)  # S_i
    group_horizon = torch.zeros(num_groups, dtype=torch.long, device=r.device).scatter_reduce_(
        0, gidx, n_turns, reduce="amax")  # fmt: skip
    multi = (group_horizon[gidx] > 1).unsqueeze(1)  # (bs, 1): rows of a group with a multi-turn response
    a_tok = a_turn.gather(1, (turn - 1).clamp_min(0)).to(segment_adv.dtype)
    out = torch.where(multi & (turn > 0), a_tok, segment_adv)
    first_sum = summary & (torch.cumsum(summary.long(), dim=-1) == 1)  # the decision token
    last_turn = (turn == n_turns.unsqueeze(1)) & (turn > 0)
    decision = torch.where((summary.any(dim=-1)).unsqueeze(1), first_sum, last_turn) & multi
    out = torch.where(decision, out + s.unsqueeze(1).to(out.dtype), out)
    if record is not None:
        record(_turn_stats(r, a_turn, n_turns, has_tool, s))
    return out


def _turn_stats(r, a_turn, n_turns, has_tool, s) -> dict[str, float]:
    present = has_tool
    out = {}
    if bool(present.any()):
        out["slca/turns/mean"] = float(n_turns[present].float().mean())
        out["slca/stop_adv/mean"] = float(s[present].float().mean())
    for k in range(min(LOGGED_TURNS, r.shape[1])):
        rows = n_turns > k
        if bool(rows.any()):
            out[f"slca/turn{k + 1}/reward_mean"] = float(r[rows, k].float().mean())
            out[f"slca/turn{k + 1}/adv_mean"] = float(a_turn[rows, k].float().mean())
    return out
