"""scripts/check_gpu_env.py on this CPU machine: it names what a GPU run lacks, exits 1 unless everything is there, and
tells a live OpenAI-compatible server from a dead port. The whole script runs once (one subprocess: importing torch
and verl is most of its ~10 s); the rest calls its check functions in-process."""

import http.server
import importlib.util
import json
import os
import subprocess
import sys
import threading

import pytest
from sgls_helpers import dead_url

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "check_gpu_env.py")
RECIPE_ENV = ("SGLS_URLS", "JUDGE_URLS", "SGLS_MODEL", "JUDGE_MODEL", "SGLS_BACKEND", "JUDGE", "MODEL_PATH", "SFT_DIR",
              "N_GPUS_PER_NODE", "SERVICES_DIR", "VERL_USE_EXTERNAL_PLUGINS")  # fmt: skip

spec = importlib.util.spec_from_file_location("check_gpu_env", SCRIPT)
check_gpu_env = sys.modules["check_gpu_env"] = importlib.util.module_from_spec(spec)  # dataclasses look it up there
spec.loader.exec_module(check_gpu_env)


class ModelsHandler(http.server.BaseHTTPRequestHandler):
    """GET /v1/models as vLLM answers it (one model, id "m"); 404 elsewhere."""

    def do_GET(self):
        if self.path.rstrip("/") != "/v1/models":
            self.send_error(404)
            return
        body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def models_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ModelsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture()
def clean_env(monkeypatch, tmp_path):
    for name in RECIPE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SERVICES_DIR", str(tmp_path / "services"))
    return tmp_path


def lines_of(output: str) -> dict[str, str]:
    """{check name: status} from the script's output."""
    out = {}
    for line in output.splitlines():
        status, _, rest = line.partition(" ")
        if status in ("OK", "MISSING", "SKIP"):
            out[rest.strip().split(": ", 1)[0]] = status
    return out


def test_on_a_cpu_machine_it_exits_1_and_names_the_cuda_torch_missing(models_server, clean_env):
    model = clean_env / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    dead = dead_url()
    env = {k: v for k, v in os.environ.items() if k not in RECIPE_ENV}
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--gpus-per-node", "8", "--sgls-urls", f"{models_server},{dead}", "--sgls-model", "m",
         "--judge-urls", dead, "--model-path", str(model), "--timeout", "2"],
        capture_output=True, text=True, timeout=120, env={**env, "SERVICES_DIR": str(clean_env / "services")},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    status = lines_of(proc.stdout)
    torch_line = next(line for line in proc.stdout.splitlines() if "torch with CUDA" in line)
    assert torch_line.startswith("MISSING") and "CPU build" in torch_line
    assert 'pip install -e ".[gpu]"' in proc.stdout  # the fix is named
    assert status["GPUs per node"] == "MISSING"
    assert status["flash_attn"] == "MISSING" and "--no-build-isolation" in proc.stdout
    assert status["vllm"] == "MISSING"
    assert status["verl"] == "OK" and status["slca_verl plugin"] == "OK"
    assert status[f"SGLS server {models_server}"] == "OK"
    assert status[f"SGLS server {dead}"] == "MISSING"
    assert status[f"Judge server {dead}"] == "MISSING"
    assert status["model path"] == "OK"
    assert "checks MISSING" in proc.stdout.splitlines()[-1]


def test_a_live_server_is_ok_and_a_dead_port_is_missing(models_server):
    live = check_gpu_env.check_server("SGLS", models_server, None, 2.0, "serve_sgls.sh", "SGLS_URLS")
    assert live.ok is True and live.detail == "serves m"
    dead = check_gpu_env.check_server("SGLS", dead_url(), None, 2.0, "serve_sgls.sh", "SGLS_URLS")
    assert dead.ok is False and "refused" in dead.detail and "recipes/serve_sgls.sh" in dead.fix
    assert dead.render().startswith("MISSING  SGLS server http://127.0.0.1:")


def test_a_server_that_serves_another_model_is_missing(models_server):
    check = check_gpu_env.check_server("Judge", models_server, "gpt-oss-120b", 2.0, "serve_judge.sh", "JUDGE_URLS")
    assert check.ok is False and "not gpt-oss-120b" in check.detail and "JUDGE_MODEL" in check.fix


def test_a_url_without_the_models_route_is_missing(models_server):
    root = models_server.removesuffix("/v1")
    check = check_gpu_env.check_server("SGLS", root, None, 2.0, "serve_sgls.sh", "SGLS_URLS")
    assert check.ok is False and "404" in check.detail


