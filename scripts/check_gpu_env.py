#!/usr/bin/env python3
"""Preflight for GPU training: is everything `bash recipes/run_qwen7b_slca.sh` needs in place?

    python scripts/check_gpu_env.py                          # the recipe's defaults (N_GPUS_PER_NODE, URLs, MODEL_PATH)
    python scripts/check_gpu_env.py --gpus-per-node 8 --model-path /ckpt/huggingface \
        --sgls-urls http://10.0.0.5:8000/v1,http://10.0.0.6:8000/v1 --judge-urls http://10.0.0.7:8016/v1
    python scripts/check_gpu_env.py --no-servers             # the software only

One line per check, ``OK`` or ``MISSING`` (with the fix on the next line; ``SKIP`` when a check does not apply).
Exit status 0 only when nothing is missing, else 1. Defaults follow the recipe: ``N_GPUS_PER_NODE`` (8),
``SGLS_URLS`` / ``JUDGE_URLS``, else the files ``serve_sgls.sh`` / ``serve_judge.sh`` write under ``SERVICES_DIR``
(``~/.cache/slca_verl/services``), else http://127.0.0.1:8000/v1 and :8016/v1; ``SGLS_MODEL`` / ``JUDGE_MODEL``;
``MODEL_PATH``, else the newest SFT checkpoint. Heavy modules (torch, flash_attn, vllm, verl) are imported only by
the check that needs them.
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import json
import os
import re
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERL_VERSION = "0.9.1"
# what verl 0.9.1's `vllm` / `fsdp` extras pin; read from verl's own metadata when it is installed
FALLBACK_PINS = {"torch": "2.11.0", "vllm": "0.24.0", "flash-attn": "2.8.3"}
DEFAULT_SGLS_MODEL = "Qwen3-235B-A22B-Instruct-2507"  # recipes/run_qwen7b_slca.sh
DEFAULT_JUDGE_MODEL = "gpt-oss-120b"
FLASH_ATTN_FIX = (
    "install it after torch, with nvcc of torch's CUDA version on PATH: pip install wheel packaging psutil ninja && "
    "FLASH_ATTENTION_FORCE_BUILD=TRUE FLASH_ATTN_CUDA_ARCHS=90 pip install --no-build-isolation flash-attn=={v}"
)
GPU_EXTRA_FIX = 'pip install -e ".[gpu]" in a fresh venv (README, "GPU install")'


@dataclass
class Check:
    name: str
    ok: bool | None  # None: skipped
    detail: str
    fix: str = ""

    def render(self) -> str:
        status = "SKIP" if self.ok is None else ("OK" if self.ok else "MISSING")
        line = f"{status:<8} {self.name}: {self.detail}"
        return line + (f"\n{'':<8} fix: {self.fix}" if self.ok is False and self.fix else "")


def base_version(version: str) -> str:
    """'2.11.0+cu130' -> '2.11.0'."""
    return version.split("+", 1)[0]


def pinned_versions() -> dict[str, str]:
    """torch / vllm / flash-attn as verl's installed metadata pins them (any extra), else verl 0.9.1's pins."""
    pins = dict(FALLBACK_PINS)
    try:
        requires = importlib.metadata.requires("verl") or []
    except importlib.metadata.PackageNotFoundError:
        return pins
    for req in requires:
        m = re.match(r"\s*(torch|vllm|flash-attn)\s*==\s*([\w.]+)", req)
        if m:
            pins[m.group(1)] = m.group(2)
    return pins


def dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


# ---------------------------------------------------------------------------------------------------- software


def check_torch(expected: str):
    """torch importable, a CUDA build, CUDA usable, at the version vLLM pins. Returns (Check, torch module or None)."""
    name = "torch with CUDA"
    try:
        import torch
    except Exception as e:  # ImportError, or a broken CUDA library load
        return Check(name, False, f"torch does not import ({type(e).__name__}: {e})", GPU_EXTRA_FIX), None
    version, cuda = torch.__version__, torch.version.cuda
    if cuda is None:
        return Check(name, False, f"torch {version} is a CPU build (torch.version.cuda is None)",
                     f"{GPU_EXTRA_FIX}, which brings torch=={expected} (the CUDA build on PyPI)"), torch  # fmt: skip
    if not torch.cuda.is_available():
        return Check(name, False, f"torch {version} (CUDA {cuda}) sees no GPU (torch.cuda.is_available() is False)",
                     f"check nvidia-smi and CUDA_VISIBLE_DEVICES; CUDA {cuda} needs an NVIDIA driver that supports it "
                     "(CUDA 13 needs driver 580 or newer)"), torch  # fmt: skip
    if base_version(version) != expected:
        return Check(name, False, f"torch {version} (CUDA {cuda}); vLLM and verl[vllm]=={VERL_VERSION} pin {expected}",
                     GPU_EXTRA_FIX), torch  # fmt: skip
    return Check(name, True, f"torch {version}, CUDA {cuda}"), torch


def check_gpu_count(torch_module, wanted: int) -> Check:
    name = "GPUs per node"
    found = 0
    if torch_module is not None and torch_module.version.cuda is not None and torch_module.cuda.is_available():
        found = torch_module.cuda.device_count()
    if found >= wanted:
        return Check(name, True, f"{found} visible, the run uses N_GPUS_PER_NODE={wanted}")
    return Check(name, False, f"{found} visible, the run uses N_GPUS_PER_NODE={wanted}",
                 f"run with N_GPUS_PER_NODE={found} (and NNODES to match the budget), or make more GPUs visible"
                 if found else "no usable CUDA GPU: see the torch line")  # fmt: skip


def check_flash_attn(expected: str) -> Check:
    name = "flash_attn"
    try:
        import flash_attn
    except Exception as e:  # not installed, or built against another torch / CUDA
        return Check(name, False, f"does not import ({type(e).__name__}: {e})", FLASH_ATTN_FIX.format(v=expected))
    version = getattr(flash_attn, "__version__", "?")
    if base_version(version) != expected:
        return Check(name, False, f"flash_attn {version}; verl[fsdp]=={VERL_VERSION} pins {expected}",
                     FLASH_ATTN_FIX.format(v=expected))  # fmt: skip
    return Check(name, True, f"flash_attn {version}")


def check_vllm(expected: str) -> Check:
    name = "vllm"
    version = dist_version("vllm")
    if version is None:
        return Check(name, False, "not installed", f"{GPU_EXTRA_FIX}, which brings vllm=={expected}")
    if base_version(version) != expected:
        return Check(name, False, f"vllm {version}; verl[vllm]=={VERL_VERSION} pins {expected}", GPU_EXTRA_FIX)
    try:
        import vllm  # noqa: F401
    except Exception as e:
        return Check(name, False, f"vllm {version} does not import ({type(e).__name__}: {e})", GPU_EXTRA_FIX)
    return Check(name, True, f"vllm {version}")


def check_verl() -> Check:
    version = dist_version("verl")
    if version == VERL_VERSION:
        return Check("verl", True, f"verl {version}")
    found = "not installed" if version is None else f"verl {version}"
    return Check("verl", False, f"{found}; slca-verl is built for verl=={VERL_VERSION}", GPU_EXTRA_FIX)


def check_plugin() -> Check:
    """``import verl`` loads the ``verl.plugins`` entry points; slca-verl's names must then be in verl's registries."""
    name = "slca_verl plugin"
    if os.environ.get("VERL_USE_EXTERNAL_PLUGINS", "auto").strip().lower() == "none":
        return Check(name, False, "VERL_USE_EXTERNAL_PLUGINS=none stops verl from loading plugins",
                     "unset VERL_USE_EXTERNAL_PLUGINS (or list slca_verl in it)")  # fmt: skip
    entry_points = [ep.name for ep in importlib.metadata.entry_points(group="verl.plugins")]
    if "slca_verl" not in entry_points:
        return Check(name, False, "no verl.plugins entry point named slca_verl (slca-verl is not installed here)",
                     'pip install -e ".[gpu]" from the slca-verl checkout')  # fmt: skip
    try:
        import verl  # noqa: F401  (loads the plugin)
        from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
        from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
        from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
    except Exception as e:
        return Check(name, False, f"verl does not import ({type(e).__name__}: {e})", GPU_EXTRA_FIX)
    wanted = {"slca_grpo": ADV_ESTIMATOR_REGISTRY, "slca_sync": TRAINER_REGISTRY,
              "slca_tool_agent": _agent_loop_registry}  # fmt: skip
    absent = [key for key, registry in wanted.items() if key not in registry]
    if absent:
        return Check(name, False, f"not registered with verl: {', '.join(absent)}",
                     "run `python -c 'import verl'` and read the slca-verl WARNING that names the failing module")
    return Check(name, True, "slca_grpo, slca_sync and slca_tool_agent are registered with verl")


# ---------------------------------------------------------------------------------------------------- services


def served_models(url: str, timeout: float) -> list[str]:
    """The model ids an OpenAI-compatible server lists at GET {url}/models."""
    with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=timeout) as response:
        body = json.load(response)
    return [str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict)]


def check_server(kind: str, url: str, model: str | None, timeout: float, serve_script: str, env_var: str) -> Check:
    name = f"{kind} server {url}"
    fix = f"start it (DETACH=1 bash recipes/{serve_script}) or point {env_var} / --{kind.lower()}-urls at a running one"
    try:
        ids = served_models(url, timeout)
    except (urllib.error.URLError, OSError, ValueError) as e:  # refused, timed out, HTTP error, not JSON
        reason = f"HTTP {e.code} {e.reason}" if isinstance(e, urllib.error.HTTPError) else getattr(e, "reason", e)
        return Check(name, False, f"GET {url.rstrip('/')}/models failed ({reason})", fix)
    if model and model not in ids:
        return Check(name, False, f"serves {ids or 'no models'}, not {model}",
                     f"set {kind.upper()}_MODEL / --{kind.lower()}-model to the --served-model-name, or serve {model}")
    return Check(name, True, f"serves {', '.join(ids) or 'no models'}")


def split_urls(urls: str) -> list[str]:
    return [u.strip() for u in urls.split(",") if u.strip()]


def recipe_urls(env_var: str, file_name: str, fallback: str) -> str:
    """Like the recipe: the environment variable, else the serving script's URL file, else the local default."""
    if os.environ.get(env_var):
        return os.environ[env_var]
    services = os.environ.get("SERVICES_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "slca_verl",
                                                                "services")  # fmt: skip
    try:
        with open(os.path.join(services, file_name), encoding="utf-8") as f:
            return f.read().strip() or fallback
    except OSError:
        return fallback


