#!/usr/bin/env python3
"""Preflight for GPU training: is everything `bash recipes/run_qwen7b_slca.sh` needs in place?

    python scripts/check_gpu_env.py                          # the recipe's defaults (N_GPUS_PER_NODE, URLs, MODEL_PATH)
    python scripts/check_gpu_env.py --gpus-per-node 8 --model-path /ckpt/huggingface \
        --sgls-urls http://10.0.0.5:8000/v1,http://10.0.0.6:8000/v1 --judge-urls http://10.0.0.7:8016/v1
    python scripts/check_gpu_env.py --no-servers             # the software only
    python scripts/check_gpu_env.py --smoke                  # what recipes/run_smoke_1gpu.sh needs (1 GPU, no servers)
    python scripts/check_gpu_env.py --sft                    # what recipes/run_qwen7b_sft.sh needs (run it first)
    RAY_ADDRESS=auto python scripts/check_gpu_env.py         # several nodes: every node of the Ray cluster is asked
    python scripts/check_gpu_env.py --device cpu             # the CPU rehearsal (no CUDA, flash-attn or vLLM checks)

One line per check, ``OK`` or ``MISSING`` (with the fix on the next line; ``SKIP`` when a check does not apply).
Exit status 0 only when nothing is missing, else 1. Defaults follow the recipe: ``N_GPUS_PER_NODE`` (8),
``SGLS_URLS`` / ``JUDGE_URLS``, else the files ``serve_sgls.sh`` / ``serve_judge.sh`` write under ``SERVICES_DIR``
(``~/.cache/slca_verl/services``), else http://127.0.0.1:8000/v1 and :8016/v1; ``SGLS_MODEL`` / ``JUDGE_MODEL``;
``MODEL_PATH``, else the newest SFT checkpoint; ``ATTN``, ``LOGGER``, ``API_KEY_FILE`` (else ``SERVICES_DIR/api_key``).
Each server must refuse a request without the key (HTTP 401) and list its model with it. Heavy modules (torch,
flash_attn, vllm, verl, ray) are imported only by the check that needs them.

The run's layout and plan come from the recipe itself (``--recipe``; the mode's recipe by default): its overrides
(``DRY_RUN=args``, nothing written into the checkout) give the nodes and GPUs it asks for (``NNODES`` x
``N_GPUS_PER_NODE``, the recipe's own defaults included), and the plan check (``slca_verl/plan/check.py``) reads the
composed config: each phase's per-GPU memory on this node's GPUs (``--gpu-mem-gib`` without one), fp32 master
weights, the services' keys and timeouts.

With ``RAY_ADDRESS`` (or ``--ray-address``) the run spans a Ray cluster: the GPUs are counted over the cluster
(the recipe's nodes x GPUs per node wanted), and a task on every node checks what verl's workers there will meet,
which is the environment of ``ray start`` on that node plus the variables the recipe forwards (``FORWARD_ENV``), not
this shell's: the model path, the data files and the API key file exist there, and wandb has a key or an offline mode.
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import json
import netrc
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERL_VERSION = "0.9.1"
# what verl 0.9.1's `vllm` / `fsdp` extras pin; read from verl's own metadata when it is installed
FALLBACK_PINS = {"torch": "2.11.0", "vllm": "0.24.0", "flash-attn": "2.8.3"}
DEFAULT_SGLS_MODEL = "Qwen3-235B-A22B-Instruct-2507"  # recipes/run_qwen7b_slca.sh
DEFAULT_JUDGE_MODEL = "gpt-oss-120b"
FLASH_ATTN_FIX = (
    "install it after torch, compiled by the nvcc of torch's CUDA version ({cuda}): export CUDA_HOME=<CUDA {cuda} "
    "toolkit, e.g. /usr/local/cuda-13.0> PATH=$CUDA_HOME/bin:$PATH; pip install wheel packaging psutil ninja && "
    "MAX_JOBS=8 FLASH_ATTENTION_FORCE_BUILD=TRUE FLASH_ATTN_CUDA_ARCHS={arch} pip install --no-build-isolation "
    "flash-attn=={v} (the build takes tens of minutes). Or skip it: ATTN=sdpa bash recipes/<recipe>.sh"
)
GPU_EXTRA_FIX = 'pip install -e ".[gpu]" in a fresh venv (docs/gpu.md, "1. Install")'
RECIPE_LOGGER = '["console","wandb","file"]'  # run_qwen7b_slca.sh's LOGGER; run_smoke_1gpu.sh: ["console"]
SFT_LOGGER = '["console","wandb"]'  # run_qwen7b_sft.sh's LOGGER
SFT_MODEL = "Qwen/Qwen2.5-7B-Instruct"  # run_qwen7b_sft.sh's BASE_MODEL
SFT_DATA_FIX = (
    "python -m data_prep.sft --input toucan_toolcall_sft_split_42k.parquet --format sharegpt "
    '--output_dir data/sft (docs/gpu.md, "2. Data"), or set TRAIN_FILES'
)
SMOKE_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"  # run_smoke_1gpu.sh
SMOKE_DATA_FIX = (
    "python -m data_prep.xlam --input tests/fixtures/data_prep/xlam_sample.json --output_dir data/smoke "
    "--val_ratio 0.25"
)
RUN_DATA_FIX = (
    "python -m data_prep.toucan ... --output_dir data/toucan (docs/data_prep.md), or set TRAIN_FILES / VAL_FILES"
)


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
        return Check(
            name,
            False,
            f"torch {version} is a CPU build (torch.version.cuda is None)",
            f"{GPU_EXTRA_FIX}, which brings torch=={expected} (the CUDA build on PyPI)",
        ), torch
    if not torch.cuda.is_available():
        return Check(
            name,
            False,
            f"torch {version} (CUDA {cuda}) sees no GPU (torch.cuda.is_available() is False)",
            f"check nvidia-smi and CUDA_VISIBLE_DEVICES; CUDA {cuda} needs an NVIDIA driver that supports it "
            "(CUDA 13 needs driver 580 or newer)",
        ), torch
    if base_version(version) != expected:
        return Check(
            name,
            False,
            f"torch {version} (CUDA {cuda}); vLLM and verl[vllm]=={VERL_VERSION} pin {expected}",
            GPU_EXTRA_FIX,
        ), torch
    return Check(name, True, f"torch {version}, CUDA {cuda}"), torch


def check_gpu_count(torch_module, wanted: int) -> Check:
    name = "GPUs per node"
    found = 0
    if torch_module is not None and torch_module.version.cuda is not None and torch_module.cuda.is_available():
        found = torch_module.cuda.device_count()
    if found >= wanted:
        return Check(name, True, f"{found} visible, the run uses N_GPUS_PER_NODE={wanted}")
    return Check(
        name,
        False,
        f"{found} visible, the run uses N_GPUS_PER_NODE={wanted}",
        f"run with N_GPUS_PER_NODE={found} (and NNODES to match the budget), or make more GPUs visible"
        if found
        else "no usable CUDA GPU: see the torch line",
    )


def check_python(version_info=None) -> Check:
    """verl 0.9.1 is published for Python 3.10-3.12 only (setup.py's python_requires says the same)."""
    v = tuple(version_info or sys.version_info)[:3]
    shown = ".".join(map(str, v))
    if (3, 10) <= v[:2] < (3, 13):
        return Check("python", True, f"Python {shown}")
    return Check(
        "python",
        False,
        f"Python {shown}; verl=={VERL_VERSION} has no release for it (needs >=3.10,<3.13)",
        "create the venv with python3.12 (or 3.10 / 3.11): python3.12 -m venv .venv-gpu",
    )


def nvcc_version() -> tuple[str | None, str | None]:
    """(path, CUDA release like '13.0') of the nvcc a source build would use: $CUDA_HOME/bin/nvcc, else PATH's."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    path = os.path.join(home, "bin", "nvcc") if home else shutil.which("nvcc")
    if not path or not os.path.exists(path):
        return None, None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return path, None
    m = re.search(r"release (\d+\.\d+)", out)
    return path, m.group(1) if m else None


def cuda_arch(torch_module=None) -> str:
    """The compute capability flash-attn must be built for (FLASH_ATTN_CUDA_ARCHS): 80 on A100, 90 on H100 / H200."""
    try:
        major, minor = torch_module.cuda.get_device_capability(0)
        return f"{major}{minor}"
    except Exception:  # no torch, no CUDA, no GPU: the user's own
        return "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d .)"


def check_flash_attn(expected: str, torch_module=None, attn: str = "flash_attention_2") -> Check:
    name = "flash_attn"
    if attn == "sdpa":
        return Check(name, None, "ATTN=sdpa: actor and reference use PyTorch's attention")
    torch_cuda = getattr(getattr(torch_module, "version", None), "cuda", None) or "13.0"
    fix = FLASH_ATTN_FIX.format(v=expected, cuda=torch_cuda, arch=cuda_arch(torch_module))
    try:
        import flash_attn
    except Exception as e:  # not installed, or built against another torch / CUDA
        nvcc, release = nvcc_version()
        if nvcc is None:
            found = "no nvcc ($CUDA_HOME/bin or PATH)"
        elif release and release.split(".")[0] != torch_cuda.split(".")[0]:
            found = f"{nvcc} is CUDA {release}, torch is built for CUDA {torch_cuda}: the build would fail"
        else:
            found = f"{nvcc} is CUDA {release or '?'}"
        return Check(name, False, f"does not import ({type(e).__name__}: {e}); {found}", fix)
    version = getattr(flash_attn, "__version__", "?")
    if base_version(version) != expected:
        return Check(name, False, f"flash_attn {version}; verl[fsdp]=={VERL_VERSION} pins {expected}", fix)
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
        return Check(
            name,
            False,
            "VERL_USE_EXTERNAL_PLUGINS=none stops verl from loading plugins",
            "unset VERL_USE_EXTERNAL_PLUGINS (or list slca_verl in it)",
        )
    entry_points = [ep.name for ep in importlib.metadata.entry_points(group="verl.plugins")]
    if "slca_verl" not in entry_points:
        return Check(
            name,
            False,
            "no verl.plugins entry point named slca_verl (slca-verl is not installed here)",
            'pip install -e ".[gpu]" from the slca-verl checkout',
        )
    try:
        import verl  # noqa: F401  (loads the plugin)
        from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
        from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
        from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
    except Exception as e:
        return Check(name, False, f"verl does not import ({type(e).__name__}: {e})", GPU_EXTRA_FIX)
    wanted = {
        "slca_grpo": ADV_ESTIMATOR_REGISTRY,
        "slca_sync": TRAINER_REGISTRY,
        "slca_tool_agent": _agent_loop_registry,
    }
    absent = [key for key, registry in wanted.items() if key not in registry]
    if absent:
        return Check(
            name,
            False,
            f"not registered with verl: {', '.join(absent)}",
            "run `python -c 'import verl'` and read the slca-verl WARNING that names the failing module",
        )
    return Check(name, True, "slca_grpo, slca_sync and slca_tool_agent are registered with verl")


# ---------------------------------------------------------------------------------------------------- services


def served_models(url: str, timeout: float, api_key: str | None = None) -> list[str]:
    """The model ids an OpenAI-compatible server lists at GET {url}/models (with ``Authorization`` when a key)."""
    request = urllib.request.Request(url.rstrip("/") + "/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = json.load(response)
    return [str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict)]


def _failure(url: str, e: Exception) -> str:
    reason = f"HTTP {e.code} {e.reason}" if isinstance(e, urllib.error.HTTPError) else getattr(e, "reason", e)
    return f"GET {url.rstrip('/')}/models failed ({reason})"


def check_server(
    kind: str,
    url: str,
    model: str | None,
    timeout: float,
    serve_script: str,
    env_var: str,
    api_key: str | None = None,
    key_file: str = "",
) -> Check:
    """Reachable; refuses a request without the key (HTTP 401: nobody else can use our GPUs or poison the
    simulator's cache); with the key (``api_key``, read from ``key_file``) lists ``model``."""
    name = f"{kind} server {url}"
    fix = f"start it (DETACH=1 bash recipes/{serve_script}) or point {env_var} / --{kind.lower()}-urls at a running one"
    try:
        served_models(url, timeout)
    except urllib.error.HTTPError as e:
        if e.code != 401:
            return Check(name, False, _failure(url, e), fix)
    except (urllib.error.URLError, OSError, ValueError) as e:  # refused, timed out, not JSON
        return Check(name, False, _failure(url, e), fix)
    else:
        return Check(
            name,
            False,
            "answers without an API key: anyone who can reach it can use it",
            f"restart it with recipes/{serve_script} (it demands the key in API_KEY_FILE), or `vllm serve "
            "--api-key` / VLLM_API_KEY",
        )
    if not api_key:
        return Check(
            name,
            False,
            f"refuses requests without a key (HTTP 401), and there is no key file ({key_file})",
            "set API_KEY_FILE / --api-key-file to the file the serving script wrote (SERVICES_DIR/api_key)",
        )
    try:
        ids = served_models(url, timeout, api_key)
    except (urllib.error.URLError, OSError, ValueError) as e:
        if isinstance(e, urllib.error.HTTPError) and e.code == 401:
            return Check(
                name,
                False,
                f"refuses the key in {key_file} (HTTP 401)",
                "point API_KEY_FILE / --api-key-file at the key this server was started with",
            )
        return Check(name, False, _failure(url, e), fix)
    if model and model not in ids:
        return Check(
            name,
            False,
            f"serves {ids or 'no models'}, not {model}",
            f"set {kind.upper()}_MODEL / --{kind.lower()}-model to the --served-model-name, or serve {model}",
        )
    return Check(name, True, f"serves {', '.join(ids) or 'no models'}; refuses requests without the key")


def read_key(path: str) -> str | None:
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def services_dir() -> str:
    return os.environ.get("SERVICES_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "slca_verl", "services")


def split_urls(urls: str) -> list[str]:
    return [u.strip() for u in urls.split(",") if u.strip()]


def recipe_urls(env_var: str, file_name: str, fallback: str) -> str:
    """Like the recipe: the environment variable, else the serving script's URL file, else the local default."""
    if os.environ.get(env_var):
        return os.environ[env_var]
    try:
        with open(os.path.join(services_dir(), file_name), encoding="utf-8") as f:
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
    if re.fullmatch(r"[\w.-]+/[\w.-]+", path) and not os.path.exists(path):  # a Hub id (the smoke run's model)
        return check_hub_model(path)
    what = "has no config.json" if os.path.isdir(path) else "does not exist"
    return Check(
        name,
        False,
        f"{path} {what}",
        "run recipes/run_qwen7b_sft.sh first, or pass --model-path / MODEL_PATH (a Hugging Face model "
        "directory, reachable from every node)",
    )


def check_hub_model(repo: str) -> Check:
    name = "model path"
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = isinstance(try_to_load_from_cache(repo, "config.json"), str)
    except Exception:  # no huggingface_hub, or a cache it cannot read
        cached = False
    if cached:
        return Check(name, True, f"{repo} (Hub model, in the Hugging Face cache)")
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return Check(
            name,
            False,
            f"{repo} is not in the Hugging Face cache and HF_HUB_OFFLINE is set",
            f"hf download {repo} (with Hub access), or MODEL_PATH=<a local model directory>",
        )
    return Check(
        name, True, f"{repo} (Hub model, not cached: downloaded at start; `hf download {repo}` fetches it now)"
    )


def check_data(files: list[str], fix: str) -> Check:
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        return Check("data", False, f"missing {', '.join(missing)}", fix)
    return Check("data", True, ", ".join(files))


def check_wandb(logger_value: str, env: dict | None = None, home: str | None = None) -> Check:
    """wandb in trainer.logger needs a key or an offline mode: wandb 0.31 raises "No API key configured" in a
    non-interactive process, which verl's trainer is, minutes in (after every worker is up)."""
    name = "wandb"
    env = os.environ if env is None else env
    if "wandb" not in logger_value:
        return Check(name, None, f"trainer.logger={logger_value} does not use wandb")
    mode = env.get("WANDB_MODE", "").strip().lower()
    if mode in ("offline", "disabled", "dryrun"):
        return Check(name, True, f"WANDB_MODE={mode}: no API key needed")
    fix = (
        "`wandb login` (or export WANDB_API_KEY on every node); "
        "or WANDB_MODE=offline (sync later with `wandb sync`); "
        'or no wandb: LOGGER=\'["console","file"]\' bash recipes/run_qwen7b_slca.sh '
        "(= trainer.logger=[console,file])"
    )
    version = dist_version("wandb")
    if version is None:
        return Check(name, False, "trainer.logger uses wandb, which is not installed", f"pip install wandb; {fix}")
    if env.get("WANDB_API_KEY", "").strip():
        return Check(name, True, f"wandb {version}, WANDB_API_KEY set")
    host = urllib.parse.urlparse(env.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"
    path = env.get("NETRC") or os.path.join(home or os.path.expanduser("~"), ".netrc")
    try:
        entry = netrc.netrc(path).authenticators(host)
    except (OSError, netrc.NetrcParseError):
        entry = None
    if entry and entry[2]:
        return Check(name, True, f"wandb {version}, logged in ({path} holds {host})")
    return Check(
        name,
        False,
        f"trainer.logger uses wandb {version} without a key (WANDB_API_KEY unset, no {host} in "
        f"{path}, WANDB_MODE {mode or 'unset'}): the run dies minutes in with 'No API key configured'",
        fix,
    )


# ---------------------------------------------------------------------------------------------------- cluster

#: what recipes/run_qwen7b_slca.sh forwards to every Ray worker when set (its FORWARD_ENV default)
FORWARD_ENV = (
    "VERL_FILE_LOGGER_PATH VERL_PLATFORM VERL_LOGGING_LEVEL WANDB_MODE WANDB_PROJECT WANDB_ENTITY WANDB_DIR "
    "WANDB_BASE_URL HF_HOME HF_HUB_OFFLINE HF_ENDPOINT TOKENIZERS_PARALLELISM"
)


def node_checks(paths: dict[str, list[str]], logger_value: str, forwarded: dict[str, str]) -> list[Check]:
    """Run on one node, in a Ray worker: the files verl's workers there must read, and wandb as they will see it
    (this worker's environment, i.e. its ``ray start``'s, plus the ``forwarded`` variables)."""
    env = {**os.environ, **forwarded}
    out = []
    for what, files in paths.items():
        missing = [f for f in files if f and not os.path.exists(f)]
        out.append(
            Check(
                what,
                not missing,
                f"missing {', '.join(missing)}" if missing else ", ".join(files),
                "every node reads it: put it on a file system all nodes share (or copy it to the same path on each)",
            )
        )
    out.append(check_wandb(logger_value, env))
    return out


def check_cluster(address: str, wanted_gpus: int, paths: dict[str, list[str]], logger_value: str) -> list[Check]:
    """The Ray cluster at ``address``: its GPUs against ``wanted_gpus``, then :func:`node_checks` on every node."""
    name = f"Ray cluster {address}"
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except Exception as e:  # no ray, or nothing listening at the address
        return [
            Check(
                name,
                False,
                f"cannot join it ({type(e).__name__}: {e})",
                "`ray start --head` on the head node and `ray start --address <head>:6379` on every other node "
                '(docs/gpu.md, "5. RL on several nodes"), then RAY_ADDRESS=auto',
            )
        ]
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        gpus = int(sum(n["Resources"].get("GPU", 0) for n in nodes))
        out = [
            Check(
                name,
                gpus >= wanted_gpus,
                f"{len(nodes)} node(s), {gpus} GPUs; the run uses NNODES x N_GPUS_PER_NODE = {wanted_gpus}",
                "start Ray on every node the run needs (`ray start --address <head>:6379` there), or lower NNODES",
            )
        ]
        names = (os.environ.get("FORWARD_ENV") or FORWARD_ENV).split()
        forwarded = {k: os.environ[k] for k in names if k in os.environ}
        remote = ray.remote(num_cpus=0)(node_checks)
        for node in nodes:
            host = node.get("NodeManagerAddress", "?")
            strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
            try:
                checks = ray.get(
                    remote.options(scheduling_strategy=strategy).remote(paths, logger_value, forwarded), timeout=120
                )
            except Exception as e:  # the node cannot run a Python task of this environment
                checks = [
                    Check(
                        "worker",
                        False,
                        f"a task there failed ({type(e).__name__}: {e})",
                        "install this environment (same Python, same packages) on that node",
                    )
                ]
            for c in checks:
                c.name = f"node {host} {c.name}"
            out += checks
        return out
    finally:
        ray.shutdown()


# ---------------------------------------------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--smoke",
        action="store_true",
        help="check what recipes/run_smoke_1gpu.sh needs: 1 GPU, no servers, its Hub model and data, logger console",
    )
    p.add_argument(
        "--sft",
        action="store_true",
        help="check what recipes/run_qwen7b_sft.sh needs: GPUs, flash-attn (or ATTN=sdpa), verl, the base "
        "model, the SFT data, wandb; no servers, no vLLM",
    )
    p.add_argument(
        "--device",
        choices=["cuda", "cpu"],
        default=os.environ.get("DEVICE") or "cuda",
        help="cpu: the CPU rehearsal (DEVICE=cpu); no CUDA, GPU, flash-attn or vLLM checks",
    )
    p.add_argument(
        "--ray-address",
        default=os.environ.get("RAY_ADDRESS") or None,
        help="a Ray cluster to check node by node (default: RAY_ADDRESS)",
    )
    p.add_argument(
        "--recipe",
        default=None,
        help="the recipe whose layout and plan to check (default: recipes/run_qwen7b_slca.sh; --sft: "
        "run_qwen7b_sft.sh; --smoke: run_smoke_1gpu.sh); it sees this shell's environment",
    )
    p.add_argument(
        "--nnodes",
        type=int,
        default=None,
        help="nodes of the run (default: what the recipe asks for: trainer.nnodes)",
    )
    p.add_argument(
        "--gpus-per-node",
        type=int,
        default=None,
        help="GPUs the run uses on each node (default: what the recipe asks for: trainer.n_gpus_per_node)",
    )
    p.add_argument(
        "--gpu-mem-gib",
        type=float,
        default=None,
        help="GiB of one GPU for the plan check (default: this node's GPU 0, else GPU_MEM_GIB, else 79.6)",
    )
    p.add_argument("--no-plan", action="store_true", help="skip the plan check (layout from the flags / 1 x 8)")
    p.add_argument("--sgls-urls", default=None, help="comma-separated simulator base URLs (…/v1)")
    p.add_argument("--judge-urls", default=None, help="comma-separated judge base URLs (…/v1)")
    p.add_argument(
        "--sgls-model",
        default=os.environ.get("SGLS_MODEL") or DEFAULT_SGLS_MODEL,
        help="model id the simulator must serve ('' to accept any)",
    )
    p.add_argument(
        "--judge-model",
        default=os.environ.get("JUDGE_MODEL") or DEFAULT_JUDGE_MODEL,
        help="model id the judge must serve ('' to accept any)",
    )
    p.add_argument(
        "--api-key-file",
        default=None,
        help="the servers' API key file (default: API_KEY_FILE, else SERVICES_DIR/api_key)",
    )
    p.add_argument("--no-servers", action="store_true", help="skip the simulator and judge checks")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds per server request")
    p.add_argument("--model-path", default=None, help="policy checkpoint (default: MODEL_PATH, else newest SFT)")
    p.add_argument(
        "--attn",
        default=os.environ.get("ATTN") or "flash_attention_2",
        choices=["flash_attention_2", "sdpa"],
        help="the recipe's ATTN (sdpa: no flash-attn needed)",
    )
    p.add_argument(
        "--logger",
        default=None,
        help=f'the run\'s trainer.logger (default: LOGGER, else {RECIPE_LOGGER}; --smoke: ["console"])',
    )
    args = p.parse_args(argv)
    if args.recipe is None:
        args.recipe = os.path.join(
            REPO,
            "recipes",
            "run_smoke_1gpu.sh" if args.smoke else "run_qwen7b_sft.sh" if args.sft else "run_qwen7b_slca.sh",
        )
    if args.logger is None:
        args.logger = os.environ.get("LOGGER") or ('["console"]' if args.smoke else RECIPE_LOGGER)
    if args.smoke or args.sft:
        args.no_servers = True  # smoke: offline SGLS backend and offline proxy judge; SFT: none
    if args.sft and args.logger == RECIPE_LOGGER and not os.environ.get("LOGGER"):
        args.logger = SFT_LOGGER
    return args


def server_checks(args: argparse.Namespace) -> list[Check]:
    out = []
    if args.sft:
        return [Check("servers", None, "--sft: SFT needs no simulator or judge")]
    if args.smoke:
        return [
            Check("SGLS server", None, "--smoke: offline SGLS backend"),
            Check("Judge server", None, "--smoke: offline proxy judge"),
        ]
    key_file = args.api_key_file or os.environ.get("API_KEY_FILE") or os.path.join(services_dir(), "api_key")
    api_key = read_key(key_file)
    services = [
        (
            "SGLS",
            args.sgls_urls,
            "SGLS_URLS",
            "sgls_urls",
            "http://127.0.0.1:8000/v1",
            args.sgls_model,
            "serve_sgls.sh",
            os.environ.get("SGLS_BACKEND", "openai") != "openai",
            "SGLS_BACKEND is not openai",
        ),
        (
            "Judge",
            args.judge_urls,
            "JUDGE_URLS",
            "judge_urls",
            "http://127.0.0.1:8016/v1",
            args.judge_model,
            "serve_judge.sh",
            os.environ.get("JUDGE", "llm") != "llm",
            "JUDGE is not llm",
        ),
    ]
    for kind, urls, env_var, file_name, fallback, model, script, not_used, why in services:
        if args.no_servers or (urls is None and not_used):
            out.append(Check(f"{kind} server", None, "--no-servers" if args.no_servers else why))
            continue
        for url in split_urls(urls if urls is not None else recipe_urls(env_var, file_name, fallback)):
            out.append(check_server(kind, url, model or None, args.timeout, script, env_var, api_key, key_file))
    return out


def data_files(args: argparse.Namespace) -> tuple[list[str], str]:
    """The run's data files (the recipe's defaults unless TRAIN_FILES / VAL_FILES) and the command that makes them."""
    data_dir = os.environ.get("DATA_DIR") or os.path.join(REPO, "data")  # the recipes' DATA_DIR
    if args.sft:
        return [os.environ.get("TRAIN_FILES") or os.path.join(data_dir, "sft", "sft_train.parquet")], SFT_DATA_FIX
    if args.smoke:
        default = [os.path.join(REPO, "data", "smoke", f"xlam_{s}.parquet") for s in ("train", "val")]
        fix = SMOKE_DATA_FIX
    else:
        default = [os.path.join(data_dir, "toucan", f"toucan_{s}.parquet") for s in ("train", "test")]
        fix = RUN_DATA_FIX
    return [os.environ.get("TRAIN_FILES") or default[0], os.environ.get("VAL_FILES") or default[1]], fix


def data_check(args: argparse.Namespace) -> Check:
    return check_data(*data_files(args))


def run_model(args: argparse.Namespace) -> str:
    if args.model_path:
        return args.model_path
    if args.sft:
        return os.environ.get("BASE_MODEL") or SFT_MODEL
    return os.environ.get("MODEL_PATH") or SMOKE_MODEL if args.smoke else default_model_path()


def recipe_overrides(recipe: str, out_dir: str, what: str = "args") -> list[str]:
    """The hydra overrides ``recipe`` launches with in this shell's environment (its ``DRY_RUN=args``; ``plan_args``:
    its plan check's arguments), its run config written under ``out_dir`` (a temporary folder): what the run will
    ask for, its own defaults included."""
    proc = subprocess.run(
        ["bash", recipe],
        env={**os.environ, "DRY_RUN": what, "OUTPUT_DIR": out_dir},
        capture_output=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{recipe} DRY_RUN={what} failed: {proc.stderr.decode(errors='replace')[-800:]}")
    return [a.decode() for a in proc.stdout.split(b"\0") if a]


def override_value(overrides: list[str], key: str) -> str | None:
    """The last value the overrides give ``key`` (hydra keeps the last), or None."""
    found = None
    for item in overrides:
        name, sep, value = item.partition("=")
        if sep and name.lstrip("+") == key:
            found = value
    return found


def local_gpu_mem_gib(torch_module) -> float | None:
    """GiB of this node's first GPU as torch counts it, or None without CUDA."""
    try:
        if torch_module is not None and torch_module.cuda.is_available():
            return torch_module.cuda.get_device_properties(0).total_memory / 1024**3
    except Exception:  # a broken driver reads as no GPU here; check_gpu_count says so
        pass
    return None


def check_plan(
    args: argparse.Namespace, overrides: list[str], plan_args: list[str], gpu_mem_gib: float | None
) -> Check:
    """The plan check of the recipe's composed config (slca_verl.plan.check) with the recipe's own plan arguments,
    on GPUs of ``gpu_mem_gib`` (this node's, measured; None: the recipe's GPU_MEM_GIB)."""
    name = "plan (memory, precision, services)"
    sys.path.insert(0, os.path.join(REPO, "recipes"))
    try:
        import compose_check

        config = compose_check.SFT if args.sft else compose_check.PPO
        cfg = compose_check.compose(config, overrides)
        plan = compose_check.plan_from_args(config, cfg, plan_args, gpu_mem_gib)
    except Exception as e:  # composition or a model shape it cannot read: say which
        return Check(name, False, f"{type(e).__name__}: {e}", f"DRY_RUN=1 bash {args.recipe} shows the same")
    finally:
        sys.path.pop(0)
    stops = [f for f in plan.findings if f.stop]
    worst = max(plan.phases, key=lambda p: p.total, default=None)
    detail = (
        f"{plan.cluster.nnodes} x {plan.cluster.gpus_per_node} GPUs of {plan.cluster.gpu_mem_gib:.1f} GiB, "
        f"model {plan.model}"
        + (f"; worst phase {worst.name} {worst.total:.1f} GiB" if worst else "")
        + "".join(f"\n           {f.line()}" for f in plan.findings if not f.stop)
    )
    if stops:
        return Check(name, False, detail, "; ".join(f"{f.area}: {f.message} -> {f.fix}" for f in stops))
    return Check(name, True, detail)


def run_checks(args: argparse.Namespace) -> list[Check]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="slca_preflight_") as tmp:  # the recipe's run config, for the plan
        return _run_checks(args, tmp)


def _run_checks(args: argparse.Namespace, tmp: str) -> list[Check]:
    pins = pinned_versions()
    overrides: list[str] = []
    plan_args: list[str] = []
    if not args.no_plan:
        try:
            overrides = recipe_overrides(args.recipe, tmp)
            plan_args = recipe_overrides(args.recipe, tmp, "plan_args")
        except Exception as e:
            return [Check("recipe", False, f"{type(e).__name__}: {e}", f"DRY_RUN=1 bash {args.recipe}")]
    if args.nnodes is None:
        args.nnodes = int(override_value(overrides, "trainer.nnodes") or 1)
    if args.gpus_per_node is None:
        args.gpus_per_node = int(override_value(overrides, "trainer.n_gpus_per_node") or (1 if args.smoke else 8))
    torch_module = None
    if args.device == "cpu":
        checks = [check_python(), Check("GPU software", None, "--device cpu: no CUDA, GPU, flash-attn or vLLM checks")]
    else:
        torch_check, torch_module = check_torch(pins["torch"])
        checks = [
            check_python(),
            torch_check,
            check_gpu_count(torch_module, args.gpus_per_node),
            check_flash_attn(pins["flash-attn"], torch_module, args.attn),
        ]
        checks += [] if args.sft else [check_vllm(pins["vllm"])]
    checks += [check_verl(), check_plugin()]
    checks += server_checks(args)
    model = run_model(args)
    files, _ = data_files(args)
    checks += [check_model_path(model), data_check(args), check_wandb(args.logger)]
    if not args.no_plan and args.device != "cpu":
        checks.append(check_plan(args, overrides, plan_args, args.gpu_mem_gib or local_gpu_mem_gib(torch_module)))
    if args.ray_address and not args.sft:  # the SFT recipe runs torchrun on each node, not Ray
        key_file = args.api_key_file or os.environ.get("API_KEY_FILE") or os.path.join(services_dir(), "api_key")
        paths = {
            "model path": [] if re.fullmatch(r"[\w.-]+/[\w.-]+", model) and not os.path.exists(model) else [model],
            "data": files,
            "API key file": [key_file] if os.path.exists(key_file) else [],
        }
        checks += check_cluster(args.ray_address, args.nnodes * args.gpus_per_node, paths, args.logger)
    return checks


def report(checks: list[Check], out=None, recipe: str = "recipes/run_qwen7b_slca.sh") -> int:
    """Print every check and a summary (to ``out``, default stdout); 0 when nothing is missing, else 1."""
    out = out or sys.stdout
    for check in checks:
        print(check.render(), file=out)
    missing = [c.name for c in checks if c.ok is False]
    if missing:
        print(f"\n{len(missing)} of {len(checks)} checks MISSING: {'; '.join(missing)}", file=out)
        return 1
    print(f"\nall {sum(c.ok is True for c in checks)} checks OK: bash {recipe}", file=out)
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    recipe = (
        "recipes/run_smoke_1gpu.sh"
        if args.smoke
        else "recipes/run_qwen7b_sft.sh"
        if args.sft
        else "recipes/run_qwen7b_slca.sh"
    )
    return report(run_checks(args), recipe=recipe)


if __name__ == "__main__":
    sys.exit(main())
