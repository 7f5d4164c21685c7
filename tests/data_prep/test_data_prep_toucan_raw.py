"""Raw Toucan-1.5M -> RL rows: hand-written trajectories in the upstream message layout (single-turn, parallel,
multi-turn, irrelevance, and one per rejection), streamed from parquet shards or a local Hugging Face folder."""

import io
import json
import math
import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_prep import toucan_raw

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather-get_weather",
            "description": "Current weather of a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
                "$schema": "http://json-schema.org/draft-07/schema#",
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "weather-convert_temp",
            "description": "Celsius to Fahrenheit",
            "parameters": {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]},
        },
    },
]
SYSTEM = {"role": "system", "content": "<|im_system|>tool_declare<|im_middle|>" + json.dumps(TOOLS)}


def think(text="Let me think."):
    return {"role": "assistant", "content": "", "reasoning_content": text}


def call(name, **arguments):
    return {
        "role": "assistant",
        "content": "",
        "function_call": {"name": name, "arguments": json.dumps(arguments), "call_id": f"call_{name}"},
    }


def result(name, content):
    return {"role": "function", "name": name, "content": content}


def say(text):
    return {"role": "assistant", "content": text}


def user(text):
    return {"role": "user", "content": text}


def rating(score):
    return {"reasoning": "...", "score": score}


def record(uuid, subset, messages, question_quality=5, completeness=5, conciseness=4, tools=TOOLS):
    return {
        "uuid": uuid,
        "subset_name": subset,
        "messages": messages if isinstance(messages, str) else json.dumps(messages),
        "question": next((m["content"] for m in messages if m["role"] == "user"), "")
        if isinstance(messages, list)
        else "",
        "available_tools": json.dumps(tools),
        "target_tools": "get_weather",
        "question_quality_assessment": json.dumps(
            {
                "tool_selection_difficulty": rating(3),
                "question_quality": rating(question_quality),
                "scenario_realism": rating(4),
            }
        ),
        "response_quality_assessment": json.dumps(
            {
                "completeness": rating(completeness),
                "conciseness": rating(conciseness),
                "overall_score": (completeness + conciseness) / 2,
                "desired_tools_used_percentage": 1.0,
                "order_correctness": True,
            }
        ),
        "metadata": json.dumps({"mcp_servers": [{"server_name": "weather"}]}),
    }


GOOD = [
    record(
        "single",
        "single-turn-original",
        [
            SYSTEM,
            user("Weather in Paris?"),
            think(),
            call("weather-get_weather", city="Paris"),
            result("weather-get_weather", '{"temp": 21}'),
            say("It is 21 C in Paris."),
        ],
    ),
    record(
        "parallel",
        "single-turn-original",
        [
            SYSTEM,
            user("Weather in Paris and Rome, then Rome in Fahrenheit."),
            think(),
            call("weather-get_weather", city="Paris"),
            call("weather-get_weather", city="Rome"),
            result("weather-get_weather", '{"temp": 21}'),
            result("weather-get_weather", '{"temp": 25}'),
            think(),
            call("weather-convert_temp", celsius=25),
            result("weather-convert_temp", "77"),
            say("Paris 21 C, Rome 77 F."),
        ],
    ),
    record(
        "multi",
        "multi-turn",
        [
            SYSTEM,
            user("Weather in Oslo?"),
            call("weather-get_weather", city="Oslo"),
            result("weather-get_weather", '{"temp": 3}'),
            say("3 C."),
            user("Thanks! Is that cold?"),
            think(),
            say("Yes, fairly cold."),
            user("Compare Oslo and Bergen."),
            call("weather-get_weather", city="Oslo"),
            call("weather-get_weather", city="Bergen"),
            result("weather-get_weather", '{"temp": 3}'),
            result("weather-get_weather", '{"temp": 6}'),
            say("Bergen is warmer."),
        ],
    ),
    record("irrelevant", "irrelevant", [SYSTEM, user("Write me a haiku about rain."), think(), say("Rain taps...")]),
    # OpenAI-style tool_calls and role "tool"; the call names the tool without its server prefix
    record(
        "openai",
        "single-turn-diversify",
        [
            SYSTEM,
            user("Weather in Lima?"),
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Lima"})},
                    }
                ],
            },
            {"role": "tool", "content": '{"temp": 18}'},
            say("18 C."),
        ],
    ),
]
BAD = [
    record(
        "calls-when-irrelevant",
        "irrelevant",
        [SYSTEM, user("Tell me a joke."), call("weather-get_weather", city="Paris")],
    ),
    record("not-json", "single-turn-original", "[{'role': 'user'"),
    record(
        "unknown-tool",
        "single-turn-original",
        [SYSTEM, user("Book a flight to Rome."), call("flights-book", city="Rome")],
    ),
    record(
        "bad-arguments",
        "single-turn-original",
        [
            SYSTEM,
            user("Weather in Nice?"),
            {
                "role": "assistant",
                "content": "",
                "function_call": {"name": "weather-get_weather", "arguments": "{city"},
            },
        ],
    ),
    record(
        "schema-mismatch",
        "single-turn-original",
        [SYSTEM, user("Weather in 42?"), call("weather-get_weather", city=42)],
    ),
    record("no-tools", "single-turn-original", [SYSTEM, user("Weather in Paris?")], tools=[]),
]
LOW = [
    record(
        "low-question",
        "single-turn-original",
        [SYSTEM, user("weather?"), call("weather-get_weather", city="X")],
        question_quality=2,
    ),
    record(
        "low-response",
        "single-turn-original",
        [SYSTEM, user("Weather in Bonn?"), call("weather-get_weather", city="Bonn")],
        completeness=2,
        conciseness=3,
    ),
]
ALL = GOOD + BAD + LOW
GOOD_ROWS = 1 + 1 + 3 + 1 + 1  # one per user turn


