"""Toucan pass-through and the multi-turn sources (hermes, glaive, ToolACE): one row per user turn, every
malformed fixture row rejected under the reason it was written to trigger."""

import json
import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from data_prep import glaive, hermes_fc, toolace, toucan
from data_prep.readers import read_records

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "data_prep")


def convert(module, fixture, out, *extra):
    report = module.main(
        ["--input", os.path.join(FIXTURES, fixture), "--output_dir", str(out), "--no_progress", *extra]
    )
    assert report.rows_in == report.rows_written + report.rows_rejected
    assert json.loads((out / f"{report.source}_report.json").read_text())["rejected_by_reason"] == dict(report.rejected)
    path = out / f"{report.source}_train.parquet"
    return report, (pd.read_parquet(path) if path.exists() else pd.DataFrame())


def gold(row):
    return json.loads(row["reward_model"]["ground_truth"]["gold_tool_calls"])


def by_question(df):
    return {r["reward_model"]["ground_truth"]["question_content"]: r for _, r in df.iterrows()}


def test_toucan_rows_pass_through_and_each_malformed_kind_is_rejected(tmp_path):
    report, df = convert(toucan, "toucan_sample.jsonl", tmp_path, "--gold_forms", "nested")  # flat/names: see _forms
    assert dict(report.rejected) == {
        "gold_flat_rejected": 1,
        "gold_names_rejected": 1,
        "allowed_tools_mismatch": 1,
        "tool_schema_invalid": 1,
        "prompt_malformed": 1,
        "gold_call_schema_mismatch": 1,
        "gold_call_unparseable": 1,
        "malformed_record": 1,
    }
    assert report.records_in == 11 and report.rows_written == 3
    source_rows = {
        json.loads(line)["reward_model"]["ground_truth"]["question_content"]: json.loads(line)
        for line in open(os.path.join(FIXTURES, "toucan_sample.jsonl"))
        if line.startswith('{"prompt": [{"role": "system"')
    }
    for question, row in by_question(df).items():
        original = source_rows[question]
        assert [dict(m) for m in row["prompt"]] == original["prompt"]  # verbatim
        assert row["data_source"] == "toucan_toolcall" and row["agent_name"] == "slca_tool_agent"
        assert gold(row) == json.loads(original["reward_model"]["ground_truth"]["gold_tool_calls"])
        assert row["extra_info"]["original_turn_index"] == original["extra_info"]["original_turn_index"]
        assert (
            row["reward_model"]["ground_truth"]["subset_name"]
            == original["reward_model"]["ground_truth"]["subset_name"]
        )
    multi_step = by_question(df)["Add 1 and 2, then multiply the result by 10."]
    assert [len(step) for step in gold(multi_step)] == [1, 1]


def test_toucan_reads_the_authors_parquet_and_keeps_their_tool_schema_keys(tmp_path):
    good = [r for r in read_records(os.path.join(FIXTURES, "toucan_sample.jsonl"))[:3]]
    pq.write_table(pa.Table.from_pylist(good), tmp_path / "rl.parquet")
    report = toucan.main(
        [
            "--input",
            str(tmp_path / "rl.parquet"),
            "--output_dir",
            str(tmp_path / "out"),
            "--split_name",
            "test",
            "--no_progress",
        ]
    )
    df = pd.read_parquet(tmp_path / "out" / "toucan_test.parquet")
    assert report.rows_written == 3 and set(df["extra_info"].map(lambda e: e["split"])) == {"test"}
    params = json.loads(df.iloc[0]["tools"])[0]["function"]["parameters"]
    assert params["$schema"] == "http://json-schema.org/draft-07/schema#" and params["additionalProperties"] is False


