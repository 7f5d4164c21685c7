"""A generated tool-calling task small enough for the CPU run to learn, with validation held out by argument
combination (the task of ``recipes/run_cpu_tiny_slca.sh`` and ``benchmarks/cpu_reproduction.py``).

    python -m data_prep.cpu_task --output_dir data/cpu_task --seed 0        # cpu_task_{train,val}.parquet + report

Three tools, arguments from finite vocabularies, and five kinds of prompt::

    weather      "What is the weather in Rome?"                      [[get_weather(city=Rome)]]
    population   "How many people live in Oslo?"                     [[get_population(city=Oslo)]]
    exchange     "What is the exchange rate from USD to EUR?"        [[get_exchange_rate(base=USD, quote=EUR)]]
    parallel     "What is the weather in Lima and in Cairo?"         [[get_weather(city=Lima), get_weather(city=Cairo)]]
    chat         "Tell me a joke about Paris."                       []   (a direct reply is right: irrelevance row)

Each kind's argument combinations (a city, a currency pair, an ordered city pair) are split by a seeded draw:
``--val_share`` of them (at least one per kind) go to validation with every phrasing, the rest to training, so
validation measures whether the policy reads the arguments from the prompt, not whether it memorised a prompt.
Every city and currency still appears in training (in other kinds or combinations). Tool rows have data_source
``cpu_task``, chat rows ``cpu_task_chat``, so verl's validation reports tool accuracy and abstention accuracy
separately (``val-aux/cpu_task/toolpo_success/mean@1`` and ``val-aux/cpu_task_chat/toolpo_success/mean@1``).
The rows go through the shared pipeline (checks, de-duplication, report) like every source's; the offline SGLS
answers the calls.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from data_prep.cli import main_for
from data_prep.row_builder import Candidate, Rejection
from data_prep.tool_schema import normalize_tools

SOURCE = "cpu_task"
CHAT_SOURCE = "cpu_task_chat"
__all__ = ["SOURCE", "CHAT_SOURCE", "TOOLS", "KINDS", "generate_records", "convert_record", "main"]

CITIES = ("Paris", "Rome", "Tokyo", "Cairo", "Lima", "Oslo", "Delhi", "Berlin", "Madrid", "Sydney", "Quito", "Hanoi")
CURRENCIES = ("USD", "EUR", "JPY", "GBP", "INR", "BRL")


def function_tool(name: str, description: str, **params: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": v} for k, v in params.items()},
                "required": list(params),
            },
        },
    }


TOOLS = [
    function_tool("get_weather", "Current weather of a city.", city="city name"),
    function_tool("get_population", "Number of inhabitants of a city.", city="city name"),
    function_tool(
        "get_exchange_rate", "Exchange rate between two currencies.", base="currency code", quote="currency code"
    ),
]


@dataclass(frozen=True)
class Kind:
    """One kind of prompt: its phrasings, the argument combinations it draws from, and its gold calls."""

    name: str
    phrasings: tuple[str, ...]
    combos: tuple[tuple[str, ...], ...]

    def gold(self, combo: tuple[str, ...]) -> list[list[dict]]:
        if self.name == "weather":
            return [[{"name": "get_weather", "arguments": {"city": combo[0]}}]]
        if self.name == "population":
            return [[{"name": "get_population", "arguments": {"city": combo[0]}}]]
        if self.name == "exchange":
            return [[{"name": "get_exchange_rate", "arguments": {"base": combo[0], "quote": combo[1]}}]]
        if self.name == "parallel":
            return [[{"name": "get_weather", "arguments": {"city": c}} for c in combo]]
        return []  # chat


_PAIRS = tuple((a, b) for a in CURRENCIES for b in CURRENCIES if a != b)
_CITY_PAIRS = tuple((a, b) for a in CITIES for b in CITIES if a != b)
KINDS = (
    Kind("weather", ("What is the weather in {0}?", "How is the weather in {0} today?"), tuple((c,) for c in CITIES)),
    Kind("population", ("How many people live in {0}?", "What is the population of {0}?"), tuple((c,) for c in CITIES)),
    Kind("exchange", ("What is the exchange rate from {0} to {1}?", "How many {1} do I get for one {0}?"), _PAIRS),
    Kind("parallel", ("What is the weather in {0} and in {1}?",), _CITY_PAIRS),
    Kind("chat", ("Tell me a joke about {0}.", "Write a short poem about {0}."), tuple((c,) for c in CITIES)),
)


def generate_records(seed: int = 0, val_share: float = 0.2, parallel_combos: int = 36) -> list[dict]:
    """Every record of the task: ``{"kind", "question", "gold", "split"}``, training records first.

    ``parallel_combos`` caps the ordered city pairs drawn for the parallel kind (132 exist) so that it does not
    outnumber the others. A seeded shuffle of each kind's combinations puts ``max(1, round(val_share * n))`` of
    them in validation.
    """
    if not 0.0 <= val_share < 1.0:
        raise ValueError(f"--val_share must be in [0, 1), got {val_share}")
    rng = random.Random(seed)
    records = []
    for kind in KINDS:
        combos = list(kind.combos)
        rng.shuffle(combos)
        if kind.name == "parallel":
            combos = combos[:parallel_combos]
        n_val = max(1, round(val_share * len(combos))) if val_share > 0 else 0
        for i, combo in enumerate(combos):
            for phrasing in kind.phrasings:
                records.append(
                    {
                        "kind": kind.name,
                        "question": phrasing.format(*combo),
                        "gold": kind.gold(combo),
                        "split": "val" if i < n_val else "train",
                    }
                )
    records.sort(key=lambda r: r["split"] != "train")
    return records


def pinned_candidate(
    record: Any, index: int, task: str, tools: list[dict], sources: dict[str, str]
) -> list[Candidate | Rejection]:
    """A generated task's record -> one candidate with its split pinned (data source ``sources[kind]``, else
    ``task``; chat rows are the irrelevance subset), or a ``malformed_record`` rejection naming the task."""
    if not isinstance(record, dict) or not all(k in record for k in ("kind", "question", "gold", "split")):
        return [Rejection("malformed_record", f"not a {task} record: {str(record)[:200]}", index)]
    kind = record["kind"]
    return [
        Candidate(
            data_source=sources.get(kind, task),
            messages=[{"role": "user", "content": record["question"]}],
            tools=tools,
            gold=record["gold"],
            question=record["question"],
            record_index=index,
            subset="irrelevant" if kind == "chat" else kind,
            split=record["split"],
        )
    ]


def split_counts(records: Iterable[dict]) -> dict[str, dict[str, int]]:
    """``{split: {kind: records}}`` of a generated task (its report's ``generated`` note)."""
    counts: dict[str, dict[str, int]] = {}
    for r in records:
        counts.setdefault(r["split"], {}).setdefault(r["kind"], 0)
        counts[r["split"]][r["kind"]] += 1
    return counts


def convert_record(record: Any, index: int) -> Iterable[Candidate | Rejection]:
    """One generated record -> one candidate with its split pinned."""
    return pinned_candidate(record, index, SOURCE, normalize_tools(TOOLS), {"chat": CHAT_SOURCE})


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--val_share",
        type=float,
        default=0.2,
        help="share of each kind's argument combinations held out for validation (default 0.2)",
    )
    p.add_argument("--parallel_combos", type=int, default=36, help="ordered city pairs of the parallel kind (max 132)")


def _load(args: argparse.Namespace) -> tuple[list[dict], dict]:
    records = generate_records(args.seed, args.val_share, args.parallel_combos)
    return records, {"generated": split_counts(records), "val_share": args.val_share}


def main(argv: Sequence[str] | None = None):
    return main_for(
        SOURCE,
        __doc__.splitlines()[0],
        lambda args: convert_record,
        argv,
        add_arguments=_add_arguments,
        load=_load,
        input_required=False,
    )


if __name__ == "__main__":
    main()
