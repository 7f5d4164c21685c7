"""Schema normalisation (xLAM / BFCL styles) and argument validation, one test per JSON Schema rule."""

import json

import pytest
from jsonschema import Draft202012Validator

from slca_verl.sgls.toolset import ToolSet, normalize_tool
from slca_verl.toolcall.schema import type_string_to_schema

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather now",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "filters": {
                    "type": "object",
                    "properties": {"rain": {"type": "boolean"}},
                    "additionalProperties": False,
                },
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
TOOLS = ToolSet.from_schemas([WEATHER])


def error_of(name, args, tools=TOOLS):
    rej = tools.validate(name, args)
    assert rej is not None, "expected a rejection"
    body = json.loads(rej.text())
    assert body == rej.body()
    return rej, body["error"]


def test_valid_call_is_accepted():
    assert TOOLS.validate("get_weather", {"city": "Paris", "days": 2, "unit": "celsius"}) is None


def test_unknown_tool_gets_404_listing_available_tools():
    rej, err = error_of("get_wether", {"city": "Paris"})
    assert rej.status_code == 404 and err["type"] == "tool_not_found"
    assert "get_wether" in err["message"] and "get_weather" in err["message"]


def test_missing_required_argument_is_named():
    rej, err = error_of("get_weather", {"days": 1})
    assert rej.status_code == 400
    assert err["details"] == [
        {"param": "city", "problem": "missing_required", "message": "missing required parameter 'city'"}
    ]


def test_wrong_type_names_expected_and_actual_types():
    _, err = error_of("get_weather", {"city": "Paris", "days": "3"})
    (d,) = err["details"]
    assert d["param"] == "days" and d["problem"] == "wrong_type"
    assert "integer" in d["message"] and "string" in d["message"] and '"3"' in d["message"]


def test_value_outside_enum_lists_allowed_values():
    _, err = error_of("get_weather", {"city": "Paris", "unit": "kelvin"})
    (d,) = err["details"]
    assert d["problem"] == "not_in_enum" and "celsius" in d["message"] and "kelvin" in d["message"]


def test_extra_property_is_rejected_when_additional_properties_is_false():
    _, err = error_of("get_weather", {"city": "Paris", "country": "FR"})
    (d,) = err["details"]
    assert d["problem"] == "unknown_parameter" and d["param"] == "country" and "accepted: city" in d["message"]


def test_extra_property_in_a_nested_object_is_reported_with_its_path():
    _, err = error_of("get_weather", {"city": "Paris", "filters": {"snow": True}})
    (d,) = err["details"]
    assert d["problem"] == "unknown_parameter" and d["param"] == "snow" and "'filters'" in d["message"]


def test_extra_property_is_accepted_when_the_schema_allows_it():
    loose = {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}
    assert ToolSet.from_schemas([loose]).validate("f", {"a": "x", "b": 1}) is None


def test_forbid_extra_arguments_option_rejects_unlisted_arguments():
    loose = {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}
    ts = ToolSet.from_schemas([loose], forbid_extra_arguments=True)
    assert ts.validate("f", {"a": "x", "b": 1}).details[0]["problem"] == "unknown_parameter"


def test_non_object_arguments_are_rejected():
    rej, err = error_of("get_weather", ["Paris"])
    assert rej.status_code == 400 and "JSON object" in err["message"]


def test_several_problems_are_all_reported_in_a_stable_order():
    args = {"days": "x", "unit": "k", "zzz": 1}
    texts = {TOOLS.validate("get_weather", dict(reversed(list(args.items())))).text() for _ in range(3)}
    texts.add(TOOLS.validate("get_weather", args).text())
    assert len(texts) == 1
    problems = {d["problem"] for d in json.loads(texts.pop())["error"]["details"]}
    assert problems == {"missing_required", "wrong_type", "not_in_enum", "unknown_parameter"}


# ------------------------------------------------------------------------------------------ normaliser