def write_parquet(path, records):
    pq.write_table(pa.Table.from_pylist(records), path)
    return path


def convert(tmp_path, input_path, *extra, name="toucan_raw"):
    out = tmp_path / "out"
    report = toucan_raw.main(["--input", str(input_path), "--output_dir", str(out), "--quiet", *extra])
    assert report.rows_in == report.rows_written + report.rows_rejected
    on_disk = json.loads((out / f"{name}_report.json").read_text())
    assert on_disk["rejected_by_reason"] == dict(report.rejected) and on_disk["rows_in"] == report.rows_in
    frames = [
        pd.read_parquet(out / f"{name}_{s}.parquet") for s in ("train", "val") if (out / f"{name}_{s}.parquet").exists()
    ]
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return report, df, on_disk


def gold(row):
    return json.loads(row["reward_model"]["ground_truth"]["gold_tool_calls"])


def by_question(df):
    return {r["reward_model"]["ground_truth"]["question_content"]: r for _, r in df.iterrows()}


W = "weather-get_weather"


def test_each_layout_becomes_one_row_per_user_turn_with_nested_steps(tmp_path):
    report, df, on_disk = convert(tmp_path, write_parquet(tmp_path / "toucan.parquet", ALL))
    assert report.records_in == len(ALL) == 13
    assert report.rows_in == GOOD_ROWS + len(BAD) + len(LOW) and report.rows_written == GOOD_ROWS + len(LOW)
    assert dict(report.rejected) == {
        "irrelevance_with_call": 1,
        "messages_malformed": 1,
        "gold_call_unknown_tool": 1,
        "gold_call_unparseable": 1,
        "gold_call_schema_mismatch": 1,
        "no_tools": 1,
    }
    rows = by_question(df)
    assert gold(rows["Weather in Paris?"]) == [[{"name": W, "arguments": {"city": "Paris"}}]]
    assert gold(rows["Weather in Paris and Rome, then Rome in Fahrenheit."]) == [
        [{"name": W, "arguments": {"city": "Paris"}}, {"name": W, "arguments": {"city": "Rome"}}],  # parallel step
        [{"name": "weather-convert_temp", "arguments": {"celsius": 25}}],
    ]
    assert gold(rows["Write me a haiku about rain."]) == []
    assert gold(rows["Weather in Lima?"]) == [[{"name": W, "arguments": {"city": "Lima"}}]]  # server prefix matched
    assert on_disk["notes"]["calls_matched_by_server_prefix"] == 1
    assert on_disk["written_by_subset"] == {
        "irrelevant": 1,
        "multi-turn": 3,
        "single-turn-diversify": 1,
        "single-turn-original": 4,
    }
    assert on_disk["notes"]["gold_format"] == {"nested": GOOD_ROWS + len(LOW)}
    assert {r["reward_model"]["ground_truth"]["gold_format"] for _, r in df.iterrows()} == {"nested"}
    assert set(df["data_source"]) == {"toucan_toolcall"}
    tools = json.loads(rows["Weather in Paris?"]["tools"])
    assert [t["function"]["name"] for t in tools] == [W, "weather-convert_temp"]
    allowed = rows["Weather in Paris?"]["reward_model"]["ground_truth"]["allowed_tools"]
    assert list(allowed) == [W, "weather-convert_temp"]


