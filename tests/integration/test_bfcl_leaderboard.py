"""BFCL's own scorer through our wrapper: bfcl-eval's gold answers for multi-turn entries, written as the policy
would write them (hermes ``<tool_call>`` blocks, one step per turn and a closing reply), are scored by ``bfcl
evaluate`` (run by ``slca_verl.eval.bfcl_leaderboard`` in the bfcl-eval venv, with the registered
``slca-verl/policy-FC`` handler decoding them) at full marks; the same answers with one argument changed score 0.

Tier setup: ``bash scripts/bfcl_setup.sh`` (bfcl-eval with its dependencies in its own venv; writes ``.bfcl_python``).
"""

import ast
import json
import os
from pathlib import Path

import pytest
import subproc

from slca_verl.eval import bfcl_leaderboard

ENTRIES = ("multi_turn_base_0", "multi_turn_miss_func_0")


@pytest.fixture(scope="module")
def bfcl_data(bfcl_python) -> Path:
    """The data folder of the bfcl-eval that will score (its own venv's copy)."""
    code = "import bfcl_eval, os; print(os.path.dirname(bfcl_eval.__file__))"
    out = subproc.run(
        [bfcl_python, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "BFCL_PROJECT_ROOT": "/tmp"},
    )
    return Path(out.stdout.strip().splitlines()[-1]) / "data"


def _line(path: Path, entry_id: str) -> dict:
    with open(path) as f:
        return next(e for e in map(json.loads, f) if e["id"] == entry_id)


def hermes_call(call: str, docs: dict[str, dict]) -> str:
    """BFCL's gold ``"mv(source='a', destination='b')"`` as the policy's ``<tool_call>`` block; positional arguments
    take the parameter names in the order of the function's documented properties."""
    node = ast.parse(call, mode="eval").body
    params = list(docs[node.func.id]["parameters"]["properties"])
    args = {params[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
    args.update({k.arg: ast.literal_eval(k.value) for k in node.keywords})
    return "<tool_call>\n" + json.dumps({"name": node.func.id, "arguments": args}) + "\n</tool_call>"


def write_gold_results(data: Path, out_dir: Path, corrupt: bool = False) -> None:
    """bfcl-eval's result files (its layout under ``BFCL_PROJECT_ROOT``) holding the gold answers of :data:`ENTRIES`;
    ``corrupt`` changes the first string argument of the first call of every entry."""
    docs = {}
    for doc_file in (data / "multi_turn_func_doc").iterdir():
        with open(doc_file) as f:
            docs.update({d["name"]: d for d in map(json.loads, f)})
    folder = out_dir / "bfcl" / "result" / bfcl_leaderboard.model_dir() / "multi_turn"
    folder.mkdir(parents=True, exist_ok=True)
    for entry_id in ENTRIES:
        category = entry_id.rsplit("_", 1)[0]
        gold = _line(data / "possible_answer" / f"BFCL_v4_{category}.json", entry_id)["ground_truth"]
        turns = []
        for calls in gold:
            blocks = [hermes_call(c, docs) for c in calls]
            turns.append(["\n".join(blocks), "Done."] if blocks else ["Done."])
        if corrupt:
            first = next(i for i, t in enumerate(turns) if len(t) == 2)
            call = json.loads(turns[first][0].split("\n")[1])
            key = next(k for k, v in call["arguments"].items() if isinstance(v, str))
            call["arguments"][key] += "_x"
            turns[first][0] = "\n".join(["<tool_call>", json.dumps(call), *turns[first][0].split("\n")[2:]])
        with open(folder / f"BFCL_v4_{category}_result.json", "w") as f:
            f.write(json.dumps({"id": entry_id, "result": turns}) + "\n")


def evaluate(bfcl_python: str, out_dir: Path) -> dict:
    code = bfcl_leaderboard.main(
        [
            "--skip_generate",
            "--categories",
            "multi_turn_base,multi_turn_miss_func",
            "--bfcl_python",
            bfcl_python,
            "--out_dir",
            str(out_dir),
        ]
    )
    assert code == 0
    return json.loads((out_dir / "bfcl_leaderboard.json").read_text())


def test_bfcl_evaluate_gives_the_gold_multi_turn_answers_full_marks(bfcl_python, bfcl_data, tmp_path):
    write_gold_results(bfcl_data, tmp_path)
    result = evaluate(bfcl_python, tmp_path)
    for entry_id in ENTRIES:
        category = entry_id.rsplit("_", 1)[0]
        assert result["categories"][category] == {"accuracy": 1.0, "correct_count": 1, "total_count": 1}
    # bfcl-eval's own v4 arithmetic, read back from its CSV: multi-turn = mean of its four categories (two at 100 %,
    # two not run, counted 0) = 50 %; overall = 30 % weight x 50 % = 15 %
    assert result["groups"]["Multi Turn Acc"] == pytest.approx(0.5)
    assert result["overall_v4"] == pytest.approx(0.15)
    assert result["bfcl_eval_version"] == "2026.3.23"  # the venv's, as scripts/bfcl_setup.sh pins it
    assert result["v3_style"]["value"] is None  # non-live and live were not run: no aggregate, and it says why
    assert "simple_python" in result["v3_style"]["missing_categories"]
    assert "memory_vector" in result["left_out"] and "multi_turn_base" not in result["left_out"]


def test_bfcl_evaluate_fails_a_wrong_argument_in_the_same_answers(bfcl_python, bfcl_data, tmp_path):
    write_gold_results(bfcl_data, tmp_path, corrupt=True)
    result = evaluate(bfcl_python, tmp_path)
    for entry_id in ENTRIES:
        assert result["categories"][entry_id.rsplit("_", 1)[0]]["accuracy"] == 0.0
    score_file = next((tmp_path / "bfcl" / "score").rglob("BFCL_v4_multi_turn_base_score.json"))
    failure = json.loads(score_file.read_text().splitlines()[1])
    assert failure["id"] == "multi_turn_base_0" and failure["error"]["error_type"].startswith("multi_turn:")
