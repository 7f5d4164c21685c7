"""The plan check: will this composed verl config run on this cluster, in the precision it means to, with the services
it names? Read before verl starts (a recipe's ``DRY_RUN=1``, ``scripts/check_gpu_env.py``); stops naming the setting.

    python -m slca_verl.plan.check --config-name ppo_trainer --gpus-per-node 8 --nnodes 4 --gpu-mem-gib 79.6 \
        --model Qwen/Qwen2.5-7B-Instruct -- <the recipe's hydra overrides>

What it checks, for ``ppo_trainer`` (GRPO-family runs) and ``sft_trainer_engine`` (verl's SFT trainer):

- **precision**: every engine that trains keeps fp32 master weights and optimizer state (``model_dtype``), unless
  ``allow_bf16_master`` (:mod:`slca_verl.plan.precision`); a CPU run computes in fp32;
- **memory**: each phase's per-GPU memory (:mod:`slca_verl.plan.memory`) fits the card, with the setting to change
  where one does not;
- **layout**: the cluster has the GPUs the config asks for (``trainer.nnodes`` x ``trainer.n_gpus_per_node``), and
  the rollout's tensor-parallel size divides a node;
- **services** (PPO runs with an LLM judge or simulator): every URL is sent the run's key file, the client's timeout
  covers the queue an assumed server throughput makes of one step's requests (warnings: the throughputs are
  assumptions the user can set).
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass, field
from typing import Any, Sequence

from slca_verl.plan.memory import GIB, TrainLayout, phases, resolve_shape
from slca_verl.plan.precision import engine_precision

logger = logging.getLogger(__name__)

DEFAULT_GPU_MEM_GIB = 79.6  # an 80 GB H100 / A100 as torch reports it (85.5e9 bytes)


@dataclass
class Cluster:
    """What the run will have: nodes, GPUs per node, GiB per GPU."""

    nnodes: int
    gpus_per_node: int
    gpu_mem_gib: float = DEFAULT_GPU_MEM_GIB


@dataclass
class Finding:
    """A problem the plan check found: ``stop`` ones fail the check, the others are warnings."""

    area: str
    message: str
    fix: str
    stop: bool = True

    def line(self) -> str:
        return f"{'STOP' if self.stop else 'WARN'} {self.area}: {self.message}. Fix: {self.fix}"


@dataclass
class Plan:
    """The plan check's result: a per-GPU memory table and the findings."""

    config_name: str
    cluster: Cluster
    model: str
    precision: dict[str, tuple[str, str]] = field(default_factory=dict)  # engine key -> (master, compute)
    phases: list = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.stop for f in self.findings)

    def table(self) -> str:
        """Markdown: precision per engine, then GiB per GPU per phase against the card."""
        lines = [
            f"plan for {self.config_name} of {self.model} on {self.cluster.nnodes} x {self.cluster.gpus_per_node} "
            f"GPUs of {self.cluster.gpu_mem_gib:.1f} GiB",
            "",
            "| engine | master weights + optimizer | compute |",
            "|---|---|---|",
        ]
        lines += [f"| `{k}` | {m} | {c} |" for k, (m, c) in self.precision.items()]
        if not self.phases:
            lines += ["", "no per-GPU memory plan: a CPU run (host memory)"]
        else:
            lines += ["", "| phase (one GPU) | GiB | fits | what it holds (GiB) |", "|---|---:|---|---|"]
        for p in self.phases:
            fits = "yes" if p.total <= self.cluster.gpu_mem_gib else "**NO**"
            lines.append(f"| {p.name} | {p.total:.1f} | {fits} | {p.describe()} |")
        lines.append("")
        lines += [f.line() for f in self.findings] or ["OK: nothing to stop for"]
        return "\n".join(lines)


def _sel(cfg: Any, dotted: str, default: Any = None) -> Any:
    from omegaconf import OmegaConf

    value = OmegaConf.select(cfg, dotted, default=default)
    return default if value is None else value


def _tokens(section: Any, dynamic_key: str, cap_key: str, rows_key: str, seq_len: int) -> int:
    """Tokens of one micro-batch at worst: the dynamic-batch cap, else micro-batch rows x (prompt + response)."""
    if bool(_sel(section, dynamic_key, False)):
        return int(_sel(section, cap_key, 16384))
    rows = _sel(section, rows_key, None)
    return int(rows or 1) * seq_len


