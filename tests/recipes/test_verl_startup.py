"""recipes/verl_startup.py, through which the CPU recipes start their python steps: verl's start-up notices that
carry nothing on a CPU (a UserWarning per training engine not installed, "No supported accelerator detected ...
Falling back to 'nvidia'") become one summary line, the processes the step starts do not print the engine warnings
either, the run's own warnings still show, and the module runs as ``python -m`` runs it (hydra finds main_ppo's
config). Each case imports verl in a fresh process (~5-10 s)."""

import os
import sys

import pytest
import subproc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STARTUP = os.path.join(REPO, "recipes", "verl_startup.py")

PROBE = """import os, subprocess, sys, warnings
print("ARGV", sys.argv[1:], __name__, flush=True)
warnings.warn("a warning of the run itself", UserWarning)
child = subprocess.run([sys.executable, "-c", "import verl"], capture_output=True, text=True)
with open(os.environ["CHILD_LOG"], "w") as f:
    f.write(child.stderr)
"""


def env(**kw):
    return {**{k: v for k, v in os.environ.items() if k not in ("VERL_PLATFORM", "PYTHONWARNINGS")}, **kw}


@pytest.mark.slow
def test_verls_start_up_notices_become_one_line_and_the_runs_own_warnings_still_show(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    child_log = tmp_path / "child.log"
    out = subproc.run(
        [sys.executable, STARTUP, "probe", "a", "--b"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env(CHILD_LOG=str(child_log)),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines()[0] == "ARGV ['a', '--b'] __main__"  # run as python -m runs it
    summary = [line for line in out.stderr.splitlines() if "verl start-up:" in line]
    assert len(summary) == 1 and "engines not installed" in summary[0], out.stderr[-3000:]
    assert "no accelerator detected" in summary[0] and "QUIET_VERL=0" in summary[0]
    assert "engine is not available" not in out.stderr and "Falling back to 'nvidia'" not in out.stderr
    assert "is registered but not available" not in out.stderr
    assert "a warning of the run itself" in out.stderr
    assert "DeprecationWarning" not in out.stderr  # a library's deprecation stays hidden, as without the launcher
    # a process the step starts (a Ray worker of the local cluster) inherits the engine filter
    assert "engine is not available" not in child_log.read_text()


@pytest.mark.slow
def test_verls_main_ppo_runs_through_it_with_hydras_config_beside_main_ppo(tmp_path):
    out = subproc.run(
        [sys.executable, STARTUP, "verl.trainer.main_ppo", "--cfg", "job", "trainer.total_epochs=3"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env(VERL_PLATFORM="cpu"),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "\ntrainer:\n" in out.stdout and "total_epochs: 3" in out.stdout
    assert "platform from VERL_PLATFORM" in out.stderr and "Platform override" not in out.stderr
    assert not os.path.exists(tmp_path / "outputs")  # --cfg job runs nothing


def test_usage_without_a_module():
    out = subproc.run([sys.executable, STARTUP], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "usage:" in out.stderr


TQ_PROBE = """import subprocess, sys
child = subprocess.run([sys.executable, "-c", '''
import psutil
from transfer_queue import client
from transfer_queue.storage import simple_storage
from transfer_queue.utils.common import limit_pytorch_auto_parallel_threads
for n in (client.TQ_NUM_THREADS, simple_storage.TQ_NUM_THREADS):
    with limit_pytorch_auto_parallel_threads(target_num_threads=n, info="probe"):
        pass
print("TQ", client.TQ_NUM_THREADS, psutil.cpu_count(logical=False))
'''], capture_output=True, text=True)
sys.stdout.write(child.stdout)
sys.stderr.write(child.stderr)
"""


@pytest.mark.slow
def test_transfer_queue_threads_fit_the_machine_so_its_put_and_get_do_not_warn_each_time(tmp_path):
    """A process the step starts (a Ray worker: TransferQueue's storage units and clients) runs TransferQueue's own
    thread cap at the TQ_NUM_THREADS it was given: no "should not exceed total physical CPU cores" warning, which a
    20-step CPU run on 2 cores logged 118 times with transfer_queue's default of 8."""
    (tmp_path / "tq_probe.py").write_text(TQ_PROBE)
    out = subproc.run(
        [sys.executable, STARTUP, "tq_probe"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={k: v for k, v in env().items() if k != "TQ_NUM_THREADS"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    tq, cores = (int(x) for x in out.stdout.split("TQ ")[1].split()[:2])
    assert tq == min(8, cores), out.stdout
    assert "should not exceed total physical CPU cores" not in out.stderr, out.stderr[-3000:]
    # a value the user set is kept
    out = subproc.run(
        [sys.executable, STARTUP, "tq_probe"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env(TQ_NUM_THREADS="1"),
    )
    assert out.returncode == 0 and out.stdout.split("TQ ")[1].split()[0] == "1", out.stdout + out.stderr[-2000:]


@pytest.mark.slow
def test_the_eval_commands_python_steps_on_a_cpu_start_through_it_and_other_devices_are_unchanged(tmp_path):
    """recipes/eval_lib.sh's VERL_PY, which eval_in_domain.sh, eval_bfcl.sh and eval_tau2.sh start their python steps
    with (the merger, the export, the scorers, the summary): on DEVICE=cpu each step's verl notices are one line (the
    seed-5 walk's in-domain eval ended in 21 lines of them, three steps' worth), elsewhere ``python3 -m`` as before."""
    script = 'source "$RECIPES_DIR/eval_lib.sh"; "${VERL_PY[@]}" slca_verl.eval.summary --out_dir "$1" --label walk'
    outs = {}
    for device in ("cpu", "cuda"):
        (tmp_path / device).mkdir()
        out = subproc.run(
            ["bash", "-c", script, "_", str(tmp_path / device)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            env=env(DEVICE=device, RECIPES_DIR=os.path.join(REPO, "recipes")),
        )
        assert out.returncode == 0, out.stderr[-3000:]
        assert "| walk |" in (tmp_path / device / "summary.md").read_text()  # the step ran, as python -m runs it
        outs[device] = out.stderr
    assert "verl start-up: " in outs["cpu"] and "engine is not available" not in outs["cpu"], outs["cpu"][-3000:]
    assert "verl start-up: " not in outs["cuda"] and "engine is not available" in outs["cuda"], outs["cuda"][-3000:]