def test_multi_turn_rows_carry_the_dialogue_up_to_their_turn(tmp_path):
    _, df, _ = convert(tmp_path, write_parquet(tmp_path / "toucan.parquet", GOOD))
    rows = by_question(df)
    first, second, third = (rows[q] for q in ("Weather in Oslo?", "Thanks! Is that cold?", "Compare Oslo and Bergen."))
    assert [r["extra_info"]["original_turn_index"] for r in (first, second, third)] == [0, 1, 2]
    assert gold(first) == [[{"name": W, "arguments": {"city": "Oslo"}}]]
    assert gold(second) == []  # answered without a call
    assert gold(third) == [[{"name": W, "arguments": {"city": "Oslo"}}, {"name": W, "arguments": {"city": "Bergen"}}]]
    assert all(r["reward_model"]["ground_truth"]["subset_name"] == "multi-turn" for r in (first, second, third))
    prompt = [dict(m) for m in third["prompt"]]
    assert [m["role"] for m in prompt] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "user",
    ]  # reasoning-only messages are left out
    assert "<tools>" in prompt[0]["content"] and "tool_declare" not in prompt[0]["content"]  # our listing
    assert json.loads(prompt[2]["content"].split("<tool_call>\n")[1].split("\n</tool_call>")[0]) == {
        "name": W,
        "arguments": {"city": "Oslo"},
    }
    assert prompt[3]["content"] == '{"temp": 3}' and prompt[6]["content"] == "Yes, fairly cold."


def test_quality_filters_reject_under_named_reasons(tmp_path):
    path = write_parquet(tmp_path / "toucan.parquet", GOOD + LOW)
    report, df, _ = convert(tmp_path, path, "--min_question_quality", "3", "--min_response_quality", "3")
    assert dict(report.rejected) == {"low_question_quality": 1, "low_response_quality": 1}
    assert report.rows_written == GOOD_ROWS
    assert report.examples["low_response_quality"][0]["detail"] == "overall_score 2.5 < 3"
    # any rating by name; GOOD records have completeness 5 and conciseness 4
    report, _, _ = convert(tmp_path, path, "--min_quality", "conciseness=4.5")
    assert dict(report.rejected) == {"low_response_quality": len(GOOD + LOW)}
    report, _, _ = convert(tmp_path, path, "--min_quality", "scenario_realism=4", "order_correctness=1")
    assert dict(report.rejected) == {}
    report, _, _ = convert(tmp_path, path, "--min_quality", "verifiable=3")  # not in these records
    assert dict(report.rejected) == {"quality_assessment_missing": len(GOOD + LOW)}


def test_response_overall_score_falls_back_to_the_mean_of_its_ratings(tmp_path):
    rec = record(
        "no-overall",
        "single-turn-original",
        [SYSTEM, user("Weather in Riga?"), call(W, city="Riga")],
        completeness=3,
        conciseness=2,
    )
    assessment = json.loads(rec["response_quality_assessment"])
    del assessment["overall_score"]
    rec["response_quality_assessment"] = json.dumps(assessment)
    report, _, _ = convert(tmp_path, write_parquet(tmp_path / "t.parquet", [rec]), "--min_response_quality", "2.5")
    assert report.rows_written == 1
    report, _, _ = convert(tmp_path, write_parquet(tmp_path / "t.parquet", [rec]), "--min_response_quality", "2.6")
    assert dict(report.rejected) == {"low_response_quality": 1}


def test_subsets_option_and_duplicates(tmp_path):
    path = write_parquet(tmp_path / "toucan.parquet", GOOD + [GOOD[0]])
    report, _, _ = convert(tmp_path, path)
    assert dict(report.rejected) == {"duplicate": 1}
    report, df, _ = convert(tmp_path, path, "--subsets", "multi-turn,irrelevant")
    assert dict(report.rejected) == {"subset_not_selected": 4} and report.rows_written == 4


