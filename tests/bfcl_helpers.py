"""A stand-in for bfcl-eval's score folder (its file layout and its overall CSV), for the tests that read it."""

import json

from slca_verl.eval import bfcl_leaderboard as bl

#: bfcl-eval 2026.3.23's data_overall.csv header (bfcl_eval/constants/column_headers.py, COLUMNS_OVERALL)
HEADER = (
    "Rank,Overall Acc,Model,Model Link,Total Cost ($),Latency Mean (s),Latency Standard Deviation (s),"
    "Latency 95th Percentile (s),Non-Live AST Acc,Non-Live Simple AST,Non-Live Multiple AST,"
    "Non-Live Parallel AST,Non-Live Parallel Multiple AST,Live Acc,Live Simple AST,Live Multiple AST,"
    "Live Parallel AST,Live Parallel Multiple AST,Multi Turn Acc,Multi Turn Base,Multi Turn Miss Func,"
    "Multi Turn Miss Param,Multi Turn Long Context,Web Search Acc,Web Search Base,Web Search No Snippet,"
    "Memory Acc,Memory KV,Memory Vector,Memory Recursive Summarization,Relevance Detection,"
    "Irrelevance Detection,Format Sensitivity Max Delta,Format Sensitivity Standard Deviation,Organization,"
    "License"
).split(",")
#: where bfcl-eval writes each category's score file (utils.get_directory_structure_by_category)
FOLDER = {
    "memory_kv": "agentic/memory/kv",
    "memory_rec_sum": "agentic/memory/rec_sum",
    "multi_turn_base": "multi_turn",
    "simple_python": "non_live",
    "simple_java": "non_live",
    "multiple": "non_live",
}


def write_scores(root, counts: dict[str, tuple[int, int]], cells: dict[str, str]):
    """bfcl-eval's score folder: a score file per category of ``counts`` ({category: (correct, total)}), and the
    overall CSV whose row has ``cells`` (bfcl-eval's text, e.g. "12.50%" or "N/A"), "N/A" elsewhere."""
    for category, (correct, total) in counts.items():
        folder = root / bl.model_dir() / FOLDER[category]
        folder.mkdir(parents=True, exist_ok=True)
        head = {"accuracy": correct / total, "correct_count": correct, "total_count": total}
        (folder / f"BFCL_v4_{category}_score.json").write_text(json.dumps(head) + "\n" + json.dumps({"id": "x"}))
    row = {c: "N/A" for c in HEADER} | {"Rank": "1", "Model": "slca-verl policy (FC)", "Model Link": "local"} | cells
    (root / "data_overall.csv").write_text(",".join(HEADER) + "\n" + ",".join(row[c] for c in HEADER))
