"""xLAM -> parquet: rows written in the agreed layout, every rejected fixture row counted under its reason."""

import json
import os

import pandas as pd
import pytest

from data_prep import xlam

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "data_prep", "xlam_sample.json")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("xlam")
    report = xlam.main(["--input", FIXTURE, "--output_dir", str(out), "--val_ratio", "0.25", "--no_progress"])
    return out, report


def read_all(out):
    return pd.concat([pd.read_parquet(out / f) for f in sorted(os.listdir(out)) if f.endswith(".parquet")])


def test_every_fixture_row_is_written_or_rejected_under_its_reason(converted):
    out, report = converted
    saved = json.loads((out / "xlam_report.json").read_text())
    assert saved["records_in"] == 18 and saved["rows_in"] == 18
    assert saved["rows_written"] + saved["rows_rejected"] == saved["rows_in"]
    assert saved["rejected_by_reason"] == {
        "tools_unparseable": 1,
        "tool_schema_unknown_type": 1,
        "gold_call_unknown_tool": 1,
        "gold_call_schema_mismatch": 2,
        "gold_call_unknown_argument": 1,
        "gold_call_unparseable": 2,
        "malformed_record": 1,
        "empty_question": 1,
        "duplicate": 1,
        "tool_name_duplicate": 1,
    }
    assert saved["rows_written"] == 6 == len(read_all(out))
    assert saved["written_by_subset"] == {"tool_call": 5, "irrelevant": 1}
    bad_records = {e["record_index"] for ex in saved["examples_by_reason"].values() for e in ex}
    assert bad_records == {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17}


def test_rows_have_the_fields_the_agent_loop_and_reward_read(converted):
    out, _ = converted
    df = read_all(out).set_index(read_all(out)["reward_model"].map(lambda r: r["ground_truth"]["question_content"]))
    row = df.loc["Weather in Oslo and in Lima, in fahrenheit please."]
    assert row["data_source"] == "xlam" and row["ability"] == "tool_calling" and row["agent_name"] == "slca_tool_agent"
    gt = row["reward_model"]["ground_truth"]
    assert row["reward_model"]["style"] == "rule"
    assert list(gt["allowed_tools"]) == ["get_weather", "mean_of"]
    assert json.loads(gt["gold_tool_calls"]) == [
        [  # one step, two parallel calls
            {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "fahrenheit"}},
            {"name": "get_weather", "arguments": {"city": "Lima", "unit": "fahrenheit"}},
        ]
    ]
    tools = json.loads(row["tools"])
    assert tools == json.loads(gt["tool_schemas"]) == json.loads(row["extra_info"]["tool_schemas"])
    assert tools[0]["function"]["parameters"]["required"] == ["city"]
    prompt = list(row["prompt"])
    assert [m["role"] for m in prompt] == ["system", "user"]
    assert "<tools>" in prompt[0]["content"] and '"name": "mean_of"' in prompt[0]["content"]
    assert prompt[1]["content"] == gt["question_content"]
    assert row["extra_info"]["original_turn_index"] == 0 and row["extra_info"]["need_tools_kwargs"] is False


def test_a_query_without_answers_becomes_an_irrelevance_row(converted):
    out, _ = converted
    df = read_all(out)
    gts = df["reward_model"].map(lambda r: r["ground_truth"])
    joke = [gt for gt in gts if gt["question_content"] == "Tell me a joke about cats."][0]
    assert joke["subset_name"] == "irrelevant" and json.loads(joke["gold_tool_calls"]) == []


def test_split_is_seeded_and_indices_count_within_each_split(tmp_path):
    def splits(seed, out):
        xlam.main(
            ["--input", FIXTURE, "--output_dir", str(out), "--val_ratio", "0.34", "--seed", str(seed), "--no_progress"]
        )
        val = pd.read_parquet(out / "xlam_val.parquet")
        train = pd.read_parquet(out / "xlam_train.parquet")
        assert list(train["extra_info"].map(lambda e: e["index"])) == list(range(len(train)))
        assert set(val["extra_info"].map(lambda e: e["split"])) == {"val"}
        return sorted(val["reward_model"].map(lambda r: r["ground_truth"]["question_content"]))

    assert splits(1, tmp_path / "a") == splits(1, tmp_path / "b")
    assert len(splits(1, tmp_path / "a")) == 3  # ceil(0.34 * 7 records)
    assert any(splits(s, tmp_path / f"s{s}") != splits(1, tmp_path / "a") for s in (2, 3, 4, 5))


def test_question_dedup_also_drops_same_question_with_other_gold(tmp_path):
    first = json.load(open(FIXTURE))[0]
    records = [first, dict(first)]
    records[1]["answers"] = json.dumps([{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}])
    path = tmp_path / "two.json"
    path.write_text(json.dumps(records))
    exact = xlam.main(["--input", str(path), "--output_dir", str(tmp_path / "e"), "--no_progress"])
    question = xlam.main(
        ["--input", str(path), "--output_dir", str(tmp_path / "q"), "--dedup", "question", "--no_progress"]
    )
    assert exact.rows_written == 2 and question.rows_written == 1 and question.rejected["duplicate"] == 1


def test_tau2_decontamination_drops_rows_sharing_a_long_span_with_a_task(tmp_path):
    tasks = [
        {
            "id": "t1",
            "user_scenario": {
                "instructions": {
                    "reason_for_call": "You want to know: what's the weather in Paris right now? Ask politely.",
                    "task_instructions": "Be brief.",
                }
            },
        }
    ]
    tasks_path = tmp_path / "tasks.json"
    tasks_path.write_text(json.dumps(tasks))
    report = xlam.main(
        [
            "--input",
            FIXTURE,
            "--output_dir",
            str(tmp_path),
            "--no_progress",
            "--decontaminate_with",
            f"tau2={tasks_path}",
            "--decontam_ngram",
            "6",
        ]
    )
    assert report.rejected["contaminated_tau2"] == 1
    assert report.notes["decontamination"]["tau2"]["rows_removed"] == 1
    assert report.rows_in == report.rows_written + report.rows_rejected