# ---------------------------------------------------------------------------------------------------- model


def default_model_path() -> str:
    """Like the recipe: MODEL_PATH, else the newest global_step_N/huggingface of the 7B SFT run."""
    if os.environ.get("MODEL_PATH"):
        return os.environ["MODEL_PATH"]
    sft_dir = os.environ.get("SFT_DIR") or os.path.join(REPO, "checkpoints", "sft", "qwen2_5_7b_sft")
    steps = glob.glob(os.path.join(sft_dir, "global_step_*", "huggingface"))

    def step(path: str) -> int:
        m = re.search(r"global_step_(\d+)", path)
        return int(m.group(1)) if m else -1

    return max(steps, key=step) if steps else os.path.join(sft_dir, "global_step_LAST", "huggingface")


def check_model_path(path: str) -> Check:
    name = "model path"
    if os.path.isfile(os.path.join(path, "config.json")):
        return Check(name, True, path)
    what = "has no config.json" if os.path.isdir(path) else "does not exist"
    return Check(name, False, f"{path} {what}",
                 "run recipes/run_qwen7b_sft.sh first, or pass --model-path / MODEL_PATH (a Hugging Face model "
                 "directory, reachable from every node)")  # fmt: skip


# ---------------------------------------------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus-per-node", type=int, default=int(os.environ.get("N_GPUS_PER_NODE") or 8),
                   help="GPUs the run uses on this node (default: N_GPUS_PER_NODE, else 8)")
    p.add_argument("--sgls-urls", default=None, help="comma-separated simulator base URLs (…/v1)")
    p.add_argument("--judge-urls", default=None, help="comma-separated judge base URLs (…/v1)")
    p.add_argument("--sgls-model", default=os.environ.get("SGLS_MODEL") or DEFAULT_SGLS_MODEL,
                   help="model id the simulator must serve ('' to accept any)")
    p.add_argument("--judge-model", default=os.environ.get("JUDGE_MODEL") or DEFAULT_JUDGE_MODEL,
                   help="model id the judge must serve ('' to accept any)")
    p.add_argument("--no-servers", action="store_true", help="skip the simulator and judge checks")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds per server request")
    p.add_argument("--model-path", default=None, help="policy checkpoint (default: MODEL_PATH, else newest SFT)")
    return p.parse_args(argv)


