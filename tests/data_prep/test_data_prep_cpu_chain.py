"""data_prep.cpu_chain: the multi-step CPU task. Its second call's argument is what the RL run's simulator answers
the first call with, and validation holds out cities the chain kinds never train on (real parquet files read back,
the simulator built from the seed of the agent loop's own SGLS config)."""

import asyncio
import json
import os

import pandas as pd
import pytest
import yaml

from data_prep import cpu_chain
from slca_verl.sgls import Simulator

CONFIG = os.path.join(os.path.dirname(cpu_chain.__file__), "..", "slca_verl", "config", "sgls_tool.yaml")


def gt(row):
    return row["reward_model"]["ground_truth"]


def city_of(row):
    return gt(row)["question_content"].rstrip("?.").split()[-1]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("cpu_chain")
    report = cpu_chain.main(["--output_dir", str(out), "--seed", "3", "--no_progress"])
    return report, pd.read_parquet(out / "cpu_chain_train.parquet"), pd.read_parquet(out / "cpu_chain_val.parquet")


def run_seed() -> int:
    """The SGLS seed of the agent loop's tool config (what the RL run's simulator uses)."""
    return int(yaml.safe_load(open(CONFIG))["tools"][0]["config"]["seed"])


def test_the_second_calls_station_is_what_the_runs_simulator_answers_the_first_call_with(written):
    _, train, val = written
    rows = pd.concat([train, val])
    chains = rows[rows["data_source"] == "cpu_chain"]
    assert len(chains) == 48

    async def answer(row):
        sim = Simulator({"backend": "offline", "seed": run_seed()})
        try:
            gold = json.loads(gt(row)["gold_tool_calls"])
            first = gold[0][0]
            res = await sim.call(first["name"], first["arguments"], tool_schemas=row["extra_info"]["tool_schemas"])
            return json.loads(res.text)["station"], gold
        finally:
            await sim.aclose()

    for _, row in chains.iterrows():
        station, gold = asyncio.run(answer(row))
        assert [len(s) for s in gold] == [1, 1] and gold[0][0] == {
            "name": "find_station",
            "arguments": {"city": city_of(row)},
        }
        assert gold[1][0]["arguments"] == {"station": station} and station not in gt(row)["question_content"]
        assert gold[1][0]["name"] == "get_" + gt(row)["subset_name"]


def test_validation_holds_out_kind_and_city_pairs_whose_station_training_shows(written):
    report, train, val = written
    pairs = lambda df: {(gt(r)["subset_name"], city_of(r)) for _, r in df.iterrows()}  # noqa: E731
    assert pairs(val) and not (pairs(val) & pairs(train))
    held = {k: {c for kind, c in pairs(val) if kind == k} for k in ("departures", "arrivals", "airport", "irrelevant")}
    assert all(len(cities) == 3 for cities in held.values())
    # a held-out chain city is trained on as the other chain kind: its station is one the training rows show
    assert not (held["departures"] & held["arrivals"])
    for kind, other in (("departures", "arrivals"), ("arrivals", "departures")):
        assert held[kind] <= {c for k, c in pairs(train) if k == other}
    assert val.groupby("data_source").size().to_dict() == {"cpu_chain": 12, "cpu_chain_chat": 6, "cpu_chain_single": 6}
    assert report.rows_rejected == 0 and report.written_by_split == {"train": len(train), "val": len(val)}


def test_rows_carry_the_tools_with_their_response_schemas_and_the_nested_gold(written):
    _, train, _ = written
    for _, r in train.iterrows():
        tools = json.loads(r["extra_info"]["tool_schemas"])
        assert [t["function"]["name"] for t in tools] == [
            "find_station",
            "find_airport",
            "get_departures",
            "get_arrivals",
        ]
        assert all(t["function"]["response_schema"]["required"] for t in tools)
        gold = json.loads(gt(r)["gold_tool_calls"])
        assert (r["data_source"] == "cpu_chain_chat") == (gold == [])
        if r["data_source"] == "cpu_chain_single":
            assert gold == [[{"name": "find_airport", "arguments": {"city": city_of(r)}}]]
        assert "response_schema" in r["prompt"][0]["content"]  # the policy sees what each tool answers


def test_seeds_move_the_split_and_the_sgls_seed_moves_the_stations():
    a, b = cpu_chain.generate_records(seed=3), cpu_chain.generate_records(seed=4)
    assert a == cpu_chain.generate_records(seed=3)
    held = lambda rs: {r["question"] for r in rs if r["split"] == "val"}  # noqa: E731
    assert held(a) != held(b)
    assert cpu_chain.stations(0) != cpu_chain.stations(1)
    assert set(cpu_chain.stations(0).values()) <= set(cpu_chain.STATIONS)
    with pytest.raises(ValueError, match="val_share"):
        cpu_chain.generate_records(val_share=0.0)
    with pytest.raises(ValueError, match="val_share"):
        cpu_chain.generate_records(val_share=0.6)


