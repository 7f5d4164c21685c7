"""The multi-step CPU task: two dependent calls, the second one's argument found only in the first one's output
(the task of ``TASK=cpu_chain bash recipes/run_cpu_tiny_slca.sh``; per-turn credit's in-trainer test).

    python -m data_prep.cpu_chain --output_dir data/cpu_chain --seed 0    # cpu_chain_{train,val}.parquet + report
    python -m data_prep.cpu_chain --output_dir DIR --seed 0 --cities 26 --phrasings 4 --val_share 0.5 \
        --val_other_phrasings 1                                             # the wide task: 104 held-out chains

Four tools and four kinds of prompt::

    departures  "When does the next train leave from Rome?"   [[find_station(city=Rome)], [get_departures(station=S)]]
    arrivals    "When does the next train arrive in Rome?"    [[find_station(city=Rome)], [get_arrivals(station=S)]]
    airport     "Which airport serves Rome?"                  [[find_airport(city=Rome)]]
    chat        "Tell me a joke about Rome."                  []   (a direct reply is right)

S is the station ``find_station`` answers for the city: the tools carry response schemas (a station or an airport
from a fixed list, a time), and the offline simulator picks the answer by a seeded hash of the call, so S is known
only from the first call's output, the same in data preparation and in the RL run as long as the run's SGLS seed is
``--sgls_seed`` (0, the seed of ``slca_verl/config/sgls_tool.yaml``). An episode therefore decides three times:
which lookup tool to call (``find_station`` and ``find_airport`` take the same argument), whether to go on after
it (the chain kinds do, the airport kind replies), and which of the two same-signature timetable tools answers the
question. A wrong first call leaves the second without its argument.

Validation holds out (kind, city) combinations: ``--val_share`` of the cities per kind (at least one), every
phrasing; the departures and arrivals draws are disjoint, so a held-out chain city still occurs in training as the
other chain kind, with the same station. Validation thus measures the decisions (which lookup, go on or reply, which
timetable) on prompts never trained on; the station may be recalled rather than read off the output — the tiny model
does not learn to copy it (with whole cities held out from both chain kinds, no validation chain was right at any
step, seed 0, because the model wrote a station it had memorised). Data sources: ``cpu_chain``
(chain rows: verl's validation reports their chain accuracy), ``cpu_chain_single`` (airport rows) and
``cpu_chain_chat`` (chat rows: abstention).

The defaults (the 12 cities of data_prep.cpu_task, 2 phrasings a kind, ``--val_share 0.25``) hold out 12 chain
prompts. ``--cities`` (up to 26: those 12, then :data:`EXTRA_CITIES`) and ``--phrasings`` (up to 4) widen the task;
with ``--val_share 0.5`` every city is held out of exactly one chain kind and trained on as the other, so validation
holds ``2 * round(cities / 2) * phrasings`` chain prompts (104 for 26 cities and 4 phrasings).
``--val_other_phrasings`` keeps only the first K phrasings of the held-out airport and chat prompts (they measure the
lookup choice and abstention, and each validation sample costs time); training keeps every phrasing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from typing import Any, Iterable, Sequence

from data_prep.cli import main_for
from data_prep.cpu_task import CITIES, function_tool, pinned_candidate, split_counts
from data_prep.row_builder import Candidate, Rejection
from data_prep.tool_schema import normalize_tools

SOURCE = "cpu_chain"
SINGLE_SOURCE = "cpu_chain_single"
CHAT_SOURCE = "cpu_chain_chat"
__all__ = [
    "SOURCE",
    "SINGLE_SOURCE",
    "CHAT_SOURCE",
    "EXTRA_CITIES",
    "STATIONS",
    "cities",
    "tools",
    "stations",
    "generate_records",
    "main",
]

#: the cities ``--cities`` adds after data_prep.cpu_task's 12, in this order
EXTRA_CITIES = (
    "Lisbon",
    "Vienna",
    "Prague",
    "Dublin",
    "Seoul",
    "Nairobi",
    "Bogota",
    "Toronto",
    "Athens",
    "Warsaw",
    "Manila",
    "Havana",
    "Lagos",
    "Denver",
)
MAX_PHRASINGS = 4
STATIONS = ("Central", "North", "South", "East", "West", "Harbour")
AIRPORTS = ("Intercontinental", "Regional", "Metropolitan", "Lakeside")
TIMES = ("06:40", "08:15", "09:30", "11:05", "13:20", "15:45", "18:10", "21:35")


def _returns(key: str, values: Sequence[str]) -> dict:
    return {"type": "object", "properties": {key: {"type": "string", "enum": list(values)}}, "required": [key]}


def tools() -> list[dict]:
    """The task's tools in the normalised OpenAI form, each with its response schema (what SGLS answers from)."""
    raw = [
        (function_tool("find_station", "Main railway station of a city.", city="city name"), "station", STATIONS),
        (function_tool("find_airport", "Main airport of a city.", city="city name"), "airport", AIRPORTS),
        (function_tool("get_departures", "Next train leaving a station.", station="station name"), "time", TIMES),
        (function_tool("get_arrivals", "Next train arriving at a station.", station="station name"), "time", TIMES),
    ]
    out = normalize_tools([t for t, _, _ in raw])
    for t, (_, key, values) in zip(out, raw):
        t["function"]["response_schema"] = _returns(key, values)
    return out


def cities(n: int = len(CITIES)) -> tuple[str, ...]:
    """The task's first ``n`` cities: data_prep.cpu_task's, then :data:`EXTRA_CITIES`."""
    every = CITIES + EXTRA_CITIES
    if not 2 <= n <= len(every):
        raise ValueError(f"--cities must be in [2, {len(every)}], got {n}")
    return every[:n]