def test_shards_in_small_batches_and_small_chunks_give_the_same_rows(tmp_path):
    _, whole, _ = convert(tmp_path, write_parquet(tmp_path / "toucan.parquet", ALL))
    shards = tmp_path / "Toucan-1.5M" / "Qwen3"
    shards.mkdir(parents=True)
    for i in range(3):
        write_parquet(shards / f"train-{i:05d}-of-00003.parquet", ALL[i * 5 : (i + 1) * 5])
    report, sharded, _ = convert(tmp_path, shards, "--batch_size", "2")  # pyarrow batches
    assert report.records_in == len(ALL)
    assert sharded.to_json() == whole.to_json()
    assert list(sharded["extra_info"].map(lambda e: e["index"])) == list(range(len(sharded)))
    report, snapshot, _ = convert(tmp_path, tmp_path / "Toucan-1.5M", "--batch_size", "2")  # a snapshot: datasets
    assert report.records_in == len(ALL) and snapshot.to_json() == whole.to_json()


def test_a_snapshot_root_with_configs_of_different_columns_asks_for_one_config(tmp_path):
    pytest.importorskip("datasets")
    (tmp_path / "Toucan-1.5M" / "Qwen3").mkdir(parents=True)
    (tmp_path / "Toucan-1.5M" / "SFT").mkdir()
    write_parquet(tmp_path / "Toucan-1.5M" / "Qwen3" / "train-00000-of-00001.parquet", GOOD)
    write_parquet(
        tmp_path / "Toucan-1.5M" / "SFT" / "train-00000-of-00001.parquet",
        [{"uuid": "u", "messages": "[]", "tools": "[]"}],
    )
    with pytest.raises(ValueError, match=r"\(Qwen3, SFT\): pass --input at one config's folder"):
        toucan_raw.main(["--input", str(tmp_path / "Toucan-1.5M"), "--output_dir", str(tmp_path / "o"), "--quiet"])


def test_rows_are_written_in_chunks_with_contiguous_indices(tmp_path):
    from data_prep.pipeline import Options
    from data_prep.stream import run_streaming

    convert_record = toucan_raw.ToucanRawConverter()
    opts = Options(output_dir=str(tmp_path), name="chunked", progress=False)
    batches = iter([GOOD[:2], GOOD[2:]])
    report = run_streaming("toucan_raw", "<memory>", batches, len(GOOD), convert_record, opts, chunk_rows=2)
    path = tmp_path / "chunked_train.parquet"
    assert report.rows_written == GOOD_ROWS and pq.ParquetFile(path).num_row_groups == math.ceil(GOOD_ROWS / 2)
    assert list(pd.read_parquet(path)["extra_info"].map(lambda e: e["index"])) == list(range(GOOD_ROWS))


def test_val_split_takes_whole_dialogues(tmp_path):
    report, df, _ = convert(
        tmp_path, write_parquet(tmp_path / "toucan.parquet", GOOD), "--val_ratio", "0.4", "--seed", "3"
    )
    splits = {q: r["extra_info"]["split"] for q, r in by_question(df).items()}
    multi = {splits[q] for q in ("Weather in Oslo?", "Thanks! Is that cold?", "Compare Oslo and Bergen.")}
    assert len(multi) == 1  # every turn of the dialogue in one split
    val_records = math.ceil(0.4 * len(GOOD))
    assert report.written_by_split["val"] == (val_records - 1) + (3 if multi == {"val"} else 1)


def test_progress_bar_only_on_a_tty():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    from data_prep.stream import progress_enabled

    assert progress_enabled(True, Tty()) and not progress_enabled(True, io.StringIO())
    assert not progress_enabled(False, Tty())


def test_local_hugging_face_folder_is_read_through_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    _, direct, _ = convert(tmp_path, write_parquet(tmp_path / "toucan.parquet", ALL))
    datasets.Dataset.from_list(ALL).save_to_disk(str(tmp_path / "hf"))
    report, via_hf, _ = convert(tmp_path, tmp_path / "hf")
    assert report.records_in == len(ALL) and report.rows_written == GOOD_ROWS + len(LOW)
    assert via_hf.to_json() == direct.to_json()


