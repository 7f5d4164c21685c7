"""The CPU main job with SGLS and the HierR judge on the real vLLM OpenAI server of this tier (docs/sgls.md):
``OPENAI_BASE_URL=... OPENAI_MODEL=... bash recipes/run_cpu_tiny_slca.sh`` for two steps of verl's ``main_ppo``.

The served model is a tiny random Qwen3, so simulated tool responses and ratings are garbage; what is tested is that
the whole trainer runs with the simulator and judge as network services, and that they were really asked.
"""

import re
import urllib.request

from main_ppo_helpers import STEPS, read_metrics, run_recipe


def served_requests(base_url: str) -> float:
    """vLLM's Prometheus counter of finished requests (all finish reasons)."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(v) for v in re.findall(r"^vllm:request_success_total\{[^}]*\} ([0-9.e+]+)$", text, re.M))


def test_main_ppo_trains_two_steps_with_sgls_and_the_judge_on_the_vllm_server(vllm, tmp_path):
    url, model = vllm
    before = served_requests(url)
    # no validation passes here (the suite's CPU run checks them): the served judge is slow on a CPU. The random
    # simulator's answers are long garbage: cut them (characters) and leave the policy room for a reply after them,
    # or every episode ends at the response limit without a summary and nothing is judged
    proc, out_dir = run_recipe(
        str(tmp_path),
        OPENAI_BASE_URL=url,
        OPENAI_MODEL=model,
        VAL_BEFORE_TRAIN="false",
        TEST_FREQ="-1",
        MAX_TOOL_RESPONSE_CHARS="160",
        MAX_RESPONSE_LENGTH="384",
        MAX_MODEL_LEN="1536",
        TRAIN_BATCH_SIZE="4",
        PPO_MINI_BATCH_SIZE="4",
    )  # 16 rollouts a step
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    metrics = read_metrics(out_dir)
    assert sorted(metrics) == list(range(1, STEPS + 1))
    # the judge was asked for every reply it had to rate; a random model's answers are counted failures or ratings
    judged = sum(m["reward_extra/judge_used/mean"] + m["reward_extra/judge_failed/mean"] for m in metrics.values())
    assert judged > 0
    assert served_requests(url) > before  # SGLS and the judge really went to the server