def test_hermes_splits_dialogues_per_user_turn_with_history(tmp_path):
    report, df = convert(hermes_fc, "hermes_fc_sample.json", tmp_path)
    assert dict(report.rejected) == {
        "no_tools": 1,
        "gold_call_unparseable": 1,
        "gold_call_unknown_tool": 1,
        "malformed_record": 1,
        "no_user_turn": 1,
        "tools_unparseable": 1,
        "gold_call_schema_mismatch": 1,
    }
    assert report.records_in == 9 and report.rows_in == 11 and report.rows_written == 4
    rows = by_question(df)
    first = rows["Price of MSFT and news about Microsoft?"]  # python-literal <tool_call> bodies, parallel
    assert gold(first) == [
        [
            {"name": "get_stock_price", "arguments": {"symbol": "MSFT"}},
            {"name": "get_news", "arguments": {"company": "Microsoft", "limit": 3}},
        ]
    ]
    second = rows["And Nvidia's price?"]
    assert second["extra_info"]["original_turn_index"] == 1
    assert [m["role"] for m in second["prompt"]] == ["system", "user", "assistant", "tool", "tool", "assistant", "user"]
    assert second["prompt"][3]["content"] == '{"price": 410}'  # <tool_response> tags left to the chat template
    assert '<tool_call>\n{"name": "get_news"' in second["prompt"][2]["content"]
    thanks = rows["Thanks, that's all!"]
    assert gold(thanks) == [] and thanks["reward_model"]["ground_truth"]["subset_name"] == "irrelevant"
    assert "You are a function calling AI model" not in first["prompt"][0]["content"]  # source system replaced


def test_drop_no_call_turns_counts_them_instead_of_writing_them(tmp_path):
    report, df = convert(hermes_fc, "hermes_fc_sample.json", tmp_path, "--drop_no_call_turns")
    assert report.rejected["no_call_turn"] == 1 and report.rows_written == 3


def test_glaive_parses_single_quoted_arguments_and_splits_turns(tmp_path):
    report, df = convert(glaive, "glaive_sample.json", tmp_path)
    assert dict(report.rejected) == {
        "no_tools": 1,
        "gold_call_unparseable": 1,
        "gold_call_unknown_tool": 1,
        "gold_call_schema_mismatch": 1,
        "malformed_record": 2,
        "tool_schema_invalid": 1,
    }
    assert report.rows_written == 3 and set(df["data_source"]) == {"glaive_fc"}
    rows = by_question(df)
    tip = rows["Hi, my bill is $50 and I want to tip 15%."]
    assert gold(tip) == [[{"name": "calculate_tip", "arguments": {"bill": 50, "percent": 15}}]]
    fact = rows["Great, thanks! Tell me a fun fact."]
    assert gold(fact) == [] and [m["role"] for m in fact["prompt"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert fact["prompt"][4]["content"] == "Your tip is $7.50."


def test_toolace_reads_python_style_calls_with_spaces_in_names(tmp_path):
    report, df = convert(toolace, "toolace_sample.json", tmp_path)
    assert dict(report.rejected) == {
        "no_tools": 1,
        "gold_call_unparseable": 2,
        "gold_call_unknown_tool": 1,
        "gold_call_schema_mismatch": 1,
        "malformed_record": 1,
        "tool_schema_unknown_type": 1,
    }
    rows = by_question(df)
    first = rows["Is flight BA117 on time today, and find hotels in Boston under 200 with wifi."]
    assert gold(first) == [
        [
            {"name": "Get Flight Status", "arguments": {"flight": "BA117"}},
            {"name": "hotel.search", "arguments": {"city": "Boston", "max_price": 200.0, "amenities": ["wifi"]}},
        ]
    ]
    tools = {t["function"]["name"]: t for t in json.loads(first["tools"])}
    assert tools["hotel.search"]["function"]["parameters"]["properties"]["max_price"] == {"type": "number"}
    second = rows["What about flight LH400 on 2024-05-01?"]
    assert second["extra_info"]["original_turn_index"] == 1
    assert gold(second) == [[{"name": "Get Flight Status", "arguments": {"flight": "LH400", "date": "2024-05-01"}}]]
    book = rows["Can you recommend a good book?"]
    assert gold(book) == []
