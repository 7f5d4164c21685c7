"""tests/subproc.run kills a timed-out command's whole process group: a recipe's python child dies with its bash."""

import os
import subprocess
import sys

import pytest
import subproc

SCRIPT = (
    f'\'{sys.executable}\' -c \'import os, time; open(os.environ["PID_FILE"], "w").write(str(os.getpid())); '
    "time.sleep(300)' & wait"
)


def test_a_timed_out_command_leaves_no_process_of_its_group_behind(tmp_path):
    pid_file = tmp_path / "pid"
    with pytest.raises(subprocess.TimeoutExpired):
        subproc.run(["bash", "-c", SCRIPT], timeout=3, env={**os.environ, "PID_FILE": str(pid_file)})
    assert subproc.gone(subproc.read_pid(pid_file))


def test_subprocess_run_alone_would_leave_the_child_running(tmp_path):
    """The failure subproc.run exists for: subprocess.run kills bash only, its python child runs on."""
    pid_file = tmp_path / "pid"
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run(["bash", "-c", SCRIPT], timeout=3, env={**os.environ, "PID_FILE": str(pid_file)})
    child = subproc.read_pid(pid_file)
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
