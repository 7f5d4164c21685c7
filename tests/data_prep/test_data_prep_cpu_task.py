"""data_prep.cpu_task: the generated CPU task, its validation held out by argument combination, through the
shared pipeline (real parquet files read back)."""

import json

import pandas as pd
import pytest

from data_prep import cpu_task
from data_prep.pipeline import Options, run
from data_prep.row_builder import Candidate
from data_prep.tool_schema import normalize_tools


def combo_of(row) -> tuple:
    gold = json.loads(row["reward_model"]["ground_truth"]["gold_tool_calls"])
    question = row["reward_model"]["ground_truth"]["question_content"]
    if not gold:  # chat: the city is the last word
        return ("chat", question.rstrip(".").split()[-1])
    return (
        row["reward_model"]["ground_truth"]["subset_name"],
        tuple(tuple(sorted(c["arguments"].items())) for c in gold[0]),
    )


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("cpu_task")
    report = cpu_task.main(["--output_dir", str(out), "--seed", "5", "--no_progress"])
    return report, pd.read_parquet(out / "cpu_task_train.parquet"), pd.read_parquet(out / "cpu_task_val.parquet")


def test_validation_holds_out_argument_combinations_never_seen_in_training(written):
    report, train, val = written
    train_combos = {combo_of(r) for _, r in train.iterrows()}
    val_combos = {combo_of(r) for _, r in val.iterrows()}
    assert val_combos and not (train_combos & val_combos)
    # every kind is held out, and every city / currency of validation still occurs in training
    assert {k for k, _ in val_combos} == {"weather", "population", "exchange", "parallel", "chat"}
    train_text = " ".join(train["reward_model"].map(lambda m: m["ground_truth"]["question_content"]))
    for _, r in val.iterrows():
        for word in r["reward_model"]["ground_truth"]["question_content"].replace("?", " ").replace(".", " ").split():
            if word in cpu_task.CITIES or word in cpu_task.CURRENCIES:
                assert word in train_text
    assert report.rows_rejected == 0 and report.written_by_split == {"train": len(train), "val": len(val)}


def test_rows_are_the_authors_format_with_tools_gold_and_data_sources_per_kind(written):
    _, train, _ = written
    by_source = train.groupby("data_source").size().to_dict()
    assert set(by_source) == {"cpu_task", "cpu_task_chat"}
    for _, r in train.iterrows():
        gt = r["reward_model"]["ground_truth"]
        gold = json.loads(gt["gold_tool_calls"])
        assert gt["allowed_tools"].tolist() == ["get_weather", "get_population", "get_exchange_rate"]
        assert (r["data_source"] == "cpu_task_chat") == (gold == [])
        if gt["subset_name"] == "parallel":
            assert len(gold) == 1 and len(gold[0]) == 2 and gold[0][0]["arguments"] != gold[0][1]["arguments"]
        for step in gold:
            for call in step:  # the arguments are read off the question
                assert all(v in gt["question_content"] for v in call["arguments"].values())
        assert "<tools>" in r["prompt"][0]["content"] and r["agent_name"] == "slca_tool_agent"


def test_the_same_seed_writes_the_same_split_and_another_seed_another(written, tmp_path):
    _, train, val = written
    again = cpu_task.generate_records(seed=5)
    assert sorted(r["question"] for r in again if r["split"] == "val") == sorted(
        val["reward_model"].map(lambda m: m["ground_truth"]["question_content"])
    )
    other = cpu_task.generate_records(seed=6)
    assert {r["question"] for r in other if r["split"] == "val"} != {
        r["question"] for r in again if r["split"] == "val"
    }
    with pytest.raises(ValueError, match="val_share"):
        cpu_task.generate_records(val_share=1.0)


def test_a_pinned_split_is_kept_while_unpinned_rows_are_split_at_random(tmp_path):
    tools = normalize_tools(cpu_task.TOOLS)

    def convert(record, index):
        return [
            Candidate(
                data_source="t",
                messages=[{"role": "user", "content": record["q"]}],
                tools=tools,
                gold=[],
                question=record["q"],
                record_index=index,
                split=record.get("split"),
            )
        ]

    records = [{"q": f"pinned val {i}?", "split": "val"} for i in range(3)]
    records += [{"q": f"pinned train {i}?", "split": "train"} for i in range(3)]
    records += [{"q": f"free {i}?"} for i in range(10)]
    report = run(
        "t", "mem", records, convert, Options(output_dir=str(tmp_path), name="t", val_ratio=0.5, seed=1, progress=False)
    )
    val = set(
        pd.read_parquet(tmp_path / "t_val.parquet")["reward_model"].map(lambda m: m["ground_truth"]["question_content"])
    )
    assert {f"pinned val {i}?" for i in range(3)} <= val
    assert not any(q.startswith("pinned train") for q in val)
    assert len([q for q in val if q.startswith("free")]) == 5  # ceil(0.5 * 10) of the free records
    assert report.written_by_split == {"train": 8, "val": 8}
