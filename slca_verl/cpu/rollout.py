"""``hf_cpu``: a GPU-free rollout for verl's agent loop, registered in verl's rollout registries.

verl 0.9.1 can only generate through vLLM, SGLang or TensorRT-LLM servers (its ``hf_rollout.py`` is legacy and never
registered). This module adds the three pieces verl's server-mode rollout expects, for HF transformers on a CPU:

- :class:`HFRolloutServer` — one Ray actor per replica: token-in / token-out generation with a KV cache,
  temperature / top-p / top-k, stop tokens, per-token log-probs of the sampled tokens, and ``TokenOutput`` with
  ``extra_fields["global_steps"]`` (the weight version) like verl's own servers; sleep / wake / abort / KV-cache
  calls are no-ops;
- :class:`HFCPUReplica` — the ``RolloutReplica`` that launches it (``RolloutReplicaRegistry`` name "hf_cpu");
- :class:`HFCPUServerAdapter` — the ``BaseRollout`` living in each hybrid actor worker: at every weight sync it
  drains verl's ``(name, tensor)`` generator on every rank (its full-tensor gathers are collective) and, on the
  replica's first rank, sends a float32 state dict to the server through Ray's object store.

Select it with ``actor_rollout_ref.rollout.name=hf_cpu actor_rollout_ref.rollout.mode=async`` on the CPU platform
(``VERL_PLATFORM=cpu``; see :mod:`slca_verl.cpu`). Requests are served one at a time per replica: meant for tiny
models and tests, not throughput.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Optional

import ray
import torch
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry, TokenOutput

from slca_verl.cpu import ROLLOUT_NAME

logger = logging.getLogger(__name__)


def server_name(replica_rank: int, name_suffix: str = "") -> str:
    """The Ray actor name of replica ``replica_rank``'s server (the adapter finds it by this name)."""
    return f"{ROLLOUT_NAME}_server_{replica_rank}{name_suffix}"


def _world_size(config) -> int:
    return config.tensor_model_parallel_size * config.data_parallel_size * config.pipeline_model_parallel_size