@pytest.mark.parametrize(
    "text, schema, optional",
    [
        ("str", {"type": "string"}, False),
        ("int", {"type": "integer"}, False),
        ("float", {"type": "number"}, False),
        ("bool", {"type": "boolean"}, False),
        ("List[int]", {"type": "array", "items": {"type": "integer"}}, False),
        ("List[List[str]]", {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}, False),
        ("str, optional", {"type": "string"}, True),
        ("List[int], optional", {"type": "array", "items": {"type": "integer"}}, True),
        ("Optional[float]", {"type": ["number", "null"]}, True),  # Python's meaning: a float or None
        ("Dict[str, int]", {"type": "object", "additionalProperties": {"type": "integer"}}, False),
        ("Dict[str, Any]", {"type": "object"}, False),
        ("Union[int, str]", {"type": ["integer", "string"]}, False),
        ("int|float", {"type": ["integer", "number"]}, False),
        (
            "Tuple[int, str]",
            {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2, "maxItems": 2},
            False,
        ),
        ("int default 5", {"type": "integer"}, True),
        ("callable", {"type": "string"}, False),  # a function travels in JSON as its name or source
        ("Literal['a', 'b']", {"enum": ["a", "b"]}, False),
        ("Any", {}, False),
        ("SomeCustomClass", {}, False),
    ],
)
def test_python_type_strings_map_to_json_schema(text, schema, optional):
    assert type_string_to_schema(text) == (schema, optional)


XLAM = {
    "name": "find_max",
    "description": "Largest number",
    "parameters": {
        "nums": {"description": "Numbers", "type": "List[int]"},
        "k": {"description": "How many", "type": "int, optional", "default": 1},
        "mode": {"description": "Mode", "type": "str", "default": "fast"},
        "opts": {"description": "Options", "type": "Dict[str, Any], optional"},
    },
}


def test_xlam_schema_is_normalised_into_valid_json_schema():
    tool = normalize_tool(XLAM)
    Draft202012Validator.check_schema(tool.parameters)
    assert tool.parameters["type"] == "object"
    assert tool.parameters["required"] == ["nums"]  # optional types and defaults are not required
    assert tool.parameters["properties"]["nums"] == {
        "description": "Numbers",
        "type": "array",
        "items": {"type": "integer"},
    }
    assert tool.parameters["properties"]["k"]["type"] == "integer"


def test_xlam_schema_validates_calls_after_normalisation():
    ts = ToolSet.from_schemas(json.dumps([XLAM]))  # xLAM rows store tools as a JSON string
    assert ts.validate("find_max", {"nums": [3, 1], "k": 2}) is None
    assert ts.validate("find_max", {"nums": [3, "1"]}).details[0]["param"] == "nums[1]"
    assert ts.validate("find_max", {"k": 2}).details[0]["problem"] == "missing_required"


def test_bfcl_python_type_names_and_draft3_required_flags_are_normalised():
    bfcl = {
        "name": "calc_area",
        "description": "Area",
        "parameters": {
            "type": "dict",
            "properties": {
                "base": {"type": "float", "required": True},
                "dims": {"type": "tuple", "items": {"type": "integer"}},
                "meta": {"type": "any"},
            },
        },
    }
    tool = normalize_tool(bfcl)
    Draft202012Validator.check_schema(tool.parameters)
    props = tool.parameters["properties"]
    assert props["base"] == {"type": "number"} and props["dims"]["type"] == "array" and props["meta"] == {}
    assert tool.parameters["required"] == ["base"]


def test_response_schema_is_picked_up_from_the_function():
    raw = {**WEATHER["function"], "response_schema": {"type": "object", "properties": {"t": {"type": "float"}}}}
    tool = normalize_tool(raw)
    assert tool.response_schema == {"type": "object", "properties": {"t": {"type": "number"}}}
    assert tool.response_validator.is_valid({"t": 1.5}) and not tool.response_validator.is_valid({"t": "hot"})


def test_schema_that_stays_invalid_falls_back_to_any_object():
    broken = {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string", "minLength": -3}}}}
    tool = normalize_tool(broken)
    assert tool.parameters == {"type": "object"} and ToolSet([tool]).validate("f", {"a": 1}) is None


def test_tool_without_name_is_skipped_not_fatal():
    ts = ToolSet.from_schemas([{"description": "nameless"}, XLAM])
    assert list(ts.tools) == ["find_max"]
