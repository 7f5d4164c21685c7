"""Cutting over-long text to a character budget, one way for the whole library (tool responses, the simulator's
answers and prompts, the judge's inputs).

    truncate(text, 100)                        # head + "...(truncated)..." + tail, as verl's ToolAgentLoop cuts
    truncate(text, 100, "left")                # "(truncated)..." + the last 100 characters
    truncate(text, 100, marker="…[{cut} characters cut]…")   # the marker may say how much was cut
"""

from __future__ import annotations


def truncate(text: str, limit: int, side: str = "middle", *, marker: str = "...(truncated)...") -> str:
    """``text`` cut to ``limit`` characters (plus the marker); unchanged when it fits or ``limit`` is not positive.

    Args:
        side: keep the tail ("left": cut on the left), the head ("right") or both halves ("middle"), with verl's
            ToolAgentLoop markers for "left" / "right" (``multi_turn.tool_response_truncate_side``).
        marker: what stands for the cut middle; ``{cut}`` in it becomes the number of characters cut.
    """
    if not limit or limit <= 0 or len(text) <= limit:
        return text
    if side == "left":
        return "(truncated)..." + text[-limit:]
    if side == "right":
        return text[:limit] + "...(truncated)"
    half = max(1, limit // 2)
    return text[:half] + marker.replace("{cut}", str(len(text) - 2 * half)) + text[-half:]
