"""Write a run's agent loop YAML: the shipped ``slca_verl/config/agent_loop.yaml`` with this run's reward layout and
an inline SGLS block pointing at the simulator servers (the serving scripts' URLs).

    python3 recipes/make_run_config.py --out RUN_DIR/agent_loop.yaml --reward-layout toolpo \
        --sgls-backend openai --sgls-urls http://10.0.0.5:8000/v1,http://10.0.0.6:8000/v1 \
        --sgls-model Qwen3-235B-A22B-Instruct-2507 --sgls-temperature 0.6 --set max_tool_response_length=2048

Only the ``slca_tool_agent`` entry changes: its reward layout, its SGLS block and each ``--set KEY=VALUE`` (the value
read as YAML; the recipes pass their multi-turn limits this way, because the agent loop's own keyword arguments win
over ``actor_rollout_ref.rollout.multi_turn``). Every other key keeps the shipped value. The SGLS block starts from the
``SGLSTool`` config of ``--sgls-template`` (default ``slca_verl/config/sgls_tool.yaml``) so all its documented
defaults (cache scope, retries, structured output) stay in force.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import yaml

logger = logging.getLogger("make_run_config")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_DIR = os.path.join(REPO, "slca_verl", "config")
AGENT = "slca_tool_agent"
SGLS_CLASS = "slca_verl.sgls.tool.SGLSTool"


def sgls_block(
    template: str,
    backend: str,
    urls: list[str],
    model: str | None,
    temperature: float | None,
    api_key_file: str | None = None,
    settings: dict | None = None,
) -> dict:
    with open(template, encoding="utf-8") as f:
        tools = yaml.safe_load(f)["tools"]
    block = next((dict(t["config"]) for t in tools if t.get("class_name") == SGLS_CLASS), None)
    if block is None:
        raise ValueError(f"{template}: no tool with class_name {SGLS_CLASS}")
    block.pop("type", None)
    block["backend"] = backend
    if urls:
        block["base_urls"] = urls
    if model:
        block["model"] = model
    if temperature is not None:
        block["temperature"] = temperature
    if api_key_file:  # the path only: the key itself never enters the run's YAML
        block["api_key_file"] = os.path.abspath(api_key_file)
    for key, value in (settings or {}).items():
        if key not in block:
            raise ValueError(f"{template}: the simulator's config has no key '{key}' (it has {sorted(block)})")
        block[key] = value
    return block


def build(
    source: str,
    template: str,
    layout: str,
    backend: str,
    urls: list[str],
    model: str | None,
    temperature: float | None,
    extra: dict | None = None,
    api_key_file: str | None = None,
    sgls_settings: dict | None = None,
) -> list[dict]:
    with open(source, encoding="utf-8") as f:
        entries = yaml.safe_load(f)
    entry = next((e for e in entries if e.get("name") == AGENT), None)
    if entry is None:
        raise ValueError(f"{source}: no agent loop named {AGENT}")
    entry["reward_layout"] = layout
    entry["sgls"] = sgls_block(template, backend, urls, model, temperature, api_key_file, sgls_settings)
    entry["sgls_config_path"] = None
    entry.update(extra or {})
    return entries


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--source", default=os.path.join(CONFIG_DIR, "agent_loop.yaml"))
    p.add_argument("--sgls-template", default=os.path.join(CONFIG_DIR, "sgls_tool.yaml"))
    p.add_argument("--reward-layout", default="slca")
    p.add_argument("--sgls-backend", default="openai", choices=["openai", "offline"])
    p.add_argument("--sgls-urls", default="", help="comma-separated base URLs of the simulator servers")
    p.add_argument("--sgls-model", default=None)
    p.add_argument("--sgls-temperature", type=float, default=None)
    p.add_argument("--sgls-api-key-file", default=None, help="file holding the simulator servers' API key")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a keyword argument of the agent loop entry (value parsed as YAML); repeatable",
    )
    p.add_argument(
        "--sgls-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a key of the simulator's config block (timeout_s, max_retries, ...; value parsed as YAML)",
    )
    args = p.parse_args(argv)
    extra, sgls_settings = {}, {}
    for items, into, flag in ((args.set, extra, "--set"), (args.sgls_set, sgls_settings, "--sgls-set")):
        for item in items:
            key, sep, value = item.partition("=")
            if not sep or not key:
                p.error(f"{flag} expects KEY=VALUE, got {item!r}")
            into[key] = yaml.safe_load(value)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    urls = [u for u in args.sgls_urls.split(",") if u]
    if args.sgls_backend == "openai" and not urls:
        logger.error("--sgls-backend openai needs --sgls-urls")
        return 1
    entries = build(
        args.source,
        args.sgls_template,
        args.reward_layout,
        args.sgls_backend,
        urls,
        args.sgls_model,
        args.sgls_temperature,
        extra,
        args.sgls_api_key_file,
        sgls_settings,
    )
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(f"# written by recipes/make_run_config.py from {args.source}\n")
        yaml.safe_dump(entries, f, sort_keys=False)
    logger.info(
        "wrote %s (reward_layout=%s, sgls backend=%s, %d url(s))",
        args.out,
        args.reward_layout,
        args.sgls_backend,
        len(urls),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
