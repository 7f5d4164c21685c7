"""Evaluation of a checkpoint: in-domain HierR metrics, BFCL (bfcl-eval's AST checker), tau^2-bench, and plots.

Each scorer is a CLI that writes ``<name>.json`` and ``<name>.md`` (a markdown table) into ``--out_dir``::

    python -m slca_verl.eval.in_domain --predictions val_dump.jsonl --out_dir eval/7b_slca
    python -m slca_verl.eval.bfcl_ast --base_url http://127.0.0.1:8100/v1 --model policy --out_dir eval/7b_slca
    python -m slca_verl.eval.tau2 --agent_base_url ... --user_base_url ... --out_dir eval/7b_slca    # extra: tau2
    python -m slca_verl.eval.plots --metrics checkpoints/.../metrics.jsonl --out_dir eval/7b_slca/plots

Nothing here is imported by the plugin; importing a module has no side effects.
"""
