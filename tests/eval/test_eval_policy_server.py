"""The eval commands' policy server (recipes/eval_lib.sh serve_policy / stop_policy): it binds 127.0.0.1 unless
POLICY_HOST says otherwise, and when the command that started it returns -- normally, on SIGTERM, or with an engine
process that ignores SIGTERM -- neither the server, nor a process under it, nor a listener on its port is left. No
vLLM: a stand-in `vllm` serves GET /health with python's http.server and starts an "engine" child, as vLLM's API
server starts its engine core."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import subproc
from sgls_helpers import free_port

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECIPES = os.path.join(REPO, "recipes")

STAND_IN = """#!{python}
import http.server, json, os, signal, subprocess, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "args.json"), "w") as f:
    json.dump(sys.argv[1:], f)
engine = "import signal, sys, time\\n" + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n" if {stubborn} else "")
ready = os.path.join(here, "engine.ready")
engine += "open(sys.argv[2], 'w').close()\\ntime.sleep(300)\\n"
subprocess.Popen([sys.executable, "-c", engine, "engine-of", ready])
import time
while not os.path.exists(ready):  # healthy only once the engine runs (and ignores SIGTERM, if stubborn): under load
    time.sleep(0.05)              # a TERM sent before the engine set SIG_IGN killed it and the test saw no SIGKILL
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
port = int(sys.argv[sys.argv.index("--port") + 1])
import time; time.sleep({delay})
http.server.HTTPServer((sys.argv[sys.argv.index("--host") + 1], port), Health).serve_forever()
"""

RUN = """set -euo pipefail
RECIPES_DIR=$1
source "${RECIPES_DIR}/eval_lib.sh"
serve_policy /models/ckpt "$2"
echo healthy
[[ "$3" == exit ]] || { sleep 120 > /dev/null 2>&1 & wait $!; }   # (a sleep holding our pipes would stall the read)
"""


def stand_in(tmp_path, stubborn=False, delay=0):
    vllm = tmp_path / "vllm"
    vllm.write_text(STAND_IN.format(python=sys.executable, stubborn=stubborn, delay=delay))
    vllm.chmod(0o755)
    return vllm


def left_over(tmp_path) -> list[int]:
    """Processes whose command line names tmp_path (the stand-in server and its engine)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(tmp_path) in cmd and state != "Z":
            pids.append(int(pid))
    return pids


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def start(tmp_path, mode, stubborn=False, delay=0, xtrace=False, **env):
    port = free_port()
    (tmp_path / "out").mkdir(exist_ok=True)
    proc = subprocess.Popen(
        ["bash", *(["-x"] if xtrace else []), "-c", RUN, "_", RECIPES, str(port), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={
            **os.environ,
            "VLLM_BIN": str(stand_in(tmp_path, stubborn, delay)),
            "OUT_DIR": str(tmp_path / "out"),
            "DEVICE": "cuda",
            **env,
        },
    )
    return proc, port


@pytest.mark.parametrize("how", ["exit", "sigterm"])
def test_the_policy_server_binds_loopback_and_is_gone_with_its_engine_when_the_command_returns(tmp_path, how):
    proc, port = start(tmp_path, "exit" if how == "exit" else "wait")
    try:
        assert proc.stdout.readline().strip() == "healthy", proc.stderr.read()[-2000:]
        args = json.loads((tmp_path / "args.json").read_text())
        assert args[:2] == ["serve", "/models/ckpt"] and args[args.index("--host") + 1] == "127.0.0.1"
        assert args[args.index("--served-model-name") + 1] == "policy"
        if how == "sigterm":
            assert len(left_over(tmp_path)) == 2 and listening(port)  # the server and its engine, up
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        stderr = proc.stderr.read()
    finally:
        subproc.kill_group(proc)
    assert proc.returncode == (0 if how == "exit" else 143), stderr[-2000:]
    assert "policy server stopped" in stderr and "processes under it" in stderr
    assert left_over(tmp_path) == [] and not listening(port)


def test_an_engine_that_ignores_sigterm_is_killed_and_waited_for(tmp_path):
    proc, port = start(tmp_path, "exit", stubborn=True, POLICY_STOP_S="1")
    try:
        assert proc.stdout.readline().strip() == "healthy", proc.stderr.read()[-2000:]
        t0 = time.monotonic()
        proc.wait(timeout=60)
        stderr = proc.stderr.read()
    finally:
        subproc.kill_group(proc)
    assert proc.returncode == 0, stderr[-2000:]
    assert "still running after 1 s; SIGKILL" in stderr and time.monotonic() - t0 < 30
    assert left_over(tmp_path) == [] and not listening(port)


def test_policy_host_binds_elsewhere_only_when_asked(tmp_path):
    proc, port = start(tmp_path, "exit", POLICY_HOST="0.0.0.0")
    try:
        assert proc.stdout.readline().strip() == "healthy", proc.stderr.read()[-2000:]
        proc.wait(timeout=60)
    finally:
        subproc.kill_group(proc)
    args = json.loads((tmp_path / "args.json").read_text())
    assert args[args.index("--host") + 1] == "0.0.0.0"
    assert left_over(tmp_path) == []


def test_the_wait_for_health_is_two_lines_under_an_eval_scripts_xtrace_not_four_a_second(tmp_path):
    """The eval scripts run under `set -x`; the health loop, traced, wrote curl / kill / sleep lines every second
    (440 lines of the seed-5 walk's eval_bfcl.sh). Now a line before and after, and the trace goes on after it."""
    proc, _ = start(tmp_path, "exit", delay=4, xtrace=True)
    try:
        proc.wait(timeout=120)
        stdout, stderr = proc.stdout.read(), proc.stderr.read()
    finally:
        subproc.kill_group(proc)
    assert proc.returncode == 0 and stdout.strip() == "healthy", stderr[-2000:]
    assert "waiting for http://127.0.0.1:" in stderr and "policy server: healthy after" in stderr, stderr[-2000:]
    assert [line for line in stderr.splitlines() if "curl -sf" in line] == [], stderr[-2000:]
    assert "+ echo healthy" in stderr  # the caller's trace is back on
    assert left_over(tmp_path) == []
