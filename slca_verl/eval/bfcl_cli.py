"""bfcl-eval's own command line, with the served checkpoint registered as a bfcl-eval model.

Run with the Python of the bfcl-eval environment (``scripts/bfcl_setup.sh``), by path — this file imports only
bfcl-eval and the standard library, never the rest of slca-verl (whose package imports verl)::

    BFCL_PROJECT_ROOT=eval/run/bfcl LOCAL_SERVER_PORT=8100 \
      /tmp/slca-bfcl/venv/bin/python slca_verl/eval/bfcl_cli.py --served_model policy -- \
      generate --model slca-verl/policy-FC --test-category multi_turn --skip-server-setup --local-model-path CK
    ... bfcl_cli.py -- evaluate --model slca-verl/policy-FC --test-category multi_turn

Everything after ``--`` is bfcl's own ``generate`` / ``evaluate`` / ``scores`` arguments, unchanged; bfcl-eval reads
its endpoint from ``LOCAL_SERVER_ENDPOINT`` / ``LOCAL_SERVER_PORT`` and writes under ``BFCL_PROJECT_ROOT``, as its
README says.

The registered model, ``slca-verl/policy-FC`` (:data:`MODEL_NAME`), is bfcl-eval's Qwen function-calling handler
(``QwenFCHandler``: hermes ``<tool_call>`` JSON blocks, tool results as ``<tool_response>`` user turns, prompts
through the completions endpoint) with one change: the prompt is rendered by the checkpoint's own chat template
(``tokenizer.apply_chat_template(messages, tools=functions)``), so the policy is asked in exactly the format it
was trained in. For a Qwen3 template this is the text bfcl-eval's handler writes itself; for Qwen2.5-7B-Instruct,
the paper's model, which bfcl-eval 2026.3.23 no longer lists, it adds the template's default system line ("You
are Qwen, created by Alibaba Cloud...") that the Qwen3 handler leaves out. Requests name the served model
(``--served_model``) rather than the local path, and ``--max_tokens`` caps each completion (a CPU needs short
ones; bfcl-eval's own cap is 4096).

``--limit N`` generates the first N entries of each requested category: it writes bfcl-eval's
``test_case_ids_to_generate.json`` and adds ``--run-ids`` (``evaluate`` then needs ``--partial-eval``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

MODEL_NAME = "slca-verl/policy-FC"


class _Capped:
    """An OpenAI client whose ``completions.create`` asks for at most ``cap`` tokens."""

    def __init__(self, client, cap: int):
        self._client, self._cap = client, cap
        self.completions = self

    def create(self, **kwargs):
        kwargs["max_tokens"] = min(int(kwargs.get("max_tokens") or self._cap), self._cap)
        return self._client.completions.create(**kwargs)

    def __getattr__(self, name):
        return getattr(self._client, name)


def register(served_model: str, max_tokens: int | None) -> None:
    """Add :data:`MODEL_NAME` to bfcl-eval's model table (the table its generate and evaluate look names up in)."""
    from bfcl_eval.constants import model_config
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler
    from typing_extensions import override

    class PolicyFCHandler(QwenFCHandler):
        """QwenFCHandler whose prompt is the checkpoint's own chat template, sent under the served name."""

        @override  # PEP 698's marker: bfcl-eval's handlers demand it on every overriding method
        def _query_prompting(self, inference_data):
            # spin_up_local_server (final in bfcl-eval) loaded the tokenizer from --local-model-path; requests
            # name the model as the OpenAI server serves it
            self.model_path_or_id = served_model
            if max_tokens and not isinstance(self.client, _Capped):
                self.client = _Capped(self.client, max_tokens)
            return super()._query_prompting(inference_data)

        @override
        def _format_prompt(self, messages, function):
            return self.tokenizer.apply_chat_template(
                messages, tools=function or None, add_generation_prompt=True, tokenize=False
            )

    model_config.MODEL_CONFIG_MAPPING[MODEL_NAME] = model_config.ModelConfig(
        model_name=MODEL_NAME,
        display_name="slca-verl policy (FC)",
        url="https://github.com/slca-verl/slca-verl",
        org="slca-verl",
        license="apache-2.0",
        model_handler=PolicyFCHandler,
        is_fc_model=True,
        underscore_to_dot=False,
    )


def write_run_ids(categories: list[str], limit: int) -> dict[str, list[str]]:
    """bfcl-eval's id file (under ``BFCL_PROJECT_ROOT``): the first ``limit`` entries of each category."""
    from bfcl_eval.constants.eval_config import TEST_IDS_TO_GENERATE_PATH
    from bfcl_eval.utils import load_dataset_entry, parse_test_category_argument

    chosen = {}
    for category in parse_test_category_argument(categories):
        entries = load_dataset_entry(category, include_prereq=False)
        chosen[category] = [e["id"] for e in entries[:limit]]
    TEST_IDS_TO_GENERATE_PATH.write_text(json.dumps(chosen, indent=2))
    return chosen


def _option(argv: list[str], flag: str) -> list[str]:
    """The comma-separated values of ``flag`` in bfcl's arguments (``--test-category a,b --test-category c``)."""
    values = []
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            values += argv[i + 1].split(",")
        elif arg.startswith(flag + "="):
            values += arg.split("=", 1)[1].split(",")
    return values


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, bfcl_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else ([], argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--served_model", default="policy", help="the model name the OpenAI server serves")
    parser.add_argument("--max_tokens", type=int, default=None, help="cap on each completion's tokens")
    parser.add_argument("--limit", type=int, default=None, help="generate the first N entries of each category")
    args = parser.parse_args(ours)
    if "BFCL_PROJECT_ROOT" not in os.environ:
        parser.error("set BFCL_PROJECT_ROOT: bfcl-eval writes its result/ and score/ folders under it")
    register(args.served_model, args.max_tokens)
    if args.limit is not None and bfcl_args[:1] == ["generate"]:
        write_run_ids(_option(bfcl_args, "--test-category") or ["all"], args.limit)
        bfcl_args.append("--run-ids")
    from bfcl_eval.__main__ import cli

    return cli(bfcl_args, standalone_mode=False) or 0


if __name__ == "__main__":
    sys.exit(main())