def stations(sgls_seed: int = 0, n_cities: int = len(CITIES)) -> dict[str, str]:
    """{city: the station the offline simulator (seed ``sgls_seed``) answers ``find_station(city)`` with}, for the
    task's first ``n_cities`` cities."""
    from slca_verl.sgls import Simulator

    async def run():
        sim = Simulator({"backend": "offline", "cache_scope": "run", "seed": int(sgls_seed)})
        try:
            return {
                c: json.loads((await sim.call("find_station", {"city": c}, tool_schemas=tools(), scope="data")).text)
                for c in cities(n_cities)
            }
        finally:
            await sim.aclose()

    return {c: body["station"] for c, body in asyncio.run(run()).items()}


#: kind -> its phrasings, the city last; ``--phrasings`` uses the first N
PHRASINGS = {
    "departures": (
        "When does the next train leave from {0}?",
        "Show me the next departure from {0}.",
        "What time is the next train out of {0}?",
        "I need the next departure from {0}.",
    ),
    "arrivals": (
        "When does the next train arrive in {0}?",
        "Show me the next arrival in {0}.",
        "What time does the next train get into {0}?",
        "I need the next arrival in {0}.",
    ),
    "airport": (
        "Which airport serves {0}?",
        "What is the main airport of {0}?",
        "Which airport should I fly into for {0}?",
        "Name the airport of {0}.",
    ),
    "chat": (
        "Tell me a joke about {0}.",
        "Write a short poem about {0}.",
        "Say something nice about {0}.",
        "Give me a fun fact about {0}.",
    ),
}


def gold(kind: str, city: str, station: str) -> list[list[dict]]:
    """The nested gold of a ``kind`` row about ``city`` (``station``: what ``find_station(city)`` answers)."""
    if kind in ("departures", "arrivals"):
        return [
            [{"name": "find_station", "arguments": {"city": city}}],
            [{"name": f"get_{kind}", "arguments": {"station": station}}],
        ]
    if kind == "airport":
        return [[{"name": "find_airport", "arguments": {"city": city}}]]
    return []


def generate_records(
    seed: int = 0,
    val_share: float = 0.25,
    sgls_seed: int = 0,
    n_cities: int = len(CITIES),
    phrasings: int = 2,
    val_other_phrasings: int = MAX_PHRASINGS,
) -> list[dict]:
    """Every record of the task: ``{"kind", "question", "gold", "split"}``, training records first. Each kind holds
    out ``max(1, round(val_share * n_cities))`` cities, a seeded draw; arrivals draws from the cities departures keeps.
    Every kind is written in its first ``phrasings`` phrasings; held-out airport and chat cities in the first
    ``val_other_phrasings`` of them."""
    if not 0.0 < val_share <= 0.5:
        raise ValueError(f"--val_share must be in (0, 0.5] (the chain kinds hold out disjoint cities), got {val_share}")
    if not 1 <= phrasings <= MAX_PHRASINGS:
        raise ValueError(f"--phrasings must be in [1, {MAX_PHRASINGS}], got {phrasings}")
    if val_other_phrasings < 1:
        raise ValueError(f"--val_other_phrasings must be at least 1, got {val_other_phrasings}")
    names = cities(n_cities)
    rng = random.Random(seed)
    n_val = max(1, round(val_share * len(names)))
    station = stations(sgls_seed, n_cities)
    held = {"departures": rng.sample(names, n_val)}
    held["arrivals"] = rng.sample([c for c in names if c not in held["departures"]], n_val)
    for kind in ("airport", "chat"):
        held[kind] = rng.sample(names, n_val)
    records = []
    for kind, every in PHRASINGS.items():
        for city in names:
            split = "val" if city in held[kind] else "train"
            n = min(phrasings, val_other_phrasings) if split == "val" and kind in ("airport", "chat") else phrasings
            records += [
                {"kind": kind, "question": p.format(city), "gold": gold(kind, city, station[city]), "split": split}
                for p in every[:n]
            ]
    records.sort(key=lambda r: r["split"] != "train")
    return records


def convert_record(record: Any, index: int) -> Iterable[Candidate | Rejection]:
    """One generated record -> one candidate with its split pinned."""
    return pinned_candidate(record, index, SOURCE, tools(), {"chat": CHAT_SOURCE, "airport": SINGLE_SOURCE})


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--val_share", type=float, default=0.25, help="share of the cities held out per kind (0.25, at most 0.5)"
    )
    p.add_argument(
        "--sgls_seed",
        type=int,
        default=0,
        help="the RL run's SGLS seed: the stations of the gold are what its offline simulator answers (default 0)",
    )
    p.add_argument("--cities", type=int, default=len(CITIES), help=f"cities (default {len(CITIES)}, at most 26)")
    p.add_argument("--phrasings", type=int, default=2, help=f"phrasings a kind (default 2, at most {MAX_PHRASINGS})")
    p.add_argument(
        "--val_other_phrasings",
        type=int,
        default=MAX_PHRASINGS,
        help="phrasings of the held-out airport and chat prompts (default: all of --phrasings)",
    )


def _load(args: argparse.Namespace) -> tuple[list[dict], dict]:
    records = generate_records(
        args.seed, args.val_share, args.sgls_seed, args.cities, args.phrasings, args.val_other_phrasings
    )
    settings = {k: getattr(args, k) for k in ("val_share", "sgls_seed", "cities", "phrasings", "val_other_phrasings")}
    return records, {"generated": split_counts(records), **settings}


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
