"""slca_verl.toolcall.schema: the one normaliser data preparation (strict) and the simulator (tolerant) share, so a
row's tools mean the same thing when written and when the policy's calls are checked against them."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_prep.tool_schema import normalize_tool, tools_index, validate_call
from slca_verl.sgls import toolset
from slca_verl.sgls.toolset import ToolSet
from slca_verl.toolcall.limits import RecordError
from slca_verl.toolcall.schema import SchemaError, normalize_parameters, split_top_level, type_string_to_schema

NAMES = [
    "int",
    "str",
    "float",
    "bool",
    "Any",
    "None",
    "List",
    "Dict",
    "Tuple",
    "Optional",
    "Union",
    "Set",
    "Literal",
    "datetime.date",
    "callable",
    "Frobnicator",
]


@st.composite
def type_expr(draw, depth=0):
    name = draw(st.sampled_from(NAMES))
    if name == "Optional":
        return f"Optional[{draw(type_expr(depth=depth + 1))}]" if depth < 3 else "int"
    if depth < 3 and name in ("List", "Dict", "Tuple", "Union", "Set") and draw(st.booleans()):
        args = draw(st.lists(type_expr(depth=depth + 1), min_size=1, max_size=3))
        return f"{name}[{', '.join(args)}]"
    return "Literal['a', 2]" if name == "Literal" else name


@settings(max_examples=300, deadline=None)
@given(type_expr(), st.sampled_from(["", ", optional", ", default=3", " default 3", "|int"]))
def test_strict_mode_answers_as_the_tolerant_mode_or_refuses(expr, suffix):
    text = expr + suffix
    tolerant = type_string_to_schema(text)
    try:
        strict = type_string_to_schema(text, strict=True)
    except SchemaError as e:
        assert e.reason == "tool_schema_unknown_type"
        assert "Frobnicator" in text  # the only name the grammar writes that is not a type
        return
    assert "Frobnicator" not in text
    assert strict == tolerant
    if suffix.startswith((", optional", ", default", " default")) or expr.startswith("Optional["):
        assert tolerant[1]


def test_the_choices_between_dialects_are_made_once():
    assert type_string_to_schema("Optional[int]") == ({"type": ["integer", "null"]}, True)
    assert type_string_to_schema("Union[int, None]") == ({"type": ["integer", "null"]}, True)
    assert type_string_to_schema("callable") == ({"type": "string"}, False)
    assert type_string_to_schema("int, str") == ({"type": ["integer", "string"]}, False)
    assert type_string_to_schema("int|str, optional") == ({"type": ["integer", "string"]}, True)
    assert type_string_to_schema("List[int|str]") == (
        {"type": "array", "items": {"type": ["integer", "string"]}},
        False,
    )
    assert type_string_to_schema("Tuple[int, ...]") == ({"type": "array", "items": {"type": "integer"}}, False)
    assert type_string_to_schema("Set[str]") == (
        {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        False,
    )
    # the draft-4 tuple form of a dataset becomes the positional form the normaliser writes for Tuple[...]
    params = normalize_parameters(
        {"type": "object", "properties": {"p": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]}}}
    )
    assert params["properties"]["p"] == {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}


def test_what_strict_mode_refuses_tolerant_mode_reads_as_any_value():
    for text in ("Frobnicator[int]", "3int", "Optional[int, str]"):
        with pytest.raises(SchemaError):
            type_string_to_schema(text, strict=True)
    assert type_string_to_schema("Frobnicator[int]") == ({}, False)
    deep = "List[" * 40 + "int" + "]" * 40
    with pytest.raises(RecordError) as err:
        type_string_to_schema(deep, strict=True)
    assert err.value.reason == "too_deep" and type_string_to_schema(deep) == ({}, False)
    for bad in (
        {"type": "object", "properties": {"a": 3}},
        {"properties": {"a": {"enum": "x"}}},
        {"properties": {"a": {"type": 5}}},
        {"properties": {}, "required": "a"},
        "not json",
        [1],
    ):
        with pytest.raises(SchemaError) as err:
            normalize_parameters(bad, strict=True)
        assert err.value.reason == "tool_schema_invalid"
        assert normalize_parameters(bad)["type"] == "object"  # tolerant: never raises


def test_split_top_level_respects_brackets_and_quotes():
    assert split_top_level("Dict[str, int], optional") == ["Dict[str, int]", "optional"]
    assert split_top_level("f(a='x, y'), g(b=[1, 2])") == ["f(a='x, y')", "g(b=[1, 2])"]
    with pytest.raises(ValueError):
        split_top_level("f(a=[1, 2)", strict=True)


RAW_TOOLS = [
    {
        "name": "find",
        "description": "xLAM style",
        "parameters": {
            "nums": {"type": "List[int]"},
            "k": {"type": "int, optional", "default": 1},
            "pair": {"type": "Tuple[int, str], optional"},
            "when": {"type": "Optional[datetime.date]"},
            "mode": {"type": "str", "enum": ["a", 2], "default": "a"},
        },
    },
    {
        "name": "area",
        "description": "BFCL style",
        "parameters": {
            "type": "dict",
            "required": ["base", "ghost"],
            "properties": {
                "base": {"type": "float"},
                "dims": {"type": "tuple", "items": {"type": "integer"}},
                "meta": {"type": "any"},
                "fn": {"type": "callable"},
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "old",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "required": True}, "n": {"type": ["int", "null"]}},
            },
        },
    },
]


@pytest.mark.parametrize("raw", RAW_TOOLS, ids=lambda r: r.get("name", "openai"))
def test_the_simulator_reads_a_prepared_schema_unchanged(raw):
    prepared = normalize_tool(raw)["function"]["parameters"]
    assert toolset.normalize_tool({"name": "t", "parameters": prepared}).parameters == prepared
    assert toolset.normalize_tool(raw).parameters == prepared  # and a raw schema the same way data preparation does


CALLS = [
    ("find", {"nums": [1, 2], "pair": [1, "x"]}, True),
    ("find", {"nums": [1, 2], "pair": ["x", 1]}, False),  # positions checked by both
    ("find", {"nums": [1], "when": None, "mode": "2"}, True),  # Optional takes None; numeric enum read as text
    ("find", {"nums": [1], "mode": 2}, False),
    ("find", {"k": 2}, False),  # nums is required
    ("area", {"base": 2.5, "dims": [1, 2], "fn": "lambda x: x"}, True),
    ("area", {"dims": [1]}, False),  # base required, the ghost is not
    ("old", {"city": "Paris", "n": None}, True),
    ("old", {"n": 3}, False),
]


@pytest.mark.parametrize("name, args, ok", CALLS)
def test_data_preparation_and_the_simulator_accept_the_same_calls(name, args, ok):
    tools = [normalize_tool(t) for t in RAW_TOOLS]
    gold_problem = validate_call({"name": name, "arguments": args}, tools_index(tools))
    sim_problem = ToolSet.from_schemas(json.dumps(RAW_TOOLS)).validate(name, args)
    assert (gold_problem is None) == ok, gold_problem
    assert (sim_problem is None) == ok, sim_problem
