"""data_prep.tool_schema: every dialect becomes meta-schema-valid JSON Schema; gold calls are checked against it."""

import jsonschema
import pytest

from data_prep.calls import CallParseError, parse_glaive_call, parse_hermes_calls, parse_python_calls
from data_prep.tool_schema import (
    SchemaError,
    normalize_tool,
    normalize_tools,
    tools_index,
    type_to_schema,
    validate_call,
)


@pytest.mark.parametrize(
    "xlam_type, schema, optional",
    [
        ("str", {"type": "string"}, False),
        ("int", {"type": "integer"}, False),
        ("float, optional", {"type": "number"}, True),
        ("str, default='x'", {"type": "string"}, True),
        ("dict", {"type": "object"}, False),
        ("List[int]", {"type": "array", "items": {"type": "integer"}}, False),
        (
            "List[Dict[str, int]]",
            {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "integer"}}},
            False,
        ),
        ("Tuple[int, int]", {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}, False),
        (
            "Tuple[int, str]",
            {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2, "maxItems": 2},
            False,
        ),  # 2020-12's positional form, as the simulator checks calls
        ("Optional[str]", {"type": ["string", "null"]}, True),
        ("Union[int, str]", {"type": ["integer", "string"]}, False),
        ("Literal['a', 'b']", {"enum": ["a", "b"]}, False),
        ("Any", {}, False),
        ("datetime.date", {"type": "string"}, False),
    ],
)
def test_xlam_type_strings_become_json_schema(xlam_type, schema, optional):
    assert type_to_schema(xlam_type) == (schema, optional)


def test_unknown_type_names_are_refused_not_guessed():
    with pytest.raises(SchemaError) as err:
        type_to_schema("Frobnicator[int]")
    assert err.value.reason == "tool_schema_unknown_type"


def test_xlam_required_is_inferred_from_optional_marks_and_defaults():
    tool = normalize_tool(
        {
            "name": "f",
            "description": "d",
            "parameters": {
                "a": {"type": "List[int]", "description": "kept"},
                "b": {"type": "str, optional"},
                "c": {"type": "int", "default": 3},
                "d": {"type": "Optional[float]"},
            },
        }
    )
    params = tool["function"]["parameters"]
    assert tool["type"] == "function" and tool["function"]["name"] == "f"
    assert params["required"] == ["a"]
    assert params["properties"]["a"] == {"type": "array", "items": {"type": "integer"}, "description": "kept"}
    assert params["properties"]["c"]["default"] == 3
    jsonschema.Draft7Validator.check_schema(params)


def test_bfcl_and_toolace_dict_dialect_becomes_object_schema():
    tool = normalize_tool(
        {
            "name": "g",
            "description": "",
            "parameters": {
                "type": "dict",
                "required": ["x", "ghost"],
                "properties": {
                    "x": {"type": "float"},
                    "t": {"type": "tuple", "items": {"type": "integer"}},
                    "o": {"type": "dict", "properties": {"k": {"type": "any", "description": "anything"}}},
                },
            },
        }
    )
    params = tool["function"]["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["x"]  # "ghost" has no property
    assert params["properties"]["x"] == {"type": "number"}
    assert params["properties"]["t"] == {"type": "array", "items": {"type": "integer"}}
    assert params["properties"]["o"]["properties"]["k"] == {"description": "anything"}


def test_a_schema_that_fails_the_meta_schema_is_rejected():
    with pytest.raises(SchemaError) as err:
        normalize_tool(
            {"name": "h", "parameters": {"type": "object", "properties": {"x": {"type": "string", "minLength": -1}}}}
        )
    assert err.value.reason == "tool_schema_invalid"


def test_duplicate_tool_names_are_rejected():
    tool = {"name": "f", "parameters": {}}
    with pytest.raises(SchemaError) as err:
        normalize_tools([tool, tool])
    assert err.value.reason == "tool_name_duplicate"


def test_validate_call_names_each_kind_of_bad_gold_call():
    index = tools_index(
        normalize_tools([{"name": "w", "parameters": {"city": {"type": "str"}, "n": {"type": "int, optional"}}}])
    )
    assert validate_call({"name": "w", "arguments": {"city": "Oslo", "n": 2}}, index) is None
    assert validate_call({"name": "x", "arguments": {}}, index)[0] == "gold_call_unknown_tool"
    assert validate_call({"name": "w", "arguments": {"n": 2}}, index)[0] == "gold_call_schema_mismatch"
    assert validate_call({"name": "w", "arguments": {"city": 5}}, index)[0] == "gold_call_schema_mismatch"
    assert validate_call({"name": "w", "arguments": {"city": "a", "zz": 1}}, index)[0] == "gold_call_unknown_argument"
    assert validate_call({"name": "w", "arguments": "city=a"}, index)[0] == "gold_call_malformed"


def test_call_parsers_read_each_source_format():
    assert parse_hermes_calls(
        "<think>hm</think><tool_call>\n{'name': 'f', 'arguments': {'a': 1}}\n</tool_call>"
        '<tool_call>{"name": "g", "arguments": {}}</tool_call>'
    ) == [{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]
    assert parse_glaive_call("""{"name": "f", "arguments": '{"a": "x, y"}'} <|endoftext|>""") == {
        "name": "f",
        "arguments": {"a": "x, y"},
    }
    assert parse_python_calls('[Get Weather(city="Paris, FR", days=[1, 2]), ping()]') == [
        {"name": "Get Weather", "arguments": {"city": "Paris, FR", "days": [1, 2]}},
        {"name": "ping", "arguments": {}},
    ]


@pytest.mark.parametrize(
    "bad, parser",
    [
        ("<tool_call>{'name': 'f'", parse_hermes_calls),
        ("<tool_call>not json at all</tool_call>", parse_hermes_calls),
        ("""{"name": "f", "arguments": '{broken'}""", parse_glaive_call),
        ("[f(1, 2)]", parse_python_calls),
        ("[f(a=open('x'))]", parse_python_calls),
        ("[f(a=1]", parse_python_calls),
    ],
)
def test_call_parsers_refuse_malformed_text(bad, parser):
    with pytest.raises(CallParseError):
        parser(bad)
