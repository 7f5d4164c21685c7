"""``--input`` at a local Hugging Face dataset folder, for any source: save_to_disk output (a Dataset or a
DatasetDict), a ``datasets`` cache folder and a Hub snapshot give the same rows as the plain file; a missing path
says where the data is expected."""

import json
import os

import pandas as pd
import pytest

from data_prep import hf_local, toucan, xlam

datasets = pytest.importorskip("datasets")

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "data_prep")
XLAM = os.path.join(FIXTURES, "xlam_sample.json")


def run(module, input_path, out, *extra):
    report = module.main(["--input", str(input_path), "--output_dir", str(out), "--no_progress", *extra])
    return report, pd.read_parquet(out / f"{report.source}_train.parquet")


@pytest.fixture(scope="module")
def xlam_records():
    """The xLAM fixture less its record without a query: a columnar dataset has no "missing key" (it reads None)."""
    with open(XLAM) as f:
        return [r for r in json.load(f) if "query" in r]


@pytest.fixture(scope="module")
def xlam_file(tmp_path_factory, xlam_records):
    path = tmp_path_factory.mktemp("plain") / "xlam.json"
    path.write_text(json.dumps(xlam_records))
    return path


@pytest.fixture(scope="module")
def direct(tmp_path_factory, xlam_file):
    return run(xlam, xlam_file, tmp_path_factory.mktemp("direct"))


def same(a, b):
    (ra, da), (rb, db) = a, b
    assert dict(ra.rejected) == dict(rb.rejected) and ra.records_in == rb.records_in
    assert da.to_json() == db.to_json()


def test_save_to_disk_folder(tmp_path, xlam_records, direct):
    datasets.Dataset.from_list(xlam_records).save_to_disk(str(tmp_path / "hf"))
    assert hf_local.detect(str(tmp_path / "hf")) == "save_to_disk"
    same(run(xlam, tmp_path / "hf", tmp_path / "out"), direct)
    report = xlam.main(
        ["--input", str(tmp_path / "hf"), "--output_dir", str(tmp_path / "few"), "--no_progress", "--max_records", "4"]
    )
    assert report.records_in == 4  # the pipeline slices the memory-mapped dataset


def test_dataset_dict_folder_reads_train_or_the_named_split(tmp_path, xlam_records, direct):
    ds = datasets.Dataset.from_list(xlam_records)
    datasets.DatasetDict({"train": ds, "test": ds.select(range(3))}).save_to_disk(str(tmp_path / "dd"))
    assert hf_local.detect(str(tmp_path / "dd")) == "dataset_dict"
    same(run(xlam, tmp_path / "dd", tmp_path / "out"), direct)
    report = xlam.main(
        ["--input", str(tmp_path / "dd" / "test"), "--output_dir", str(tmp_path / "test"), "--no_progress"]
    )
    assert report.records_in == 3
    datasets.DatasetDict({"a": ds, "b": ds}).save_to_disk(str(tmp_path / "ab"))
    with pytest.raises(ValueError, match=r"holds the splits \['a', 'b'\]"):
        xlam.main(["--input", str(tmp_path / "ab"), "--output_dir", str(tmp_path / "x"), "--no_progress"])


def test_datasets_cache_folder(tmp_path, xlam_file, direct):
    datasets.load_dataset("json", data_files=str(xlam_file), split="train", cache_dir=str(tmp_path / "cache"))
    info = [root for root, _, files in os.walk(tmp_path / "cache") if any(f.endswith(".arrow") for f in files)]
    assert len(info) == 1 and hf_local.detect(info[0]) == "arrow_cache"
    same(run(xlam, info[0], tmp_path / "out"), direct)


