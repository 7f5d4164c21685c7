"""Run a python module as ``python -m`` does, with verl's start-up notices that carry nothing on a CPU filtered to one
summary line. The CPU recipes start their python steps through it (recipes/run_cpu_tiny_slca.sh; verl's main_ppo
with DEVICE=cpu in recipes/run_qwen7b_slca.sh):

    python3 recipes/verl_startup.py verl.trainer.main_ppo [hydra overrides...]
    python3 recipes/verl_startup.py slca_verl.cpu.tiny_model warmup ...

Every process that imports verl 0.9.1 prints, before anything of the run: a UserWarning per training engine whose
package is not installed ("torchtitan / veomni / automodel / mindspeed / megatron engine is not available"), and
from its platform manager "No supported accelerator detected ... Falling back to 'nvidia'" with "Platform 'nvidia'
... is registered but not available" (no VERL_PLATFORM), or "Platform override from VERL_PLATFORM: cpu". On a CPU run
none of it is news, and seven lines per process bury the errors that are.

What it does, at run start and nowhere else (importing slca_verl installs nothing):

* ``import verl`` inside :func:`warnings.catch_warnings`, recording; the engine warnings are counted, every other
  warning raised during the import is shown as before;
* a :class:`logging.Filter` on verl's platform-manager logger that drops those three messages, counted;
* one INFO line saying what was filtered (and that QUIET_VERL=0 in the recipes shows it all);
* ``PYTHONWARNINGS`` extended with an ``ignore`` entry per engine seen, so the processes the run starts (the Ray
  workers of the local cluster verl starts, which inherit the environment) do not print the engine warnings either.
  A worker still logs verl's one INFO line about its platform; workers of a cluster started elsewhere (RAY_ADDRESS)
  keep their own environment.
* ``TQ_NUM_THREADS`` (transfer_queue's own setting, read at its import) set to the machine's physical cores when
  unset and there are fewer than its default 8: TransferQueue caps torch's threads at that number around every put
  and get of every storage unit and client, and with 8 on a 2-core machine logged "target_num_threads 8 should not
  exceed total physical CPU cores 2. Setting to 2." each time -- 118 lines of a 20-step CPU run, the cap it then
  took anyway. A value the user set is kept.

Then the module runs as ``__main__`` (``runpy.run_module``): hydra finds verl's config beside main_ppo.py as it does
for ``python -m``. Standard library only (psutil aside, which imports nothing of verl), because it must run before
anything imports verl.
"""

from __future__ import annotations

import logging
import os
import re
import runpy
import sys
import warnings

logger = logging.getLogger("verl_startup")

ENGINE_WARNING = re.compile(r"^(\w+) engine is not available\b")
PLATFORM_LOGGER = "verl.plugin.platform.platform_manager"
PLATFORM_NOTICES = {
    "no accelerator detected, platform 'nvidia' taken and not available": re.compile(
        r"^No supported accelerator detected\b|^Platform '\w+' \(\w+\) is registered but not available"
    ),
    "platform from VERL_PLATFORM": re.compile(r"^Platform override from VERL_PLATFORM\b"),
}


class PlatformNoticeFilter(logging.Filter):
    """Drops verl's platform-manager notices of :data:`PLATFORM_NOTICES`, remembering which kinds it dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        for kind, pattern in PLATFORM_NOTICES.items():
            if pattern.search(message):
                self.dropped[kind] = self.dropped.get(kind, 0) + 1
                return False
        return True


def import_verl_quietly() -> tuple[list[str], dict[str, int]]:
    """``import verl`` with its start-up notices held back: returns (engines reported missing, platform notices
    dropped by kind); any other warning of the import is shown. The platform filter stays on verl's logger."""
    notices = PlatformNoticeFilter()
    logging.getLogger(PLATFORM_LOGGER).addFilter(notices)
    engines = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import verl  # noqa: F401  (the import is the point: its plugins and platform are resolved here)
    for w in caught:
        m = ENGINE_WARNING.search(str(w.message))
        if m and issubclass(w.category, UserWarning):
            engines.append(m.group(1))
        else:
            # through the filters as if never caught (a DeprecationWarning from a library stays hidden by default)
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return engines, notices.dropped


def child_warning_filters(engines: list[str], current: str = "") -> str:
    """``PYTHONWARNINGS`` for the processes this one starts: ``current`` and an ignore entry per engine."""
    entries = [e for e in current.split(",") if e]
    entries += [f"ignore:{name} engine is not available:UserWarning" for name in engines]
    return ",".join(dict.fromkeys(entries))


TQ_DEFAULT_THREADS = 8  # transfer_queue.client / transfer_queue.storage.simple_storage: TQ_NUM_THREADS's default


def tq_num_threads(environ: dict[str, str]) -> str | None:
    """``TQ_NUM_THREADS`` for this process and the ones it starts, or None to leave it as it is: the physical cores
    (transfer_queue's own count) when unset and fewer than transfer_queue's default, so it never warns about it."""
    if environ.get("TQ_NUM_THREADS"):
        return None
    try:
        import psutil  # verl's and transfer_queue's dependency; does not import verl

        cores = psutil.cpu_count(logical=False)
    except ImportError:
        cores = None
    cores = cores or os.cpu_count() or 1
    return str(cores) if cores < TQ_DEFAULT_THREADS else None


def summary(engines: list[str], dropped: dict[str, int]) -> str:
    parts = []
    if engines:
        parts.append(f"{len(engines)} engines not installed ({', '.join(engines)})")
    parts += [kind for kind in PLATFORM_NOTICES if kind in dropped]
    what = "; ".join(parts) if parts else "nothing to filter"
    return (
        f"verl start-up: {len(engines) + sum(dropped.values())} notices filtered: {what} -- expected on a CPU; "
        "QUIET_VERL=0 shows them (docs/cpu.md)"
    )


def main(argv: list[str]) -> None:
    if not argv or argv[0].startswith("-"):
        sys.exit("usage: python3 recipes/verl_startup.py MODULE [ARGS...]")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s:%(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    sys.path[0] = os.getcwd()  # as `python -m`: the working directory first, not this script's folder
    threads = tq_num_threads(dict(os.environ))
    if threads:  # before anything imports transfer_queue, which reads it at import
        os.environ["TQ_NUM_THREADS"] = threads
    engines, dropped = import_verl_quietly()
    os.environ["PYTHONWARNINGS"] = child_warning_filters(engines, os.environ.get("PYTHONWARNINGS", ""))
    logger.info(summary(engines, dropped))
    sys.argv = [argv[0], *argv[1:]]
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
