"""The GPU smoke recipe (recipes/run_smoke_1gpu.sh: the first run on a new GPU machine) trains the two steps it
promises, run here on verl's CPU platform with a random tiny Qwen3 (the real Qwen3 tokenizer) in place of
Qwen2.5-0.5B-Instruct: its 4 training rows are one batch, so it needs two epochs for two steps."""

import os
import sys

import pytest
import subproc
from main_ppo_helpers import REPO, read_metrics

from slca_verl.cpu import tiny_model

pytestmark = pytest.mark.e2e


def test_the_smoke_recipe_trains_two_steps(tmp_path):
    data = tmp_path / "data"
    subproc.run(
        [
            sys.executable,
            "-m",
            "data_prep.xlam",
            "--input",
            os.path.join(REPO, "tests", "fixtures", "data_prep", "xlam_sample.json"),
            "--output_dir",
            str(data),
            "--val_ratio",
            "0.25",
            "--no_progress",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    model = tiny_model.init_model(str(tmp_path / "model"), seed=0)
    out = tmp_path / "run"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("VERL_PLATFORM", "RAY_ADDRESS")},
        "DEVICE": "cpu",
        "MODEL_PATH": model,
        "TRAIN_FILES": str(data / "xlam_train.parquet"),
        "VAL_FILES": str(data / "xlam_val.parquet"),
        "OUTPUT_DIR": str(out),
        "MODEL_DTYPE": "float32",
        "MAX_RESPONSE_LENGTH": "64",
        "ROLLOUT_N": "2",  # groups of 2 (the recipe's 4 on a GPU): the same path, half the CPU's log-prob work
        "LOGGER": '["console","file"]',
    }
    proc = subproc.run(
        ["bash", os.path.join(REPO, "recipes", "run_smoke_1gpu.sh")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    assert sorted(read_metrics(str(out))) == [1, 2]
