"""bfcl_leaderboard's report read from a small fixture of bfcl-eval's own score files (its layout: one
``BFCL_v4_<category>_score.json`` per category under ``score/<model>/<group>/...``, first line the summary, and
``score/data_overall.csv`` with bfcl-eval's column names and its "N/A" for a group one of whose categories was not
scored). bfcl-eval itself is not run here (tests/integration/test_bfcl_leaderboard.py runs it)."""

import pytest
from bfcl_helpers import write_scores

from slca_verl.eval import bfcl_leaderboard as bl


def test_memory_acc_is_reported_over_the_memory_categories_that_ran_where_bfcl_eval_says_na(tmp_path):
    """The CPU chain's report said "Memory Acc N/A" after memory_kv and memory_rec_sum ran: bfcl-eval shows N/A for
    the group because memory_vector (internet) was left out. The report gives the mean of the two that ran."""
    write_scores(
        tmp_path,
        {"memory_kv": (0, 3), "memory_rec_sum": (1, 2), "multi_turn_base": (1, 2)},
        {"Overall Acc": "5.00%", "Multi Turn Acc": "12.50%", "Live Acc": "0.00%"},
    )
    result = bl.summarize(str(tmp_path), ["memory_kv", "memory_rec_sum", "multi_turn_base"])
    assert result["groups"]["Memory Acc"] is None and result["groups"]["Multi Turn Acc"] == pytest.approx(0.125)
    assert result["groups_over_run"] == {
        "Memory Acc": {
            "accuracy": pytest.approx(0.25),
            "categories": ["memory_kv", "memory_rec_sum"],
            "not_run": ["memory_vector"],
        }
    }
    text = bl.table(result)
    assert (
        "| **Memory Acc** over the categories run (memory_kv, memory_rec_sum; not run: memory_vector; "
        "bfcl-eval: N/A) |  | 25.00 |"
    ) in text
    # a group none of whose categories ran stays bfcl-eval's N/A; a group bfcl-eval gives a number keeps it
    assert "| **Web Search Acc** (bfcl-eval) |  | N/A |" in text
    assert "| **Multi Turn Acc** (bfcl-eval) |  | 12.50 |" in text
    assert "memory_vector (downloads the all-MiniLM-L6-v2 encoder" in text  # still listed as left out


def test_a_group_over_run_averages_as_bfcl_eval_does_nested_means_included():
    """Non-Live AST is the mean of simple (itself the mean of python, java, javascript), multiple, parallel and
    parallel_multiple: with simple_python 1.0, simple_java 0.0 and multiple 0.2 run, (0.5 + 0.2) / 2."""
    scores = {"simple_python": {"accuracy": 1.0}, "simple_java": {"accuracy": 0.0}, "multiple": {"accuracy": 0.2}}
    got = bl.groups_over_run({"Non-Live AST Acc": None}, scores)["Non-Live AST Acc"]
    assert got["accuracy"] == pytest.approx(0.35)
    assert got["not_run"] == ["simple_javascript", "parallel", "parallel_multiple"]
    # every category bfcl-eval averages in those groups is one this module knows (a renamed one would be missed)
    known = set(bl.OFFLINE_CATEGORIES) | set(bl.NEEDS_INTERNET) | {"memory_vector"}
    assert {c for parts in bl.GROUP_PARTS.values() for c in bl._flat(parts)} <= known
    assert bl.groups_over_run({"Non-Live AST Acc": 0.4}, scores) == {}  # bfcl-eval's own number wins
