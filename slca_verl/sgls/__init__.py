"""SGLS: a schema-guided LLM tool simulator (tool calls answered by an LLM playing the API server).

    from slca_verl.sgls import Simulator
    sim = Simulator({"backend": "offline"})
    res = await sim.call("get_weather", {"city": "Paris"}, tool_schemas=row_tools, scope=group_uid)

Modules, in the order a call goes through them:
- ``schema``: normalise dataset tool schemas into JSON Schema, validate calls (404/400 bodies, no LLM call);
- ``faults``: optional injected timeouts / 5xx / 429;
- ``cache``: scope | tool | canonical-arguments cache, in-flight coalescing, optional sqlite;
- ``offline`` / ``openai_backend`` (+ ``prompt``, ``client``): produce the answer;
- ``simulator``: the service tying these together; ``tool``: verl's ``BaseTool`` (``SGLSTool``);
- ``client``: the project's OpenAI-compatible HTTP client (shared with the HierR judge).
``slca_verl.sgls.tool`` imports verl; nothing else here does.
"""

from .client import ChatClient, ChatClientError
from .config import FaultConfig, SGLSConfig
from .simulator import SimResult, Simulator
from .toolset import ToolSet, normalize_tool

__all__ = [
    "ChatClient",
    "ChatClientError",
    "FaultConfig",
    "SGLSConfig",
    "SimResult",
    "Simulator",
    "ToolSet",
    "normalize_tool",
]