def test_missing_input_says_where_the_data_is_expected(tmp_path):
    missing = tmp_path / "Toucan-1.5M"
    with pytest.raises(FileNotFoundError) as err:
        toucan_raw.main(["--input", str(missing), "--output_dir", str(tmp_path / "out"), "--quiet"])
    assert f"expected the data at {missing}" in str(err.value)
    with pytest.raises(FileNotFoundError) as err:
        toucan_raw.main(["--input", "Agent-Ark/Toucan-1.5M", "--output_dir", str(tmp_path / "out"), "--quiet"])
    assert os.path.abspath("Agent-Ark/Toucan-1.5M") in str(err.value) and "hf download --repo-type dataset" in str(
        err.value
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no .parquet file under"):
        toucan_raw.main(["--input", str(empty), "--output_dir", str(tmp_path / "out"), "--quiet"])


# ---------------------------------------------------------------------------------------------------------------
# Raw Toucan-1.5M as it really is.


def refused(name):
    """Qwen-Agent's answer to a call whose name is not one of its tools."""
    return result(name, f"Tool {name} does not exists.")


def test_a_call_refused_upstream_is_never_renamed_into_the_right_one(tmp_path):
    records = [
        # the model first calls the short name (refused), then the prefixed tool: gold is the one call that ran
        record(
            "refused-then-right",
            "single-turn-original",
            [
                SYSTEM,
                user("Forecast for Oslo?"),
                call("get_weather", city="Oslo"),
                refused("get_weather"),
                call(W, city="Oslo"),
                result(W, '{"temp": 3}'),
                say("3 C."),
                user("And Bergen?"),
                call(W, city="Bergen"),
                result(W, '{"temp": 6}'),
                say("6 C."),
            ],
        ),
        # a parallel step with one refused call: the step keeps the call that ran
        record(
            "parallel-one-refused",
            "single-turn-original",
            [
                SYSTEM,
                user("Weather in Rome and Nice?"),
                call("get_weather", city="Rome"),
                call(W, city="Nice"),
                refused("get_weather"),
                result(W, '{"temp": 20}'),
                say("Nice 20 C."),
            ],
        ),
        # every call of the turn refused: no gold to imitate, and not an irrelevance row either
        record(
            "all-refused",
            "single-turn-original",
            [
                SYSTEM,
                user("Weather in Kyiv?"),
                call("get_weather", city="Kyiv"),
                refused("get_weather"),
                say("I cannot look that up."),
            ],
        ),
        # the short name ran upstream (a result that is not the refusal): renamed and counted
        record(
            "short-name-ran",
            "single-turn-original",
            [
                SYSTEM,
                user("Weather in Lima?"),
                call("get_weather", city="Lima"),
                result("get_weather", '{"temp": 18}'),
                say("18 C."),
            ],
        ),
    ]
    report, df, on_disk = convert(tmp_path, write_parquet(tmp_path / "t.parquet", records))
    rows = by_question(df)
    assert gold(rows["Forecast for Oslo?"]) == [[{"name": W, "arguments": {"city": "Oslo"}}]]  # was [[X], [X]]
    assert gold(rows["Weather in Rome and Nice?"]) == [[{"name": W, "arguments": {"city": "Nice"}}]]
    assert gold(rows["Weather in Lima?"]) == [[{"name": W, "arguments": {"city": "Lima"}}]]
    assert dict(report.rejected) == {"gold_calls_all_failed": 1}
    assert on_disk["notes"]["calls_matched_by_server_prefix"] == 1
    assert on_disk["notes"]["gold_calls_dropped"] == {"failed_upstream_no_such_tool": 3}
    # the later turn's prompt keeps the refused call as the dialogue had it (short name, refusal as its result)
    history = [dict(m) for m in rows["And Bergen?"]["prompt"]]
    assert (
        '"name": "get_weather"' in history[2]["content"]
        and history[3]["content"] == "Tool get_weather does not exists."
    )
    assert gold(rows["And Bergen?"]) == [[{"name": W, "arguments": {"city": "Bergen"}}]]


def sft_call(name, **arguments):
    """The SFT config's call message: upstream's ms-swift converter writes ``str(function_call)``."""
    return {
        "role": "tool_call",
        "content": str({"name": name, "arguments": json.dumps(arguments), "call_id": f"call_{name}"}),
    }


def sft_record(uuid, messages, tools=TOOLS, subset=None):
    out = {"uuid": uuid, "tools": json.dumps(tools), "messages": json.dumps(messages)}
    if subset is not None:
        out["subset_name"] = subset
    return out


def test_the_sft_config_is_read_tools_column_parallel_tool_calls_and_python_literal_calls(tmp_path):
    records = [
        sft_record(
            "sft-parallel",
            [
                user("Weather in Paris and Rome?"),
                say("I will look both up."),
                sft_call("get_weather", city="Paris"),
                sft_call("get_weather", city="Rome"),
                {"role": "tool_response", "content": '{"temp": 21}'},
                {"role": "tool_response", "content": '{"temp": 25}'},
                say("Paris 21 C, Rome 25 C."),
                user("Rome in Fahrenheit?"),
                sft_call("convert_temp", celsius=25),
                {"role": "tool_response", "content": "77"},
                say("77 F."),
            ],
        ),
        # arguments already a dict inside the literal; JSON content is read as well
        sft_record(
            "sft-dict-args",
            [
                user("Weather in Oslo?"),
                {"role": "tool_call", "content": str({"name": "weather-get_weather", "arguments": {"city": "Oslo"}})},
                {"role": "tool_response", "content": "3"},
                say("3 C."),
            ],
        ),
        sft_record("sft-not-a-call", [user("Weather in Nice?"), {"role": "tool_call", "content": "get_weather(Nice"}]),
        sft_record("sft-deep", [user("Weather in Bonn?"), {"role": "tool_call", "content": "[" * 120 + "]" * 120}]),
        sft_record(
            "sft-no-eval",
            [user("Weather in Riga?"), {"role": "tool_call", "content": "__import__('os').system('true')"}],
        ),
    ]
    report, df, _ = convert(tmp_path, write_parquet(tmp_path / "sft.parquet", records))
    assert dict(report.rejected) == {"gold_call_unparseable": 2, "too_deep": 1}  # never no_tools
    rows = by_question(df)
    paris = "Weather in Paris and Rome?"
    assert gold(rows[paris]) == [
        [{"name": W, "arguments": {"city": "Paris"}}, {"name": W, "arguments": {"city": "Rome"}}]
    ]  # ONE parallel step
    assert gold(rows["Rome in Fahrenheit?"]) == [[{"name": "weather-convert_temp", "arguments": {"celsius": 25}}]]
    assert gold(rows["Weather in Oslo?"]) == [[{"name": W, "arguments": {"city": "Oslo"}}]]
    prompt = [dict(m) for m in rows["Rome in Fahrenheit?"]["prompt"]]
    assert [m["role"] for m in prompt] == [
        "system",
        "user",
        "assistant",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    calls = [json.loads(b.split("\n</tool_call>")[0]) for b in prompt[3]["content"].split("<tool_call>\n")[1:]]
    assert calls == [{"name": W, "arguments": {"city": "Paris"}}, {"name": W, "arguments": {"city": "Rome"}}]
    assert not any(
        "{'name'" in m["content"] or "call_id" in m["content"] for _, r in df.iterrows() for m in r["prompt"]
    )  # no python-literal call text reaches a prompt


def irrelevant_record(uuid, question, question_quality, response_assessment=""):
    rec = record(
        uuid,
        "irrelevant",
        [SYSTEM, user(question), think(), say("I have no tool for that.")],
        question_quality=question_quality,
    )
    rec["response_quality_assessment"] = response_assessment  # empty upstream for this subset
    return rec


def test_response_quality_filters_gate_irrelevance_records_on_their_question_rating(tmp_path):
    records = (
        GOOD[:1]
        + LOW[1:]
        + [irrelevant_record("irr-good", "Write a haiku.", 5), irrelevant_record("irr-low", "haiku?", 3, "{}")]
    )
    path = write_parquet(tmp_path / "t.parquet", records)
    report, df, on_disk = convert(tmp_path, path, "--min_response_quality", "4")  # the docs' own example
    # before: both irrelevance records were dropped as quality_assessment_missing
    assert dict(report.rejected) == {"low_response_quality": 1, "low_question_quality": 1}
    assert report.examples["low_question_quality"][0]["detail"] == "question_quality 3 < 4 (irrelevance record)"
    assert gold(by_question(df)["Write a haiku."]) == [] and on_disk["written_by_subset"]["irrelevant"] == 1
    assert on_disk["notes"]["irrelevance_gated_on_question_quality"] == 2
    report, _, on_disk = convert(tmp_path, path, "--min_response_quality", "4", "--irrelevance_quality", "reject")
    assert dict(report.rejected) == {"low_response_quality": 1, "irrelevance_response_unrated": 2}
    report, _, _ = convert(tmp_path, path)  # no filter: nothing to gate
    assert dict(report.rejected) == {} and report.rows_written == 4
