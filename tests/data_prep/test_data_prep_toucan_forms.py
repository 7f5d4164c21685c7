"""The authors' RL rows in each gold layout they wrote (nested v2, flat v1, names-only): every form is kept by
default and written nested with its ``gold_format``, counted in the report, warned about once, and
``--gold_forms`` rejects the forms it does not list under their own reason."""

import json
import logging

import pandas as pd
import pytest

from data_prep import toucan

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "server-search_components",
            "description": "Search components",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "server-list_components",
            "description": "List components",
            "parameters": {"type": "object", "properties": {"limit": {"type": "integer"}}},
        },
    },
]
SEARCH = {"name": "server-search_components", "arguments": {"query": "button"}}
LIST = {"name": "server-list_components", "arguments": {"limit": 5}}


def authors_row(question, gold, subset="tool_call", serialise=True):
    """One row in the authors' RL parquet layout (gold as a JSON string, or a list as in their preview file)."""
    listing = "\n".join(json.dumps(t) for t in TOOLS)
    system = f"You have access to the following tools:\n<tools>\n{listing}\n</tools>"
    return {
        "prompt": [{"role": "system", "content": system}, {"role": "user", "content": question}],
        "data_source": "toucan_toolcall",
        "reward_model": {
            "style": "rule",
            "ground_truth": {
                "allowed_tools": [t["function"]["name"] for t in TOOLS],
                "gold_tool_calls": json.dumps(gold) if serialise else gold,
                "question_content": question,
                "subset_name": subset,
                "tool_schemas": json.dumps(TOOLS),
            },
        },
        "extra_info": {"need_tools_kwargs": False, "original_turn_index": 0},
        "tools": json.dumps(TOOLS),
    }


ROWS = [
    authors_row("nested: search then list", [[SEARCH], [LIST]]),
    authors_row("flat: search and list", [SEARCH, LIST]),
    # the released RL parquet: bare names, as a list (not a JSON string); search's required query is absent
    authors_row(
        "names: search twice, then list",
        ["server-search_components", "server-search_components", "server-list_components"],
        serialise=False,
    ),
    authors_row("irrelevant: hello", [], subset="irrelevant", serialise=False),
]


def write_rows(tmp_path, rows):
    path = tmp_path / "rl.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(tmp_path, rows, *extra):
    out = tmp_path / "out"
    report = toucan.main(
        ["--input", str(write_rows(tmp_path, rows)), "--output_dir", str(out), "--no_progress", *extra]
    )
    assert report.rows_in == report.rows_written + report.rows_rejected
    path = out / "toucan_train.parquet"
    df = pd.read_parquet(path) if path.exists() else pd.DataFrame()
    by_question = {r["reward_model"]["ground_truth"]["question_content"]: r for _, r in df.iterrows()}
    return report, by_question, json.loads((out / "toucan_report.json").read_text())


def gold(row):
    return json.loads(row["reward_model"]["ground_truth"]["gold_tool_calls"])


def lossy_warnings(caplog):
    return [r for r in caplog.records if r.name == "data_prep.gold_forms" and r.levelno == logging.WARNING]


