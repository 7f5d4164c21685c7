"""``slca_sync``: verl's synchronous v1 trainer, handing explicit per-token segment ids to ``slca_grpo``.

Use it when the rollout comes from ``slca_tool_agent``, which knows which assistant turns carried tool calls::

    trainer.v1.trainer_mode=slca_sync algorithm.adv_estimator=slca_grpo

It also logs ``slca_grpo``'s per-segment statistics (``slca/adv_tool/mean`` ..., see
:data:`slca_verl.core_algos.SEGMENT_METRICS`) and, for every estimator, the batch means of the reward's extra keys
(``reward_extra/r_tool/mean`` ..., :func:`reward_extra_metrics`), which verl's v1 trainer logs for validation only.
With an estimator that ignores segment ids (e.g. ``grpo``) it is verl's sync trainer plus those metrics.

Without it, ``slca_grpo`` derives segments from response_mask runs (last run = summary), which mislabels an
episode cut by a length or turn limit. Everything else is verl's ``sync`` trainer, unchanged: the mode is reset to
"sync" before verl reads it, because verl's trainer base compares ``trainer_mode`` with the string "sync" in
several places and would otherwise silently take its asynchronous code paths.
"""

from __future__ import annotations

import contextlib
import logging
import math

import numpy as np
import torch
import transfer_queue as tq
from omegaconf import open_dict
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from slca_verl.baselines import GDPO_V1, gdpo_components
from slca_verl.core_algos import collect_segment_stats
from slca_verl.reward_layout import finite_number
from slca_verl.segments import SEGMENT_IDS_FIELD, TOOL, explicit_segment_ids

logger = logging.getLogger(__name__)

TRAINER_MODE = "slca_sync"

#: Estimators that read explicit segment ids (``slca_verl.segments.current_explicit_segment_ids``).
SEGMENT_AWARE_ESTIMATORS = frozenset({"slca_grpo", "toolpo", "rltr"})


