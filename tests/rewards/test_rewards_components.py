"""HierR's component table: every row HierR returns has its keys, in its order, of its types; the empty row is the
table's empty values; docs/rewards.md's key table lists exactly its keys."""

import asyncio
import math
import re
from pathlib import Path

import pytest

from slca_verl.rewards import score_trajectory
from slca_verl.rewards.components import COMPONENTS, RESULT_KEYS, empty_row, typed_row
from slca_verl.rewards.hierr import empty_result

DOC = Path(__file__).resolve().parents[2] / "docs" / "rewards.md"
GT = {
    "allowed_tools": ["weather"],
    "gold_tool_calls": [[{"name": "weather", "arguments": {"city": "paris"}}]],
    "question_content": "Weather in Paris?",
}


def test_a_scored_row_and_an_empty_row_follow_the_table():
    call = '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    rows = [
        asyncio.run(score_trajectory([call, "It is 21 degrees in Paris today."], ['{"temp_c": 21}'], GT)),
        asyncio.run(score_trajectory(["<tool_call>{broken"], [], GT)),
        empty_result("nothing to score"),
    ]
    for row in rows:
        assert tuple(row) == RESULT_KEYS
        for c in COMPONENTS:
            assert type(row[c.key]) is c.kind, (c.key, row[c.key])
    assert rows[0]["r_tool"] > 0 and rows[0]["reason"] == ""
    assert rows[1]["fmt"] == 0.0 and rows[1]["reason"]
    assert empty_row("x") == {**{c.key: c.kind() for c in COMPONENTS}, "reason": "x"}


def test_typed_row_refuses_a_row_whose_keys_drift_and_zeroes_non_finite_floats():
    good = {c.key: c.kind() for c in COMPONENTS}
    assert typed_row({**good, "score": math.nan, "r_tool": math.inf})["score"] == 0.0
    with pytest.raises(KeyError, match="missing \\['reason'\\]"):
        typed_row({k: v for k, v in good.items() if k != "reason"})
    with pytest.raises(KeyError, match="not in the table \\['surprise'\\]"):
        typed_row({**good, "surprise": 1.0})


def test_docs_key_table_lists_exactly_the_components():
    text = DOC.read_text(encoding="utf-8")
    table = text.split("## What every row holds", 1)[1].split("\n\n", 2)[1]
    documented = [k for line in table.splitlines()[2:] for k in re.findall(r"`(\w+)`", line.split("|")[1])]
    assert sorted(documented) == sorted(RESULT_KEYS)
