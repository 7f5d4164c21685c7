"""``run``: :func:`subprocess.run` for tests, the child in a process group of its own that is killed whole when the
test times it out or is interrupted. ``subprocess.run`` kills only the child it started: a recipe's ``bash`` dies,
and its python (a warm-up, a trainer, a server) runs on as an orphan into the tests after it."""

import os
import signal
import subprocess
import time


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL every process of ``proc``'s group (``proc`` leads it: started with ``start_new_session``)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process: it exists and is not a zombie (dead, waiting for its parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def read_pid(path, timeout: float = 60.0) -> int:
    """The pid a test's child wrote to ``path``, once it has (AssertionError after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"the child never wrote its pid to {path}")


def gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether ``pid`` is gone (not :func:`alive`) within ``timeout`` seconds: a killed process takes a moment."""
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def run(args, *, timeout=None, input=None, capture_output=False, check=False, **kwargs) -> subprocess.CompletedProcess:
    """Like :func:`subprocess.run` (same keywords), the child leading a new process group; on a timeout or any
    exception (KeyboardInterrupt included) the whole group is killed before the error goes on."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with subprocess.Popen(args, start_new_session=True, **kwargs) as proc:
        try:
            stdout, stderr = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            kill_group(proc)
            exc.stdout, exc.stderr = proc.communicate()
            raise
        except BaseException:
            kill_group(proc)
            raise
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done
