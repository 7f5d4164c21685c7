"""Per-GPU memory of a verl run, phase by phase, from the model's shape and the composed config: arithmetic, no GPU.

verl's GPU recipes colocate on every training GPU the FSDP actor (its shard of the weights, gradients and AdamW
state), the reference model (verl's FSDP2 reference keeps its weights on the host: ``CPUOffloadPolicy``) and a vLLM
server that sleeps during the update and wakes for the rollout (``free_cache_engine``). What each phase holds on one
GPU, with ``P`` parameters, ``N`` FSDP shards (all training GPUs), ``b`` bytes of the master dtype (4 for fp32):

=================  ==================================================================================================
phase              per-GPU memory
=================  ==================================================================================================
rollout (step 1)   ``b P / N`` (weights, unless ``param_offload``) + ``u M`` (vLLM: ``gpu_memory_utilization`` of the
                   card's memory ``M``, its weights and KV cache) + reserve
rollout (step 2+)  the same + ``2 b P / N``: AdamW's two moments exist after the first update and stay on the GPU
                   unless ``optimizer_offload`` (verl's ``update_weights`` offloads the weights only)
log-probs          ``b P / N`` + moments + one micro-batch's logits ``T_lp V c`` + one layer's activations + vLLM asleep
update             ``4 b P / N`` (weights, gradients, both moments: an offloaded optimizer is loaded back for the
                   step) + activations of a micro-batch of ``T`` tokens + its logits ``T V c`` + vLLM asleep
SFT                ``4 b P / N`` + activations + logits of a micro-batch (verl's SFT trainer: no rollout)
=================  ==================================================================================================

Activations of ``T`` tokens in bf16: with gradient checkpointing ``L`` saved layer inputs (``2 T h`` bytes each) plus
one layer recomputed for its backward (``T (16 h + 8 I)`` bytes: attention projections and the SwiGLU MLP's gate, up
and product, with their gradients); without it ``L`` layers of the latter. Logits: ``T V`` elements at ``c`` bytes
each, 4 with flash-attn's in-place cross-entropy (remove-padding path: bf16 logits and their gradient) and 6 without
(a bf16 log-softmax copy besides). ``T`` is the dynamic-batch token cap (``ppo_max_token_len_per_gpu``,
``log_prob_max_token_len_per_gpu``) when ``use_dynamic_bsz``, else micro-batch rows x (prompt + response): the worst
case, every row at its maximum length. The reserve (CUDA contexts of the trainer and vLLM processes, NCCL buffers,
the allocator's fragmentation) is :data:`RESERVE_GIB`.

The state terms are exact arithmetic; the activation and logits terms are estimates (the constants above), sized to
the peak rather than the mean. ``benchmarks/plan_memory_gpu.py`` measures a real fp32-master AdamW step with bf16
compute on a GPU and prints predicted vs measured peak, to check them where a GPU is at hand.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

GIB = 1024**3
RESERVE_GIB = 4.0  # CUDA contexts (trainer + vLLM process), NCCL buffers, allocator fragmentation
VLLM_ASLEEP_GIB = 1.0  # a sleeping vLLM (level-1 sleep: weights on the host, KV cache released) keeps its context


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer (Qwen2 / Qwen2.5 / Qwen3 / Llama layout: GQA attention, SwiGLU MLP)."""

    name: str
    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool
    head_dim: int | None = None
    qkv_bias: bool = True

    @property
    def params(self) -> int:
        """Parameter count: embeddings (+ an untied LM head), per layer q/k/v/o (+ q/k/v biases), the MLP, norms."""
        hd = self.head_dim or self.hidden // self.heads
        q, kv = self.heads * hd, self.kv_heads * hd
        attn = self.hidden * q + 2 * self.hidden * kv + q * self.hidden
        if self.qkv_bias:
            attn += q + 2 * kv
        mlp = 3 * self.hidden * self.intermediate
        per_layer = attn + mlp + 2 * self.hidden
        embed = self.vocab * self.hidden * (1 if self.tied else 2)
        return embed + self.layers * per_layer + self.hidden


#: Public shapes (each model's config.json on the Hugging Face hub), for plans made before a checkpoint exists.
KNOWN_SHAPES = {
    "Qwen/Qwen2.5-0.5B-Instruct": ModelShape("Qwen2.5-0.5B", 896, 24, 4864, 14, 2, 151936, True),
    "Qwen/Qwen2.5-1.5B-Instruct": ModelShape("Qwen2.5-1.5B", 1536, 28, 8960, 12, 2, 151936, True),
    "Qwen/Qwen2.5-3B-Instruct": ModelShape("Qwen2.5-3B", 2048, 36, 11008, 16, 2, 151936, True),
    "Qwen/Qwen2.5-7B-Instruct": ModelShape("Qwen2.5-7B", 3584, 28, 18944, 28, 4, 152064, False),
    "Qwen/Qwen2.5-14B-Instruct": ModelShape("Qwen2.5-14B", 5120, 48, 13824, 40, 8, 152064, False),
}
for _name in list(KNOWN_SHAPES):  # the base models share the instruct models' shapes
    KNOWN_SHAPES[_name.removesuffix("-Instruct")] = KNOWN_SHAPES[_name]


