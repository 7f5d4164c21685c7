"""The bottom layer (slca_verl.toolcall): the hermes format written once, read back by verl's own hermes parser and
by this project's; and the layering rule it exists for: no library module imports the data-preparation scripts,
the benchmarks, the recipes or the examples, and the layer itself imports nothing above it."""

import ast
import asyncio
import json
from pathlib import Path

import pytest

from slca_verl.toolcall import hermes

REPO = Path(__file__).resolve().parents[2]
CALLS = [
    {"name": "get_weather", "arguments": {"city": "Zürich", "days": 3}},
    {"name": "noop"},  # arguments default to {}
    {"name": "convert", "arguments": {"amount": 1.5, "pair": ["EUR", "USD"], "opts": {"round": True}}},
]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_render_calls_writes_one_json_object_per_block_in_order():
    text = hermes.render_calls(CALLS)
    blocks = text.split("\n</tool_call>")
    assert text.count("<tool_call>\n") == 3 and text.endswith("\n</tool_call>")
    read = [json.loads(b.split("<tool_call>\n", 1)[1]) for b in blocks if b.strip()]
    assert read == [{"name": c["name"], "arguments": c.get("arguments", {})} for c in CALLS]
    assert "Zürich" in text  # written as is, not \\u-escaped


def test_verls_hermes_parser_and_ours_read_back_what_render_calls_wrote(tok):
    from verl.experimental.agent_loop.tool_parser import ToolParser

    from slca_verl.agent_loop.parser import parse_hermes_calls

    text = hermes.render_calls(CALLS)
    ids = tok.encode(text, add_special_tokens=False)
    _, verl_calls = asyncio.run(ToolParser.get_tool_parser("hermes", tok).extract_tool_calls(ids))
    written = [(c["name"], c.get("arguments", {})) for c in CALLS]
    assert [(c.name, json.loads(c.arguments)) for c in verl_calls] == written
    _, ours = parse_hermes_calls(text)
    assert [(c.name, json.loads(c.arguments)) for c in ours] == written
    assert not any(c.error for c in ours)


def test_system_prompt_lists_every_tool_as_one_json_line():
    tools = [{"name": "a", "parameters": {"type": "object", "properties": {}}}, {"name": "b", "description": "é"}]
    prompt = hermes.system_prompt(tools)
    listing = prompt.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].splitlines()
    assert [json.loads(line) for line in listing] == tools


@pytest.mark.parametrize("banned", ["data_prep", "benchmarks", "recipes", "examples"])
def test_no_library_module_imports_the_scripts_around_it(banned):
    offenders = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "slca_verl").rglob("*.py")
        if any(m == banned or m.startswith(banned + ".") for m in _imports(p))
    )
    assert offenders == []


def test_the_toolcall_layer_imports_nothing_above_it():
    """Only its own modules, and verl's ToolParser registry and tool schema model (formats.py reads every format
    but hermes through verl's own parser)."""
    for path in (REPO / "slca_verl" / "toolcall").glob("*.py"):
        above = {
            m
            for m in _imports(path)
            if m.split(".")[0] in ("verl", "slca_verl", "data_prep")
            and m != "slca_verl.toolcall"
            and not m.startswith("slca_verl.toolcall.")
        }
        assert above <= {"verl.experimental.agent_loop.tool_parser", "verl.tools.schemas"}, (path.name, above)


def test_the_gold_forms_are_defined_once_for_data_prep_and_hierr():
    from data_prep.gold_forms import GOLD_FORMS as written
    from slca_verl.rewards.parsing import GOLD_FORMS as scored
    from slca_verl.toolcall.rows import GOLD_FORMS

    assert written is scored is GOLD_FORMS == ("nested", "flat", "names")


def test_one_truncation_for_the_library_cuts_as_verl_and_says_how_much():
    from slca_verl.toolcall.text import truncate

    text = "abcdefghij"  # 10 characters
    assert truncate(text, 10) == text and truncate(text, 0) == text
    assert truncate(text, 4) == "ab...(truncated)...ij"  # verl's ToolAgentLoop: half of the limit on each side
    assert truncate(text, 4, "left") == "(truncated)...ghij"
    assert truncate(text, 4, "right") == "abcd...(truncated)"
    assert truncate(text, 4, marker="[{cut} cut]") == "ab[6 cut]ij"
    assert truncate(text, 1, marker="|") == "a|j"  # never text[-0:], which would keep the whole text


def test_plain_is_the_one_conversion_to_python_values_each_caller_relies_on(tmp_path):
    """numpy arrays and scalars as parquet and verl hand them back, OmegaConf containers (reward_kwargs), tuples and
    None; JSON text decoded as each caller needs: never (HierR, the agent loop), every cell once (SFT, the CPU
    model's warm-up), arrays / objects recursively (evaluation's row key)."""
    import numpy as np
    import pandas as pd
    from omegaconf import OmegaConf

    from slca_verl.toolcall.limits import MAX_DEPTH, RecordError
    from slca_verl.toolcall.rows import plain

    gold = '[[{"name": "f", "arguments": {"x": "42"}}]]'
    row = {
        "prompt": [{"role": "user", "content": '{"q": 1}'}],
        "reward_model": {"ground_truth": {"gold_tool_calls": gold, "tags": ["a", "b"], "n": 3, "none": None}},
    }
    pd.DataFrame([row]).to_parquet(tmp_path / "r.parquet")
    back = pd.read_parquet(tmp_path / "r.parquet").to_dict("records")[0]
    assert isinstance(back["prompt"], np.ndarray)  # what every caller gets from parquet
    as_python = plain(back)
    assert as_python == row and type(as_python["reward_model"]["ground_truth"]["n"]) is int
    assert plain(np.float32(0.5)) == 0.5 and type(plain(np.int64(2))) is int and plain(None) is None
    assert plain((1, np.array([2, 3]))) == [1, [2, 3]] and plain({1: "x"}) == {"1": "x"}
    assert plain(OmegaConf.create({"urls": ["u"], "ref": "${urls}"})) == {"urls": ["u"], "ref": ["u"]}
    assert plain({"w": OmegaConf.create([1, 2])}) == {"w": [1, 2]}

    # keep (the default): a tool argument "42" or a JSON tool response stays the text the policy / the tool wrote
    assert plain(back)["prompt"][0]["content"] == '{"q": 1}' and plain("42") == "42"
    # any: every string once, not what it decodes to; a string that is not JSON stays
    gt = plain(back["reward_model"], json_text="any")["ground_truth"]
    assert gt["gold_tool_calls"] == [[{"name": "f", "arguments": {"x": "42"}}]] and gt["tags"] == ["a", "b"]
    assert plain(["42", "true", "not json"], json_text="any") == [42, True, "not json"]
    # containers: arrays and objects, recursively; scalars stay text
    assert plain(['{"a": "[1]"}', "42"], json_text="containers") == [{"a": [1]}, "42"]
    deep = "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)
    assert plain(deep, json_text="containers") == deep  # a key, not a row: the text stays
    with pytest.raises(RecordError):
        plain(deep, json_text="any")  # a row reader: the bounds reject the record
    with pytest.raises(ValueError, match="json_text"):
        plain("x", json_text="all")
