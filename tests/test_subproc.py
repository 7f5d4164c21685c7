"""tests/subproc.run kills a timed-out command's whole process group: a recipe's python child dies with its bash."""

import os
import subprocess
import sys
import time

import pytest
import subproc

SCRIPT = (
    f'\'{sys.executable}\' -c \'import os, time; open(os.environ["PID_FILE"], "w").write(str(os.getpid())); '
    "time.sleep(300)' & wait"
)


def _child_pid(path) -> int:
    for _ in range(100):
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("the child never started")


def test_a_timed_out_command_leaves_no_process_of_its_group_behind(tmp_path):
    pid_file = tmp_path / "pid"
    with pytest.raises(subprocess.TimeoutExpired):
        subproc.run(["bash", "-c", SCRIPT], timeout=3, env={**os.environ, "PID_FILE": str(pid_file)})
    child = _child_pid(pid_file)
    for _ in range(50):
        if not subproc.alive(child):
            break
        time.sleep(0.1)
    assert not subproc.alive(child)


def test_subprocess_run_alone_would_leave_the_child_running(tmp_path):
    """The failure subproc.run exists for: subprocess.run kills bash only, its python child runs on."""
    pid_file = tmp_path / "pid"
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run(["bash", "-c", SCRIPT], timeout=3, env={**os.environ, "PID_FILE": str(pid_file)})
    child = _child_pid(pid_file)
    try:
        assert subproc.alive(child)
    finally:
        os.kill(child, 9)


def test_it_returns_what_subprocess_run_returns():
    done = subproc.run(
        [sys.executable, "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(3)"],
        input="abc",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout.strip()) == (3, "ABC")
    with pytest.raises(subprocess.CalledProcessError):
        subproc.run([sys.executable, "-c", "raise SystemExit(1)"], check=True, timeout=60)