def sample_next(
    logits: torch.Tensor, temperature: float, top_p: float, top_k: int, generator: Optional[torch.Generator]
) -> int:
    """One token from ``logits`` (V,): greedy at temperature <= 0, else top-k then nucleus (top-p) sampling."""
    if temperature <= 0:
        return int(torch.argmax(logits))
    scaled = logits.float() / temperature
    if top_k is not None and 0 < top_k < scaled.numel():
        kth = torch.topk(scaled, top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if top_p is not None and 0 < top_p < 1:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < top_p  # always keeps the most likely token
        probs = torch.zeros_like(probs).scatter_(0, order[keep], sorted_p[keep])
    return int(torch.multinomial(probs, 1, generator=generator))


def _model_path(model_config) -> str:
    """The local model directory of verl's model config (an HFModelConfig, or the DictConfig replicas receive)."""
    from verl.utils.fs import copy_to_local

    get = model_config.get if hasattr(model_config, "get") else lambda k, d=None: getattr(model_config, k, d)
    local = get("local_path", None)
    return local or copy_to_local(get("path"))


class HFRolloutServer:
    """Token-in / token-out generation with an HF causal LM on the CPU (one Ray actor per replica)."""

    def __init__(self, config, model_config, replica_rank: int = 0, seed: int = 0):
        from transformers import AutoModelForCausalLM

        self.config = config
        self.replica_rank = replica_rank
        path = _model_path(model_config)
        self.model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32, attn_implementation="sdpa")
        self.model.eval()
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])
        self.generator = torch.Generator().manual_seed(int(seed) + replica_rank)
        self.global_steps = 0  # verl reads it as an int (the weight version); set by every weight sync
        self.weight_syncs = 0
        self.requests = 0
        self.tokens = 0
        self._lock: asyncio.Lock | None = None
        logger.info(
            "%s: loaded %s (%d parameters)",
            server_name(replica_rank),
            path,
            sum(p.numel() for p in self.model.parameters()),
        )

    def _budget(self, prompt_len: int, sampling_params: dict) -> int:
        cfg = self.config
        room = (cfg.max_model_len or cfg.prompt_length + cfg.response_length) - prompt_len
        asked = sampling_params.get("max_new_tokens", sampling_params.get("max_tokens"))
        if asked is None:  # as verl's servers: the response budget, capped by what is left of prompt + response
            asked = min(cfg.response_length, cfg.prompt_length + cfg.response_length - prompt_len)
        return max(0, min(int(asked), room))

    @torch.no_grad()
    def _generate(self, prompt_ids: list[int], sampling_params: dict) -> tuple[list[int], list[float], str]:
        budget = self._budget(len(prompt_ids), sampling_params)
        if budget == 0:
            return [], [], "completed"
        temperature = float(sampling_params.get("temperature", 1.0))
        top_p = float(sampling_params.get("top_p", 1.0))
        top_k = int(sampling_params.get("top_k", -1) or -1)
        stop = set(sampling_params.get("stop_token_ids") or [])
        if not sampling_params.get("ignore_eos", False):
            stop |= self.eos_ids
        out = self.model(input_ids=torch.tensor([prompt_ids], dtype=torch.long), use_cache=True)
        tokens, log_probs = [], []
        for _ in range(budget):
            logits = out.logits[0, -1]
            token = sample_next(logits, temperature, top_p, top_k, self.generator)
            tokens.append(token)
            log_probs.append(float(torch.log_softmax(logits.float(), dim=-1)[token]))
            if token in stop or len(tokens) == budget:
                break
            out = self.model(input_ids=torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)
        return tokens, log_probs, "completed"

    async def generate(
        self,
        request_id: str = None,
        prompt_ids: list[int] = None,
        sampling_params: dict = None,
        image_data: Optional[list[Any]] = None,
        video_data: Optional[list[Any]] = None,
        **kwargs,
    ) -> TokenOutput:
        """verl's server ``generate`` contract (see ``LLMServerClient.generate``): token ids in, ``TokenOutput`` out."""
        if image_data or video_data:
            raise ValueError(f"{ROLLOUT_NAME}: multi-modal inputs are not supported by the CPU rollout")
        if self._lock is None:
            self._lock = asyncio.Lock()
        params = dict(sampling_params or {})
        async with self._lock:
            tokens, log_probs, reason = await asyncio.to_thread(self._generate, list(prompt_ids), params)
        self.requests += 1
        self.tokens += len(tokens)
        return TokenOutput(
            token_ids=tokens,
            log_probs=log_probs if params.get("logprobs") else None,
            stop_reason=reason,
            num_preempted=0,
            extra_fields={"global_steps": self.global_steps},
        )

    async def load_weights(self, state: dict[str, torch.Tensor], global_steps: Optional[int] = None) -> dict:
        """Replace the model's weights with the actor's; returns what was loaded (and what did not match)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # never between two tokens of a request
            result = self.model.load_state_dict(state, strict=False)
        tied = {"lm_head.weight"} if getattr(self.model.config, "tie_word_embeddings", False) else set()
        missing = [k for k in result.missing_keys if k not in tied]
        self.weight_syncs += 1
        if global_steps is not None:
            self.global_steps = global_steps
        report = {
            "tensors": len(state),
            "missing": missing,
            "unexpected": list(result.unexpected_keys),
            "global_steps": self.global_steps,
            "weight_syncs": self.weight_syncs,
        }
        level = logging.WARNING if missing or result.unexpected_keys else logging.INFO
        logger.log(level, "%s: weights loaded: %s", server_name(self.replica_rank), report)
        return report

    async def stats(self) -> dict:
        """Counters for tests and logs: requests, generated tokens, weight syncs, weight version."""
        return {
            "requests": self.requests,
            "tokens": self.tokens,
            "weight_syncs": self.weight_syncs,
            "global_steps": self.global_steps,
        }

    async def set_global_steps(self, global_steps: int):
        self.global_steps = global_steps

    # the lifecycle calls verl makes on every server; nothing to free or pause on a CPU
    async def wake_up(self):
        return None

    async def sleep(self):
        return None

    async def abort_all_requests(self, reject_request: bool = False):
        return None

    async def resume_generation(self):
        return None

    async def clear_kv_cache(self):
        return None

    async def release_kv_cache(self):
        return None

    async def resume_kv_cache(self):
        return None

    async def start_profile(self, **kwargs):
        return None

    async def stop_profile(self):
        return None


class HFCPUReplica(RolloutReplica):
    """Launches one :class:`HFRolloutServer` per replica (on the node of the replica's first worker)."""

    def rollout_worker_use_gpu(self) -> bool:
        return True  # logical GPUs on the CPU platform: only scheduling tokens

    async def launch_servers(self):
        if self.world_size != 1:
            raise ValueError(
                f"{ROLLOUT_NAME}: one process per replica; set actor_rollout_ref.rollout.tensor_model_parallel_size=1 "
                f"(and data/pipeline parallel size 1), got a replica world size of {self.world_size}"
            )
        name = server_name(self.replica_rank, self.name_suffix)
        options = {"name": name, "num_cpus": 0, "max_concurrency": self.max_concurrency}
        if self.workers:
            node_id = await self.workers[0].__ray_call__.remote(lambda w: ray.get_runtime_context().get_node_id())
            options["scheduling_strategy"] = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                node_id=node_id, soft=False
            )
        server = (
            ray.remote(HFRolloutServer)
            .options(**options)
            .remote(
                config=self.config,
                model_config=self.model_config,
                replica_rank=self.replica_rank,
                seed=getattr(self.config, "seed", 0) or 0,
            )
        )
        await server.stats.remote()  # waits for the model to load; raises here if it cannot
        self.servers = [server]
        self._server_handle = server
        self._server_address = name


