"""The dtypes a verl FSDP engine trains in, read from its config the way verl 0.9.1's engine reads them.

verl's ``FSDPEngine`` (``workers/engine/fsdp/transformer_impl.py``) uses two settings of ``FSDPEngineConfig``:

- ``model_dtype`` — the dtype the module is *loaded* in, which is also the dtype of the weights the optimizer updates
  and of AdamW's state (the "master" weights). verl's default is fp32; ``None`` means fp32 for training and bf16 for a
  forward-only engine (the reference model).
- ``mixed_precision.param_dtype`` — the dtype FSDP casts the weights to for forward and backward (the *compute* dtype,
  also torch's autocast dtype). With ``mixed_precision`` unset it is bf16, on any device.

Two ways this goes wrong silently, both checked here:

- ``model_dtype=bf16`` for training: weights and AdamW state in bf16, no fp32 master copy. An update smaller than half
  a bf16 step of the weight (bf16 keeps 8 significant bits: a step of 2**-7 relative) rounds away; at lr 5e-6 most do.
- bf16 compute on a CPU without native bf16 (AVX512-BF16 or AMX): torch runs a bf16 matmul through a naive fallback
  kernel there (``at::native::cpublas::cpublas_gemm_impl``), ~90x slower than fp32 for a Qwen LM head. verl's default
  is bf16 on a CPU too, so slca-verl's CPU engines compute in fp32 unless a config asks otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

#: verl's spellings of the dtypes (verl.utils.torch_dtypes.PrecisionType), by canonical name.
_ALIASES = {
    "fp32": ("fp32", "float32", "float", "32", "torch.float32"),
    "bf16": ("bf16", "bfloat16", "torch.bfloat16"),
    "fp16": ("fp16", "float16", "half", "16", "torch.float16"),
}
FP32_MIXED_PRECISION = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}


def canonical(dtype: Any) -> str:
    """``"fp32"``, ``"bf16"`` or ``"fp16"`` for any of verl's spellings of a dtype (a string or a torch dtype).

    Raises:
        ValueError: for a dtype verl's FSDP engine does not train in.
    """
    text = str(dtype).strip().lower()
    for name, spellings in _ALIASES.items():
        if text in spellings:
            return name
    raise ValueError(f"unknown dtype {dtype!r} (expected one of fp32 / bf16 / fp16 in any of verl's spellings)")


@dataclass(frozen=True)
class EnginePrecision:
    """What one FSDP engine trains in: ``master`` (weights and optimizer state) and ``compute`` (forward/backward)."""

    master: str
    compute: str

    @property
    def fp32_master(self) -> bool:
        return self.master == "fp32"


def setting(cfg: Any, key: str, default: Any = None) -> Any:
    """``cfg[key]`` of a dict, DictConfig or dataclass config (``default`` where it has none)."""
    if cfg is None:
        return default
    if isinstance(cfg, Mapping) or hasattr(cfg, "get") and not hasattr(cfg, "__dataclass_fields__"):
        return cfg.get(key, default)
    return getattr(cfg, key, default)


def engine_precision(engine_cfg: Any, forward_only: bool | None = None) -> EnginePrecision:
    """The dtypes verl 0.9.1's FSDP engine would use for this ``FSDPEngineConfig`` (a dataclass, DictConfig or dict).

    Args:
        engine_cfg: ``actor_rollout_ref.actor.fsdp_config``, ``actor_rollout_ref.ref.fsdp_config`` or the SFT
            trainer's ``engine``.
        forward_only: overrides ``engine_cfg.forward_only`` (the reference model is forward-only).

    Returns:
        master = ``model_dtype`` (None: fp32 for training, bf16 forward-only), compute = ``mixed_precision.param_dtype``
        (``mixed_precision`` unset, or without the key: bf16), as ``_build_module`` / ``_build_fsdp_module`` read them.
    """
    if forward_only is None:
        forward_only = bool(setting(engine_cfg, "forward_only", False))
    model_dtype = setting(engine_cfg, "model_dtype", "fp32")
    master = canonical(model_dtype) if model_dtype is not None else ("bf16" if forward_only else "fp32")
    mixed = setting(engine_cfg, "mixed_precision", None)
    compute = canonical(setting(mixed, "param_dtype", "bf16")) if mixed is not None else "bf16"
    return EnginePrecision(master=master, compute=compute)


def cpu_flags() -> frozenset[str]:
    """The processor's feature flags (``/proc/cpuinfo``; empty where that file does not exist)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_has_native_bf16(flags: frozenset[str] | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """True when torch's bf16 matmuls on this CPU take oneDNN's bf16 kernels (AVX512-BF16 or AMX), not the naive one.

    ``ONEDNN_MAX_CPU_ISA`` below AVX-512 (e.g. ``AVX2``) caps oneDNN as on a processor without those instructions.
    """
    flags = cpu_flags() if flags is None else flags
    environ = os.environ if environ is None else environ
    isa = environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if isa and not (isa.startswith("AVX512") or isa.startswith("AVX10") or isa in ("ALL", "DEFAULT")):
        return False
    return bool({"avx512_bf16", "amx_bf16"} & flags)
