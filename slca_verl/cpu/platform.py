"""The CPU platform for verl's ``PlatformRegistry``: ``VERL_PLATFORM=cpu``.

verl 0.9.1 ships cuda, npu and rocm platforms only and falls back to "nvidia" when none is detected, which then asks
for NCCL and CUDA memory calls. This platform answers for a machine without accelerators: device "cpu", gloo for
collectives, memory/seed/stream calls that are no-ops or zeros, no CUDA IPC.

Ray scheduling: verl's resource pools always ask for accelerator bundles (``use_gpu=True``). The platform names
"GPU" as its Ray resource, so a CPU run gives Ray *logical* GPUs (``+ray_kwargs.ray_init.num_gpus=N``): they are
only scheduling tokens; no CUDA is touched (the CPU build of torch has none).
"""

from __future__ import annotations

import contextlib
import os
import types
from typing import Any, Optional

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

from slca_verl.cpu import PLATFORM_NAME


def _zero(*args, **kwargs) -> int:
    return 0


def _none(*args, **kwargs) -> None:
    return None


def _mem_get_info(*args, **kwargs) -> tuple[int, int]:
    """(free, total) bytes of host memory, as ``torch.cuda.mem_get_info`` reports device memory."""
    try:
        import psutil

        vm = psutil.virtual_memory()
        return int(vm.available), int(vm.total)
    except Exception:
        return 0, 0


def _build_device_module() -> types.ModuleType:
    """A ``torch.<device>``-shaped namespace for the CPU: ``torch.cpu``'s own calls (streams, events, synchronize,
    device_count) plus the CUDA-only calls verl makes, as no-ops or zeros."""
    mod = types.ModuleType("slca_verl_cpu_device")
    for name in (
        "synchronize",
        "current_stream",
        "stream",
        "Stream",
        "Event",
        "is_available",
        "device_count",
        "current_device",
        "set_device",
        "StreamContext",
    ):
        if hasattr(torch.cpu, name):
            setattr(mod, name, getattr(torch.cpu, name))
    mod.is_available = lambda: True
    mod.device_count = lambda: 1
    mod.current_device = lambda: "cpu"
    mod.set_device = _none
    mod.synchronize = _none
    mod.empty_cache = _none
    mod.ipc_collect = _none
    mod.reset_peak_memory_stats = _none
    mod.set_per_process_memory_fraction = _none
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
        setattr(mod, name, _zero)
    mod.mem_get_info = _mem_get_info
    mod.get_device_name = lambda *a, **k: "cpu"
    mod.manual_seed = torch.manual_seed
    mod.manual_seed_all = torch.manual_seed
    mod.get_rng_state = lambda *a, **k: torch.get_rng_state()
    mod.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    return mod


DEVICE_MODULE = _build_device_module()


@PlatformRegistry.register(platform=PLATFORM_NAME)
class PlatformCPU(PlatformBase):
    """verl's platform interface answered for a host CPU (no accelerator)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check=False) -> bool:
        # never auto-detected: only VERL_PLATFORM=cpu selects it, so GPU machines are unaffected
        return False

    def current_device(self) -> str:
        # verl passes get_device_id() straight to .to(...) / device=...: "cpu" is what torch.cpu.current_device()
        # answers too, and the only value that keeps tensors on the host (an int means accelerator 0)
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: Optional[int] = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[Optional[int], Optional[int]]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets it for actors holding logical GPUs; verl reads it to number local ranks
        return "CUDA_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def get_device_uuid(self, device_id):
        return f"cpu-{os.getpid()}-{device_id}"

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