def server_checks(args: argparse.Namespace) -> list[Check]:
    out = []
    services = [
        ("SGLS", args.sgls_urls, "SGLS_URLS", "sgls_urls", "http://127.0.0.1:8000/v1", args.sgls_model,
         "serve_sgls.sh", os.environ.get("SGLS_BACKEND", "openai") != "openai", "SGLS_BACKEND is not openai"),
        ("Judge", args.judge_urls, "JUDGE_URLS", "judge_urls", "http://127.0.0.1:8016/v1", args.judge_model,
         "serve_judge.sh", os.environ.get("JUDGE", "llm") != "llm", "JUDGE is not llm"),
    ]  # fmt: skip
    for kind, urls, env_var, file_name, fallback, model, script, not_used, why in services:
        if args.no_servers or (urls is None and not_used):
            out.append(Check(f"{kind} server", None, "--no-servers" if args.no_servers else why))
            continue
        for url in split_urls(urls if urls is not None else recipe_urls(env_var, file_name, fallback)):
            out.append(check_server(kind, url, model or None, args.timeout, script, env_var))
    return out


def run_checks(args: argparse.Namespace) -> list[Check]:
    pins = pinned_versions()
    torch_check, torch_module = check_torch(pins["torch"])
    checks = [torch_check, check_gpu_count(torch_module, args.gpus_per_node), check_flash_attn(pins["flash-attn"]),
              check_vllm(pins["vllm"]), check_verl(), check_plugin()]  # fmt: skip
    checks += server_checks(args)
    checks.append(check_model_path(args.model_path or default_model_path()))
    return checks


def report(checks: list[Check], out=None) -> int:
    """Print every check and a summary (to ``out``, default stdout); 0 when nothing is missing, else 1."""
    out = out or sys.stdout
    for check in checks:
        print(check.render(), file=out)
    missing = [c.name for c in checks if c.ok is False]
    if missing:
        print(f"\n{len(missing)} of {len(checks)} checks MISSING: {'; '.join(missing)}", file=out)
        return 1
    print(f"\nall {sum(c.ok is True for c in checks)} checks OK: bash recipes/run_qwen7b_slca.sh", file=out)
    return 0


def main(argv=None) -> int:
    return report(run_checks(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
