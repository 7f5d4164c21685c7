"""verl's FSDP training engines for device "cpu", in verl's ``EngineRegistry``.

verl 0.9.1 registers its FSDP engines for devices cuda and npu only (``workers/engine/fsdp/transformer_impl.py``),
so on the CPU platform ``EngineRegistry.get_engine_cls`` finds none. The same engines work on a CPU over gloo, given
settings a CPU can honour; the subclasses below check those at start-up and name the override to change.

They also compute in fp32 where the config does not say (``mixed_precision`` unset). verl's FSDP engine then computes
in bf16 on any device, and on a processor without native bf16 (AVX512-BF16 or AMX: most AVX2 EPYCs and older Xeons)
torch runs every bf16 matmul through a naive fallback kernel: a Qwen-vocabulary LM head took 14.1 s in bf16 and
0.16 s in fp32 on an AVX2 EPYC, and verl's SFT of a tiny Qwen3 80 s a step instead of 3. An explicit bf16 or fp16
compute dtype is honoured, with a warning where the processor lacks native bf16 (:mod:`slca_verl.plan.precision`).
"""

from __future__ import annotations

import dataclasses
import logging

from verl.workers.engine.base import EngineRegistry
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

from slca_verl.plan.precision import FP32_MIXED_PRECISION, cpu_has_native_bf16, engine_precision, setting

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


def cpu_compute_config(engine_config, native_bf16: bool | None = None):
    """``engine_config`` with the compute dtype a CPU run should use: fp32 where ``mixed_precision`` is unset (verl's
    implicit bf16), the config unchanged where it names a dtype (a warning when that is bf16 / fp16 on a processor
    without native bf16). Works on verl's ``FSDPEngineConfig`` dataclass, a DictConfig or a dict."""
    if setting(engine_config, "mixed_precision") is None:
        logger.info("slca-verl cpu platform: FSDP engine computes in fp32 (mixed_precision unset; verl's default bf16)")
        if dataclasses.is_dataclass(engine_config):
            return dataclasses.replace(engine_config, mixed_precision=dict(FP32_MIXED_PRECISION))
        if isinstance(engine_config, dict):
            return {**engine_config, "mixed_precision": dict(FP32_MIXED_PRECISION)}
        from omegaconf import OmegaConf

        cfg = OmegaConf.create(OmegaConf.to_container(engine_config))
        cfg.mixed_precision = dict(FP32_MIXED_PRECISION)
        return cfg
    compute = engine_precision(engine_config).compute
    if compute != "fp32" and not (cpu_has_native_bf16() if native_bf16 is None else native_bf16):
        logger.warning(
            "slca-verl cpu platform: the FSDP engine computes in %s (mixed_precision.param_dtype), and this processor "
            "has no native bf16 (AVX512-BF16 / AMX): torch takes a naive matmul kernel, ~90x slower than fp32 for a "
            "Qwen LM head. Set ...fsdp_config.mixed_precision.param_dtype=fp32 (engine.mixed_precision.param_dtype "
            "for verl's SFT trainer), or leave mixed_precision unset.",
            compute,
        )
    return engine_config


class _CPUCheck:
    def __init__(self, model_config, engine_config, *args, **kwargs):
        problems = cpu_setting_problems(model_config, engine_config)
        if problems:
            raise CPUSettingError("slca-verl cpu platform: " + "; ".join(problems))
        super().__init__(model_config, cpu_compute_config(engine_config), *args, **kwargs)


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
