"""``slca_sync``: verl's synchronous v1 trainer, handing explicit per-token segment ids to ``slca_grpo``.

Use it when the rollout comes from ``slca_tool_agent``, which knows which assistant turns carried tool calls::

    trainer.v1.trainer_mode=slca_sync algorithm.adv_estimator=slca_grpo

It also logs ``slca_grpo``'s per-segment statistics (``slca/adv_tool/mean`` ..., see
:data:`slca_verl.core_algos.SEGMENT_METRICS`) with the step's metrics.

Without it, ``slca_grpo`` derives segments from response_mask runs (last run = summary), which mislabels an
episode cut by a length or turn limit. Everything else is verl's ``sync`` trainer, unchanged: the mode is reset to
"sync" before verl reads it, because verl's trainer base compares ``trainer_mode`` with the string "sync" in
several places and would otherwise silently take its asynchronous code paths.
"""

from __future__ import annotations

import logging

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

    def _fetch_segment_ids(self, batch):
        """Padded (bs, L) int segment ids of the batch, in the row order verl's own fetch uses."""
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=[SEGMENT_IDS_FIELD])
        if SEGMENT_IDS_FIELD not in data.keys():
            # TransferQueue drops a requested field that some rows lack, so one check covers "some" and "all".
            raise RuntimeError(
                f"{TRAINER_MODE}: the field '{SEGMENT_IDS_FIELD}' is missing from some or all rows of the batch. "
                f"It is written by the `slca_tool_agent` agent loop; set "
                f"actor_rollout_ref.rollout.agent.default_agent_loop=slca_tool_agent (and agent_name in the "
                f"dataset), or use trainer.v1.trainer_mode=sync to derive segments from response_mask runs."
            )
        return data.to_padded_tensor()[SEGMENT_IDS_FIELD]

    def _compute_advantage(self, batch, metrics):
        if self.config.algorithm.adv_estimator not in SEGMENT_AWARE_ESTIMATORS:
            logger.warning(
                "%s: algorithm.adv_estimator=%s ignores segment ids; they are used by %s",
                TRAINER_MODE,
                self.config.algorithm.adv_estimator,
                sorted(SEGMENT_AWARE_ESTIMATORS),
            )
            return super()._compute_advantage(batch, metrics)
        with explicit_segment_ids(self._fetch_segment_ids(batch)), collect_segment_stats() as stats:
            batch = super()._compute_advantage(batch, metrics)
        metrics.update(stats)  # slca_grpo's per-segment statistics (core_algos.SEGMENT_METRICS); {} for the others
        return batch