def test_hub_snapshot_with_parquet_in_a_config_folder(tmp_path, xlam_records, direct):
    snap = tmp_path / "snapshot"
    (snap / "default").mkdir(parents=True)
    (snap / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n")
    datasets.Dataset.from_list(xlam_records).to_parquet(str(snap / "default" / "train-00000-of-00001.parquet"))
    assert hf_local.detect(str(snap)) == "snapshot"
    same(run(xlam, snap, tmp_path / "out"), direct)


def test_the_authors_rl_parquet_as_a_dataset_folder(tmp_path):
    """The released layout: gold_tool_calls a list of names (or []) in every row, read via datasets."""
    from test_data_prep_toucan_forms import authors_row

    rows = [
        authors_row("names", ["server-search_components", "server-list_components"], serialise=False),
        authors_row("irrelevant", [], subset="irrelevant", serialise=False),
    ]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "rl"))
    report, df = run(toucan, tmp_path / "rl", tmp_path / "out")
    assert report.rows_written == 2 and report.notes["gold_format"] == {"nested": 1, "flat": 0, "names": 1}
    names = df[df["reward_model"].map(lambda r: r["ground_truth"]["question_content"]) == "names"].iloc[0]
    assert json.loads(names["reward_model"]["ground_truth"]["gold_tool_calls"]) == [
        [{"name": "server-search_components", "arguments": {}}, {"name": "server-list_components", "arguments": {}}]
    ]


def test_plain_folders_and_files_are_not_hugging_face_folders(tmp_path):
    (tmp_path / "rows.jsonl").write_text("{}\n")
    assert hf_local.detect(str(tmp_path)) is None and hf_local.detect(str(tmp_path / "rows.jsonl")) is None