def check_precision(plan: Plan, engines: dict[str, Any], device: str, allow_bf16_master: bool) -> None:
    for key, engine_cfg in engines.items():
        p = engine_precision(engine_cfg)
        plan.precision[key] = (p.master, p.compute)
        if not p.fp32_master and not allow_bf16_master:
            plan.findings.append(
                Finding(
                    "precision",
                    f"{key}.model_dtype={p.master}: weights and AdamW state in {p.master} with no fp32 master copy "
                    "(an update below half a bf16 step of a weight rounds away; at lr 5e-6 most do)",
                    f"{key}.model_dtype=fp32 (verl's default; compute stays in mixed_precision.param_dtype={p.compute})"
                    " or, to mean it, allow_bf16_master",
                )
            )
        if device == "cpu" and p.compute != "fp32":
            plan.findings.append(
                Finding(
                    "precision",
                    f"{key} computes in {p.compute} on a CPU (a naive matmul kernel without AVX512-BF16 / AMX)",
                    f"+{key}.mixed_precision.param_dtype=fp32",
                )
            )


def _setting(keys: dict[str, tuple[str, str]], name: str, value: str) -> str:
    """``key=value`` with the recipe variable that sets it, e.g. ``...optimizer_offload=true (OPTIMIZER_OFFLOAD)``."""
    key, var = keys.get(name, ("", ""))
    return f"{key}={value}" + (f" ({var})" if var else "")


def check_memory(plan: Plan, layout: TrainLayout, keys: dict[str, tuple[str, str]]) -> None:
    """A stop for every phase over the card, with the settings that bring it under (``keys``: setting name ->
    (hydra key, recipe variable))."""
    plan.phases = phases(layout)
    for p in plan.phases:
        if p.total <= layout.gpu_mem_gib:
            continue
        over = p.total - layout.gpu_mem_gib
        if p.name.startswith("rollout"):
            util = max(layout.vllm_util - over / layout.gpu_mem_gib - 0.01, 0)
            fix = (
                f"{_setting(keys, 'optimizer_offload', 'true')} (AdamW moments to the host between steps: "
                f"-{p.parts.get('AdamW moments', 0):.1f} GiB), or {_setting(keys, 'util', f'{util:.2f}')} or lower, "
                "or more GPUs"
            )
        else:
            name = "logprob_tokens" if "log-probs" in p.name else "update_tokens"
            key, var = keys.get(name, ("", ""))
            held = p.parts.get("activations", 0) + p.parts.get("logits", 0)
            fix = (
                f"a smaller {key}" + (f" ({var})" if var else "") + f" (activations + logits {held:.1f} GiB), "
                "gradient checkpointing, or more GPUs (the FSDP shards of weights, gradients and AdamW)"
            )
        plan.findings.append(
            Finding("memory", f"{p.name} needs {p.total:.1f} GiB per GPU of {layout.gpu_mem_gib:.1f}", fix)
        )


def check_layout(plan: Plan, wanted_nodes: int, wanted_per_node: int, tp: int, have: Cluster | None) -> None:
    if have is not None and (have.nnodes < wanted_nodes or have.gpus_per_node < wanted_per_node):
        plan.findings.append(
            Finding(
                "layout",
                f"the config asks for {wanted_nodes} node(s) x {wanted_per_node} GPUs "
                f"({wanted_nodes * wanted_per_node}); the cluster has {have.nnodes} x {have.gpus_per_node}",
                f"NNODES={have.nnodes} N_GPUS_PER_NODE={have.gpus_per_node} (trainer.nnodes, "
                "trainer.n_gpus_per_node), or join the missing nodes (ray start --address ...)",
            )
        )
    if tp > 1 and wanted_per_node % tp:
        plan.findings.append(
            Finding(
                "layout",
                f"rollout tensor_model_parallel_size={tp} does not divide {wanted_per_node} GPUs per node",
                "actor_rollout_ref.rollout.tensor_model_parallel_size dividing trainer.n_gpus_per_node",
            )
        )


@dataclass
class ServiceLoad:
    """What one training step asks of a served model, and what one replica is ASSUMED to serve (the user's numbers)."""

    name: str  # "simulator" | "judge"
    urls: list[str]
    requests_per_step: int
    timeout_s: float
    key_file: str | None
    prompt_tokens: int = 3000
    output_tokens: int = 500
    prefill_toks_per_s: float = 20000.0
    decode_toks_per_s: float = 4000.0

    @property
    def step_queue_s(self) -> float:
        """Seconds the replicas need for one step's requests: the last one waits about that long."""
        per = self.prompt_tokens / self.prefill_toks_per_s + self.output_tokens / self.decode_toks_per_s
        return self.requests_per_step * per / max(len(self.urls), 1)