def test_every_form_is_kept_and_written_nested_with_its_format(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        report, rows, written = run(tmp_path, ROWS)
    assert report.rows_written == 4 and report.rows_rejected == 0
    nested, flat, names, irrelevant = (rows[r["reward_model"]["ground_truth"]["question_content"]] for r in ROWS)
    assert gold(nested) == [[SEARCH], [LIST]]
    assert gold(flat) == [[SEARCH, LIST]]  # one step holding all the calls, as the authors' reward reads v1
    assert gold(names) == [
        [
            {"name": "server-search_components", "arguments": {}},
            {"name": "server-search_components", "arguments": {}},
            {"name": "server-list_components", "arguments": {}},
        ]
    ]
    assert gold(irrelevant) == []
    assert [r["reward_model"]["ground_truth"]["gold_format"] for r in (nested, flat, names, irrelevant)] == [
        "nested",
        "flat",
        "names",
        "nested",
    ]
    assert written["notes"]["gold_format"] == {"nested": 2, "flat": 1, "names": 1}
    warnings = lossy_warnings(caplog)
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "1 flat, 1 names" in message and "parallel structure" in message and "arguments" in message


def test_names_only_gold_checks_names_but_not_arguments(tmp_path):
    rows = [
        authors_row("names: unknown tool", ["server-search_components", "server-delete_everything"], serialise=False),
        authors_row("names: known tools", ["server-search_components"], serialise=False),
    ]
    report, by_question, _ = run(tmp_path, rows)
    assert dict(report.rejected) == {"gold_call_unknown_tool": 1}
    assert "server-delete_everything" in report.examples["gold_call_unknown_tool"][0]["detail"]
    assert list(by_question) == ["names: known tools"]  # required "query" missing, yet kept: names only


def test_flat_gold_is_validated_like_nested_gold(tmp_path):
    rows = [
        authors_row("flat: wrong type", [SEARCH, {"name": "server-list_components", "arguments": {"limit": "x"}}]),
        authors_row(
            "flat: unknown argument",
            [{"name": "server-search_components", "arguments": {"query": "a", "colour": "red"}}],
        ),
        authors_row(
            "flat: arguments as JSON text", [{"name": "server-list_components", "arguments": json.dumps({"limit": 2})}]
        ),
    ]
    report, by_question, _ = run(tmp_path, rows)
    assert dict(report.rejected) == {"gold_call_schema_mismatch": 1, "gold_call_unknown_argument": 1}
    assert gold(by_question["flat: arguments as JSON text"]) == [
        [{"name": "server-list_components", "arguments": {"limit": 2}}]
    ]


@pytest.mark.parametrize(
    "forms, rejected, written",
    [
        ("nested", {"gold_flat_rejected": 1, "gold_names_rejected": 1}, {"nested": 2, "flat": 0, "names": 0}),
        ("nested,flat", {"gold_names_rejected": 1}, {"nested": 2, "flat": 1, "names": 0}),
        ("names, nested", {"gold_flat_rejected": 1}, {"nested": 2, "flat": 0, "names": 1}),
    ],
)
def test_gold_forms_option_rejects_the_forms_it_does_not_list(tmp_path, caplog, forms, rejected, written):
    with caplog.at_level(logging.WARNING):
        report, _, report_json = run(tmp_path, ROWS, "--gold_forms", forms)
    assert dict(report.rejected) == rejected and report_json["rejected_by_reason"] == rejected
    assert report_json["notes"]["gold_format"] == written
    assert len(lossy_warnings(caplog)) == (1 if written["flat"] or written["names"] else 0)


def test_unknown_gold_form_is_a_usage_error(tmp_path):
    with pytest.raises(SystemExit):
        run(tmp_path, ROWS, "--gold_forms", "nested,steps")


def test_gold_in_no_known_form_is_rejected_as_not_nested(tmp_path):
    rows = [authors_row("mixed", ["server-search_components", SEARCH]), authors_row("a dict", {"name": "x"})]
    report, _, _ = run(tmp_path, rows)
    assert dict(report.rejected) == {"gold_not_nested": 2}


def test_per_turn_rewards_on_the_authors_v1_rows_pay_no_redundant_call(tmp_path):
    """The flat-gold rule on the rows as data_prep writes them (flat v1 and names-only gold, kept by default): the
    written ground truth carries its gold_format to HierR, whose per-turn step rewards then treat the calls as an
    unordered set, so repeating a call or calling a tool the gold does not need earns less than the honest episode,
    and calling the two gold calls in one turn or in two earns the same (the written gold is one step of two calls:
    read as nested, the split would score below the parallel call)."""
    from slca_verl.rewards.hierr import score_trajectory_sync

    _, rows, _ = run(tmp_path, ROWS)
    truth = {k: rows[q]["reward_model"]["ground_truth"] for k, q in (("flat", "flat: search and list"),)}
    names_q = next(q for q in rows if q.startswith("names"))
    truth["names"] = rows[names_q]["reward_model"]["ground_truth"]

    def ret(turns, gt):
        out = score_trajectory_sync([*turns, "Here are the components."], ["{}"] * len(turns), dict(gt))
        return sum(json.loads(out["step_rewards"]))

    def block(*calls):
        return "<tool_call>\n" + json.dumps(list(calls) if len(calls) > 1 else calls[0]) + "\n</tool_call>"

    gt = truth["flat"]
    honest = ret([block(SEARCH, LIST)], gt)
    assert ret([block(SEARCH), block(LIST)], gt) == pytest.approx(honest)
    assert ret([block(SEARCH, LIST), block(SEARCH)], gt) < honest
    assert ret([block(SEARCH), block(SEARCH), block(LIST)], gt) < honest
    gt = truth["names"]
    honest = ret([block(SEARCH), block(SEARCH), block(LIST)], gt)
    assert ret([block(SEARCH), block(SEARCH), block(LIST), block(LIST)], gt) < honest
