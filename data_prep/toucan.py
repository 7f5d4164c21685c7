"""The authors' Toucan-derived RL / eval parquet: validate every row and pass it through in our layout.

    python -m data_prep.toucan --input toucan_toolcall_rl.parquet --output_dir data/toucan
    python -m data_prep.toucan --input toucan_toolcall_eval.parquet --output_dir data/toucan --split_name test

The prompt is kept verbatim (it already lists the tools in a hermes system prompt); ``data_source``,
``subset_name`` and ``original_turn_index`` are kept; ``ability``, ``agent_name`` and ``extra_info.index`` /
``split`` / ``tool_schemas`` are added. Checked: the prompt is a list of chat messages, the tool schemas pass the
JSON Schema meta-schema, ``allowed_tools`` names exactly those tools and every gold call fits its schema.

``gold_tool_calls`` may be in any layout the authors wrote (``data_prep.gold_forms``): nested v2 steps, a flat v1
list of calls (written as one step) or bare tool names (one step of name-only calls, whose arguments are not
checked). Each row records its form in ``ground_truth.gold_format``, the report counts rows per form
(``notes.gold_format``) and the CLI warns once when flat or names-only rows cost the reward information.
``--gold_forms nested`` (or any subset) rejects the other forms as ``gold_flat_rejected`` / ``gold_names_rejected``;
gold in none of the forms is ``gold_not_nested``. ``reward_model``, its
``ground_truth`` and ``extra_info`` may be objects or their JSON text; text that does not parse is rejected as
``<field>_unparseable``. Passed-through fields must have the layout's types (``field_type_invalid`` otherwise).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

from data_prep.cli import main_for
from data_prep.gold_forms import GOLD_FORMS, add_gold_forms_argument, read_gold, rejection_reason, warn_lossy_forms
from data_prep.readers import read_records
from data_prep.row_builder import Candidate, Rejection
from data_prep.tool_schema import normalize_tools
from slca_verl.toolcall import limits
from slca_verl.toolcall.limits import RecordError

SOURCE = "toucan"
DATA_SOURCE = "toucan_toolcall"
_ROLES = {"system", "user", "assistant", "tool"}
__all__ = ["SOURCE", "convert_record", "main"]


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


def convert_record(record: Any, index: int, gold_forms: Iterable[str] = GOLD_FORMS) -> Iterable[Candidate | Rejection]:
    """One authors' row -> a pass-through candidate, or the reason it cannot be used."""
    if not isinstance(record, dict):
        return [Rejection("malformed_record", str(record)[:200], index)]
    prompt = record.get("prompt")
    if (
        not isinstance(prompt, list)
        or not prompt
        or not all(
            isinstance(m, dict) and m.get("role") in _ROLES and isinstance(m.get("content"), str) for m in prompt
        )
    ):
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
        return [
            Rejection("allowed_tools_mismatch", f"allowed_tools is not a list of names: {str(allowed)[:120]}", index)
        ]
    if sorted(allowed) != sorted(names):
        return [Rejection("allowed_tools_mismatch", f"allowed_tools {allowed[:5]} != schema names {names[:5]}", index)]
    try:
        read = read_gold(gt["gold_tool_calls"])
    except json.JSONDecodeError as exc:
        return [Rejection("gold_call_unparseable", f"gold_tool_calls is not JSON: {exc}", index)]
    if read is None:
        return [
            Rejection(
                "gold_not_nested",
                "gold_tool_calls is neither steps, a flat list of calls nor a list of "
                f"names: {str(gt['gold_tool_calls'])[:120]}",
                index,
            )
        ]
    gold_format, gold = read
    if gold_format not in gold_forms:
        return [
            Rejection(
                rejection_reason(gold_format),
                f"{gold_format} gold not in --gold_forms: {str(gt['gold_tool_calls'])[:120]}",
                index,
            )
        ]
    return [
        Candidate(
            data_source=record.get("data_source") or DATA_SOURCE,
            messages=[],
            prompt=[{"role": m["role"], "content": m["content"]} for m in prompt],
            tools=tools,
            gold=gold,
            question=gt["question_content"],
            record_index=index,
            turn_index=_turn_index(extra.get("original_turn_index")),
            subset=gt.get("subset_name") or None,
            extra_ground_truth={"gold_format": gold_format},
        )
    ]


def main(argv: Sequence[str] | None = None):
    def make_convert(args):
        return lambda record, index: convert_record(record, index, args.gold_forms)

    def load(args):
        return read_records(args.input), {"gold_format": dict.fromkeys(GOLD_FORMS, 0)}

    report = main_for(
        SOURCE, __doc__.splitlines()[0], make_convert, argv, add_arguments=add_gold_forms_argument, load=load
    )
    warn_lossy_forms(report)
    return report


if __name__ == "__main__":
    main()
