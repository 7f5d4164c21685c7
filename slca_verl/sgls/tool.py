"""verl integration: ``SGLSTool``, a ``verl.tools.base_tool.BaseTool`` whose answers come from the SGLS simulator.

In verl's tool YAML (``actor_rollout_ref.rollout.multi_turn.tool_config_path``), see
``slca_verl/config/sgls_tool.yaml``::

    tools:
      - class_name: slca_verl.sgls.tool.SGLSTool
        config: {type: native, backend: openai, base_urls: ["http://sim-0:8000/v1"], model: Qwen3-8B,
                 cache_scope: group}
        tool_schema: {type: function, function: {name: get_weather, description: ..., parameters: {...}}}

verl's ``ToolAgentLoop`` calls ``create(create_kwargs=row["extra_info"]["tools_kwargs"][name]["create_kwargs"])``
then ``execute(instance_id, arguments, agent_data=...)``. Recognised create kwargs (top level or inside
``create_kwargs``): ``tool_schemas`` (this sample's OpenAI-format tool list or its JSON string), ``group_id`` (or
``uid``: the GRPO group, for ``cache_scope: group``), ``step`` (for ``cache_scope: step``), ``context``, ``name``.
Earlier answers of the same trajectory (keyed by ``agent_data.request_id``) are given to the prompt as context.

Agent loops that route every call of a row through one object use :meth:`SGLSTool.call` directly.
All SGLSTool objects with the same config in a process share one :class:`Simulator` (client, cache, metrics).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any
from uuid import uuid4

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from .simulator import SimResult, Simulator, shared_simulator

logger = logging.getLogger(__name__)

_TOOL_ONLY_KEYS = ("response_schema",)  # per-tool keys of the YAML config block, not simulator settings


class SGLSTool(BaseTool):
    """A simulated tool.

    Example (outside verl)::

        tool = SGLSTool({"backend": "offline"}, tool_schema=None)
        iid, _ = await tool.create(tool_schemas=row_tools, group_id="uid-3")
        resp, reward, metrics = await tool.execute(iid, {"city": "Paris"}, name="get_weather")

    Args:
        config: the YAML ``config`` block: SGLS settings (see SGLSConfig) plus an optional ``response_schema``
            for this tool.
        tool_schema: verl's OpenAIFunctionToolSchema of this tool (None for a router over per-sample schemas).
        simulator: share an existing Simulator instead of the per-config shared one (tests, agent loops).
    """

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None, *, simulator=None):
        # BaseTool.__init__ prints the schema; set its attributes ourselves instead.
        config = dict(config or {})
        self.config = config
        self.tool_schema = tool_schema
        self.name = tool_schema.function.name if tool_schema is not None else str(config.get("name", "sgls"))
        sim_config = {k: v for k, v in config.items() if k not in _TOOL_ONLY_KEYS and k != "name"}
        self.simulator: Simulator = simulator or shared_simulator(sim_config)
        self._default_schemas = None
        if tool_schema is not None:
            schema = tool_schema.model_dump(exclude_none=True)
            if config.get("response_schema"):
                schema["function"]["response_schema"] = config["response_schema"]
            self._default_schemas = [schema]
        self._instances: dict[str, dict] = {}
        self._histories: OrderedDict[str, list] = OrderedDict()  # request_id -> earlier calls of the trajectory
        self._lock = threading.Lock()

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return self.tool_schema

    async def create(self, instance_id: str | None = None, **kwargs) -> tuple[str, ToolResponse]:
        """Register a per-trajectory instance; kwargs as in the module docstring (also nested in create_kwargs)."""
        kw = dict(kwargs.get("create_kwargs") or {})
        kw.update({k: v for k, v in kwargs.items() if k != "create_kwargs"})
        instance_id = instance_id or str(uuid4())
        group = kw.get("group_id", kw.get("uid"))
        state = {
            "tool_schemas": kw.get("tool_schemas"),
            "scope": self.simulator.scope_key(group_id=group, step=kw.get("step")),
            "context": list(kw.get("context") or []),
            "name": kw.get("name"),
        }
        with self._lock:
            self._instances[instance_id] = state
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs) -> tuple[ToolResponse, float, dict]:
        """Simulate one call; returns ``(ToolResponse(text), 0.0, metrics)``. Never raises for bad calls.

        kwargs: ``name`` (tool name, default this tool's), ``agent_data`` (verl: its request_id keys the context).
        """
        state = self._instances.get(instance_id) or {"tool_schemas": None, "scope": "", "context": [], "name": None}
        name = kwargs.get("name") or state["name"] or self.name
        agent_data = kwargs.get("agent_data")
        request_id = getattr(agent_data, "request_id", None)
        context = list(state["context"])
        if request_id is not None:
            with self._lock:
                context += self._histories.get(request_id, [])
        res = await self.call(
            name, parameters, tool_schemas=state["tool_schemas"], scope=state["scope"], context=context
        )
        if request_id is not None:
            with self._lock:
                hist = self._histories.setdefault(request_id, [])
                hist.append({"name": name, "arguments": parameters, "response": res.text})
                self._histories.move_to_end(request_id)
                while len(self._histories) > 10000:
                    self._histories.popitem(last=False)
        metrics = {
            "sgls_status": res.status,
            "sgls_cached": res.metadata.get("cached") in ("hit", "coalesced"),
            "sgls_latency_s": res.metadata.get("latency_s", 0.0),
        }
        return ToolResponse(text=res.text), 0.0, metrics

    async def call(
        self, name: str, arguments: Any, *, tool_schemas: Any = None, scope: str = "", context: list | None = None
    ) -> SimResult:
        """Route one call by tool name; ``tool_schemas`` None -> this tool's YAML schema. See Simulator.call."""
        if tool_schemas is None:
            tool_schemas = self._default_schemas
        return await self.simulator.call(name, arguments, tool_schemas=tool_schemas, scope=scope, context=context)

    def scope_key(self, group_id: Any = None, step: Any = None) -> str:
        return self.simulator.scope_key(group_id=group_id, step=step)

    async def release(self, instance_id: str, **kwargs) -> None:
        with self._lock:
            self._instances.pop(instance_id, None)

    def metrics(self) -> dict:
        return self.simulator.metrics()