class HFCPUServerAdapter(BaseRollout):
    """The rollout inside each hybrid actor worker: syncs the actor's weights into its replica's server."""

    def __init__(self, config, model_config, device_mesh, replica_rank: int = -1, **kwargs):
        super().__init__(config, model_config, device_mesh)
        world = _world_size(self.config)
        rank = int(os.environ.get("RANK", 0))
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % world
        self._server = None

    def _server_handle(self):
        if self._server is None:
            self._server = ray.get_actor(server_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]):
        return None

    async def release(self):
        return None

    async def update_weights(self, weights, wire_format: str = "named_tensors", **kwargs):
        if wire_format != "named_tensors":
            raise NotImplementedError(f"{ROLLOUT_NAME}: weight sync supports wire_format=named_tensors only")
        if kwargs.get("peft_config") is not None:
            raise NotImplementedError(f"{ROLLOUT_NAME}: LoRA adapters are not supported; set model.lora.merge=true")
        leader = self.rollout_rank == 0
        state = {}
        for name, tensor in weights:  # every rank drains: the gathers inside the generator are collective
            if leader:
                state[name] = tensor.detach().to(device="cpu", dtype=torch.float32).clone()
        if leader:
            await self._server_handle().load_weights.remote(state, kwargs.get("global_steps"))


def _named_failure(name: str, loader):
    """verl's loader for a GPU rollout, failing on the CPU platform with the override to change rather than an error
    from deep inside vLLM / SGLang (an installed CPU build still loads as before)."""

    def load():
        try:
            return loader()
        except Exception as e:  # ImportError, or verl's own "vllm version None not supported"
            raise ValueError(
                f"actor_rollout_ref.rollout.name={name} cannot run on verl's CPU platform ({type(e).__name__}: {e}); "
                f"set actor_rollout_ref.rollout.name={ROLLOUT_NAME}"
            ) from e

    load.__slca_cpu_wrapped__ = True
    return load


def _register() -> None:
    registry = RolloutReplicaRegistry._registry
    if ROLLOUT_NAME not in registry:
        RolloutReplicaRegistry.register(ROLLOUT_NAME, lambda: HFCPUReplica)
    for name, loader in list(registry.items()):
        if name != ROLLOUT_NAME and not getattr(loader, "__slca_cpu_wrapped__", False):
            RolloutReplicaRegistry.register(name, _named_failure(name, loader))
    rollout_base._ROLLOUT_REGISTRY.setdefault((ROLLOUT_NAME, "async"), f"{__name__}.HFCPUServerAdapter")


_register()
