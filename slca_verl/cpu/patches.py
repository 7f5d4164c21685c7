"""The only changes slca-verl makes to verl's own module attributes, for the CPU platform, all in one place.

Each exists because verl 0.9.1 has no registry or setting for it; each is applied once, only on the CPU platform
(:func:`slca_verl.cpu.requested`), only on the verl version it was written against, and says so loudly when it
does not apply.

1. **gloo process group** — ``verl.utils.distributed.initialize_global_process_group_ray`` builds the backend string
   ``cpu:gloo,{device}:{backend}``, which torch rejects for device "cpu" (``cpu:gloo,cpu:gloo``). The wrapper passes
   plain ``gloo`` when no backend is given; the two modules that imported the function by name get the wrapper too.
   Its torchrun twin ``initialize_global_process_group`` (verl's SFT trainer) takes no backend argument, so it is
   replaced by the same steps with ``gloo``.
2. **unpinned CPU offload** — FSDP2's ``CPUOffloadPolicy(pin_memory=True)`` (the reference model's offload) pins
   host memory, which needs an accelerator. On the CPU it is built with ``pin_memory=False``.
"""

from __future__ import annotations

import functools
import importlib
import logging

logger = logging.getLogger(__name__)

#: verl versions these patches were written and tested against.
SUPPORTED_VERL = ("0.9.1",)

_MARK = "__slca_cpu_patch__"  # set on every wrapper: an attribute that carries it is already patched


def _gloo_process_group(original):
    @functools.wraps(original)
    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        return original(timeout_second=timeout_second, backend=backend or "gloo")

    setattr(initialize_global_process_group_ray, _MARK, True)
    return initialize_global_process_group_ray


def _gloo_torchrun_process_group(original):
    @functools.wraps(original)
    def initialize_global_process_group(timeout_second=36000):
        import datetime
        import os

        import torch.distributed

        torch.distributed.init_process_group(
            backend="gloo",
            timeout=datetime.timedelta(seconds=timeout_second),
            init_method=os.environ.get("DIST_INIT_METHOD", None),
        )
        return int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

    setattr(initialize_global_process_group, _MARK, True)
    return initialize_global_process_group


def _unpinned_offload_policy(original):
    @functools.wraps(original, updated=())
    def CPUOffloadPolicy(*args, pin_memory: bool = True, **kwargs):  # noqa: N802 (verl's name)
        return original(*args, pin_memory=False, **kwargs)

    setattr(CPUOffloadPolicy, _MARK, True)
    return CPUOffloadPolicy


# (patch name, module holding the definition, attribute, wrapper factory, modules that imported it by name)
PATCHES = (
    (
        "gloo_process_group",
        "verl.utils.distributed",
        "initialize_global_process_group_ray",
        _gloo_process_group,
        ("verl.workers.engine_workers", "verl.checkpoint_engine.base"),
    ),
    (
        "gloo_torchrun_process_group",
        "verl.utils.distributed",
        "initialize_global_process_group",
        _gloo_torchrun_process_group,
        (),
    ),
    (
        "unpinned_cpu_offload",
        "verl.workers.engine.fsdp.transformer_impl",
        "CPUOffloadPolicy",
        _unpinned_offload_policy,
        (),
    ),
)


def _apply_one(module_name: str, attr: str, factory, rebinds) -> None:
    module = importlib.import_module(module_name)
    others = [importlib.import_module(m) for m in rebinds]  # before the change, so they import verl's original
    original = getattr(module, attr)  # AttributeError: verl moved it -> reported by apply()
    if original is None:
        raise AttributeError(f"{module_name}.{attr} is None in this verl")
    if getattr(original, _MARK, False):
        return
    for other_name, other in zip(rebinds, others):
        if getattr(other, attr, None) is not original:
            raise AttributeError(f"{other_name}.{attr} is not verl's {module_name}.{attr}")
    wrapped = factory(original)
    for target in (module, *others):
        setattr(target, attr, wrapped)


def apply() -> dict[str, bool]:
    """Apply every patch once; returns ``{"patch:<name>": applied}``.

    A verl other than :data:`SUPPORTED_VERL`, or an attribute that moved, leaves that patch unapplied with a WARNING
    naming it (the run would then fail where verl needs it, with verl's own error).
    """
    import verl

    status = {}
    if verl.__version__ not in SUPPORTED_VERL:
        logger.warning(
            "slca-verl cpu: verl %s is not one of %s; the CPU patches (%s) are not applied",
            verl.__version__,
            SUPPORTED_VERL,
            ", ".join(p[0] for p in PATCHES),
        )
        return {f"patch:{p[0]}": False for p in PATCHES}
    for name, module_name, attr, factory, rebinds in PATCHES:
        try:
            _apply_one(module_name, attr, factory, rebinds)
            status[f"patch:{name}"] = True
        except Exception as e:
            status[f"patch:{name}"] = False
            logger.warning(
                "slca-verl cpu: patch %s (%s.%s) not applied: %s: %s", name, module_name, attr, type(e).__name__, e
            )
    return status
