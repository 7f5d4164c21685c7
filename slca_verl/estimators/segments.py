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
  to the estimator by the ``slca_*`` trainer modes (:mod:`slca_verl.trainer.handover`).
"""

from __future__ import annotations

import torch

OBSERVATION = 0
TOOL = 1
SUMMARY = 2

#: Name of the per-token field the agent loop writes and the ``slca_*`` trainer modes fetch from TransferQueue.
SEGMENT_IDS_FIELD = "slca_segment_ids"


def first_true(mask: torch.Tensor) -> torch.Tensor:
    """Index of the first True of each row: `(torch.Tensor)` shape (bs,) long, 0 for a row without one (check
    ``mask.any(-1)``). ``mask``: shape (bs, L) bool, L >= 1."""
    return mask.to(torch.uint8).argmax(dim=-1)


def last_true(mask: torch.Tensor) -> torch.Tensor:
    """Index of the last True of each row.

    Args:
        mask: `(torch.Tensor)` shape (bs, L) bool, L >= 1.

    Returns:
        `(torch.Tensor)` shape (bs,) long; L - 1 for a row without a True (check ``mask.any(-1)``).
    """
    return (mask.shape[-1] - 1) - mask.flip(-1).to(torch.uint8).argmax(dim=-1)


def segment_masks_from_response_mask(response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Tool and summary masks from response_mask runs: the last run is the summary, earlier runs are tool calls.

    Args:
        response_mask: `(torch.Tensor)` shape (bs, L), 0/1.

    Returns:
        tool_mask, summary_mask: `(torch.Tensor)` bool, shape (bs, L); disjoint, and their union is the mask.

    start[t]  = mask[t] and not mask[t - 1]          (the first token of each run)
    s         = max {t : start[t]}                   (the start of the last run)
    summary[t] = mask[t] and t >= s;  tool[t] = mask[t] and t < s
    """
    trained = response_mask.bool()  # (bs, L)
    if trained.shape[-1] == 0:
        return trained, trained.clone()
    start = trained.clone()
    start[:, 1:] &= ~trained[:, :-1]
    last_start = last_true(start).unsqueeze(-1)  # (bs, 1)
    summary = trained & (torch.arange(trained.shape[-1], device=trained.device) >= last_start)
    return trained & ~summary, summary


def segment_ids_from_response_mask(response_mask: torch.Tensor) -> torch.Tensor:
    """Per-token segment ids (int8, shape (bs, L)) from response_mask runs; see the module docstring."""
    tool, summary = segment_masks_from_response_mask(response_mask)
    return tool.to(torch.int8) * TOOL + summary.to(torch.int8) * SUMMARY


def check_whole_ids(segment_ids: torch.Tensor, estimator: str = "slca_grpo") -> None:
    """Raise when float ids (shape (bs, L)) hold a value that is not a whole number (0.5, NaN, inf).

    Integer ids pass untouched. A fractional id is no segment: the error names the value and where it sits, rather
    than :func:`segment_masks_from_ids`'s list of the ids found.

    Raises:
        ValueError: naming the first such value and where it sits.
    """
    if not segment_ids.is_floating_point():
        return
    ids = segment_ids.double()
    bad = ~torch.isfinite(ids) | (ids != torch.round(ids))
    if bool(bad.any()):
        row, token = (int(v) for v in bad.nonzero()[0])
        raise ValueError(
            f"{estimator}: explicit segment id {float(ids[row, token])!r} at row {row}, token {token} is not a whole "
            f"number; ids must be {OBSERVATION} (observation), {TOOL} (tool) or {SUMMARY} (summary)"
        )


def segment_masks_from_ids(segment_ids: torch.Tensor, response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Tool and summary masks from explicit per-token ids, checked against response_mask.

    Args:
        segment_ids: `(torch.Tensor)` shape (bs, L), values in {OBSERVATION, TOOL, SUMMARY} (any dtype).
        response_mask: `(torch.Tensor)` shape (bs, L), 0/1.

    Returns:
        tool_mask, summary_mask: `(torch.Tensor)` bool, shape (bs, L).

    Raises:
        ValueError: a shape that differs from response_mask's, ids outside {OBSERVATION, TOOL, SUMMARY}, or a tool /
            summary id where response_mask == 0.
    """
    if segment_ids.shape != response_mask.shape:
        raise ValueError(
            f"slca_grpo: explicit segment ids have shape {tuple(segment_ids.shape)} but response_mask has "
            f"{tuple(response_mask.shape)}; the agent loop must write one id per response token"
        )
    tool, summary = segment_ids == TOOL, segment_ids == SUMMARY
    if bool(((segment_ids != OBSERVATION) & ~tool & ~summary).any()):
        raise ValueError(
            f"slca_grpo: explicit segment ids must be {OBSERVATION} (observation), {TOOL} (tool) or "
            f"{SUMMARY} (summary); got {sorted(torch.unique(segment_ids.to(torch.float32)).tolist())}"
        )
    if bool(((tool | summary) & (response_mask == 0)).any()):
        raise ValueError("slca_grpo: explicit segment ids mark tokens with response_mask == 0 as tool/summary")
    return tool, summary
