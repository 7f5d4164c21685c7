"""verl's FSDP training engines for device "cpu", in verl's ``EngineRegistry``.

verl 0.9.1 registers its FSDP engines for devices cuda and npu only (``workers/engine/fsdp/transformer_impl.py``),
so on the CPU platform ``EngineRegistry.get_engine_cls`` finds none. The same engines work on a CPU over gloo, given
settings a CPU can honour; the subclasses below check those at start-up and name the override to change.

They also compute in fp32 where the config does not say (``mixed_precision`` unset). verl's FSDP engine then computes
in bf16 on any device, and on a processor without native bf16 (AVX512-BF16 or AMX: most AVX2 EPYCs and older Xeons)
torch runs every bf16 matmul through a naive fallback kernel: a Qwen-vocabulary LM head took 14.1 s in bf16 and
0.16 s in fp32 on an AVX2 EPYC, and verl's SFT of a tiny Qwen3 80 s a step instead of 3. An explicit bf16 or fp16
compute dtype is honoured, with a warning where the processor lacks native bf16 (:mod:`slca_verl.plan.precision`).

The language-model engine computes per-token log-probabilities of padded rows with one cross entropy
(:func:`padded_model_outputs`) where verl, without flash-attn, packs the logits and loops a logsumexp over rows: the
same values, 2-15x faster on a CPU (docs/cpu.md, "Log-probabilities").
"""

from __future__ import annotations

import dataclasses
import logging

import torch
import verl.utils.torch_functional as verl_F
from torch.distributed.tensor import DTensor
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.dataset_utils import DatasetPadMode
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


def padded_log_probs_apply(micro_batch) -> bool:
    """Whether :func:`padded_model_outputs` computes what verl's ``prepare_model_outputs`` would for this micro-batch:
    padded rows (``use_remove_padding=False``, verl's only layout on a CPU), no fused kernels, no sum of squared
    probabilities, no distillation. Other micro-batches take verl's own path."""
    flags = {
        "use_remove_padding": True,
        "use_fused_kernels": False,
        "calculate_sum_pi_squared": False,
        "distillation_use_topk": False,
        "distillation_only": False,
    }
    on = {key: tu.get_non_tensor_data(data=micro_batch, key=key, default=d) for key, d in flags.items()}
    pad_mode = tu.get_non_tensor_data(data=micro_batch, key="pad_mode", default=DatasetPadMode.NO_PADDING)
    return pad_mode == DatasetPadMode.NO_PADDING and not any(on.values())


def padded_model_outputs(output, output_args: dict, micro_batch, entropy_checkpointing: bool = False) -> dict:
    """Per-token log-probabilities (and entropy when asked) of a padded micro-batch, as nested (jagged) tensors.

    The same values as verl's ``FSDPEngineWithLMHead.prepare_model_outputs`` on its padded path, computed without
    its copies of the logits. verl packs the logits ``(bsz, max_len, vocab)`` into ``(nnz, vocab)`` (narrow, unbind,
    cat) and, without flash-attn's cross entropy, takes a row-by-row logsumexp; its backward then fills and stacks
    full-vocabulary tensors several times over. Here one ``cross_entropy`` over the padded logits, whose backward is
    ``softmax - onehot`` in one pass, and the packing happens on the ``(bsz, max_len)`` result::

        labels[b, t]  = input_ids_rmpad_rolled[offsets[b] + t]       for t < len_b (verl's rolled labels)
        log_probs[b, t] = logits[b, t, labels[b, t]] / T_b - logsumexp_v(logits[b, t, v] / T_b)
        entropy[b, t] = H(softmax(logits[b, t] / T_b))                (verl's entropy_from_logits)

    Padded positions (t >= len_b) are computed and dropped. On a 2-core CPU a 575-token row of a Qwen-vocabulary
    (151,936) model takes a fraction of verl's time (benchmarks/cpu_log_probs.py).
    """
    logits = output.logits  # (bsz, max_len, vocab)
    input_ids = micro_batch["input_ids"]  # nested (bsz, j1)
    offsets = input_ids.offsets()
    lengths = offsets.diff()
    bsz, max_len, vocab = logits.shape
    if not output_args.get("temperature_is_one", False):
        temperature = output_args["temperature"].to(logits.device).clamp(min=1e-8).to(logits.dtype)
        logits = logits / temperature.view(bsz, 1, 1)
    valid = torch.arange(max_len, device=logits.device).unsqueeze(0) < lengths.to(logits.device).unsqueeze(1)
    labels = torch.zeros(bsz, max_len, dtype=torch.long, device=logits.device)
    labels[valid] = output_args["input_ids_rmpad_rolled"].to(logits.device)
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1), reduction="none")
    model_output = {"log_probs": torch.nested.nested_tensor_from_jagged(-nll.view(bsz, max_len)[valid], offsets)}
    if tu.get_non_tensor_data(data=micro_batch, key="calculate_entropy", default=False):
        if entropy_checkpointing:
            entropy = torch.utils.checkpoint.checkpoint(verl_F.entropy_from_logits, logits, use_reentrant=False)
        else:
            entropy = verl_F.entropy_from_logits(logits)
        model_output["entropy"] = torch.nested.nested_tensor_from_jagged(entropy[valid], offsets)
    return model_output


class CPUFSDPEngineWithLMHead(_CPUCheck, FSDPEngineWithLMHead):
    """verl's FSDP language-model engine, checked for CPU settings; its per-token log-probabilities are computed by
    :func:`padded_model_outputs` where that applies (the same values, several times faster on a CPU)."""

    def prepare_model_outputs(self, output, output_args, micro_batch, logits_processor_func):
        if padded_log_probs_apply(micro_batch) and not isinstance(output.logits, DTensor):
            return padded_model_outputs(output, output_args, micro_batch, self.engine_config.entropy_checkpointing)
        return super().prepare_model_outputs(output, output_args, micro_batch, logits_processor_func)


class CPUFSDPEngineWithValueHead(_CPUCheck, FSDPEngineWithValueHead):
    """verl's FSDP value-model engine, checked for CPU settings."""


def _register(model_type: str, cls) -> None:
    registered = EngineRegistry._engines.get(model_type, {})
    backends = [b for b in BACKENDS if DEVICE not in registered.get(b, {})]  # idempotent: the registry asserts
    if backends:
        EngineRegistry.register(model_type=model_type, backend=backends, device=DEVICE)(cls)


_register("language_model", CPUFSDPEngineWithLMHead)
_register("value_model", CPUFSDPEngineWithValueHead)
