"""The authors' Toucan-derived RL / eval parquet: validate every row and pass it through in our layout.

    python -m data_prep.toucan --input toucan_toolcall_rl.parquet --output_dir data/toucan
    python -m data_prep.toucan --input toucan_toolcall_eval.parquet --output_dir data/toucan --split_name test

The prompt is kept verbatim (it already lists the tools in a hermes system prompt); ``data_source``,
``subset_name`` and ``original_turn_index`` are kept; ``ability``, ``agent_name`` and ``extra_info.index`` /
``split`` / ``tool_schemas`` are added. Checked: the prompt is a list of chat messages, the tool schemas pass the
JSON Schema meta-schema, ``allowed_tools`` names exactly those tools, ``gold_tool_calls`` is the nested
(v2) list of steps and every gold call fits its schema. A flat v1 list (``[call, ...]``) or a list of bare
names is rejected as ``gold_not_nested``: the parallel term of HierR needs the steps. ``reward_model``, its
``ground_truth`` and ``extra_info`` may be objects or their JSON text; text that does not parse is rejected as
``<field>_unparseable``. Passed-through fields must have the layout's types (``field_type_invalid`` otherwise).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

from data_prep import limits
from data_prep.cli import simple_main
from data_prep.limits import RecordError
from data_prep.rows import Candidate, Rejection
from data_prep.schema import normalize_tools

SOURCE = "toucan"
DATA_SOURCE = "toucan_toolcall"
_ROLES = {"system", "user", "assistant", "tool"}
__all__ = ["SOURCE", "convert_record", "main"]


def _as_json(value: Any, what: str) -> Any:
    return limits.loads(value, what) if isinstance(value, str) else value


def _object_field(value: Any, name: str) -> dict:
    """A field that is an object or its JSON text (as some exports write it); ``{}`` when absent."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = limits.loads(value, name)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{name}_unparseable", f"{name} is a string that is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise RecordError("malformed_record", f"{name} is a {type(value).__name__}, not an object")
    return value


def _turn_index(value: Any) -> Any:
    """``original_turn_index`` as an int when it is one (``3.0`` included); anything else is left for the row check."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return 0 if value is None else value


def _nested_gold(value: Any) -> list[list[dict]] | None:
    gold = _as_json(value, "gold_tool_calls")
    if gold is None:
        return []
    if not isinstance(gold, list) or not all(isinstance(step, list) and all(isinstance(c, dict) for c in step)
                                             for step in gold):
        return None
    return [[{"name": c.get("name"), "arguments": _as_json(c.get("arguments", c.get("parameters", {})), "arguments")}
             for c in step] for step in gold]


def convert_record(record: Any, index: int) -> Iterable[Candidate | Rejection]:
    """One authors' row -> a pass-through candidate, or the reason it cannot be used."""
    if not isinstance(record, dict):
        return [Rejection("malformed_record", str(record)[:200], index)]
    prompt = record.get("prompt")
    if not isinstance(prompt, list) or not prompt or not all(
            isinstance(m, dict) and m.get("role") in _ROLES and isinstance(m.get("content"), str) for m in prompt):
        return [Rejection("prompt_malformed", "prompt is not a non-empty list of {role, content} messages", index)]
    gt = _object_field(_object_field(record.get("reward_model"), "reward_model").get("ground_truth"), "ground_truth")
    if not gt:
        return [Rejection("malformed_record", "reward_model.ground_truth is missing", index)]
    missing = [k for k in ("allowed_tools", "gold_tool_calls", "question_content") if k not in gt]
    if missing:
        return [Rejection("malformed_record", f"ground_truth lacks {missing}", index)]
    extra = _object_field(record.get("extra_info"), "extra_info")
    tools = normalize_tools(gt.get("tool_schemas") or record.get("tools") or [])
    names = [t["function"]["name"] for t in tools]
    allowed = gt["allowed_tools"] or []
    if not isinstance(allowed, list) or not all(isinstance(a, str) for a in allowed):
        return [Rejection("allowed_tools_mismatch", f"allowed_tools is not a list of names: {str(allowed)[:120]}",
                          index)]
    if sorted(allowed) != sorted(names):
        return [Rejection("allowed_tools_mismatch", f"allowed_tools {allowed[:5]} != schema names {names[:5]}", index)]
    try:
        gold = _nested_gold(gt["gold_tool_calls"])
    except json.JSONDecodeError as exc:
        return [Rejection("gold_call_unparseable", f"gold_tool_calls is not JSON: {exc}", index)]
    if gold is None:
        return [Rejection("gold_not_nested", f"gold_tool_calls is not a list of steps: {str(gt['gold_tool_calls'])[:120]}",
                          index)]
    return [Candidate(
        data_source=record.get("data_source") or DATA_SOURCE,
        messages=[],
        prompt=[{"role": m["role"], "content": m["content"]} for m in prompt],
        tools=tools,
        gold=gold,
        question=gt["question_content"],
        record_index=index,
        turn_index=_turn_index(extra.get("original_turn_index")),
        subset=gt.get("subset_name") or None,
    )]


def main(argv: Sequence[str] | None = None):
    return simple_main(SOURCE, __doc__.splitlines()[0], convert_record, argv)


if __name__ == "__main__":
    main()
