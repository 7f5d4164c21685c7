"""Per-sample tools for ``slca_tool_agent``: the row's tool schemas, the one SGLS tool object, response truncation.

A row names its own tools (docs/method.md row format; data_prep writes all three):

    extra_info.tool_schemas             JSON str of OpenAI tools   (read first)
    tools                               JSON str or list           (then)
    reward_model.ground_truth.tool_schemas  JSON str               (last)

Every call of the row goes to one :class:`slca_verl.sgls.tool.SGLSTool` with that row's schemas: there is no
registry of every tool and no verl patch.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import threading
from typing import Any

from slca_verl.toolcall.rows import plain

logger = logging.getLogger(__name__)

SCHEMA_SOURCES = ("extra_info.tool_schemas", "tools", "reward_model.ground_truth.tool_schemas")

_SGLS_TOOLS: dict[str, Any] = {}
_SGLS_LOCK = threading.Lock()


def _decode(value: Any) -> tuple[list | None, str]:
    """A schema list from a JSON string / list / numpy array; ``(None, reason)`` when unusable."""
    value = plain(value)
    if isinstance(value, str):
        if not value.strip():
            return None, "empty"
        try:
            value = json.loads(value)
        except ValueError as e:
            return None, f"not JSON ({e})"
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return None, f"a {type(value).__name__}, not a list"
    out = []
    for item in value:
        if not isinstance(item, dict):
            return None, f"holds a {type(item).__name__}, not a tool object"
        fn = item.get("function") if isinstance(item.get("function"), dict) else item
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            return None, "a tool without a string name"
        out.append(item if "function" in item else {"type": "function", "function": item})
    return (out, "") if out else (None, "an empty list")


def row_tool_schemas(row: dict) -> tuple[list[dict] | None, str]:
    """The row's OpenAI-format tool list and where it came from, or ``(None, reason)``.

    Args:
        row: the agent loop's keyword arguments (the dataset row's columns).
    """
    extra_info = plain(row.get("extra_info")) or {}
    reward_model = plain(row.get("reward_model")) or {}
    ground_truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else None
    if isinstance(ground_truth, str):
        try:
            ground_truth = json.loads(ground_truth)
        except ValueError:
            ground_truth = None
    candidates = (
        extra_info.get("tool_schemas") if isinstance(extra_info, dict) else None,
        row.get("tools"),
        ground_truth.get("tool_schemas") if isinstance(ground_truth, dict) else None,
    )
    reasons = []
    for source, value in zip(SCHEMA_SOURCES, candidates):
        if value is None:
            continue
        schemas, reason = _decode(value)
        if schemas is not None:
            return schemas, source
        reasons.append(f"{source} is {reason}")
    return None, "; ".join(reasons) or f"none of {', '.join(SCHEMA_SOURCES)} is set"


def tool_names(schemas: list[dict]) -> list[str]:
    return [(s.get("function") or s)["name"] for s in schemas]


def _resolve_path(path: str) -> str:
    """``pkg://package/rel/path`` → file inside the installed package; other paths through verl's resolver."""
    if path.startswith("pkg://"):
        package, _, rel = path[len("pkg://") :].partition("/")
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"{path}: package {package!r} not found")
        return os.path.join(list(spec.submodule_search_locations)[0], rel)
    from verl.utils.import_utils import resolve_config_path

    return resolve_config_path(path)


def sgls_config_from_yaml(path: str) -> dict:
    """The SGLS ``config`` block of a verl tool YAML (first ``SGLSTool`` entry), or a YAML that is the block itself."""
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(OmegaConf.load(_resolve_path(path)), resolve=True)
    if isinstance(data, dict) and "tools" in data:
        for entry in data["tools"] or []:
            if str(entry.get("class_name", "")).endswith("SGLSTool"):
                return dict(entry.get("config") or {})
        raise ValueError(f"{path}: no tool with class_name slca_verl.sgls.tool.SGLSTool")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a verl tool YAML or an SGLS config mapping")
    return data


def get_sgls_tool(sgls: dict | None = None, sgls_config_path: str | None = None, verl_tools: Any = None):
    """The process's SGLS tool object for this configuration (one per distinct config).

    Order: ``sgls`` (inline config) > ``sgls_config_path`` > an ``SGLSTool`` among verl's loaded tools
    (``multi_turn.tool_config_path``).

    Raises:
        ValueError: none of the three is available.
    """
    from slca_verl.sgls.tool import SGLSTool

    if sgls is None and sgls_config_path:
        sgls = sgls_config_from_yaml(sgls_config_path)
    if sgls is None:
        for tool in verl_tools or []:
            if isinstance(tool, SGLSTool):
                return tool
        raise ValueError(
            "slca_tool_agent needs an SGLS simulator: set `sgls_config_path` (a verl tool YAML such as "
            "pkg://slca_verl/config/sgls_tool.yaml) or an inline `sgls:` block in the agent loop YAML "
            "(actor_rollout_ref.rollout.agent.agent_loop_config_path), or point "
            "actor_rollout_ref.rollout.multi_turn.tool_config_path at an SGLSTool YAML."
        )
    sgls = {k: v for k, v in plain(dict(sgls)).items() if k not in ("type", "class_name")}
    key = json.dumps(sgls, sort_keys=True, default=str)
    with _SGLS_LOCK:
        tool = _SGLS_TOOLS.get(key)
        if tool is None:
            tool = _SGLS_TOOLS[key] = SGLSTool({**sgls, "name": "slca_tool_agent"})
        return tool