def test_default_urls_come_from_the_serving_scripts_files_like_the_recipe(clean_env, monkeypatch):
    services = clean_env / "services"
    assert check_gpu_env.recipe_urls("SGLS_URLS", "sgls_urls", "http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    services.mkdir()
    (services / "sgls_urls").write_text("http://10.0.0.5:8000/v1,http://10.0.0.6:8000/v1\n")
    args = check_gpu_env.parse_args(["--sgls-model", ""])
    sgls = [c for c in check_gpu_env.server_checks(args) if c.name.startswith("SGLS")]
    assert [c.name for c in sgls] == ["SGLS server http://10.0.0.5:8000/v1", "SGLS server http://10.0.0.6:8000/v1"]
    monkeypatch.setenv("SGLS_URLS", "http://a:1/v1")
    assert check_gpu_env.recipe_urls("SGLS_URLS", "sgls_urls", "x") == "http://a:1/v1"


def test_servers_are_skipped_with_no_servers_or_when_the_run_does_not_use_them(clean_env, monkeypatch):
    skipped = check_gpu_env.server_checks(check_gpu_env.parse_args(["--no-servers"]))
    assert [(c.name, c.ok) for c in skipped] == [("SGLS server", None), ("Judge server", None)]
    monkeypatch.setenv("SGLS_BACKEND", "offline")
    monkeypatch.setenv("JUDGE", "offline_proxy")
    assert all(c.ok is None for c in check_gpu_env.server_checks(check_gpu_env.parse_args([])))


def test_the_exit_status_is_0_only_when_nothing_is_missing(capsys):
    Check = check_gpu_env.Check
    assert check_gpu_env.report([Check("a", True, "x"), Check("b", None, "skipped")]) == 0
    assert check_gpu_env.report([Check("a", True, "x"), Check("b", False, "gone", "fix it")]) == 1
    out = capsys.readouterr().out
    assert "MISSING  b: gone\n         fix: fix it" in out and "1 of 2 checks MISSING: b" in out


def test_the_model_path_defaults_to_the_newest_sft_checkpoint(clean_env, monkeypatch):
    sft = clean_env / "sft"
    for step in (5, 40, 100):
        (sft / f"global_step_{step}" / "huggingface").mkdir(parents=True)
    (sft / "global_step_100" / "huggingface" / "config.json").write_text("{}")
    monkeypatch.setenv("SFT_DIR", str(sft))
    path = check_gpu_env.default_model_path()
    assert path == str(sft / "global_step_100" / "huggingface")  # numeric order, not 40 > 100 as strings
    assert check_gpu_env.check_model_path(path).ok is True
    assert check_gpu_env.check_model_path(str(sft / "global_step_5" / "huggingface")).detail.endswith("no config.json")


def test_the_pins_are_verls_own(clean_env):
    assert check_gpu_env.pinned_versions() == {"torch": "2.11.0", "vllm": "0.24.0", "flash-attn": "2.8.3"}


def fake_torch(version="2.11.0+cu130", cuda="13.0", available=True, count=8):
    """Stands in for a CUDA build of torch (this machine has a CPU build only)."""
    from types import SimpleNamespace

    gpus = SimpleNamespace(is_available=lambda: available, device_count=lambda: count)
    return SimpleNamespace(__version__=version, version=SimpleNamespace(cuda=cuda), cuda=gpus)


def test_on_a_gpu_node_torch_is_ok_and_the_gpu_count_is_checked_against_the_run(monkeypatch):
    torch = fake_torch(count=4)
    monkeypatch.setitem(sys.modules, "torch", torch)
    check, module = check_gpu_env.check_torch("2.11.0")
    assert check.ok is True and check.detail == "torch 2.11.0+cu130, CUDA 13.0" and module is torch
    assert check_gpu_env.check_gpu_count(torch, 4).ok is True
    short = check_gpu_env.check_gpu_count(torch, 8)
    assert short.ok is False and "N_GPUS_PER_NODE=4" in short.fix


@pytest.mark.parametrize(
    "torch,expected",
    [
        (fake_torch(available=False), "sees no GPU"),
        (fake_torch(version="2.13.0+cu130"), "pin 2.11.0"),
    ],
)
def test_a_cuda_torch_that_cannot_run_the_recipe_is_missing(monkeypatch, torch, expected):
    monkeypatch.setitem(sys.modules, "torch", torch)
    check, _ = check_gpu_env.check_torch("2.11.0")
    assert check.ok is False and expected in check.detail and check.fix
