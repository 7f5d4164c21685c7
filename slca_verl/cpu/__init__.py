"""verl 0.9.1 on a CPU: a platform, a GPU-free rollout and the few patches verl needs, for the tiny end-to-end run.

Nothing here loads unless verl is told to use the CPU platform, with verl's own switch::

    VERL_PLATFORM=cpu python -m verl.trainer.main_ppo ... actor_rollout_ref.rollout.name=hf_cpu ...

(``recipes/run_cpu_tiny_slca.sh`` sets all of it.) GPU users never import this package.

One module per verl extension point:

- :mod:`slca_verl.cpu.platform` — ``PlatformRegistry`` entry "cpu" (device "cpu", gloo, no-op memory calls);
- :mod:`slca_verl.cpu.engine` — verl's FSDP engines registered for device "cpu" in ``EngineRegistry``, with a
  start-up check of the settings a CPU cannot honour;
- :mod:`slca_verl.cpu.rollout` — ``RolloutReplicaRegistry`` entry "hf_cpu": a Ray actor generating token-in /
  token-out with HF transformers, and the ``BaseRollout`` adapter that syncs the actor's weights into it;
- :mod:`slca_verl.cpu.patches` — the only changes to verl's own module attributes (gloo process group, unpinned
  CPU offload), guarded and checked against ``verl.__version__``.
"""

from __future__ import annotations

import importlib
import logging
import os

logger = logging.getLogger(__name__)

PLATFORM_NAME = "cpu"
ROLLOUT_NAME = "hf_cpu"
PLATFORM_ENV = "VERL_PLATFORM"  # verl's own switch (verl.plugin.platform.platform_manager)

_MODULES = ("slca_verl.cpu.platform", "slca_verl.cpu.engine", "slca_verl.cpu.rollout")


def requested() -> bool:
    """True when verl was told to use the CPU platform (``VERL_PLATFORM=cpu``)."""
    return os.environ.get(PLATFORM_ENV, "").strip().lower() == PLATFORM_NAME


def activate() -> dict[str, bool]:
    """Register the CPU platform, engines and rollout, and apply the patches; idempotent.

    Returns:
        ``{name: ok}`` for every registering module and every patch (see :func:`slca_verl.cpu.patches.apply`).
    """
    status = {}
    for name in _MODULES:
        try:
            importlib.import_module(name)
            status[name] = True
        except Exception as e:  # the run then fails at start-up in verl; say why here first
            status[name] = False
            logger.warning("slca-verl cpu: failed to register %s (%s: %s)", name, type(e).__name__, e)
    from slca_verl.cpu import patches

    status.update(patches.apply())
    return status