@register_trainer(TRAINER_MODE)
class SLCASyncTrainer(PPOTrainerSync):
    """verl's sync trainer whose advantage step fetches ``slca_segment_ids`` from TransferQueue and hands them to
    the segment-aware estimators (``slca_grpo``, ``toolpo``, ``rltr``)."""

    def __init__(self, config):
        if config.trainer.v1.trainer_mode != "sync":
            logger.info("%s: running verl's sync trainer with explicit segment ids", TRAINER_MODE)
            with open_dict(config):
                config.trainer.v1.trainer_mode = "sync"
        super().__init__(config)

    def _fetch(self, batch, segment_ids: bool):
        """(padded (bs, L) segment ids or None, per-row reward_extra_info dicts), in verl's row order, in one
        TransferQueue request."""
        fields = ["extra_fields"] + ([SEGMENT_IDS_FIELD] if segment_ids else [])
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        extras = []
        if "extra_fields" in data.keys():
            rows = data.pop("extra_fields").tolist()
            extras = [e.get("reward_extra_info", {}) if isinstance(e, dict) else {} for e in rows]
        if not segment_ids:
            return None, extras
        if SEGMENT_IDS_FIELD not in data.keys():
            # TransferQueue drops a requested field that some rows lack, so one check covers "some" and "all".
            raise RuntimeError(
                f"{TRAINER_MODE}: the field '{SEGMENT_IDS_FIELD}' is missing from some or all rows of the batch. "
                f"It is written by the `slca_tool_agent` agent loop; set "
                f"actor_rollout_ref.rollout.agent.default_agent_loop=slca_tool_agent (and agent_name in the "
                f"dataset), or use trainer.v1.trainer_mode=sync to derive segments from response_mask runs."
            )
        return data.to_padded_tensor()[SEGMENT_IDS_FIELD], extras

    def _compute_advantage(self, batch, metrics):
        estimator = self.config.algorithm.adv_estimator
        segment_aware = estimator in SEGMENT_AWARE_ESTIMATORS
        ids, extras = self._fetch(batch, segment_ids=segment_aware)
        metrics.update(reward_extra_metrics(extras))
        with contextlib.ExitStack() as stack:
            if segment_aware:
                stack.enter_context(explicit_segment_ids(ids))
            if estimator == GDPO_V1:  # verl's gdpo, handed the components the v1 trainer does not pass
                stack.enter_context(gdpo_components(reward_components(extras)))
            stats = stack.enter_context(collect_segment_stats())
            batch = super()._compute_advantage(batch, metrics)
        metrics.update(stats)  # slca_grpo's per-segment statistics (core_algos.SEGMENT_METRICS); {} for the others
        if any(finite_number(e.get("judge_noise", 0.0)) for e in extras):
            metrics.update(self._noise_leak(batch, extras))
        return batch

    def _noise_leak(self, batch, extras: list[dict]) -> dict[str, float]:
        """``slca/corr_adv_tool_judge_noise``: Pearson correlation, over the rows with a tool segment whose reply
        was judged, between the row's mean advantage on its tool tokens and the noise the judge added to its rating
        (HierR's ``judge_noise``, from ``reward_kwargs.judge_noise_sigma``). The leak SLCA-GRPO removes: GRPO's
        tool tokens carry the noisy total, so the correlation is high; segment-locked credit keeps it near 0.
        Rows without segment ids (another agent loop) give no metric."""
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["advantages", SEGMENT_IDS_FIELD]
        )
        if SEGMENT_IDS_FIELD not in data.keys():  # TransferQueue drops a field some rows lack
            return {}
        padded = data.to_padded_tensor()
        adv, ids = padded["advantages"].float(), padded[SEGMENT_IDS_FIELD]  # (bs, L'), (bs, L)
        tool = (ids[:, : adv.shape[1]] == TOOL).float()
        n_tool = tool.sum(-1)
        used = [bool(finite_number(e.get("judge_used", 0))) for e in extras]
        rows = [i for i in range(len(extras)) if n_tool[i] > 0 and used[i]]
        if len(rows) < 3:
            return {}
        a = ((adv * tool).sum(-1) / n_tool.clamp(min=1))[rows].double()
        noise = torch.tensor([finite_number(extras[i].get("judge_noise", 0.0)) for i in rows], dtype=torch.float64)
        a, noise = a - a.mean(), noise - noise.mean()
        denom = float(a.norm() * noise.norm())
        return {"slca/corr_adv_tool_judge_noise": float((a * noise).sum()) / denom} if denom > 0 else {}


def reward_extra_metrics(extras: list[dict]) -> dict[str, float]:
    """``reward_extra/<key>/mean`` over the batch for every numeric key of the rows' ``reward_extra_info`` (HierR's
    ``r_tool``, ``r_sum``, ``success``, ``tool_name_f1`` ..., and the agent loop's ``agent_*`` counts), which verl's
    v1 trainer keeps in TransferQueue but logs only for validation. Non-numeric values and NaN are skipped."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in extras:
        for key, value in row.items():
            if isinstance(value, (int, float)) or hasattr(value, "item"):  # bool is an int; numpy scalars
                try:
                    v = float(value)
                except (TypeError, ValueError):
                    continue
                if math.isfinite(v):
                    sums[key] = sums.get(key, 0.0) + v
                    counts[key] = counts.get(key, 0) + 1
    return {f"reward_extra/{k}/mean": sums[k] / counts[k] for k in sorted(sums)}


def reward_components(extras: list[dict]) -> dict[str, np.ndarray]:
    """Every key present in all rows' ``reward_extra_info`` with a number in each, as (bs,) float arrays."""
    if not extras:
        return {}
    keys = set(extras[0]).intersection(*extras[1:])
    out = {}
    for key in sorted(keys):
        try:
            out[key] = np.array([float(e[key]) for e in extras], dtype=np.float64)
        except (TypeError, ValueError):
            continue
    return out
