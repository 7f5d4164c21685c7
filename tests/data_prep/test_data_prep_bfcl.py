"""BFCL rows from bfcl-eval's shipped data, and decontamination against it (skipped without bfcl-eval)."""

import json
import os

import pandas as pd
import pytest

from data_prep import bfcl, xlam
from data_prep.decontam import bfcl_data_dir, load_bfcl_questions

pytestmark = pytest.mark.skipif(
    bfcl_data_dir() is None, reason="bfcl-eval not installed (pip install --no-deps bfcl-eval==2026.3.23)"
)
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "data_prep")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("bfcl")
    report = bfcl.main(
        [
            "--output_dir",
            str(out),
            "--no_progress",
            "--categories",
            "simple_python",
            "parallel_multiple",
            "simple_java",
            "irrelevance",
            "live_multiple",
        ]
    )
    df = pd.read_parquet(out / "bfcl_test.parquet")
    return report, df.assign(bfcl_id=df["reward_model"].map(lambda r: r["ground_truth"]["bfcl_id"]))


def row(df, bfcl_id):
    return df.loc[df["bfcl_id"] == bfcl_id].iloc[0]


def test_every_bfcl_entry_is_written_or_rejected_with_a_reason(converted):
    report, df = converted
    entries = report.notes["entries_by_category"]
    assert report.rows_in == sum(entries.values()) == report.rows_written + report.rows_rejected
    assert report.written_by_split == {"test": len(df)}
    assert report.rows_written / report.rows_in > 0.97  # BFCL's own schema/answer disagreements are the rest
    assert set(report.rejected) <= {
        "gold_call_schema_mismatch",
        "gold_call_unknown_argument",
        "malformed_record",
        "no_tools",
    }
    assert "multi_turn_base" in report.notes["categories_not_converted"]


def test_simple_python_gold_takes_first_choices_and_omits_optional_arguments(converted):
    _, df = converted
    r = row(df, "simple_python_0")  # answer: base [10], height [5], unit ["units", ""]
    gt = r["reward_model"]["ground_truth"]
    assert r["data_source"] == "bfcl_simple_python" and gt["subset_name"] == "simple_python"
    assert json.loads(gt["gold_tool_calls"]) == [
        [{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5, "unit": "units"}}]
    ]
    assert json.loads(gt["possible_answer"])[0]["calculate_triangle_area"]["unit"] == ["units", ""]
    params = json.loads(r["tools"])[0]["function"]["parameters"]
    assert params["type"] == "object" and params["required"] == ["base", "height"]  # BFCL's "dict" normalised


def test_parallel_multiple_gold_is_one_step_of_parallel_calls(converted):
    _, df = converted
    gold = json.loads(row(df, "parallel_multiple_0")["reward_model"]["ground_truth"]["gold_tool_calls"])
    assert [[c["name"] for c in step] for step in gold] == [
        ["math_toolkit.sum_of_multiples", "math_toolkit.product_of_primes"]
    ]
    assert gold[0][0]["arguments"]["multiples"] == [3, 5]


def test_java_arguments_are_source_text_strings(converted):
    _, df = converted
    r = row(df, "simple_java_0")
    gold = json.loads(r["reward_model"]["ground_truth"]["gold_tool_calls"])
    assert gold == [
        [
            {
                "name": "GeometryPresentation.createPresentation",
                "arguments": {"controller": "mapController", "parent": "mapArea"},
            }
        ]
    ]
    props = json.loads(r["tools"])[0]["function"]["parameters"]["properties"]
    assert all(p["type"] == "string" for p in props.values())


def test_irrelevance_rows_have_no_gold_and_live_system_prompts_are_merged(converted):
    _, df = converted
    assert json.loads(row(df, "irrelevance_0")["reward_model"]["ground_truth"]["gold_tool_calls"]) == []
    live = row(df, "live_multiple_1-0-1")
    roles = [m["role"] for m in live["prompt"]]
    assert roles == ["system", "user"] and "<tools>" in live["prompt"][0]["content"]


def test_decontamination_with_bfcl_removes_a_bfcl_question_and_reports_the_count(tmp_path):
    assert len(load_bfcl_questions()) > 3000
    report = xlam.main(
        [
            "--input",
            os.path.join(FIXTURES, "xlam_sample.json"),
            "--output_dir",
            str(tmp_path),
            "--no_progress",
            "--decontaminate_with",
            "bfcl",
        ]
    )
    assert report.rejected["contaminated_bfcl"] == 1  # fixture record 16 repeats simple_python_0's question
    assert report.examples["contaminated_bfcl"][0]["record_index"] == 16
    saved = json.loads((tmp_path / "xlam_report.json").read_text())
    assert saved["notes"]["decontamination"]["bfcl"]["rows_removed"] == 1
