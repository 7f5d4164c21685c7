"""verl's FSDP training engines for device "cpu", in verl's ``EngineRegistry``.

verl 0.9.1 registers its FSDP engines for devices cuda and npu only (``workers/engine/fsdp/transformer_impl.py``),
so on the CPU platform ``EngineRegistry.get_engine_cls`` finds none. The same engines work on a CPU over gloo, given
settings a CPU can honour; the subclasses below check those at start-up and name the override to change.
"""

from __future__ import annotations

import logging

from verl.workers.engine.base import EngineRegistry
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

logger = logging.getLogger(__name__)

DEVICE = "cpu"
BACKENDS = ("fsdp", "fsdp2")


class CPUSettingError(ValueError):
    """A setting the CPU platform cannot run with; the message names the override to change."""


def cpu_setting_problems(model_config, engine_config) -> list[str]:
    """What in an engine's settings a CPU cannot run, each with the override that fixes it ([] when fine)."""
    problems = []
    if getattr(engine_config, "strategy", "fsdp2") != "fsdp2":
        problems.append(
            "FSDP1 cannot initialise on a CPU (sync_module_states needs an accelerator): set "
            "actor_rollout_ref.actor.strategy=fsdp2 and actor_rollout_ref.ref.strategy=fsdp2 "
            "(critic.strategy=fsdp2 for a critic)"
        )
    override = getattr(model_config, "override_config", None) or {}
    attn = override.get("attn_implementation", "flash_attention_2") if hasattr(override, "get") else None
    if attn == "flash_attention_2":
        problems.append(
            "flash-attention needs CUDA: set +actor_rollout_ref.model.override_config.attn_implementation=sdpa "
            "(or eager)"
        )
    if getattr(model_config, "use_remove_padding", False):
        problems.append(
            "remove-padding kernels need flash-attention: set actor_rollout_ref.model.use_remove_padding=false"
        )
    return problems


class _CPUCheck:
    def __init__(self, model_config, engine_config, *args, **kwargs):
        problems = cpu_setting_problems(model_config, engine_config)
        if problems:
            raise CPUSettingError("slca-verl cpu platform: " + "; ".join(problems))
        super().__init__(model_config, engine_config, *args, **kwargs)


class CPUFSDPEngineWithLMHead(_CPUCheck, FSDPEngineWithLMHead):
    """verl's FSDP language-model engine, checked for CPU settings."""


class CPUFSDPEngineWithValueHead(_CPUCheck, FSDPEngineWithValueHead):
    """verl's FSDP value-model engine, checked for CPU settings."""


def _register(model_type: str, cls) -> None:
    registered = EngineRegistry._engines.get(model_type, {})
    backends = [b for b in BACKENDS if DEVICE not in registered.get(b, {})]  # idempotent: the registry asserts
    if backends:
        EngineRegistry.register(model_type=model_type, backend=backends, device=DEVICE)(cls)


_register("language_model", CPUFSDPEngineWithLMHead)
_register("value_model", CPUFSDPEngineWithValueHead)
