"""verl's trainer config composed with hydra, exactly as ``python -m verl.trainer.main_ppo`` (or ``sft_trainer``) would
build it from the same overrides: hydra's compose API over verl's own config directory. Launches nothing."""

from __future__ import annotations

import os
from typing import Sequence


def verl_config_dir() -> str:
    import verl

    return os.path.join(os.path.dirname(verl.__file__), "trainer", "config")


def compose(config_name: str, overrides: Sequence[str], return_hydra_config: bool = False):
    """verl's trainer config ``config_name`` with ``overrides`` applied; with ``return_hydra_config`` hydra's own
    section (``hydra.*``) is kept too."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=verl_config_dir(), version_base=None):
        return hydra_compose(
            config_name=config_name, overrides=list(overrides), return_hydra_config=return_hydra_config
        )