def shape_from_config(path: str) -> ModelShape:
    """The shape in ``path/config.json`` (a Hugging Face checkpoint directory)."""
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        c = json.load(f)
    c = c.get("text_config", c)  # a multimodal config nests the language model's
    missing = [
        k
        for k in ("hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads", "vocab_size")
        if k not in c
    ]
    if missing:
        raise ValueError(f"{path}/config.json has no {', '.join(missing)}: not a decoder-only transformer config")
    return ModelShape(
        name=os.path.basename(os.path.normpath(path)),
        hidden=int(c["hidden_size"]),
        layers=int(c["num_hidden_layers"]),
        intermediate=int(c["intermediate_size"]),
        heads=int(c["num_attention_heads"]),
        kv_heads=int(c.get("num_key_value_heads") or c["num_attention_heads"]),
        vocab=int(c["vocab_size"]),
        tied=bool(c.get("tie_word_embeddings", False)),
        head_dim=c.get("head_dim"),
        qkv_bias=bool(c.get("attention_bias", c.get("model_type", "") in ("qwen2",))),
    )


def resolve_shape(model: str) -> ModelShape:
    """A shape from a checkpoint directory (its config.json) or a hub name in :data:`KNOWN_SHAPES`.

    Raises:
        ValueError: naming both ways to give one.
    """
    if os.path.isfile(os.path.join(model, "config.json")):
        return shape_from_config(model)
    if model in KNOWN_SHAPES:
        return KNOWN_SHAPES[model]
    raise ValueError(
        f"no model shape for {model!r}: give a checkpoint directory with a config.json or one of {sorted(KNOWN_SHAPES)}"
    )


def activation_bytes(shape: ModelShape, tokens: int, checkpointing: bool) -> float:
    """Activations held for the backward of one micro-batch of ``tokens`` tokens (bf16), see the module docstring."""
    layer = tokens * (16 * shape.hidden + 8 * shape.intermediate)
    if checkpointing:
        return shape.layers * 2 * tokens * shape.hidden + layer
    return shape.layers * layer


def logits_bytes(shape: ModelShape, tokens: int, flash_ce: bool) -> float:
    """The logits of ``tokens`` tokens and what the log-prob computation keeps beside them."""
    return tokens * shape.vocab * (4 if flash_ce else 6)


@dataclass
class Phase:
    """One phase on one GPU: named components in GiB, their sum against the card."""

    name: str
    parts: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def describe(self) -> str:
        return " + ".join(f"{k} {v:.1f}" for k, v in self.parts.items() if v > 0.05)


@dataclass(frozen=True)
class TrainLayout:
    """What the memory model reads of a run (the plan check fills it from the composed verl config)."""

    shape: ModelShape
    shards: int  # FSDP shards of the actor: every training GPU
    gpu_mem_gib: float
    master_bytes: int = 4  # fp32 master weights (verl's model_dtype default)
    update_tokens: int = 32768  # tokens of one update micro-batch (worst case)
    logprob_tokens: int = 32768  # tokens of one log-prob micro-batch (worst case)
    checkpointing: bool = True
    flash_ce: bool = True
    param_offload: bool = False
    optimizer_offload: bool = False
    vllm_util: float = 0.0  # 0: no colocated rollout (SFT)


def phases(layout: TrainLayout) -> list[Phase]:
    """The per-GPU memory of every phase of the run, in GiB (the table of the module docstring)."""
    s, n = layout.shape, layout.shards
    weights = 0.0 if layout.param_offload else layout.master_bytes * s.params / n / GIB
    moments = 0.0 if layout.optimizer_offload else 2 * layout.master_bytes * s.params / n / GIB
    full_state = 4 * layout.master_bytes * s.params / n / GIB
    act = activation_bytes(s, layout.update_tokens, layout.checkpointing) / GIB
    upd_logits = logits_bytes(s, layout.update_tokens, layout.flash_ce) / GIB
    lp_logits = logits_bytes(s, layout.logprob_tokens, layout.flash_ce) / GIB
    lp_act = activation_bytes(s, layout.logprob_tokens, checkpointing=True) / GIB / max(s.layers, 1)
    out = []
    if layout.vllm_util > 0:
        vllm = layout.vllm_util * layout.gpu_mem_gib
        out.append(Phase("rollout, step 1", {"actor weights": weights, "vLLM": vllm, "reserve": RESERVE_GIB}))
        out.append(
            Phase(
                "rollout, step 2+",
                {"actor weights": weights, "AdamW moments": moments, "vLLM": vllm, "reserve": RESERVE_GIB},
            )
        )
        asleep = VLLM_ASLEEP_GIB
        out.append(
            Phase(
                "old / ref log-probs",
                {
                    "actor weights": weights,
                    "AdamW moments": moments,
                    "logits": lp_logits,
                    "activations": lp_act,
                    "vLLM asleep": asleep,
                    "reserve": RESERVE_GIB,
                },
            )
        )
        name, extra = "actor update", {"vLLM asleep": asleep}
    else:
        name, extra = "SFT step", {}
    out.append(
        Phase(
            name,
            {"weights + grads + AdamW": full_state, "activations": act, "logits": upd_logits, **extra}
            | {"reserve": RESERVE_GIB},
        )
    )
    return out
