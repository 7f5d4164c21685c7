"""recipes/run_cpu_tiny_slca.sh plots a training run's curves when verl's trainer returns, and plots nothing after a
validation-only run (VAL_ONLY=1, what recipes/eval_in_domain.sh starts): there it made a one-point figure and logged
"no data for [...]" at the end of every in-domain eval (the seed-5 walk). The recipe runs from a copy of recipes/ whose
run_qwen7b_slca.sh is a stand-in that writes verl's file-logger records; the plots step is the real one."""

import json
import os
import shutil

import pytest
import subproc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STAND_IN = """#!/usr/bin/env bash
# stands in for verl's trainer: the file logger's records of a 2-step run
mkdir -p "$OUTPUT_DIR"
echo "$VAL_ONLY" > "$OUTPUT_DIR/val_only_seen"
val=val-aux/cpu_task/toolpo_success/mean@1
for step in 1 2; do
  echo '{"step": '$step', "data": {"critic/score/mean": 0.'$step', "'$val'": 0.'$step'}}'
done > "$OUTPUT_DIR/metrics.jsonl"
"""


def run(tmp_path, name, **env):
    out = tmp_path / name
    result = subproc.run(
        ["bash", str(tmp_path / "repo" / "recipes" / "run_cpu_tiny_slca.sh")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "VAL_ONLY", "BUILD_ONLY")},
            "MODEL_PATH": str(tmp_path / "model"),
            "TRAIN_FILES": str(tmp_path / "train.parquet"),
            "VAL_FILES": str(tmp_path / "val.parquet"),
            "OUTPUT_DIR": str(out),
            "HOME": str(tmp_path / "home"),
            **env,
        },
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out, result.stderr


@pytest.mark.slow
def test_a_training_run_is_plotted_and_a_validation_only_run_is_not(tmp_path):
    shutil.copytree(os.path.join(REPO, "recipes"), tmp_path / "repo" / "recipes")
    shutil.copytree(os.path.join(REPO, "scripts"), tmp_path / "repo" / "scripts")
    for keyed in ("slca_verl/cpu/tiny_model.py", "data_prep/cpu_task.py"):  # the recipe hashes them for its cache key
        os.makedirs(tmp_path / "repo" / os.path.dirname(keyed), exist_ok=True)
        shutil.copy(os.path.join(REPO, keyed), tmp_path / "repo" / keyed)
    (tmp_path / "repo" / "recipes" / "run_qwen7b_slca.sh").write_text(STAND_IN)
    trained, _ = run(tmp_path, "trained")
    assert (trained / "val_only_seen").read_text().strip() in ("", "0")
    assert (trained / "plots" / "reward.png").exists() and (trained / "plots" / "validation.png").exists()
    validated, stderr = run(tmp_path, "validated", VAL_ONLY="1")
    assert (validated / "val_only_seen").read_text().strip() == "1"
    assert json.loads((validated / "metrics.jsonl").read_text().splitlines()[0])["step"] == 1
    assert not (validated / "plots").exists() and "slca_verl.eval.plots" not in stderr
    assert not (tmp_path / "home" / ".cache" / "slca_verl").exists()  # nothing built: model and data were given
