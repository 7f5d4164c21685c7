"""data_prep: one bad record never ends a CLI run. Each bad input goes through a source's public entry point
(``main(argv)``, or ``python -m data_prep.<source>`` where the exit status matters) next to good records; the test
checks the reason the report counts it under, that the good rows are still written, and that the report balances.
docs/bad_inputs.md lists what each bad input gets."""

import json
import math
import os
import sys

import pandas as pd
import pytest
import subproc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data_prep import bfcl, glaive, hermes_fc, sft, toolace, toucan, xlam
from slca_verl.toolcall.limits import MAX_DEPTH

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEEP = 5000  # far past the interpreter's recursion limit (1000)

WEATHER = {
    "name": "get_weather",
    "description": "Weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
HOTEL = {
    "name": "hotel.search",
    "description": "Find hotels.",
    "parameters": {
        "type": "dict",
        "properties": {"city": {"type": "string"}, "max_price": {"type": "float"}},
        "required": ["city"],
    },
}
BFCL_FUNCTION = {
    "name": "area",
    "description": "Area.",
    "parameters": {"type": "dict", "properties": {"base": {"type": "integer"}}, "required": ["base"]},
}


def deep_json(n: int = DEEP) -> str:
    return "[" * n + "]" * n


def deep_value(n: int):
    value: list = []
    for _ in range(n - 1):
        value = [value]
    return value


def nested_schema(levels: int) -> dict:
    schema = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


# --- one good record per source (each call gives a distinct question, so dedup keeps them all) -------------------


def xlam_record(query="Weather in Paris?", tools=None, answers=None):
    answers = [{"name": "get_weather", "arguments": {"city": "Paris"}}] if answers is None else answers
    return {
        "query": query,
        "tools": json.dumps(tools or [WEATHER]),
        "answers": answers if isinstance(answers, str) else json.dumps(answers),
    }


def toucan_record(question="Weather in Paris?", gold=None, tools=None, **fields):
    tools = tools or [{"type": "function", "function": WEATHER}]
    gold = [[{"name": "get_weather", "arguments": {"city": "Paris"}}]] if gold is None else gold
    record = {
        "prompt": [{"role": "system", "content": "tools listed here"}, {"role": "user", "content": question}],
        "data_source": "toucan_toolcall",
        "reward_model": {
            "style": "rule",
            "ground_truth": {
                "allowed_tools": [t["function"]["name"] for t in tools],
                "gold_tool_calls": json.dumps(gold),
                "question_content": question,
                "subset_name": "tool_call",
                "tool_schemas": json.dumps(tools),
            },
        },
        "extra_info": {"original_turn_index": 0},
    }
    record.update(fields)
    return record


def hermes_record(
    question="Weather in Paris?",
    call='{"name": "get_weather", "arguments": {"city": "Paris"}}',
    tools_block=None,
    conversations=None,
):
    tools_block = json.dumps([WEATHER]) if tools_block is None else tools_block
    return {
        "conversations": conversations
        or [
            {"from": "system", "value": f"<tools>\n{tools_block}\n</tools>"},
            {"from": "human", "value": question},
            {"from": "gpt", "value": f"<tool_call>\n{call}\n</tool_call>"},
        ]
    }


def glaive_record(question="Weather in Paris?", arguments='{"city": "Paris"}', system=None):
    system = system or f"SYSTEM: You have these functions -\n{json.dumps(WEATHER)}\n"
    return {
        "system": system,
        "chat": f"USER: {question}\n\n\nASSISTANT: <functioncall> "
        f'{{"name": "get_weather", "arguments": \'{arguments}\'}} <|endoftext|>\n',
    }


def toolace_record(
    question="Hotels in Boston?", call='[hotel.search(city="Boston", max_price=200.0)]', conversations=None
):
    return {
        "system": f"Here is a list of functions in JSON format:\n{json.dumps([HOTEL])}\nUse them.",
        "conversations": conversations or [{"from": "user", "value": question}, {"from": "assistant", "value": call}],
    }


GOOD = {
    "xlam": xlam_record,
    "toucan": toucan_record,
    "hermes_fc": hermes_record,
    "glaive": glaive_record,
    "toolace": toolace_record,
}
MODULES = {"xlam": xlam, "toucan": toucan, "hermes_fc": hermes_fc, "glaive": glaive, "toolace": toolace}


# --- helpers ------------------------------------------------------------------------------------------------------


def write_lines(path, lines):
    """JSON lines: dicts are dumped, str / bytes lines written as they are."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        for line in lines:
            if isinstance(line, dict):
                line = json.dumps(line)
            f.write((line.encode() if isinstance(line, str) else line) + b"\n")
    return str(path)


def convert(module, input_path, out, *extra):
    report = module.main(["--input", str(input_path), "--output_dir", str(out), "--no_progress", *extra])
    assert report.rows_in == report.rows_written + report.rows_rejected
    assert "unexpected_error" not in report.rejected
    saved = json.loads((out / f"{report.source}_report.json").read_text())
    assert saved["rejected_by_reason"] == dict(report.rejected)
    path = out / f"{report.source}_{report.options['split_name']}.parquet"
    return report, (pd.read_parquet(path) if path.exists() else pd.DataFrame())


def convert_lines(module, lines, tmp_path, *extra):
    return convert(module, write_lines(tmp_path / "in.jsonl", lines), tmp_path / "out", *extra)


def questions(df):
    return sorted(r["reward_model"]["ground_truth"]["question_content"] for _, r in df.iterrows())


def detail(report, reason):
    return report.examples[reason][0]["detail"]


# --- deep nesting -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", sorted(GOOD))
def test_a_line_nested_past_the_parser_limit_is_one_too_deep_rejection(source, tmp_path):
    good = GOOD[source]
    report, df = convert_lines(MODULES[source], [good("first?"), deep_json(), good("second?")], tmp_path)
    assert dict(report.rejected) == {"too_deep": 1}
    assert report.records_in == 3 and questions(df) == ["first?", "second?"]
    assert "line 2" in detail(report, "too_deep")


@pytest.mark.parametrize("source", sorted(GOOD))
def test_an_item_too_deep_to_parse_in_a_json_array_is_skipped_alone(source, tmp_path):
    good = GOOD[source]
    text = f"[\n{json.dumps(good('first?'))},\n{deep_json()},\n{json.dumps(good('second?'))}\n]"
    (tmp_path / "in.json").write_text(text)
    report, df = convert(MODULES[source], tmp_path / "in.json", tmp_path / "out")
    assert dict(report.rejected) == {"too_deep": 1} and report.records_in == 3
    assert questions(df) == ["first?", "second?"]
    assert "item 1 (line 3)" in detail(report, "too_deep")


def test_a_record_the_parser_reads_but_deeper_than_the_bound_is_too_deep(tmp_path):
    record = xlam_record("deep extra field?")
    record["extra"] = deep_value(MAX_DEPTH + 1)
    report, df = convert_lines(xlam, [record, xlam_record()], tmp_path)
    assert dict(report.rejected) == {"too_deep": 1} and report.rows_written == 1
    assert detail(report, "too_deep") == f"the record nests more than {MAX_DEPTH} levels deep"


def test_schemas_and_calls_nested_deep_inside_json_strings_are_too_deep(tmp_path):
    deep_tool = {"name": "get_weather", "parameters": nested_schema(450)}
    lines = [
        xlam_record("schema 450 deep?", tools=[deep_tool]),  # tools: JSON text
        xlam_record("answer 5000 deep?", answers='[{"name": "get_weather", "arguments": ' + deep_json() + "}]"),
        xlam_record(
            "type string?",
            tools=[{"name": "get_weather", "parameters": {"city": {"type": "List[" * 500 + "int" + "]" * 500}}}],
        ),  # python-style type string
        xlam_record(),
    ]
    report, df = convert_lines(xlam, lines, tmp_path)
    assert dict(report.rejected) == {"too_deep": 3} and questions(df) == ["Weather in Paris?"]


def test_a_schema_and_call_nested_just_inside_the_bound_are_still_written(tmp_path):
    levels = 45  # tool list + tool + 2 containers per object level: 94 of the 100 allowed
    arguments: object = "Paris"
    for _ in range(levels):
        arguments = {"a": arguments}
    deep_tool = {"name": "get_weather", "parameters": nested_schema(levels)}
    report, df = convert_lines(
        xlam,
        [xlam_record("deep but fine?", tools=[deep_tool], answers=[{"name": "get_weather", "arguments": arguments}])],
        tmp_path,
    )
    assert report.rows_written == 1 and not report.rejected
    assert json.loads(df.iloc[0]["reward_model"]["ground_truth"]["gold_tool_calls"])[0][0]["arguments"] == arguments


def test_a_schema_nested_450_deep_given_as_objects_is_too_deep(tmp_path):
    deep = toucan_record("deep schema?")
    deep["reward_model"]["ground_truth"]["tool_schemas"] = [
        {"type": "function", "function": {"name": "get_weather", "parameters": nested_schema(450)}}
    ]
    report, df = convert_lines(toucan, [deep, toucan_record()], tmp_path)
    assert dict(report.rejected) == {"too_deep": 1} and report.rows_written == 1


def test_hermes_tool_calls_and_tools_blocks_nested_deep_are_too_deep(tmp_path):
    lines = [
        hermes_record("json call?", call='{"name": "get_weather", "arguments": ' + deep_json() + "}"),
        hermes_record("python call?", call="{'name': 'get_weather', 'arguments': " + deep_json(300) + "}"),
        hermes_record("json tools?", tools_block=deep_json()),
        hermes_record("concatenated tools?", tools_block=json.dumps(WEATHER) + "\n" + deep_json()),
        hermes_record(),
    ]
    report, df = convert_lines(hermes_fc, lines, tmp_path)
    assert dict(report.rejected) == {"too_deep": 4} and questions(df) == ["Weather in Paris?"]


def test_glaive_and_toolace_calls_and_system_json_nested_deep_are_too_deep(tmp_path):
    report, df = convert_lines(
        glaive,
        [
            glaive_record("deep arguments?", arguments='{"city": ' + deep_json() + "}"),
            glaive_record("deep system json?", system="SYSTEM: functions -\n" + '{"a": ' * DEEP),
            glaive_record(),
        ],
        tmp_path / "glaive",
    )
    assert dict(report.rejected) == {"too_deep": 2} and report.rows_written == 1
    report, df = convert_lines(
        toolace,
        [
            toolace_record("nested literal?", call=f"[hotel.search(city={deep_json(300)})]"),
            toolace_record("long chain?", call="[hotel.search(city=" + "1+" * 100_000 + "1)]"),
            toolace_record(),
        ],
        tmp_path / "toolace",
    )
    assert dict(report.rejected) == {"too_deep": 2} and report.rows_written == 1


# --- toucan fields ------------------------------------------------------------------------------------------------


def test_toucan_reward_model_and_extra_info_given_as_json_text_are_parsed(tmp_path):
    record = toucan_record("as text?")
    record["reward_model"] = json.dumps(record["reward_model"])
    record["extra_info"] = json.dumps({"original_turn_index": 2})
    report, df = convert_lines(toucan, [record], tmp_path)
    assert report.rows_written == 1 and not report.rejected
    assert df.iloc[0]["extra_info"]["original_turn_index"] == 2


def test_toucan_fields_that_are_not_json_text_are_rejected_by_name(tmp_path):
    lines = [
        toucan_record("a?", reward_model="{not json"),
        toucan_record("b?", extra_info="garbage"),
        toucan_record("c?", reward_model=[1, 2]),
        toucan_record(),
    ]
    report, df = convert_lines(toucan, lines, tmp_path)
    assert dict(report.rejected) == {"reward_model_unparseable": 1, "extra_info_unparseable": 1, "malformed_record": 1}
    assert detail(report, "malformed_record") == "reward_model is a list, not an object"
    assert questions(df) == ["Weather in Paris?"]


def test_null_messages_are_rejected_in_every_dialogue_source(tmp_path):
    toucan_null = toucan_record("null message?")
    toucan_null["prompt"].append(None)
    report, _ = convert_lines(toucan, [toucan_null, toucan_record()], tmp_path / "toucan")
    assert dict(report.rejected) == {"prompt_malformed": 1} and report.rows_written == 1
    for module, good in ((hermes_fc, hermes_record), (toolace, toolace_record)):
        bad = good("null message?")
        bad["conversations"].insert(1, None)
        report, df = convert_lines(module, [bad, good()], tmp_path / module.SOURCE)
        assert dict(report.rejected) == {"malformed_record": 1} and report.rows_written == 1
        assert detail(report, "malformed_record") == "message 1 is null, not an object"


def test_unusable_refs_and_patterns_are_schema_rejections_not_crashes_in_the_gold_check(tmp_path):
    schema = {"type": "object", "properties": {"city": {"$ref": "#/definitions/missing"}}}
    dangling = toucan_record("dangling?", tools=[{"type": "function", "function": {**WEATHER, "parameters": schema}}])
    remote = toucan_record(
        "remote?",
        tools=[
            {
                "type": "function",
                "function": {
                    **WEATHER,
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"$ref": "https://example.invalid/city.json"}},
                    },
                },
            }
        ],
    )
    local = toucan_record(
        "resolvable ref?",
        tools=[
            {
                "type": "function",
                "function": {
                    **WEATHER,
                    "parameters": {
                        "type": "object",
                        "definitions": {"c": {"type": "string"}},
                        "properties": {"city": {"$ref": "#/definitions/c"}},
                    },
                },
            }
        ],
    )
    bad_regex = toucan_record(
        "bad pattern?",
        tools=[
            {
                "type": "function",
                "function": {
                    **WEATHER,
                    "parameters": {"type": "object", "properties": {"city": {"type": "string", "pattern": "("}}},
                },
            }
        ],
    )
    overflow = toucan_record(
        "overflow?",
        tools=[
            {
                "type": "function",
                "function": {
                    **WEATHER,
                    "parameters": {"type": "object", "properties": {"city": {"type": "integer", "multipleOf": 0.1}}},
                },
            }
        ],
        gold=[[{"name": "get_weather", "arguments": {"city": 10**400}}]],
    )  # jsonschema: int too large for a float
    cycle = toucan_record(
        "ref cycle?",
        tools=[
            {
                "type": "function",
                "function": {
                    **WEATHER,
                    "parameters": {
                        "type": "object",
                        "definitions": {"c": {"$ref": "#/definitions/c"}},
                        "properties": {"city": {"$ref": "#/definitions/c"}},
                    },
                },
            }
        ],
    )
    report, df = convert_lines(toucan, [dangling, remote, local, bad_regex, overflow, cycle], tmp_path)
    assert dict(report.rejected) == {"tool_schema_invalid": 4, "too_deep": 1} and questions(df) == ["resolvable ref?"]
    details = [e["detail"] for e in report.examples["tool_schema_invalid"]]
    assert "$ref '#/definitions/missing' does not point inside the schema" in details[0]
    assert "https://example.invalid/city.json" in details[1]
    assert "fails the JSON Schema meta-schema: '(' is not a 'regex'" in details[2]
    assert details[3] == ("get_weather: the schema cannot be applied: OverflowError: int too large to convert to float")
    assert detail(report, "too_deep") == "get_weather: validating the call recursed too deep (a $ref cycle?)"


# --- bfcl with --input --------------------------------------------------------------------------------------------


def test_bfcl_input_with_a_malformed_line_and_entries_or_answers_without_id(tmp_path):
    data = tmp_path / "data"
    (data / "possible_answer").mkdir(parents=True)

    def entry(i):
        return {
            "id": f"simple_python_{i}",
            "question": [[{"role": "user", "content": f"Area {i}?"}]],
            "function": [BFCL_FUNCTION],
        }

    write_lines(
        data / "BFCL_v4_simple_python.json",
        [entry(0), "{broken", {k: v for k, v in entry(2).items() if k != "id"}, entry(3), {**entry(4), "id": 4}],
    )
    write_lines(
        data / "possible_answer" / "BFCL_v4_simple_python.json",
        [
            {"id": "simple_python_0", "ground_truth": [{"area": {"base": [10]}}]},
            "not json",
            {"ground_truth": [{"area": {"base": [3]}}]},
        ],
    )
    report, df = convert(bfcl, data, tmp_path / "out", "--categories", "simple_python")
    assert dict(report.rejected) == {"malformed_record": 3, "bfcl_answer_missing": 1}
    assert report.records_in == 5 and report.rows_written == 1
    assert json.loads(df.iloc[0]["reward_model"]["ground_truth"]["gold_tool_calls"]) == [
        [{"name": "area", "arguments": {"base": 10}}]
    ]
    assert report.notes["answer_lines_without_id"] == {"simple_python": 2}
    details = [e["detail"] for e in report.examples["malformed_record"]]
    assert details[0].startswith(f"{data / 'BFCL_v4_simple_python.json'} line 2: Expecting property name")
    assert [d[:22] for d in details[1:]] == ["entry has no string id"] * 2


def test_bfcl_input_missing_a_category_file_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit) as exc:
        bfcl.main(["--input", str(tmp_path), "--output_dir", str(tmp_path / "out"), "--categories", "simple_python"])
    assert exc.value.code == 2


# --- column types: the parquet write never fails after conversion -------------------------------------------------


def test_toucan_fields_of_the_wrong_type_are_rejected_before_the_write(tmp_path):
    lines = [
        toucan_record("int data_source?", data_source=42),
        toucan_record("list subset?"),
        toucan_record("huge turn?", extra_info={"original_turn_index": 1e30}),
        toucan_record("infinite turn?", extra_info={"original_turn_index": float("inf")}),
        toucan_record("text turn?", extra_info={"original_turn_index": "3"}),
        toucan_record("float turn?", extra_info={"original_turn_index": 3.0}),
        toucan_record(),
    ]
    lines[1]["reward_model"]["ground_truth"]["subset_name"] = ["a", "b"]
    report, df = convert_lines(toucan, lines, tmp_path)
    assert dict(report.rejected) == {"field_type_invalid": 5}
    assert questions(df) == ["Weather in Paris?", "float turn?"]
    assert (
        df.set_index(df["reward_model"].map(lambda r: r["ground_truth"]["question_content"])).loc[
            "float turn?", "extra_info"
        ]["original_turn_index"]
        == 3
    )
    details = [e["detail"] for e in report.examples["field_type_invalid"]]
    assert details[0] == "data_source is 42, not a non-empty string"
    assert details[1] == "subset_name is a list, not a string"
    assert details[2].startswith("original_turn_index 1000000000000000019884624838656 is not an integer")


def test_a_lone_surrogate_is_rejected_instead_of_failing_the_write(tmp_path):
    report, df = convert_lines(xlam, [xlam_record("Weather in \ud800 Paris?"), xlam_record()], tmp_path)
    assert dict(report.rejected) == {"invalid_unicode": 1} and questions(df) == ["Weather in Paris?"]


def test_a_lone_surrogate_quoted_in_a_rejection_detail_does_not_stop_the_report(tmp_path):
    bad_tool = {
        "name": "\ud800",
        "parameters": {"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}},
    }
    report, df = convert_lines(xlam, [xlam_record("bad tool?", tools=[bad_tool]), xlam_record()], tmp_path)
    assert dict(report.rejected) == {"tool_schema_invalid": 1} and report.rows_written == 1
    saved = json.loads((tmp_path / "out" / "xlam_report.json").read_text())
    assert saved["examples_by_reason"]["tool_schema_invalid"][0]["detail"].startswith("\ud800: fails the JSON Schema")


# --- readers ------------------------------------------------------------------------------------------------------


def run_module(source, input_path, out):
    return subproc.run(
        [
            sys.executable,
            "-m",
            f"data_prep.{source}",
            "--input",
            str(input_path),
            "--output_dir",
            str(out),
            "--no_progress",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_a_json_file_that_is_not_utf8_is_one_clear_error_naming_the_byte(tmp_path):
    data = json.dumps([xlam_record()]).encode()
    (tmp_path / "in.json").write_bytes(data[:10] + b"\xff" + data[10:])
    proc = run_module("xlam", tmp_path / "in.json", tmp_path / "out")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{tmp_path / 'in.json'}: not UTF-8 at byte offset 10" in proc.stderr


@pytest.mark.slow
def test_a_pretty_printed_json_with_one_syntax_error_is_one_error_naming_line_and_column(tmp_path):
    text = json.dumps([xlam_record("a?"), xlam_record("b?")], indent=2)
    text = text.replace('"query": "b?",', '"query": "b?"', 1)  # a missing comma on one line
    (tmp_path / "in.json").write_text(text)
    line = next(i for i, t in enumerate(text.split("\n"), 1) if '"query": "b?"' in t) + 1
    with pytest.raises(SystemExit) as exc:
        xlam.main(["--input", str(tmp_path / "in.json"), "--output_dir", str(tmp_path / "out"), "--no_progress"])
    assert exc.value.code == 2
    proc = run_module("xlam", tmp_path / "in.json", tmp_path / "out")
    assert f"not JSON: Expecting ',' delimiter at line {line} column 5" in proc.stderr
    assert not (tmp_path / "out" / "xlam_report.json").exists()


def test_a_jsonl_line_that_is_not_utf8_is_one_rejection_naming_the_byte(tmp_path):
    first = json.dumps(xlam_record("first?")).encode()
    bad = json.dumps(xlam_record("bad?")).encode().replace(b"bad", b"b\xc3\x28d")
    report, df = convert_lines(xlam, [first, bad, xlam_record()], tmp_path)
    assert dict(report.rejected) == {"not_utf8": 1} and questions(df) == ["Weather in Paris?", "first?"]
    offset = len(first) + 1 + bad.index(b"\xc3")
    assert detail(report, "not_utf8").endswith(f"line 2: not UTF-8 at byte offset {offset}")


def test_an_integer_too_long_to_read_is_one_rejection_in_json_lines_and_in_an_array(tmp_path):
    huge = "1" * 5000  # past Python's 4300-digit limit on int(str), which json.loads raises ValueError for
    report, df = convert_lines(xlam, [xlam_record("a?"), '{"query": ' + huge + "}", xlam_record()], tmp_path / "jsonl")
    assert dict(report.rejected) == {"integer_too_long": 1} and report.rows_written == 2
    assert "line 2: Exceeds the limit (4300 digits)" in detail(report, "integer_too_long")
    (tmp_path / "in.json").write_text(f"[{json.dumps(xlam_record('a?'))}, {huge}, {json.dumps(xlam_record())}]")
    report, df = convert(xlam, tmp_path / "in.json", tmp_path / "out")
    assert dict(report.rejected) == {"integer_too_long": 1} and report.rows_written == 2
    assert "item 1 (line 1): Exceeds the limit (4300 digits)" in detail(report, "integer_too_long")


HUGE = "1" * 5000  # one digit string past Python's 4300-digit int limit
TOO_LONG = "holds an integer of more than 4300 digits, past Python's int-string limit"
UNREADABLE = f"{TOO_LONG} (sys.get_int_max_str_digits), so it cannot be read"


@pytest.mark.parametrize(
    "where, record",
    [
        # in the gold call itself, inside the JSON text of xLAM answers (was: malformed_record, Python's raw message)
        (
            "gold call text",
            xlam_record("answers?", answers='[{"name": "get_weather", "arguments": {"city": %s}}]' % HUGE),
        ),
        # arguments given as JSON text inside the call
        (
            "gold call get_weather arguments",
            xlam_record(
                "arguments?", answers=json.dumps([{"name": "get_weather", "arguments": '{"city": %s}' % HUGE}])
            ),
        ),
    ],
)
def test_an_integer_too_long_in_a_gold_call_is_rejected_naming_the_limit(where, record, tmp_path):
    report, df = convert_lines(xlam, [record, xlam_record()], tmp_path)
    assert dict(report.rejected) == {"integer_too_long": 1} and questions(df) == ["Weather in Paris?"]
    assert detail(report, "integer_too_long") == f"{where} {UNREADABLE}"


def test_an_integer_too_long_in_hermes_and_toucan_sft_python_literal_calls_is_integer_too_long(tmp_path):
    from data_prep import toucan_raw

    call = '{"name": "get_weather", "arguments": {"city": %s}}' % HUGE
    report, _ = convert_lines(
        hermes_fc, [hermes_record("json?", call=call), hermes_record("literal?", call=call.replace('"', "'"))], tmp_path
    )
    assert dict(report.rejected) == {"integer_too_long": 2}
    assert detail(report, "integer_too_long") == f"gold tool_call body {UNREADABLE}"
    tools = json.dumps([{"type": "function", "function": WEATHER}])
    sft = {
        "tools": tools,
        "messages": json.dumps(
            [{"role": "user", "content": "Weather?"}, {"role": "tool_call", "content": call.replace('"', "'")}]
        ),
    }
    (tmp_path / "sft").mkdir()
    pd.DataFrame([sft]).to_parquet(tmp_path / "sft" / "sft.parquet")
    report = toucan_raw.main(["--input", str(tmp_path / "sft"), "--output_dir", str(tmp_path / "o"), "--quiet"])
    assert dict(report.rejected) == {"integer_too_long": 1}
    assert report.examples["integer_too_long"][0]["detail"].startswith("tool_call content holds an integer")


def hotel_line(query, max_price):
    """An xLAM record whose answers are objects (not JSON text), so the JSON reader sees the number itself."""
    return (
        '{"query": "%s", "tools": %s, "answers": [{"name": "hotel.search", "arguments": {"city": "Rome", '
        '"max_price": %s}}]}' % (query, json.dumps(json.dumps([HOTEL])), max_price)
    )


@pytest.mark.parametrize(
    "huge_line",
    [
        # in a column of numbers: pyarrow read inf (was: non_finite_number, "NaN or infinity is not JSON")
        hotel_line("huge?", HUGE),
        # in a column of strings: the whole run ended inside datasets (was: ValueError: Value is too big!)
        '{"query": %s}' % HUGE,
    ],
    ids=["number_column", "string_column"],
)
def test_an_integer_too_long_in_a_hugging_face_snapshot_of_json_lines_is_integer_too_long(huge_line, tmp_path):
    pytest.importorskip("datasets")
    good = hotel_line("Hotels in Rome?", 100)
    snapshot = tmp_path / "snapshot"
    write_lines(snapshot / "default" / "train-00000-of-00001.jsonl", [good, huge_line])
    report, df = convert(xlam, snapshot, tmp_path / "out")
    assert dict(report.rejected) == {"integer_too_long": 1} and report.rows_written == 1
    assert "line 2: Exceeds the limit (4300 digits)" in detail(report, "integer_too_long")


def test_a_python_int_too_long_to_write_is_integer_too_long_not_a_crash():
    from data_prep.pipeline import convert_one, row_or_rejection

    record = xlam_record("int?")
    record["answers"] = [{"name": "get_weather", "arguments": {"city": 10**5000}}]  # an int, not JSON text
    (candidate,) = convert_one(record, 0, xlam.convert_record)
    rejection = row_or_rejection(candidate, "hermes")
    assert (rejection.reason, rejection.detail) == ("integer_too_long", f"gold call get_weather arguments {UNREADABLE}")
    schemaless = dict(candidate.__dict__)  # no schema to check it against: the row's own serialisation refuses it
    schemaless["tools"] = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "", "parameters": {"type": "object", "properties": {}}},
        }
    ]
    rejection = row_or_rejection(type(candidate)(**schemaless), "hermes")
    assert rejection.reason == "integer_too_long" and "Exceeds the limit (4300 digits)" in rejection.detail


@pytest.mark.parametrize("text", ["42", "null", "true", '"abc"'])
def test_a_top_level_scalar_is_one_rejected_record(text, tmp_path):
    (tmp_path / "in.json").write_text(text)
    report, _ = convert(xlam, tmp_path / "in.json", tmp_path / "out")
    assert report.records_in == 1 and dict(report.rejected) == {"malformed_record": 1}


def test_a_json_file_with_a_byte_order_mark_is_read(tmp_path):
    (tmp_path / "in.json").write_bytes(b"\xef\xbb\xbf" + json.dumps([xlam_record("a?"), xlam_record()]).encode())
    report, df = convert(xlam, tmp_path / "in.json", tmp_path / "out")
    assert report.rows_written == 2 and not report.rejected
    (tmp_path / "in.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps(xlam_record()).encode() + b"\n")
    report, _ = convert(xlam, tmp_path / "in.jsonl", tmp_path / "out2")
    assert report.rows_written == 1 and not report.rejected


def test_json_lines_in_a_json_file_still_read_line_by_line(tmp_path):
    raw_separator = json.dumps(xlam_record("b\u2028c?"), ensure_ascii=False)  # U+2028 unescaped inside a string
    write_lines(tmp_path / "in.json", [xlam_record("a?"), "{oops", raw_separator])
    report, df = convert(xlam, tmp_path / "in.json", tmp_path / "out")
    assert report.records_in == 3 and dict(report.rejected) == {"malformed_record": 1}
    assert questions(df) == ["a?", "b\u2028c?"]


@pytest.mark.slow
def test_a_file_that_is_not_parquet_is_a_clear_error(tmp_path):
    (tmp_path / "in.parquet").write_bytes(b"PAR1 not really")
    proc = run_module("toucan", tmp_path / "in.parquet", tmp_path / "out")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "in.parquet: not a readable parquet file" in proc.stderr


def test_a_decontamination_file_that_is_not_json_is_a_usage_error_before_reading(tmp_path, capsys):
    (tmp_path / "tasks.json").write_text("{not json")
    with pytest.raises(SystemExit) as exc:
        xlam.main(
            [
                "--input",
                str(tmp_path / "missing.json"),
                "--output_dir",
                str(tmp_path / "out"),
                "--decontaminate_with",
                f"tau2={tmp_path / 'tasks.json'}",
            ]
        )
    assert exc.value.code == 2
    assert "error: --decontaminate_with: Expecting property name" in capsys.readouterr().err


# --- non-finite numbers -------------------------------------------------------------------------------------------


def test_non_finite_numbers_in_gold_or_schemas_are_rejected_never_written(tmp_path):
    report, df = convert_lines(
        toolace,
        [toolace_record("inf price?", call='[hotel.search(city="Boston", max_price=1e999)]'), toolace_record()],
        tmp_path / "toolace",
    )
    assert dict(report.rejected) == {"non_finite_number": 1} and questions(df) == ["Hotels in Boston?"]
    assert detail(report, "non_finite_number") == (
        "gold_tool_calls at 0/0/arguments/max_price: NaN or infinity is not JSON"
    )
    nan_tool = {
        **WEATHER,
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maximum": math.inf}}},
    }
    report, df = convert_lines(
        xlam,
        [
            xlam_record("nan answer?", answers=[{"name": "get_weather", "arguments": {"city": math.nan}}]),
            xlam_record("inf schema?", tools=[nan_tool]),
            xlam_record(),
        ],
        tmp_path / "xlam",
    )
    assert dict(report.rejected) == {"non_finite_number": 2} and report.rows_written == 1


# --- sft ----------------------------------------------------------------------------------------------------------


def test_sft_counts_bad_records_under_a_reason_and_writes_the_good_dialogue(tmp_path):
    good = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}
    lines = [
        good,
        deep_json(),
        "{broken",
        {"conversations": [None]},
        {"prompt": 1},
        {"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "y"}], "tools": deep_json()},
        {"conversations": [{"from": "human", "value": "\ud800"}, {"from": "gpt", "value": "y"}]},
    ]
    path = write_lines(tmp_path / "in.jsonl", lines)
    assert sft.main(["--input", path, "--output_dir", str(tmp_path / "out")]) == 0
    report = json.loads((tmp_path / "out" / "sft_report.json").read_text())
    assert report["written"] == 1 == len(pd.read_parquet(tmp_path / "out" / "sft_train.parquet"))
    assert report["skipped"] == {"too_deep": 2, "malformed_record": 3, "invalid_unicode": 1}


# --- properties: any JSON value as a record is a row or a counted rejection ---------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def _mutated(good: dict, data) -> dict:
    """``good`` with one field (at any depth) replaced by a random JSON value."""
    record = json.loads(json.dumps(good))
    node = record
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            return record
        key = data.draw(st.sampled_from(keys))
        if isinstance(node[key], (dict, list)) and node[key] and data.draw(st.booleans()):
            node = node[key]
            continue
        node[key] = data.draw(json_values)
        return record


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(source=st.sampled_from(sorted(GOOD)), data=st.data())
def test_any_record_is_a_row_or_a_counted_rejection(source, data, tmp_path_factory):
    n = data.draw(st.integers(min_value=1, max_value=6))
    records = [
        _mutated(GOOD[source](f"question {i}?"), data) if data.draw(st.booleans()) else data.draw(json_values)
        for i in range(n)
    ]
    tmp = tmp_path_factory.mktemp("prop")
    report, df = convert_lines(MODULES[source], [json.dumps(r) for r in records], tmp)
    assert report.records_in == len(records)
    assert report.rows_written == len(df)
    for _, row in df.iterrows():  # what is written is strict JSON
        json.loads(row["reward_model"]["ground_truth"]["gold_tool_calls"], parse_constant=pytest.fail)
        json.loads(row["tools"], parse_constant=pytest.fail)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(data=st.data())
def test_any_bfcl_entry_or_answer_is_a_row_or_a_counted_rejection(data, tmp_path_factory):
    n = data.draw(st.integers(min_value=1, max_value=4))
    entries, answers = [], []
    for i in range(n):
        entry = {
            "id": f"simple_python_{i}",
            "question": [[{"role": "user", "content": f"Area {i}?"}]],
            "function": [BFCL_FUNCTION],
        }
        answer = {"id": f"simple_python_{i}", "ground_truth": [{"area": {"base": [i + 1]}}]}
        entries.append(_mutated(entry, data) if data.draw(st.booleans()) else entry)
        answers.append(_mutated(answer, data) if data.draw(st.booleans()) else answer)
    folder = tmp_path_factory.mktemp("bfcl") / "data"
    write_lines(folder / "BFCL_v4_simple_python.json", [json.dumps(e) for e in entries])
    write_lines(folder / "possible_answer" / "BFCL_v4_simple_python.json", [json.dumps(a) for a in answers])
    report, df = convert(bfcl, folder, folder.parent / "out", "--categories", "simple_python")
    assert report.records_in == n and report.rows_written == len(df)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.binary(max_size=40).filter(lambda b: b"\n" not in b and b.strip()), min_size=1, max_size=5))
def test_any_bytes_as_json_lines_are_records_or_counted_rejections(lines, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bytes")
    report, _ = convert_lines(xlam, lines, tmp)
    assert report.records_in == len(lines) == report.rows_written + report.rows_rejected


@settings(max_examples=60, deadline=None)
@given(records=st.lists(json_values, max_size=6), fmt=st.sampled_from(["rl", "sharegpt"]))
def test_sft_counts_every_record_as_a_dialogue_or_a_reason(records, fmt):
    dialogues, skipped = sft.convert(records, fmt)
    assert len(dialogues) + sum(skipped.values()) == len(records)
    assert "unexpected_error" not in skipped