def test_missing_input_names_the_expected_location(tmp_path, capsys):
    missing = tmp_path / "data" / "xlam_function_calling_60k.json"
    with pytest.raises(SystemExit) as exit_:  # the CLI's one-line exit for an input it cannot read
        xlam.main(["--input", str(missing), "--output_dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert f"expected the data at {missing}" in err and "Hugging Face dataset folder" in err
    with pytest.raises(SystemExit):
        xlam.main(["--input", "Salesforce/xlam-function-calling-60k", "--output_dir", str(tmp_path / "out")])
    assert "looks like a Hub dataset id: nothing is downloaded" in capsys.readouterr().err


# --- a snapshot of JSON files: read by the project's reader, never retyped by pyarrow --------------------------------

HUGE = "1" * 5000  # past Python's 4300-digit int limit; pyarrow's JSON reader makes it inf
FORECAST = {
    "name": "get_forecast",
    "description": "Forecast of a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
}


def xlam_line(query, **arguments):
    return json.dumps(
        {"query": query, "tools": json.dumps([FORECAST]), "answers": [{"name": "get_forecast", "arguments": arguments}]}
    ).encode()


def snapshot_and_plain(tmp_path, lines, name="train.jsonl"):
    """The same bytes as a snapshot (``snap/default/<name>``) and as a plain file."""
    data = b"\n".join(lines) + b"\n"
    (tmp_path / "snap" / "default").mkdir(parents=True)
    (tmp_path / "snap" / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n")
    (tmp_path / "snap" / "default" / name).write_bytes(data)
    (tmp_path / name).write_bytes(data)
    assert hf_local.detect(str(tmp_path / "snap")) == "snapshot"
    return tmp_path / "snap", tmp_path / name


def gold_of(df):
    return {
        r["reward_model"]["ground_truth"]["question_content"]: json.loads(
            r["reward_model"]["ground_truth"]["gold_tool_calls"]
        )
        for _, r in df.iterrows()
    }


def test_a_json_lines_snapshot_gives_the_plain_files_rows_and_rejections(tmp_path):
    lines = [
        xlam_line("Paris?", city="Paris"),
        b'{"query": ' + HUGE.encode() + b"}",  # was: inf, then "NaN or infinity"; with the string queries a crash
        xlam_line("Rome?", city="Rome", days=12345678901234567890123),  # past int64: was rounded to a float
        b'{"query": "broken?", "tools": ',  # was: the whole file failed
        b'{"query": "b\xc3\x28d?"}',  # not UTF-8
        json.dumps({"tools": "[]", "answers": "[]"}).encode(),  # no query: missing, as in the plain file
    ]
    snap, plain = snapshot_and_plain(tmp_path, lines)
    from_snapshot = run(xlam, snap, tmp_path / "out_snap")
    same(from_snapshot, run(xlam, plain, tmp_path / "out_plain"))
    report, df = from_snapshot
    assert report.records_in == 6 and report.rows_written == 2
    assert dict(report.rejected) == {"integer_too_long": 1, "malformed_record": 2, "not_utf8": 1}
    assert "line 2: Exceeds the limit (4300 digits)" in report.examples["integer_too_long"][0]["detail"]
    # exact values, and no key another row has (pyarrow unifies objects: "days": None in Paris's call)
    assert gold_of(df) == {
        "Paris?": [[{"name": "get_forecast", "arguments": {"city": "Paris"}}]],
        "Rome?": [[{"name": "get_forecast", "arguments": {"city": "Rome", "days": 12345678901234567890123}}]],
    }


def test_a_json_array_snapshot_with_a_too_long_integer_item(tmp_path):
    items = [xlam_line("Paris?", city="Paris"), HUGE.encode(), xlam_line("Rome?", city="Rome")]
    snap, plain = snapshot_and_plain(tmp_path, [b"[" + b", ".join(items) + b"]"], name="train.json")
    report, df = run(xlam, snap, tmp_path / "out_snap")
    same((report, df), run(xlam, plain, tmp_path / "out_plain"))
    assert dict(report.rejected) == {"integer_too_long": 1} and report.rows_written == 2
    assert hf_local.count_rows(str(snap)) == 3


def test_a_streamed_json_lines_snapshot_counts_every_line_and_keeps_only_the_columns(tmp_path):
    lines = [b'{"a": 1, "b": 2}', b'{"a": ' + HUGE.encode() + b"}", b"\xff", b"[1]", b"", b'{"b": "x"}']
    snap, _ = snapshot_and_plain(tmp_path, lines)
    assert hf_local.count_rows(str(snap)) == 5  # blank lines are no records, as in data_prep.readers
    batches = list(hf_local.iter_hf_batches(str(snap), 2, ["a"]))
    assert [len(b) for b in batches] == [2, 2, 1]
    records = [r for b in batches for r in b]
    assert records[0] == {"a": 1} and records[3] == [1] and records[4] == {}
    assert [getattr(r, "reason", None) for r in records] == [None, "integer_too_long", "not_utf8", None, None]
    assert hf_local.read_hf_records(str(snap))[0] == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="not read through datasets"):
        hf_local.load(str(snap))


def test_a_raw_toucan_json_lines_snapshot_streams_with_counted_rejections(tmp_path):
    from test_data_prep_toucan_raw import GOOD, write_parquet

    from data_prep import toucan_raw

    good = [json.dumps(r).encode() for r in GOOD[:2]]
    huge = json.dumps({**GOOD[0], "uuid": "huge"}).replace('"huge"', HUGE).encode()
    snap, _ = snapshot_and_plain(tmp_path, [good[0], huge, b'{"uuid": "\xff"}', good[1]])
    # was: ValueError: Value is too big! (a column of strings and one integer), or UnicodeDecodeError counting lines
    report = toucan_raw.main(
        ["--input", str(snap), "--output_dir", str(tmp_path / "o"), "--quiet", "--batch_size", "2", "--val_ratio", "0"]
    )
    assert report.records_in == 4 and dict(report.rejected) == {"integer_too_long": 1, "not_utf8": 1}
    parquet = toucan_raw.main(
        [
            "--input",
            str(write_parquet(tmp_path / "good.parquet", GOOD[:2])),
            "--output_dir",
            str(tmp_path / "p"),
            "--quiet",
            "--val_ratio",
            "0",
        ]
    )
    assert report.rows_written == parquet.rows_written == 2
    assert (
        pd.read_parquet(tmp_path / "o" / "toucan_raw_train.parquet").to_json()
        == pd.read_parquet(tmp_path / "p" / "toucan_raw_train.parquet").to_json()
    )
