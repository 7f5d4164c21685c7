"""The bottom layer of the library: how tool calls are written, and the rows they travel in.

- :mod:`slca_verl.toolcall.hermes`: the hermes format (``<tool_call>`` JSON blocks; the tools listed in ``<tools>``
  in the system prompt), rendered in one place for data preparation, the CPU model's warm-up and evaluation;
- :mod:`slca_verl.toolcall.limits`: the JSON bounds every reader of untrusted text applies (nesting depth, integer
  length, non-finite numbers, lone surrogates);
- :mod:`slca_verl.toolcall.rows`: reading parquet cells back into Python values, and writing SFT parquet files.

Nothing here imports verl, the rest of the library or the data-preparation scripts; they all stand on it.
"""
