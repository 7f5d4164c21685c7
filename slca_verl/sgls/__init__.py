"""SGLS: a schema-guided LLM tool simulator (tool calls answered by an LLM playing the API server).

Modules: ``client`` (the OpenAI-compatible HTTP client shared with the HierR judge).
"""
