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
  to the estimator by the ``slca_*`` trainer modes (:mod:`slca_verl.handover`).
"""

from __future__ import annotations

import torch

OBSERVATION = 0
TOOL = 1
SUMMARY = 2

#: Name of the per-token field the agent loop writes and the ``slca_*`` trainer modes fetch from TransferQueue.
SEGMENT_IDS_FIELD = "slca_segment_ids"


# ---------------------------------------------------------------------------------------------------------------
# Block kernels: float 0/1 masks written into caller-owned buffers (no allocation of (bs, L) temporaries).
# The estimator runs them over blocks of rows that fit in cache; the convenience functions below run them once.


def fill_last_run_start(mask_f: torch.Tensor, scratch: torch.Tensor, pos1: torch.Tensor) -> torch.Tensor:
    """1-based start of the last run of ones in each row (0 for a row without ones).

    Args:
        mask_f: `(torch.Tensor)` shape (n, L) float, values 0/1.
        scratch: `(torch.Tensor)` shape (n, L) float, overwritten.
        pos1: `(torch.Tensor)` shape (L,) float, 1..L.

    Returns:
        `(torch.Tensor)` shape (n,) float.

    d[t] = mask[t] - mask[t-1] (mask[-1] = 0) is +1 where a run starts and -1 after it ends, so
    max_t (t + 1) * d[t] is the 1-based position of the last start (0 for an empty row: d = 0 throughout).
    """
    torch.sub(mask_f[:, 1:], mask_f[:, :-1], out=scratch[:, 1:])
    scratch[:, :1] = mask_f[:, :1]
    return scratch.mul_(pos1).amax(dim=-1)


def fill_masks_from_last_start(
    mask_f: torch.Tensor, start1: torch.Tensor, pos1: torch.Tensor, summary_out: torch.Tensor
) -> None:
    """Split a float mask into tool and summary in place: ``summary_out`` = trained tokens from the last run's
    start on; ``mask_f`` becomes the remaining trained tokens (the tool segment).

    summary[t] = mask[t] * 1[t + 1 >= start1]     (a float-valued comparison: one op, no clamp)
    """
    torch.ge(pos1, start1.unsqueeze(-1), out=summary_out).mul_(mask_f)
    mask_f.sub_(summary_out)


def fill_masks_from_ids(
    ids_f: torch.Tensor, mask_f: torch.Tensor, summary_out: torch.Tensor, check: bool = True
) -> None:
    """Tool mask (into ``ids_f``) and summary mask (into ``summary_out``) from float segment ids, checked against
    the float response mask when ``check``.

    With v in {0, 1, 2}: summary = max(v - 1, 0), tool = v - 2 * summary, both exact 0/1 in float.

    Raises:
        ValueError: ids outside {OBSERVATION, TOOL, SUMMARY}, or a tool/summary id where response_mask == 0.
    """
    if check and bool(((ids_f != OBSERVATION) & (ids_f != TOOL) & (ids_f != SUMMARY)).any()):
        raise ValueError(
            f"slca_grpo: explicit segment ids must be {OBSERVATION} (observation), {TOOL} (tool) or "
            f"{SUMMARY} (summary); got {sorted(torch.unique(ids_f).tolist())}"
        )
    if check and bool(((ids_f != OBSERVATION) & (mask_f == 0)).any()):
        raise ValueError("slca_grpo: explicit segment ids mark tokens with response_mask == 0 as tool/summary")
    torch.sub(ids_f, 1.0, out=summary_out).clamp_(min=0.0)  # summary = max(v - 1, 0)
    ids_f.sub_(summary_out, alpha=2.0)  # tool = v - 2 * summary


def check_whole_ids(segment_ids: torch.Tensor, estimator: str = "slca_grpo") -> None:
    """Raise when float ids (shape (bs, L)) hold a value that is not a whole number (0.5, NaN, inf).

    Integer ids pass untouched. A fractional id is no segment: cast to int8 (the fused kernel's copy) 0.5 would
    silently become 0, an observation.

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


def _float_pos1(L: int, device) -> torch.Tensor:
    return torch.arange(1, L + 1, dtype=torch.float32, device=device)


# ---------------------------------------------------------------------------------------------------------------
# Convenience (allocating) forms, for tests, the agent loop and analysis.


def segment_masks_from_response_mask(response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Tool and summary masks from response_mask runs (last run = summary, earlier runs = tool).

    Args:
        response_mask: `(torch.Tensor)` shape (bs, L).

    Returns:
        tool_mask, summary_mask: `(torch.Tensor)` bool, shape (bs, L); disjoint, and their union is the mask.
    """
    mask_f = response_mask.to(torch.float32, copy=True)  # split in place below: never the caller's float32 mask
    summary = torch.empty_like(mask_f)
    pos1 = _float_pos1(mask_f.shape[1], mask_f.device)
    fill_masks_from_last_start(mask_f, fill_last_run_start(mask_f, summary, pos1), pos1, summary)
    return mask_f.bool(), summary.bool()


def segment_ids_from_response_mask(response_mask: torch.Tensor) -> torch.Tensor:
    """Per-token segment ids (int8, shape (bs, L)) from response_mask runs; see the module docstring."""
    tool, summary = segment_masks_from_response_mask(response_mask)
    return tool.to(torch.int8) * TOOL + summary.to(torch.int8) * SUMMARY


def segment_masks_from_ids(segment_ids: torch.Tensor, response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Tool and summary masks (bool, (bs, L)) from explicit per-token ids, checked against response_mask."""
    if segment_ids.shape != response_mask.shape:
        raise ValueError(
            f"slca_grpo: explicit segment ids have shape {tuple(segment_ids.shape)} but response_mask has "
            f"{tuple(response_mask.shape)}; the agent loop must write one id per response token"
        )
    ids_f = segment_ids.to(torch.float32, copy=True)  # becomes the tool mask in place: never the caller's ids
    summary = torch.empty_like(ids_f)
    fill_masks_from_ids(ids_f, response_mask.to(torch.float32), summary)
    return ids_f.bool(), summary.bool()
