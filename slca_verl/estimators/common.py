"""What every estimator of :mod:`slca_verl.estimators` shares: settings, batch checks, segment masks, group statistics.

config_value / estimator_settings    read ``algorithm.<section>.*`` (DictConfig, dict, verl's AlgoConfig) and check it
check_batch / check_finite_rows      a ValueError that names the estimator and what is wrong with the batch
explicit_segment_ids / segment_masks  the tool / summary masks (bs, L): explicit ids, else response_mask runs
group_index / group_zscore           per-group z-scores of (bs,) scores over the rows where a segment is present
advantage_dtype / zero_advantages    verl's ``grpo_vectorized`` dtype rule, and the result for an empty batch
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import torch
from verl.utils.groupwise import as_torch_index

from slca_verl.estimators.segments import check_whole_ids, segment_masks_from_ids, segment_masks_from_response_mask
from slca_verl.trainer import handover


def config_value(config: Any, key: str, default: Any) -> Any:
    """Read ``key`` from a DictConfig, dict, verl AlgoConfig dataclass or None."""
    if config is None:
        return default
    if hasattr(config, "get"):
        try:
            value = config.get(key, default)
        except Exception:  # a dataclass whose .get rejects unknown keys
            value = getattr(config, key, default)
    else:
        value = getattr(config, key, default)
    return default if value is None else value


def estimator_settings(config: Any, estimator: str, section: str, known: dict) -> dict:
    """``algorithm.<section>.*`` merged over the ``known`` defaults, plus verl's ``algorithm.norm_adv_by_std_in_grpo``.

    Raises:
        ValueError: a key under ``algorithm.<section>`` that is not in ``known`` (a typo would otherwise silently
            train with the default).
    """
    values = config_value(config, section, {}) or {}
    unknown = set(values.keys()) - set(known)
    if unknown:
        raise ValueError(
            f"{estimator}: unknown keys under algorithm.{section}: {sorted(unknown)}; known: {sorted(known)}"
        )
    out = {}
    for k, default in known.items():
        value = values.get(k, default)
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"{estimator}: algorithm.{section}.{k}={value!r} must be true or false")
            out[k] = value
            continue
        if isinstance(default, tuple):  # a choice: (default, *allowed)
            if value is default:
                value = default[0]
            if value not in default:
                raise ValueError(f"{estimator}: algorithm.{section}.{k}={value!r} must be one of {list(default)}")
            out[k] = value
            continue
        try:
            if isinstance(value, bool):
                raise TypeError
            out[k] = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{estimator}: algorithm.{section}.{k}={value!r} is not a number") from None
        if not math.isfinite(out[k]):
            raise ValueError(f"{estimator}: algorithm.{section}.{k}={value!r} must be finite")
    if "epsilon" in out and not out["epsilon"] > 0:
        raise ValueError(
            f"{estimator}: algorithm.{section}.epsilon={values.get('epsilon')!r} must be > 0 (it is added to the "
            f"group std; with 0, a group of equal rewards gives 0/0 = NaN advantages)"
        )
    out["norm_adv_by_std_in_grpo"] = bool(config_value(config, "norm_adv_by_std_in_grpo", True))
    return out


def explicit_segment_ids(
    estimator: str, response_mask: torch.Tensor, segment_ids: Optional[torch.Tensor]
) -> Optional[torch.Tensor]:
    """The explicit ids an estimator should use: its ``segment_ids`` argument, else those an ``slca_*`` trainer
    handed over (:func:`slca_verl.trainer.handover.current_segment_ids`), else None (segments from response_mask runs).

    Raises:
        ValueError: ids whose shape differs from response_mask's, or float ids that are not whole numbers (named by
            value and position).
    """
    if segment_ids is None:
        segment_ids = handover.current_segment_ids()
    if segment_ids is not None and segment_ids.shape != response_mask.shape:
        raise ValueError(
            f"{estimator}: explicit segment ids have shape {tuple(segment_ids.shape)} but response_mask has "
            f"{tuple(response_mask.shape)}; the agent loop must write one id per response token"
        )
    if segment_ids is not None:
        check_whole_ids(segment_ids, estimator)
    return segment_ids


def check_batch(estimator: str, token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any) -> None:
    """Raise a ValueError that says what is wrong with a batch, instead of a shape error from deep inside torch.

    Checks: rewards and mask are 2-D with the same shape; ``index`` has one uid per row, none of them None or NaN
    (such rows would silently form one group of unrelated prompts).
    """
    if token_level_rewards.dim() != 2 or tuple(response_mask.shape) != tuple(token_level_rewards.shape):
        raise ValueError(
            f"{estimator}: token_level_rewards has shape {tuple(token_level_rewards.shape)} and response_mask "
            f"{tuple(response_mask.shape)}; both must be (batch_size, response_length)"
        )
    uids = np.asarray(index, dtype=object).reshape(-1) if index is not None else np.empty(0, dtype=object)
    if len(uids) != token_level_rewards.shape[0]:
        raise ValueError(
            f"{estimator}: index (the uid of each response) has {len(uids)} entries for {token_level_rewards.shape[0]} "
            f"responses; verl gives one uid per response"
        )
    missing = np.flatnonzero((uids == None) | (uids != uids))  # noqa: E711  (elementwise; NaN != NaN)
    if missing.size:
        raise ValueError(
            f"{estimator}: the uid of rows {missing[:5].tolist()} is None or NaN; every response needs its prompt's uid"
        )


def advantage_dtype(token_level_rewards: torch.Tensor, response_mask: torch.Tensor) -> torch.dtype:
    """The dtype of the advantages, as verl's ``grpo_vectorized`` returns them (and ``grpo`` for float32/float64
    rewards): ``promote_types(promote_types(rewards, float32), mask)``.

    So integer, bool, float16 and bfloat16 rewards give float32 (verl's group statistics are float32, and integer
    advantages would truncate to 0); float64 rewards, or a float64 mask, give float64. verl's loop ``grpo`` raises on
    integer rewards (``mean()`` of a Long tensor), so integer input follows ``grpo_vectorized``.
    """
    return torch.promote_types(torch.promote_types(token_level_rewards.dtype, torch.float32), response_mask.dtype)


def group_index(index: np.ndarray, device) -> tuple[torch.Tensor, int]:
    """Group ids in [0, G) for verl's uid array, and G."""
    gidx = as_torch_index(index, device=device)
    return gidx, (int(gidx.max().item()) + 1 if gidx.numel() else 0)


