"""The fused CPU kernel of ``slca_grpo``: one read and one write of each row (``slca_verl/csrc/fused.cpp``).

``slca_grpo``'s torch path makes ~16 block operations where verl's ``grpo_vectorized`` makes two or three; this kernel
does the estimator's two passes in C++ instead: pass 1 reads each row once (segment rewards, presence, the start of
the summary run, checks), pass 2 writes each row once (the advantage of the token's segment, times the mask).

It is built with ``torch.utils.cpp_extension.load`` the first time it is needed (a C++ compiler and ninja are needed;
~30-60 s once per machine, cached by torch under ``~/.cache/torch_extensions``) and used for CPU tensors only (the
rewards as float32).
Whatever fails — no compiler, a build error, CUDA tensors — the estimator uses its torch path and says why once.
``+algorithm.slca.kernel=torch`` skips it.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Optional

logger = logging.getLogger(__name__)

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "fused.cpp")
_NAME = "slca_fused_cpu"
# -fassociative-math (with the flags it needs) lets the compiler vectorise the per-row sums. The instruction set is
# the one torch itself dispatches to on this CPU (AVX2 or AVX-512 builds get their own name, so a cache shared by
# machines of different kinds never hands one a binary it cannot run); never -march=native.
_CFLAGS = ["-O3", "-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math"]
_ISA_FLAGS = {"AVX2": ["-mavx2", "-mfma"], "AVX512": ["-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vl"]}


def _isa() -> str:
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    return capability if capability in _ISA_FLAGS else "DEFAULT"


_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


def load() -> Optional[Any]:
    """The built extension, or None (and one warning naming why) when it cannot be built here."""
    with _LOCK:
        if "module" in _STATE:
            return _STATE["module"]
        module = None
        try:
            from torch.utils.cpp_extension import load as build

            isa = _isa()
            module = build(
                name=f"{_NAME}_{isa.lower()}",
                sources=[_SOURCE],
                extra_cflags=_CFLAGS + _ISA_FLAGS.get(isa, []),
                verbose=False,
            )
        except Exception as e:  # no compiler / ninja, a build error: the torch path serves
            logger.warning(
                "slca_grpo: the fused CPU kernel could not be built (%s: %s); using the torch path",
                type(e).__name__,
                str(e).strip().splitlines()[-1][:300] if str(e).strip() else "",
            )
        _STATE["module"] = module
        return module


def applies(token_level_rewards, response_mask) -> bool:
    """Whether the kernel can serve these inputs: CPU tensors (the estimator has checked their shapes)."""
    return token_level_rewards.device.type == "cpu" and response_mask.device.type == "cpu"
