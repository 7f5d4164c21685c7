"""The bottom layer of the library: how tool calls are written, and the rows they travel in.

- :mod:`slca_verl.toolcall.hermes`: the hermes format (``<tool_call>`` JSON blocks; the tools listed in ``<tools>``
  in the system prompt), rendered in one place for data preparation, the CPU model's warm-up and evaluation, and
  read in one place for the agent loop and HierR;
- :mod:`slca_verl.toolcall.formats`: every other tool-call format verl registers, read through verl's own parsers;
- :mod:`slca_verl.toolcall.schema`: the one tool-schema normaliser (strict for data preparation, tolerant for the
  simulator);
- :mod:`slca_verl.toolcall.text`: cutting over-long text to a budget;
- :mod:`slca_verl.toolcall.limits`: the JSON bounds every reader of untrusted text applies (nesting depth, integer
  length, non-finite numbers, lone surrogates);
- :mod:`slca_verl.toolcall.rows`: the project's one helper from parquet / numpy / OmegaConf values to plain Python
  values (:func:`~slca_verl.toolcall.rows.plain`), reading message cells, and writing SFT parquet files.

Nothing here imports the rest of the library or the data-preparation scripts (``formats`` alone imports verl's
parser registry and tool schema model); they all stand on it.
"""
