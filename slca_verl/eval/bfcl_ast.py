"""BFCL (AST categories): generate with a checkpoint behind a local OpenAI-compatible server, score with bfcl-eval's
own ``ast_checker``.

    vllm serve CKPT --served-model-name policy --port 8100 &          # or recipes/eval_bfcl.sh CKPT
    python -m slca_verl.eval.bfcl_ast --base_url http://127.0.0.1:8100/v1 --model policy --out_dir eval/qwen7b_slca
    python -m slca_verl.eval.bfcl_ast --self_check --out_dir /tmp/bfcl    # gold answers as the model output: 100%

Needs ``pip install --no-deps -r requirements-bfcl.txt`` (bfcl-eval and its checker's few dependencies; its vendor
SDK imports are stubbed while the checker is imported). ``BFCL_PROJECT_ROOT`` is set to ``--bfcl_root`` (a temporary
folder by default) because bfcl-eval creates folders under it on import.

Each question is sent as the training prompts are built (:func:`slca_verl.toolcall.hermes.system_prompt`: the tools,
normalised to JSON Schema by :func:`slca_verl.sgls.toolset.normalize_tool`, listed in hermes ``<tools>`` in the system
message), at temperature 0; ``<tool_call>`` blocks of the reply become BFCL's model
output ``[{name: arguments}, ...]``. Irrelevance categories pass when the reply makes no call. Accuracy is reported
per category and over all questions (micro average).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import importlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import types
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

from slca_verl.eval.report import markdown_table, read_jsonl, write_report
from slca_verl.progress import cli_logging

logger = logging.getLogger(__name__)

DEFAULT_CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
)
NO_CALL_CATEGORIES = ("irrelevance", "live_irrelevance")
#: bfcl-eval 2026.3.23 answers no reply can pass: a required list argument with no acceptable value (2), an answer
#: whose only argument is not the function's required one, and one that demands an argument the schema lacks.
UNSATISFIABLE = ("live_simple_106-63-0", "live_simple_112-68-0", "live_multiple_862-181-3", "live_multiple_964-207-0")


# ---------------------------------------------------------------------------------------------------------------
# bfcl-eval's checker and data


class _Dummy:
    """Stands for any object of a stubbed vendor SDK: callable, any attribute, usable as a base class."""

    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return _Dummy()

    def __getattr__(self, name):
        return _Dummy()

    def __mro_entries__(self, bases):
        return (object,)


def _stub_module(name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__path__ = []
    mod.__getattr__ = lambda attr: type(attr, (Exception,), {}) if attr[:1].isupper() else _Dummy()
    return mod


def load_checker(project_root: str | None = None) -> tuple[Callable, Any, str]:
    """``(ast_checker, Language enum, model_name)`` from bfcl-eval, importing it with missing vendor SDKs stubbed.

    Stubs exist only while the checker is imported (then removed from ``sys.modules``). The model name is one whose
    function names bfcl-eval compares as written (no "." to "_" rewriting).
    """
    if "BFCL_PROJECT_ROOT" not in os.environ:  # bfcl-eval reads it when imported; a temporary one goes at exit
        root = project_root
        if root is None:
            root = tempfile.mkdtemp(prefix="bfcl_root_")
            atexit.register(shutil.rmtree, root, ignore_errors=True)
        os.environ["BFCL_PROJECT_ROOT"] = root
    added: list[tuple[str, str | None]] = []
    try:
        for _ in range(200):
            try:
                checker = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
                enums = importlib.import_module("bfcl_eval.constants.enums")
                config = importlib.import_module("bfcl_eval.constants.model_config")
                break
            except ImportError as e:
                missing_attr = re.match(r"cannot import name '(\w+)' from '([\w.]+)'", str(e))
                if missing_attr and not isinstance(e, ModuleNotFoundError):
                    attr, parent = missing_attr.group(1), missing_attr.group(2)
                    sys.modules[f"{parent}.{attr}"] = _stub_module(f"{parent}.{attr}")
                    setattr(sys.modules[parent], attr, sys.modules[f"{parent}.{attr}"])
                    added.append((f"{parent}.{attr}", attr))
                elif e.name and not e.name.startswith("bfcl_eval"):
                    parts = e.name.split(".")
                    for j in range(1, len(parts) + 1):
                        name = ".".join(parts[:j])
                        if name not in sys.modules:
                            sys.modules[name] = _stub_module(name)
                            added.append((name, None))
                else:
                    raise
                for k in [k for k in sys.modules if k.startswith("bfcl_eval")]:
                    del sys.modules[k]
        else:
            raise ImportError("bfcl: could not import bfcl_eval's ast_checker")
    finally:
        for name, attr in added:
            sys.modules.pop(name, None)
            parent = name.rpartition(".")[0]
            if attr and parent in sys.modules and hasattr(sys.modules[parent], attr):
                delattr(sys.modules[parent], attr)
    model = next(k for k, v in config.MODEL_CONFIG_MAPPING.items() if not v.underscore_to_dot and "_" not in k)
    return checker.ast_checker, enums.Language, model


def data_dir() -> Path:
    import bfcl_eval

    return Path(bfcl_eval.__file__).parent / "data"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_cases(
    categories: Sequence[str] = DEFAULT_CATEGORIES, root: Path | None = None, limit: int | None = None
) -> list[dict]:
    """BFCL questions with their functions and possible answers: ``{id, category, messages, functions, possible}``.
    ``limit`` keeps the first N questions of each category."""
    root = root or data_dir()
    cases = []
    for cat in categories:
        entries = _jsonl(root / f"BFCL_v4_{cat}.json")[:limit]
        answers = {}
        if cat not in NO_CALL_CATEGORIES:
            answers = {a["id"]: a["ground_truth"] for a in _jsonl(root / "possible_answer" / f"BFCL_v4_{cat}.json")}
        for e in entries:
            turns = e.get("question") or []
            if len(turns) != 1:
                continue
            cases.append(
                {
                    "id": e["id"],
                    "category": cat,
                    "messages": turns[0],
                    "functions": e["function"],
                    "possible": answers.get(e["id"], []),
                }
            )
    return cases


def prompt(case: dict) -> list[dict]:
    """The chat messages sent for a question: a hermes system prompt listing its tools, then BFCL's turn."""
    from slca_verl.sgls.toolset import normalize_tool
    from slca_verl.toolcall import hermes

    tools = [normalize_tool(f) for f in case["functions"]]
    system = hermes.system_prompt(
        {"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools
    )
    turn = [{"role": m["role"], "content": m["content"]} for m in case["messages"]]
    if turn and turn[0]["role"] == "system":  # BFCL's own system text goes after the tool listing
        system = system + "\n\n" + turn.pop(0)["content"]
    return [{"role": "system", "content": system}, *turn]


# ---------------------------------------------------------------------------------------------------------------
# scoring


def model_output(text: str) -> list[dict]:
    """``<tool_call>`` blocks of a reply -> BFCL's ``[{name: arguments}, ...]`` (unparseable blocks are skipped)."""
    from slca_verl.rewards.parsing import parse_tool_calls, strip_think

    return [{c.name: c.arguments} for c in parse_tool_calls(strip_think(text or ""), None).calls]


def score_case(case: dict, text: str, checker: Callable, language: Any, model_name: str) -> dict:
    """``{id, category, valid, error}`` for one reply."""
    calls = model_output(text)
    if case["category"] in NO_CALL_CATEGORIES:
        valid, error = not calls, ("made a call" if calls else "")
    elif not calls:
        valid, error = False, "no tool call"
    else:
        res = checker(case["functions"], calls, case["possible"], language.PYTHON, case["category"], model_name)
        valid, error = bool(res["valid"]), "" if res["valid"] else "; ".join(map(str, res.get("error", [])))[:300]
    return {"id": case["id"], "category": case["category"], "valid": valid, "error": error}


def summarise(scored: Sequence[dict]) -> dict:
    """Accuracy (%) per category and over all questions."""
    per: dict[str, list[bool]] = defaultdict(list)
    for s in scored:
        per[s["category"]].append(s["valid"])
    out = {c: {"n": len(v), "accuracy": 100.0 * sum(v) / len(v)} for c, v in sorted(per.items())}
    n = len(scored)
    out["overall"] = {"n": n, "accuracy": 100.0 * sum(s["valid"] for s in scored) / n if n else 0.0}
    return out


def gold_calls(possible: list[dict], functions: Sequence[dict]) -> list[dict]:
    """BFCL's possible answer -> concrete calls ``[{"name", "arguments"}]``: the calls a perfect model makes.

    Each argument takes its first acceptable value; "" among them means "may be omitted", honoured unless the
    function requires the argument; arguments the function's schema does not have are left out. A dict value is
    itself a dict of acceptable-value lists and is rendered the same way, also inside a list of dicts."""
    required = {f["name"]: set(f.get("parameters", {}).get("required", [])) for f in functions}
    known = {f["name"]: set(f.get("parameters", {}).get("properties", {})) for f in functions}

    def params(p: dict, req: set, names: set | None) -> dict:
        out = {}
        for k, acceptable in p.items():
            if names is not None and k not in names:  # a few live answers name a parameter the schema lacks
                continue
            values = [v for v in acceptable if v != ""]
            if values and not ("" in acceptable and k not in req):
                out[k] = value(values[0])
            elif not values and "" in acceptable and k in req:  # required, and "" is its only acceptable value
                out[k] = ""
        return out

    def value(v: Any) -> Any:
        if isinstance(v, dict) and v and all(isinstance(x, list) for x in v.values()):
            return params(v, set(v), None)
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            return [value(x) for x in v]
        return v

    return [
        {"name": n, "arguments": params(p, required.get(n, set()), known.get(n))}
        for entry in possible
        for n, p in entry.items()
    ]


def gold_text(case: dict) -> str:
    """The gold answer as a hermes reply (one ``<tool_call>`` block per call, the form bfcl-eval's Qwen handler reads
    too). Four live answers cannot pass whatever the reply (see :data:`UNSATISFIABLE`)."""
    from slca_verl.toolcall import hermes

    return hermes.render_calls(gold_calls(case["possible"], case["functions"]))


# ---------------------------------------------------------------------------------------------------------------
# generation


async def generate(
    cases: Sequence[dict],
    base_urls: Sequence[str],
    model: str,
    *,
    max_tokens: int = 1024,
    concurrency: int = 32,
    timeout_s: float = 120.0,
    api_key: str | None = None,
) -> list[str]:
    """Replies of the served model to every case, at temperature 0, through the project's ``ChatClient``. A request
    that fails after the client's retries yields "" (scored as a miss) and is counted in the log."""
    from slca_verl.sgls.client import ChatClient, ChatClientError

    client = ChatClient(list(base_urls), model, api_key=api_key, timeout_s=timeout_s, max_concurrency=concurrency)
    failures = 0

    async def one(case: dict) -> str:
        nonlocal failures
        try:
            return await client.chat(prompt(case), temperature=0.0, max_tokens=max_tokens)
        except ChatClientError as e:
            failures += 1
            logger.warning("bfcl: %s failed (%s)", case["id"], e.kind)
            return ""

    try:
        replies = list(await asyncio.gather(*(one(c) for c in cases)))
    finally:
        await client.aclose()
    if failures:
        logger.warning("bfcl: %d of %d requests failed and score as misses", failures, len(cases))
    return replies


def table(summary: dict) -> str:
    rows = [[c, v["n"], v["accuracy"]] for c, v in summary.items() if c != "overall"]
    rows.append(["**overall**", summary["overall"]["n"], summary["overall"]["accuracy"]])
    return markdown_table(["category", "n", "accuracy (%)"], rows)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base_url", default=None, help="comma-separated OpenAI-compatible base URLs (…/v1)")
    p.add_argument("--model", default="policy", help="served model name")
    p.add_argument("--categories", default=",".join(DEFAULT_CATEGORIES))
    p.add_argument("--limit", type=int, default=None, help="first N questions per category")
    p.add_argument("--predictions", default=None, help="score a JSONL of {id, response} instead of generating")
    p.add_argument("--self_check", action="store_true", help="score the gold answers as the model output")
    p.add_argument("--max_tokens", type=int, default=1024)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--bfcl_root", default=None)
    p.add_argument("--out_dir", required=True)
    args = p.parse_args(argv)
    cli_logging()

    checker, language, model_name = load_checker(args.bfcl_root)
    cases = load_cases(args.categories.split(","), limit=args.limit)
    if args.self_check:
        replies = [gold_text(c) for c in cases]
    elif args.predictions:
        by_id = {r["id"]: r["response"] for r in read_jsonl(args.predictions)}
        replies = [by_id.get(c["id"], "") for c in cases]
    elif args.base_url:
        replies = asyncio.run(
            generate(
                cases, args.base_url.split(","), args.model, max_tokens=args.max_tokens, concurrency=args.concurrency
            )
        )
    else:
        logger.error("give --base_url, --predictions or --self_check")
        return 1
    scored = [score_case(c, r, checker, language, model_name) for c, r in zip(cases, replies)]
    summary = summarise(scored)
    result = {
        "model": "gold" if args.self_check else args.model,
        "summary": summary,
        "cases": [{**s, "response": r} for s, r in zip(scored, replies)],
    }
    json_path, md_path = write_report(args.out_dir, "bfcl", result, table(summary))
    logger.info(
        "BFCL overall accuracy %.2f%% over %d questions -> %s, %s",
        summary["overall"]["accuracy"],
        len(scored),
        json_path,
        md_path,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