def check_finite_rows(estimator: str, per_row: torch.Tensor) -> None:
    """Raise on NaN/inf in ``per_row`` (bs,) or (bs, L) values, naming the estimator and the first bad rows."""
    bad_rows = ~torch.isfinite(per_row)
    if bad_rows.dim() > 1:
        bad_rows = bad_rows.any(dim=-1)
    if bool(bad_rows.any()):
        rows = bad_rows.nonzero().flatten()[:5].tolist()
        raise ValueError(
            f"{estimator}: non-finite reward (NaN or inf) in token_level_rewards of rows {rows}; check the reward "
            f"function's output"
        )


def group_zscore(
    scores: torch.Tensor,
    present: torch.Tensor,
    gidx: torch.Tensor,
    num_groups: int,
    epsilon: float,
    norm_by_std: bool,
) -> torch.Tensor:
    """Z-score ``scores`` within each group over the rows where ``present`` holds.

    Args:
        scores: `(torch.Tensor)` shape (bs,) float.
        present: `(torch.Tensor)` shape (bs,) bool; rows without the segment take no part and get 0.
        gidx: `(torch.Tensor)` shape (bs,) long, group ids in [0, num_groups).
        num_groups: G.
        epsilon: added to the std.
        norm_by_std: divide by the std (GRPO) or only centre (Dr.GRPO).

    Returns:
        `(torch.Tensor)` shape (bs,):
        A_i = (r_i - mean_g) / (std_g + eps), mean and unbiased std over {j in g : present_j};
        A_i = 0 where not present_i, fewer than 2 rows of g are present, or their rewards are all equal.

    The arithmetic follows verl's ``group_mean_std`` step for step, so that with every row present the result is
    bit-identical to ``grpo_vectorized`` (for groups of two or more). Where float32 overflows (reward differences
    beyond ~1e19 square past float32's range; verl's estimators then give all-zero advantages), the statistics are
    computed again in float64; nothing changes for rewards of ordinary size.
    """
    p = present.to(scores.dtype)
    count = torch.zeros(num_groups, dtype=scores.dtype, device=scores.device).index_add_(0, gidx, p)
    s1 = torch.zeros(num_groups, dtype=scores.dtype, device=scores.device).index_add_(0, gidx, scores * p)
    mean = s1 / count.clamp_min(1.0)
    centered = scores - mean[gidx]
    sq = torch.zeros(num_groups, dtype=scores.dtype, device=scores.device).index_add_(0, gidx, centered * centered * p)
    std = torch.sqrt(torch.clamp(sq / (count - 1.0).clamp_min(1.0), min=0.0))
    if scores.dtype == torch.float32 and not bool(torch.isfinite(std).all() & torch.isfinite(mean).all()):
        return group_zscore(scores.double(), present, gidx, num_groups, epsilon, norm_by_std).float()
    adv = centered / (std[gidx] + epsilon) if norm_by_std else centered
    # a group whose present rewards are all equal teaches nothing: 0 exactly. float32's mean of equal values can miss
    # them by an ulp (3 x 56347.414 -> 56347.418), and an ulp-sized std turns that into +-0.82 for every row (verl's
    # grpo does; the float64 arithmetic gives 0)
    big = torch.finfo(scores.dtype).max
    hi = torch.full((num_groups,), -big, dtype=scores.dtype, device=scores.device)
    lo = torch.full((num_groups,), big, dtype=scores.dtype, device=scores.device)
    hi = hi.scatter_reduce(0, gidx, torch.where(present, scores, torch.full_like(scores, -big)), "amax")
    lo = lo.scatter_reduce(0, gidx, torch.where(present, scores, torch.full_like(scores, big)), "amin")
    keep = present & (count[gidx] >= 2) & (hi > lo)[gidx]
    return torch.where(keep, adv, torch.zeros_like(adv))


def segment_masks(
    estimator: str, response_mask: torch.Tensor, segment_ids: Optional[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tool and summary masks, bool (bs, L), from explicit ids (the argument, then an ``slca_*`` trainer mode's
    hand-over: :func:`explicit_segment_ids`) or, without any, from response_mask runs (last run = summary)."""
    segment_ids = explicit_segment_ids(estimator, response_mask, segment_ids)
    if segment_ids is None:
        return segment_masks_from_response_mask(response_mask)
    return segment_masks_from_ids(segment_ids, response_mask)


def zero_advantages(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(advantages, returns)`` of zeros for a batch with nothing to credit (no rows, or zero-length responses)."""
    advantages = torch.zeros_like(token_level_rewards, dtype=advantage_dtype(token_level_rewards, response_mask))
    return advantages, advantages
