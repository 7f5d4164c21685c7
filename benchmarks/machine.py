"""One line that says which machine a benchmark table was measured on: CPU model, cores, cache sizes, torch threads.

from machine import describe; print(describe())
"""

from __future__ import annotations

import os
import platform
import subprocess


def _lscpu() -> dict[str, str]:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines()) if v}


def describe() -> str:
    import torch

    info = _lscpu()
    model = info.get("Model name") or platform.processor() or platform.machine()
    caches = ", ".join(
        f"{k.split()[0]} {info[k].split(' (')[0]}" for k in ("L1d cache", "L2 cache", "L3 cache") if k in info
    )
    return (
        f"machine: {model}, {os.cpu_count()} logical CPUs, {caches or 'cache sizes unknown'}; "
        f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads"
    )
