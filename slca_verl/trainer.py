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

import logging
import math

import transfer_queue as tq
from omegaconf import open_dict
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from slca_verl.core_algos import collect_segment_stats
from slca_verl.segments import SEGMENT_IDS_FIELD, explicit_segment_ids

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
        segment_aware = self.config.algorithm.adv_estimator in SEGMENT_AWARE_ESTIMATORS
        ids, extras = self._fetch(batch, segment_ids=segment_aware)
        metrics.update(reward_extra_metrics(extras))
        if not segment_aware:  # e.g. grpo: verl's own advantage step, with the reward metrics logged
            return super()._compute_advantage(batch, metrics)
        with explicit_segment_ids(ids), collect_segment_stats() as stats:
            batch = super()._compute_advantage(batch, metrics)
        metrics.update(stats)  # slca_grpo's per-segment statistics (core_algos.SEGMENT_METRICS); {} for the others
        return batch


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