def check_services(plan: Plan, loads: Sequence[ServiceLoad]) -> None:
    for s in loads:
        if not s.urls:
            continue
        if not s.key_file:
            plan.findings.append(
                Finding(
                    "services",
                    f"the {s.name} at {', '.join(s.urls)} is sent no API key (recipes/serve_*.sh servers demand one)",
                    "API_KEY_FILE=<the servers' key file>, one file for every server (docs/gpu.md, \"4. The simulator "
                    'and the judge")',
                    stop=False,
                )
            )
        if s.step_queue_s > s.timeout_s:
            replicas = int(-(-s.step_queue_s // s.timeout_s)) * max(len(s.urls), 1)
            plan.findings.append(
                Finding(
                    "services",
                    f"{s.name}: {s.requests_per_step} requests a step need ~{s.step_queue_s:.0f} s on {len(s.urls)} "
                    f"replica(s) at the ASSUMED {s.prompt_tokens}+{s.output_tokens} tokens a request and "
                    f"{s.prefill_toks_per_s:.0f}/{s.decode_toks_per_s:.0f} prefill/decode tokens/s a replica, more "
                    f"than its {s.timeout_s:.0f} s client timeout: the last ones time out",
                    f">= {replicas} replicas, a longer timeout, or measured throughputs",
                    stop=False,
                )
            )


def plan_ppo(
    cfg: Any,
    model: str,
    cluster: Cluster | None = None,
    gpu_mem_gib: float | None = None,
    allow_bf16_master: bool = False,
    services: Sequence[ServiceLoad] = (),
) -> Plan:
    """The plan of a ``ppo_trainer`` config (actor, reference and rollout colocated on every training GPU)."""
    nnodes, per_node = int(_sel(cfg, "trainer.nnodes", 1)), int(_sel(cfg, "trainer.n_gpus_per_node", 8))
    mem = gpu_mem_gib or (cluster.gpu_mem_gib if cluster else DEFAULT_GPU_MEM_GIB)
    plan = Plan("ppo_trainer", Cluster(nnodes, per_node, mem), model)
    device = str(_sel(cfg, "trainer.device", "cuda"))
    arr = cfg.actor_rollout_ref
    actor, ref, rollout = arr.actor, arr.ref, arr.rollout
    engines = {"actor_rollout_ref.actor.fsdp_config": actor.fsdp_config}
    check_precision(plan, engines, device, allow_bf16_master)
    plan.precision["actor_rollout_ref.ref.fsdp_config"] = tuple(
        getattr(engine_precision(ref.fsdp_config, forward_only=True), k) for k in ("master", "compute")
    )
    seq = int(_sel(cfg, "data.max_prompt_length", 1024)) + int(_sel(cfg, "data.max_response_length", 1024))
    update_tokens = _tokens(actor, "use_dynamic_bsz", "ppo_max_token_len_per_gpu", "ppo_micro_batch_size_per_gpu", seq)
    lp_keys = ("log_prob_use_dynamic_bsz", "log_prob_max_token_len_per_gpu", "log_prob_micro_batch_size_per_gpu")
    lp_tokens = max(_tokens(engine, *lp_keys, seq) for engine in (rollout, ref))  # old (rollout) and ref log-probs
    attn = str(_sel(arr, "model.override_config.attn_implementation", "flash_attention_2"))
    colocated = str(_sel(rollout, "name", "vllm")) in ("vllm", "sglang", "trtllm")
    tp = int(_sel(rollout, "tensor_model_parallel_size", 1))
    check_layout(plan, nnodes, per_node, tp, cluster)
    check_services(plan, services)
    if device == "cpu":  # a rehearsal: host memory, no card to fit
        return plan
    layout = TrainLayout(
        shape=resolve_shape(model),
        shards=nnodes * per_node,
        gpu_mem_gib=mem,
        master_bytes=4 if plan.precision["actor_rollout_ref.actor.fsdp_config"][0] == "fp32" else 2,
        update_tokens=update_tokens,
        logprob_tokens=lp_tokens,
        checkpointing=bool(_sel(arr, "model.enable_gradient_checkpointing", False)),
        flash_ce=attn == "flash_attention_2" and bool(_sel(arr, "model.use_remove_padding", False)),
        param_offload=bool(_sel(actor, "fsdp_config.param_offload", False)),
        optimizer_offload=bool(_sel(actor, "fsdp_config.optimizer_offload", False)),
        vllm_util=float(_sel(rollout, "gpu_memory_utilization", 0.5)) if colocated else 0.0,
    )
    check_memory(
        plan,
        layout,
        {
            "optimizer_offload": ("actor_rollout_ref.actor.fsdp_config.optimizer_offload", "OPTIMIZER_OFFLOAD"),
            "util": ("actor_rollout_ref.rollout.gpu_memory_utilization", "GPU_MEMORY_UTILIZATION"),
            "logprob_tokens": ("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu", "MAX_TOKENS_PER_GPU"),
            "update_tokens": ("actor_rollout_ref.actor.ppo_max_token_len_per_gpu", "MAX_TOKENS_PER_GPU"),
        },
    )
    return plan


def plan_sft(
    cfg: Any,
    model: str,
    cluster: Cluster | None = None,
    gpu_mem_gib: float | None = None,
    allow_bf16_master: bool = False,
) -> Plan:
    """The plan of a ``sft_trainer_engine`` config (verl's SFT trainer: FSDP over every GPU, no rollout)."""
    nnodes, per_node = int(_sel(cfg, "trainer.nnodes", 1)), int(_sel(cfg, "trainer.n_gpus_per_node", 8))
    mem = gpu_mem_gib or (cluster.gpu_mem_gib if cluster else DEFAULT_GPU_MEM_GIB)
    plan = Plan("sft_trainer_engine", Cluster(nnodes, per_node, mem), model)
    device = str(_sel(cfg, "trainer.device", "cuda"))
    check_precision(plan, {"engine": cfg.engine}, device, allow_bf16_master)
    if bool(_sel(cfg, "data.use_dynamic_bsz", True)):
        tokens = int(_sel(cfg, "data.max_token_len_per_gpu", 8192))
    else:
        tokens = int(_sel(cfg, "data.micro_batch_size_per_gpu", 1)) * int(_sel(cfg, "data.max_length", 1024))
    attn = str(_sel(cfg, "model.override_config.attn_implementation", "flash_attention_2"))
    check_layout(plan, nnodes, per_node, 1, cluster)
    if device == "cpu":
        return plan
    layout = TrainLayout(
        shape=resolve_shape(model),
        shards=nnodes * per_node,
        gpu_mem_gib=mem,
        master_bytes=4 if plan.precision["engine"][0] == "fp32" else 2,
        update_tokens=tokens,
        logprob_tokens=tokens,
        checkpointing=bool(_sel(cfg, "model.enable_gradient_checkpointing", False)),
        flash_ce=attn == "flash_attention_2" and bool(_sel(cfg, "model.use_remove_padding", False)),
    )
    check_memory(
        plan,
        layout,
        {"update_tokens": ("data.max_token_len_per_gpu", "MAX_TOKEN_LEN_PER_GPU")},
    )
    return plan


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="python -m slca_verl.plan.check", description=__doc__.split("\n\n")[0])
    p.add_argument("--config-name", default="ppo_trainer", choices=["ppo_trainer", "sft_trainer_engine"])
    p.add_argument("--model", required=True, help="checkpoint directory (its config.json) or a hub name")
    p.add_argument("--gpu-mem-gib", type=float, default=DEFAULT_GPU_MEM_GIB, help="memory of one GPU")
    p.add_argument("--nnodes", type=int, default=None, help="nodes the cluster has (default: what the config asks)")
    p.add_argument("--gpus-per-node", type=int, default=None)
    p.add_argument("--allow-bf16-master", action="store_true", help="train bf16 weights on purpose")
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, overrides = argv[:i], argv[i + 1 :]
    return p.parse_args(argv), overrides


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    args, overrides = parse_args(argv)
    from slca_verl.plan.compose import compose

    cfg = compose(args.config_name, overrides)
    cluster = None
    if args.nnodes is not None or args.gpus_per_node is not None:
        cluster = Cluster(
            args.nnodes or int(_sel(cfg, "trainer.nnodes", 1)),
            args.gpus_per_node or int(_sel(cfg, "trainer.n_gpus_per_node", 8)),
            args.gpu_mem_gib,
        )
    fn = plan_ppo if args.config_name == "ppo_trainer" else plan_sft
    plan = fn(cfg, args.model, cluster=cluster, gpu_mem_gib=args.gpu_mem_gib, allow_bf16_master=args.allow_bf16_master)
    sys.stdout.write(plan.table() + "\n")
    return 0 if plan.ok else 1


__all__ = ["GIB", "Cluster", "Finding", "Plan", "ServiceLoad", "plan_ppo", "plan_sft", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