@pytest.mark.parametrize("module", ["cpu_task", "cpu_chain"])
def test_a_malformed_record_of_a_generated_task_is_a_counted_rejection_naming_the_task(tmp_path, module):
    import importlib

    from data_prep.pipeline import Options, run

    task = importlib.import_module(f"data_prep.{module}")
    good = [r for r in task.generate_records(seed=1) if r["kind"] != "chat"][:2]
    bad = [None, "text", {"kind": "chat"}, {**good[0], "question": None}]
    report = run(
        module, "mem", good + bad, task.convert_record, Options(output_dir=str(tmp_path), name=module, progress=False)
    )
    assert sum(report.written_by_split.values()) == 2
    assert report.rejected["malformed_record"] == 3  # the three records without the four keys
    assert sum(report.rejected.values()) == 4  # the record with no question: rejected by the shared checks
    assert f"not a {module} record" in json.dumps(report.to_dict())


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    out = tmp_path_factory.mktemp("cpu_chain_wide")
    argv = ["--output_dir", str(out), "--seed", "5", "--no_progress", "--cities", "26", "--phrasings", "4"]
    report = cpu_chain.main(argv + ["--val_share", "0.5", "--val_other_phrasings", "1"])
    return report, pd.read_parquet(out / "cpu_chain_train.parquet"), pd.read_parquet(out / "cpu_chain_val.parquet")


def test_the_wide_task_holds_out_every_city_from_one_chain_kind_and_trains_it_as_the_other(wide):
    report, train, val = wide
    assert val.groupby("data_source").size().to_dict() == {
        "cpu_chain": 104,  # 13 cities a chain kind x 4 phrasings
        "cpu_chain_chat": 13,  # one phrasing a held-out city (--val_other_phrasings 1)
        "cpu_chain_single": 13,
    }
    assert len(train) == 4 * 13 * 4 and report.rows_rejected == 0
    pairs = lambda df: {(gt(r)["subset_name"], city_of(r)) for _, r in df.iterrows()}  # noqa: E731
    assert not (pairs(val) & pairs(train))
    every = set(cpu_chain.cities(26))
    held = {k: {c for kind, c in pairs(val) if kind == k} for k in ("departures", "arrivals")}
    assert held["departures"] | held["arrivals"] == every and not (held["departures"] & held["arrivals"])
    for kind, other in (("departures", "arrivals"), ("arrivals", "departures")):
        assert held[kind] == {c for k, c in pairs(train) if k == other}
    # each held-out chain is asked in all four phrasings; training rows too, the other kinds' held-out cities in one
    questions = lambda df, k: {gt(r)["question_content"] for _, r in df.iterrows() if gt(r)["subset_name"] == k}  # noqa: E731
    assert len(questions(val, "departures")) == 4 * len(held["departures"])
    assert {q.rsplit(" ", 1)[0] for q in questions(val, "airport")} == {"Which airport serves"}
    assert {q.rsplit(" ", 1)[0] for q in questions(train, "airport")} == {
        p.format("X").rsplit(" ", 1)[0] for p in cpu_chain.PHRASINGS["airport"]
    }


def test_the_added_cities_stations_are_what_the_runs_simulator_answers(wide):
    _, train, val = wide
    station = cpu_chain.stations(run_seed(), 26)
    assert set(station) == set(cpu_chain.cities(26)) and set(cpu_chain.EXTRA_CITIES) <= set(station)
    for _, row in pd.concat([train, val]).iterrows():
        gold = json.loads(gt(row)["gold_tool_calls"])
        if row["data_source"] == "cpu_chain":
            assert gold[1][0]["arguments"] == {"station": station[city_of(row)]}


def test_the_defaults_write_the_narrow_task_and_bad_sizes_fail_naming_the_option():
    narrow = cpu_chain.generate_records(seed=3)
    assert narrow == cpu_chain.generate_records(seed=3, n_cities=12, phrasings=2, val_other_phrasings=4)
    assert {r["question"].split()[-1].rstrip("?.") for r in narrow} == set(cpu_chain.cities(12))
    for kwargs, option in (
        ({"n_cities": 27}, "--cities"),
        ({"n_cities": 1}, "--cities"),
        ({"phrasings": 5}, "--phrasings"),
        ({"phrasings": 0}, "--phrasings"),
        ({"val_other_phrasings": 0}, "--val_other_phrasings"),
    ):
        with pytest.raises(ValueError, match=option):
            cpu_chain.generate_records(**kwargs)
