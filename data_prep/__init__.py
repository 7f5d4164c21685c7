"""Data preparation: local copies of function-calling datasets -> verl RL parquet for ``slca_tool_agent``.

One module per source, each runnable as ``python -m data_prep.<source> --input PATH --output_dir DIR``:
``xlam``, ``toolace``, ``hermes_fc``, ``glaive``, ``toucan``, ``toucan_raw`` (raw Toucan-1.5M, streamed), ``bfcl``.
Shared pieces: ``schema`` (tool schema
normalisation to JSON Schema, gold-call validation), ``calls`` (call-text parsers), ``rows`` (the row builder),
``report`` (the in/written/rejected report), ``pipeline`` (dedup, decontamination, split, parquet writing),
``readers`` (local files -> records), ``limits`` (the nesting and number bounds every record is held to),
``stream`` (the same in bounded memory), ``gold_forms`` (the authors' gold layouts), ``hf_local`` (local Hugging
Face dataset folders as input).
See docs/data_prep.md.
"""
