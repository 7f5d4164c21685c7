"""Response segments of a tool-calling trajectory: tool calls, observations, and the final summary.

A multi-turn response is laid out token by token as

    [assistant turn 1][tool response 1][assistant turn 2][tool response 2] ... [assistant turn k]
    mask: 1 1 1 1 1 1  0 0 0 0 0 0 0 0  1 1 1 1 1 1 1 1  0 0 0 0 0 0 0 0       1 1 1 1 1 1 1 1

Segment ids (one int8 per response token):

    OBSERVATION = 0   tool responses and padding (response_mask == 0): never trained
    TOOL        = 1   assistant turns that made tool calls
    SUMMARY     = 2   the final assistant turn, the user-facing reply

Two ways to obtain them:

* **From response_mask runs** (what verl hands every estimator): each run of ones is one assistant turn; the last
  run is the summary, earlier runs are tool calls. A single run is a summary only. This is the authors' rule; it
  mislabels an episode cut by a length or turn limit (it ends on a tool-call turn, which becomes "summary").
* **Explicit ids** written per token by ``slca_tool_agent`` (which knows which turns carried calls) and delivered
  to the estimator by the ``slca_sync`` trainer mode through :func:`explicit_segment_ids`.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Optional

import torch

OBSERVATION = 0
TOOL = 1
SUMMARY = 2

#: Name of the per-token field the agent loop writes and the ``slca_sync`` trainer fetches from TransferQueue.
SEGMENT_IDS_FIELD = "slca_segment_ids"

_EXPLICIT_IDS: contextvars.ContextVar[Optional[torch.Tensor]] = contextvars.ContextVar(
    "slca_explicit_segment_ids", default=None
)


def last_run_start(response_mask: torch.Tensor) -> torch.Tensor:
    """Index of the first token of the last run of ones in each row.

    Args:
        response_mask: `(torch.Tensor)` shape (bs, L), any dtype; nonzero = trained token.

    Returns:
        `(torch.Tensor)` shape (bs,) int64: start of the last run, or L for a row without ones.

    A run starts at t when mask[t] == 1 and (t == 0 or mask[t-1] == 0). One pass of int16 work over (bs, L):
    ``start_pos[t] = (t+1) * is_start[t]``, whose row max - 1 is the last start.
    """
    m = response_mask.bool()  # (bs, L)
    bs, L = m.shape
    if L == 0:
        return torch.zeros(bs, dtype=torch.long, device=m.device)
    is_start = m.clone()
    is_start[:, 1:] &= ~m[:, :-1]  # (bs, L) bool
    # positions fit in int32; (t + 1) so that "no start" (all zeros) maps to max == 0
    pos1 = torch.arange(1, L + 1, dtype=torch.int32, device=m.device)
    last = (is_start * pos1).amax(dim=-1).long() - 1  # (bs,), -1 when the row has no ones
    return torch.where(last < 0, torch.full_like(last, L), last)


def segment_masks_from_response_mask(response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Tool and summary masks from response_mask runs (last run = summary, earlier runs = tool).

    Args:
        response_mask: `(torch.Tensor)` shape (bs, L).

    Returns:
        tool_mask, summary_mask: `(torch.Tensor)` bool, shape (bs, L); disjoint, and their union is the mask.
    """
    m = response_mask.bool()
    start = last_run_start(m)  # (bs,)
    pos = torch.arange(m.shape[1], device=m.device)
    in_last = pos.unsqueeze(0) >= start.unsqueeze(1)  # (bs, L)
    return m & ~in_last, m & in_last


def segment_ids_from_response_mask(response_mask: torch.Tensor) -> torch.Tensor:
    """Per-token segment ids (int8, shape (bs, L)) from response_mask runs; see the module docstring."""
    tool, summary = segment_masks_from_response_mask(response_mask)
    return tool.to(torch.int8) * TOOL + summary.to(torch.int8) * SUMMARY


def segment_masks_from_ids(segment_ids: torch.Tensor, response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Tool and summary masks from explicit per-token ids, checked against response_mask.

    Args:
        segment_ids: `(torch.Tensor)` shape (bs, L), values in {OBSERVATION, TOOL, SUMMARY}.
        response_mask: `(torch.Tensor)` shape (bs, L).

    Raises:
        ValueError: shape mismatch, unknown ids, or a tool/summary id on a token with response_mask == 0.
    """
    if segment_ids.shape != response_mask.shape:
        raise ValueError(
            f"slca_grpo: explicit segment ids have shape {tuple(segment_ids.shape)} but response_mask has "
            f"{tuple(response_mask.shape)}; the agent loop must write one id per response token"
        )
    tool = segment_ids == TOOL
    summary = segment_ids == SUMMARY
    m = response_mask.bool()
    labelled = tool | summary
    if bool((labelled & ~m).any()):
        raise ValueError("slca_grpo: explicit segment ids mark tokens with response_mask == 0 as tool/summary")
    if bool(((segment_ids != OBSERVATION) & ~labelled).any()):
        raise ValueError(
            f"slca_grpo: explicit segment ids must be {OBSERVATION} (observation), {TOOL} (tool) or "
            f"{SUMMARY} (summary); got {sorted(torch.unique(segment_ids).tolist())}"
        )
    return tool, summary


@contextlib.contextmanager
def explicit_segment_ids(segment_ids: torch.Tensor) -> Iterator[None]:
    """Make per-token segment ids visible to ``slca_grpo`` for the duration of the block.

    verl's ``compute_advantage`` passes a custom estimator only token_level_rewards, response_mask, index and
    config, so the ``slca_sync`` trainer hands the ids over through this context variable instead of copying
    verl's advantage code.
    """
    token = _EXPLICIT_IDS.set(segment_ids)
    try:
        yield
    finally:
        _EXPLICIT_IDS.reset(token)


def current_explicit_segment_ids() -> Optional[torch.Tensor]:
    """The ids set by :func:`explicit_segment_ids`, or None outside such a block."""
    return _EXPLICIT_IDS.get()
