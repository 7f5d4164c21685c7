"""A small, generated stand-in for the SLCA-GRPO authors' data release, in its file names and layouts.

    python -m data_prep.release_sample --output_dir data/release_sample [--seed 0] [--rl_rows 16] [--eval_rows 8]

The release (Hugging Face dataset ``YanZhanPKU/SLCA-GRPO-Datasets``, folder ``data/``) holds four parquet files; this
module writes three of them, with the same names, columns and text conventions, from a few generated tool servers
(calculator, weather, clock), so the GPU path (data_prep -> SFT -> RL -> eval) can be rehearsed without the download:

- ``toucan_toolcall_rl.parquet`` and ``toucan_eval_4k_unified.parquet``: verl's RL layout (``prompt`` chat messages
  with the tools listed in a hermes ``<tools>`` block of the system message, ``data_source`` "toucan_toolcall",
  ``reward_model.ground_truth`` with ``allowed_tools``, ``gold_tool_calls`` as a JSON string of nested steps,
  ``question_content``, ``subset_name``, ``tool_schemas``; ``extra_info``; ``tools`` as a JSON string);
- ``toucan_toolcall_sft_split_42k.parquet``: one column ``conversations`` of ShareGPT turns ``{from, value}``: the
  system turn lists the tools as JSON lines in ``<tools>``, a ``gpt`` turn writes a step's calls as one JSON list in
  ``<tool_call>``, a ``human`` turn brings the results in ``<tool_response>`` blocks, the last ``gpt`` turn answers.

Questions are single calls, parallel calls (two calls in one step) and two dependent steps. The SFT dialogues use
other numbers and cities than the RL and eval rows. Nothing here is the authors' text.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
from typing import Sequence

from slca_verl.toolcall import hermes

logger = logging.getLogger(__name__)

RL_FILE = "toucan_toolcall_rl.parquet"
EVAL_FILE = "toucan_eval_4k_unified.parquet"
SFT_FILE = "toucan_toolcall_sft_split_42k.parquet"

CITIES = {
    "Boston": 68,
    "Chicago": 71,
    "Denver": 59,
    "Seattle": 55,
    "Austin": 88,
    "Miami": 84,
    "Portland": 61,
    "Phoenix": 97,
    "Atlanta": 79,
    "Detroit": 64,
    "Tampa": 86,
    "Omaha": 70,
}
ZONES = ["UTC", "Europe/Paris", "Asia/Tokyo", "America/New_York"]


def _tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


NUMBER = {"type": "number"}
TOOLS = [
    _tool("calculator-add", "Add two numbers", {"a": NUMBER, "b": NUMBER}, ["a", "b"]),
    _tool("calculator-mul", "Multiply two numbers", {"a": NUMBER, "b": NUMBER}, ["a", "b"]),
    _tool("calculator-div", "Divide a by b", {"a": NUMBER, "b": NUMBER}, ["a", "b"]),
    _tool(
        "weather-get_current_weather",
        "Current temperature (Fahrenheit) of a US city",
        {"city": {"type": "string", "description": "city name"}},
        ["city"],
    ),
    _tool(
        "clock-get_time",
        "Current time in a time zone",
        {"timezone": {"type": "string", "description": "IANA time zone"}},
        ["timezone"],
    ),
]


def _call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def make_task(rng: random.Random, kind: str, cities: list[str]) -> dict:
    """One question with its gold steps, the tool results and the final reply: ``{question, steps, results,
    reply, subset}``; ``kind`` in single / parallel / two_step / clock."""
    a, b = sorted(rng.sample(cities, 2))
    ta, tb = CITIES[a], CITIES[b]
    if kind == "single":
        x, y = rng.randint(2, 99), rng.randint(2, 99)
        return {
            "question": f"What is {x} plus {y}?",
            "steps": [[_call("calculator-add", a=x, b=y)]],
            "results": [[str(x + y)]],
            "reply": f"{x} plus {y} is {x + y}.",
            "subset": "single-turn-original",
        }
    if kind == "parallel":
        return {
            "question": f"What is the temperature in {a} and in {b} right now?",
            "steps": [[_call("weather-get_current_weather", city=a), _call("weather-get_current_weather", city=b)]],
            "results": [[json.dumps({"city": a, "temp_f": ta}), json.dumps({"city": b, "temp_f": tb})]],
            "reply": f"It is {ta} F in {a} and {tb} F in {b}.",
            "subset": "single-turn-diversify",
        }
    if kind == "two_step":
        return {
            "question": f"Get the temperatures of {a} and {b}, then add them up.",
            "steps": [
                [_call("weather-get_current_weather", city=a), _call("weather-get_current_weather", city=b)],
                [_call("calculator-add", a=ta, b=tb)],
            ],
            "results": [[json.dumps({"city": a, "temp_f": ta}), json.dumps({"city": b, "temp_f": tb})], [str(ta + tb)]],
            "reply": f"{a} is at {ta} F and {b} at {tb} F; together {ta + tb}.",
            "subset": "multi-turn",
        }
    zone = rng.choice(ZONES)
    return {
        "question": f"What time is it in {zone}?",
        "steps": [[_call("clock-get_time", timezone=zone)]],
        "results": [[json.dumps({"timezone": zone, "time": "10:30"})]],
        "reply": f"It is 10:30 in {zone}.",
        "subset": "single-turn-original",
    }


KINDS = ("single", "parallel", "two_step", "clock")


def rl_row(task: dict, index: int) -> dict:
    """A row of ``toucan_toolcall_rl.parquet`` / ``toucan_eval_4k_unified.parquet``."""
    schemas = json.dumps(TOOLS, ensure_ascii=False)
    return {
        "prompt": [
            {"role": "system", "content": hermes.system_prompt(TOOLS)},
            {"role": "user", "content": task["question"]},
        ],
        "data_source": "toucan_toolcall",
        "reward_model": {
            "style": "rule",
            "ground_truth": {
                "allowed_tools": [t["function"]["name"] for t in TOOLS],
                "gold_tool_calls": json.dumps(task["steps"], ensure_ascii=False),
                "question_content": task["question"],
                "subset_name": task["subset"],
                "tool_schemas": schemas,
            },
        },
        "extra_info": {"need_tools_kwargs": False, "original_turn_index": 0, "index": index},
        "tools": schemas,
    }


def sft_conversation(task: dict) -> list[dict]:
    """The ``conversations`` of one row of ``toucan_toolcall_sft_split_42k.parquet`` (ShareGPT turns)."""
    turns = [{"from": "system", "value": hermes.system_prompt(TOOLS)}, {"from": "human", "value": task["question"]}]
    for step, results in zip(task["steps"], task["results"]):
        turns.append(
            {
                "from": "gpt",
                "value": "Let me look that up.\n<tool_call>\n"
                + json.dumps(step, ensure_ascii=False)
                + "\n</tool_call>",
            }
        )
        turns.append({"from": "human", "value": "\n".join(f"<tool_response>\n{r}\n</tool_response>" for r in results)})
    turns.append({"from": "gpt", "value": task["reply"]})
    return turns


def build(seed: int = 0, rl_rows: int = 16, eval_rows: int = 8, sft_rows: int = 32) -> dict[str, list[dict]]:
    """``{file name: rows}``; RL and eval questions use the first half of the cities, SFT the second."""
    rng = random.Random(seed)
    names = sorted(CITIES)
    rl_cities, sft_cities = names[: len(names) // 2], names[len(names) // 2 :]
    rl = [make_task(rng, KINDS[i % len(KINDS)], rl_cities) for i in range(rl_rows + eval_rows)]
    sft = [make_task(rng, KINDS[i % len(KINDS)], sft_cities) for i in range(sft_rows)]
    return {
        RL_FILE: [rl_row(t, i) for i, t in enumerate(rl[:rl_rows])],
        EVAL_FILE: [rl_row(t, i) for i, t in enumerate(rl[rl_rows:])],
        SFT_FILE: [{"conversations": sft_conversation(t)} for t in sft],
    }


def write(output_dir: str, **kwargs) -> dict[str, str]:
    """Write the three files into ``output_dir``; returns ``{file name: path}``."""
    import pandas as pd

    os.makedirs(output_dir, exist_ok=True)
    paths = {}
    for name, rows in build(**kwargs).items():
        paths[name] = os.path.join(output_dir, name)
        pd.DataFrame(rows).to_parquet(paths[name], index=False)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output_dir", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rl_rows", type=int, default=16)
    p.add_argument("--eval_rows", type=int, default=8)
    p.add_argument("--sft_rows", type=int, default=32)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name, path in write(
        args.output_dir, seed=args.seed, rl_rows=args.rl_rows, eval_rows=args.eval_rows, sft_rows=args.sft_rows
    ).items():
        logger.info("%s: %s", name, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
