"""Progress lines for long work (the tiny model's warm-up, BFCL generation): how far, and an estimate of the time
left from the pace so far, e.g. ``warm-up: step 240/800 (30 %), loss 1.21, ~4 min left``.

The shell recipes' stages use the same wording (``scripts/progress_lib.sh``).
"""

from __future__ import annotations

import logging


def time_left_s(done: float, total: float, elapsed_s: float) -> float | None:
    """Seconds left at the pace so far (``elapsed_s`` for ``done`` of ``total``); None before anything is done."""
    if done <= 0 or total <= 0 or elapsed_s < 0:
        return None
    return max(0.0, elapsed_s * (total - min(done, total)) / done)


def duration(seconds: float | None) -> str:
    """``~45 s``, ``~4 min``, ``~1.5 h``; ``unknown`` for None."""
    if seconds is None:
        return "unknown"
    if seconds < 90:
        return f"~{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"~{round(seconds / 60)} min"
    return f"~{seconds / 3600:.1f} h"


def progress_line(what: str, done: int, total: int | None, elapsed_s: float, detail: str = "") -> str:
    """``<what> <done>/<total> (<pct> %)[, <detail>], ~N min left``; without a total, the count and the time spent."""
    extra = f", {detail}" if detail else ""
    if not total:
        return f"{what} {done} so far{extra} ({duration(elapsed_s)} spent)"
    pct = 100 * min(done, total) // total
    left = time_left_s(done, total, elapsed_s)
    return f"{what} {min(done, total)}/{total} ({pct} %){extra}, " + (
        "time left unknown yet" if left is None else f"{duration(left)} left"
    )


def cli_logging(fmt: str = "%(name)s: %(message)s") -> None:
    """INFO lines of this project on stderr, for a command-line entry point (``main``).

    ``import verl``, which this package does first, already called ``logging.basicConfig`` at WARNING, so an entry
    point's own ``basicConfig(level=INFO)`` did nothing and every INFO line (the warm-up's report, the eval commands'
    "-> <file>") was dropped. The root stays as verl left it; this project's loggers (and ``__main__``, a module run
    with ``python -m``) log at INFO through the root's handler."""
    logging.basicConfig(level=logging.INFO, format=fmt)  # only where nothing configured the root yet
    for name in ("__main__", "slca_verl", "data_prep"):
        logging.getLogger(name).setLevel(logging.INFO)
