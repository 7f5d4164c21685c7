"""HierR's execution components against BFCL's own AST checker on ≥500 shipped BFCL cases
(benchmarks/bfcl_agreement.py).

Needs bfcl-eval, installed beside verl without its conflicting pins: ``pip install --no-deps -r requirements-bfcl.txt``.
"""

import importlib.util
import sys

import pytest

if importlib.util.find_spec("bfcl_eval") is None:
    pytest.skip(
        "bfcl-eval is not installed; CI installs it with `pip install --no-deps -r requirements-bfcl.txt`",
        allow_module_level=True,
    )

import bfcl_agreement  # noqa: E402


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("BFCL_PROJECT_ROOT", str(tmp_path_factory.mktemp("bfcl_project_root")))
    try:
        result = bfcl_agreement.evaluate()
    finally:
        mp.undo()
    assert result["cases"] >= 500
    by = {}
    for r in result["rows"]:
        by.setdefault(r["kind"], []).append(r)
    print("\n" + bfcl_agreement.agreement_table(result["rows"]))
    return by


def test_the_checker_import_leaves_no_stubbed_vendor_sdk_behind(rows):
    for sdk in ("openai", "anthropic", "cohere", "mistralai"):
        assert sdk not in sys.modules or getattr(sys.modules[sdk], "__file__", None), sdk


def test_every_gold_answer_as_a_hermes_call_is_exact_for_hierr_and_valid_for_bfcl(rows):
    gold = rows["gold"]
    assert len(gold) >= 500
    assert {r["category"] for r in gold} == {"simple", "multiple", "parallel", "parallel_multiple"}
    assert all(r["name_f1"] == r["key"] == r["value"] == r["parallel"] == 1.0 for r in gold)
    assert all(r["fmt"] == 1.0 for r in gold)
    assert all(r["bfcl_valid"] for r in gold)


def test_a_wrong_name_lowers_name_f1_and_bfcl_rejects_it(rows):
    assert all(r["name_f1"] < 1.0 and not r["bfcl_valid"] for r in rows["wrong_name"])


def test_a_dropped_argument_lowers_key_and_value_and_bfcl_rejects_it(rows):
    assert len(rows["drop_arg"]) >= 500
    assert all(r["key"] < 1.0 and r["value"] < 1.0 and not r["bfcl_valid"] for r in rows["drop_arg"])
    assert all(r["name_f1"] == 1.0 for r in rows["drop_arg"])


def test_a_wrong_value_lowers_value_and_bfcl_rejects_it(rows):
    assert len(rows["wrong_value"]) >= 500
    assert all(r["value"] < 1.0 and not r["bfcl_valid"] for r in rows["wrong_value"])


def test_an_extra_call_lowers_name_f1_and_parallel_and_bfcl_rejects_it(rows):
    assert all(r["name_f1"] < 1.0 and r["parallel"] == 0.0 and not r["bfcl_valid"] for r in rows["extra_call"])


def test_reordering_parallel_calls_changes_nothing_for_hierr_and_almost_nothing_for_bfcl(rows):
    reordered = rows["reordered"]
    assert len(reordered) >= 300 and all(r["hierr_exact"] for r in reordered)
    # BFCL matches greedily; one case (parallel_178) lists two acceptable companies for its first call
    assert sum(not r["bfcl_valid"] for r in reordered) <= 2


def test_splitting_parallel_calls_into_separate_blocks_lowers_only_parallel(rows):
    serial = rows["serialised"]
    assert all(r["parallel"] == 0.0 and r["name_f1"] == r["key"] == r["value"] == 1.0 for r in serial)


def test_the_known_disagreements_go_the_documented_way(rows):
    # BFCL accepts a list of values, HierR knows one gold value: BFCL valid, HierR value < 1
    assert sum(r["bfcl_valid"] and r["value"] < 1.0 for r in rows["alt_value"]) >= 300
    # HierR's loose equality takes "7" for 7, BFCL type-checks
    assert all(r["hierr_exact"] and not r["bfcl_valid"] for r in rows["num_as_str"])
