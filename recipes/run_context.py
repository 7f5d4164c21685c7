"""What the eval commands need to know about the run that wrote a checkpoint: its name, step and data files, read
from the config verl's trainer saved for that run (hydra's ``.hydra/config.yaml``).

    eval "$(python3 recipes/run_context.py CHECKPOINT)"     # recipes/eval_lib.sh does this

CHECKPOINT is verl's ``…/global_step_N`` (or a folder below it: ``actor``, ``actor/huggingface``, ``merged_hf``) or
any HF model folder. The run's config is the newest of

1. ``<run dir>/hydra/<time>/.hydra/config.yaml``: the training recipes put hydra's run folder there
   (``hydra.run.dir``, recipes/run_qwen7b_slca.sh);
2. ``outputs/<date>/<time>/.hydra/config.yaml`` under the working directory or the repository whose
   ``trainer.default_local_dir`` is the run dir: hydra's default place, where runs made before (1) left it.

Writes shell assignments (values quoted for ``eval``): ``RUN_DIR``, ``RUN_STEP`` (N, or empty), ``RUN_CONFIG`` (the
file, or empty), ``RUN_NAME`` (``trainer.experiment_name``, else the run dir's name, else the checkpoint's),
``RUN_TRAIN_FILES`` and ``RUN_VAL_FILES`` (``data.train_files`` / ``data.val_files`` as a hydra override value;
empty without a config). Reads YAML only: no verl import, so a dry run stays fast.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shlex
import sys
from typing import Sequence

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP_DIR = re.compile(r"^global_step_(\d+)$")


def run_dir_and_step(checkpoint: str) -> tuple[str | None, int | None]:
    """The run folder (the parent of ``global_step_N``) and N, for a checkpoint at or below ``global_step_N``;
    ``(None, None)`` for a folder that is not inside a run's checkpoint."""
    path = os.path.abspath(checkpoint)
    for _ in range(4):  # global_step_N / actor / huggingface | merged_hf[_vllm_cpu]
        m = STEP_DIR.match(os.path.basename(path))
        if m:
            return os.path.dirname(path), int(m.group(1))
        path = os.path.dirname(path)
    return None, None


def _load(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return {}
    return cfg if isinstance(cfg, dict) else {}


def find_config(run_dir: str, search_roots: Sequence[str] = (".", REPO)) -> str | None:
    """The newest hydra config of the run that wrote ``run_dir`` (module docstring), or None."""
    own = sorted(glob.glob(os.path.join(run_dir, "hydra", "*", ".hydra", "config.yaml")))
    if own:
        return own[-1]
    target = os.path.realpath(run_dir)
    found = set()
    for root in search_roots:
        found.update(glob.glob(os.path.join(os.path.abspath(root), "outputs", "*", "*", ".hydra", "config.yaml")))
    for path in sorted(found, key=lambda p: (os.path.getmtime(p), p), reverse=True):
        local_dir = (_load(path).get("trainer") or {}).get("default_local_dir")
        if isinstance(local_dir, str) and os.path.realpath(local_dir) == target:
            return path
    return None


def _files(value) -> str:
    """``data.*_files`` as a hydra override value: a path, or ``[a,b]`` for a list."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def context(checkpoint: str, search_roots: Sequence[str] = (".", REPO)) -> dict[str, str]:
    run_dir, step = run_dir_and_step(checkpoint)
    config = find_config(run_dir, search_roots) if run_dir else None
    cfg = _load(config) if config else {}
    name = (cfg.get("trainer") or {}).get("experiment_name")
    if not isinstance(name, str) or not name or "${" in name:
        name = os.path.basename(run_dir or os.path.abspath(checkpoint).rstrip("/"))
    data = cfg.get("data") or {}
    trainer = cfg.get("trainer") or {}

    def count(key: str) -> str:
        value = trainer.get(key)
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else ""

    return {
        "RUN_DIR": run_dir or "",
        "RUN_STEP": "" if step is None else str(step),
        "RUN_CONFIG": config or "",
        "RUN_NAME": name,
        "RUN_TRAIN_FILES": _files(data.get("train_files")),
        "RUN_VAL_FILES": _files(data.get("val_files")),
        "RUN_NNODES": count("nnodes"),  # the layout the run trained on, the eval commands' default
        "RUN_GPUS_PER_NODE": count("n_gpus_per_node"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint")
    args = p.parse_args(argv)
    # the command's output is these assignments, for the shell's eval
    sys.stdout.write("".join(f"{k}={shlex.quote(v)}\n" for k, v in context(args.checkpoint).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
