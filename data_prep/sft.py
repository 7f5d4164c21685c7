"""SFT split -> verl's multi-turn SFT parquet (``verl.utils.dataset.multiturn_sft_dataset.MultiTurnSFTDataset``).

    python -m data_prep.sft --input data/toucan/toucan_train.parquet --output_dir data/sft            # RL rows
    python -m data_prep.sft --input hermes_fc.json --format sharegpt --output_dir data/sft --val_ratio 0.01

Output ``<output_dir>/sft_<split>.parquet`` with one column ``messages`` (a list of ``{"role", "content"}`` with roles
system / user / assistant / tool), which ``recipes/run_qwen7b_sft.sh`` reads with ``data.messages_key=messages``;
and ``sft_report.json`` with the counts. verl's dataset applies the chat template turn by turn and trains on the
assistant turns; tool messages become ``<tool_response>`` blocks in Qwen's template.

Sources:
- ``rl``: rows of the RL parquet (``prompt`` + ``reward_model.ground_truth.gold_tool_calls``): the prompt, then one
  assistant turn writing the first gold step as hermes ``<tool_call>`` blocks (later steps would need the tool
  responses, which RL rows do not hold). Rows without gold calls are skipped (``no_gold_call``) unless
  ``--no_call_reply`` gives the text to train on.
- ``sharegpt``: JSON / JSONL records with ``conversations: [{"from", "value"}]`` (hermes-function-calling-v1, ToolACE
  style; ``from`` in system / human / user / gpt / assistant / tool / function_response / observation) and optional
  ``tools`` (JSON list of OpenAI tool schemas): when the system message does not list ``<tools>``, the hermes system
  prompt of the RL prompts (``slca_verl.toolcall.hermes.system_prompt``) is put first, so SFT and RL see one format.
A dialogue must end on an assistant turn (``no_final_assistant``) and hold at least one user turn (``no_user_turn``).
Records are read by :func:`data_prep.readers.read_records`; a record that cannot be used is counted under its reason
(``malformed_record``, ``too_deep``, ``not_utf8``, ``non_finite_number``, ``invalid_unicode``, a tool-schema
reason), never raised.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import Counter
from typing import Any, Iterable, Sequence

from data_prep.readers import InputError, Unreadable, read_records
from data_prep.tool_schema import SchemaError, normalize_tools
from slca_verl.toolcall import hermes, limits
from slca_verl.toolcall.rows import plain, read_messages, write_sft

logger = logging.getLogger(__name__)

RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "tool": "tool",
    "function_response": "tool",
    "observation": "tool",
    "ipython": "tool",
}


def from_rl_row(row: dict, no_call_reply: str | None = None) -> tuple[list[dict] | None, str]:
    """(messages, "") for one RL-parquet row, or (None, reason)."""
    prompt = [{"role": m["role"], "content": m["content"]} for m in read_messages(row["prompt"])]
    gt = plain(row["reward_model"], json_text="any")["ground_truth"]
    gt = plain(gt, json_text="any")
    gold = plain(gt.get("gold_tool_calls") or [], json_text="any")
    if gold and gold[0]:
        if limits.non_finite_path(gold[0]) is not None:
            return None, "non_finite_number"
        reply = hermes.render_calls(gold[0])
    elif no_call_reply:
        reply = no_call_reply
    else:
        return None, "no_gold_call"
    return _checked(prompt + [{"role": "assistant", "content": reply}])


def from_sharegpt(record: dict) -> tuple[list[dict] | None, str]:
    """(messages, "") for one ShareGPT / hermes dialogue, or (None, reason)."""
    turns = record.get("conversations") or record.get("messages")
    if not isinstance(turns, list):
        return None, "malformed_record"
    messages = []
    for t in turns:
        if not isinstance(t, dict):
            return None, "malformed_record"
        role = ROLES.get(str(t.get("from", t.get("role", ""))).lower())
        content = t.get("value", t.get("content"))
        if role is None or not isinstance(content, str):
            return None, "unknown_role"
        messages.extend(_one_call_per_block(role, content))
    tools = plain(record.get("tools"), json_text="any") or []
    if tools and not any(m["role"] == "system" and "<tools>" in m["content"] for m in messages):
        system = hermes.system_prompt(normalize_tools(tools))
        if messages and messages[0]["role"] == "system":
            system = f"{system}\n\n{messages.pop(0)['content']}"
        messages.insert(0, {"role": "system", "content": system})
    return _checked(messages)


def _one_call_per_block(role: str, content: str) -> list[dict]:
    """One ShareGPT turn as the messages RL prompts and Qwen's template use.

    - an assistant ``<tool_call>`` block holding a JSON list (``[{"name", "arguments"}, ...]``, the authors' SFT
      parquet writes parallel calls so) becomes one block per call: the form the RL system prompt asks for and
      bfcl-eval's Qwen handler reads (it rejects the list form);
    - a user turn that is nothing but ``<tool_response>`` blocks (how ShareGPT dialogues carry tool results) becomes
      one ``tool`` message per block, which Qwen's template renders back as the same ``<tool_response>`` text.
    Anything else, a block that does not parse included, stays as it was written."""
    if role == "assistant" and hermes.OPEN_TAG in content:
        out, pos = [], 0
        for start, end, calls, err in hermes.read_blocks(content, None):
            if err or not content[start + len(hermes.OPEN_TAG) : end].lstrip().startswith("["):
                continue
            out += [content[pos:start], hermes.render_calls({"name": c.name, "arguments": c.arguments} for c in calls)]
            pos = end
        return [{"role": role, "content": "".join(out) + content[pos:]}]
    if role == "user" and RESPONSE_OPEN in content:
        blocks = hermes.find_blocks(content, RESPONSE_OPEN, RESPONSE_CLOSE)
        starts, ends = [b[0] for b in blocks], [b[1] for b in blocks]
        rest = "".join(content[a:b] for a, b in zip([0, *ends], [*starts, None]))  # the text between the blocks
        if blocks and not rest.strip():
            return [{"role": "tool", "content": body.strip()} for _, _, body in blocks]
    return [{"role": role, "content": content}]


def _checked(messages: list[dict]) -> tuple[list[dict] | None, str]:
    if not all(isinstance(m["role"], str) and isinstance(m["content"], str) for m in messages):
        return None, "malformed_record"  # a second type in the messages column would fail the parquet write
    if limits.has_lone_surrogate(m["content"] for m in messages):
        return None, "invalid_unicode"
    if not any(m["role"] == "user" for m in messages):
        return None, "no_user_turn"
    if not messages or messages[-1]["role"] != "assistant" or not messages[-1]["content"].strip():
        return None, "no_final_assistant"
    return messages, ""


def convert_one(record: Any, fmt: str, no_call_reply: str | None) -> tuple[list[dict] | None, str]:
    """(messages, "") or (None, reason) for one record; nothing a record holds raises out of here."""
    if isinstance(record, Unreadable):
        return None, record.reason
    if not isinstance(record, dict):
        return None, "malformed_record"
    if limits.nesting_exceeds(record):
        return None, "too_deep"
    try:
        return from_rl_row(record, no_call_reply) if fmt == "rl" else from_sharegpt(record)
    except (limits.RecordError, SchemaError) as exc:
        return None, exc.reason
    except RecursionError:
        return None, "too_deep"
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None, "malformed_record"
    except Exception:  # noqa: BLE001 - a converter bug met by one record is counted, and the run goes on
        logger.warning("unexpected error converting a %s record", fmt, exc_info=True)
        return None, "unexpected_error"


def convert(records: Iterable[dict], fmt: str, no_call_reply: str | None = None) -> tuple[list[list[dict]], Counter]:
    """All records -> (SFT dialogues, counts of skip reasons)."""
    out, skipped = [], Counter()
    for rec in records:
        messages, reason = convert_one(rec, fmt, no_call_reply)
        if messages is None:
            skipped[reason] += 1
        else:
            out.append(messages)
    return out, skipped


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, nargs="+")
    p.add_argument("--format", choices=["rl", "sharegpt"], default=None, help="default: rl for .parquet, else sharegpt")
    p.add_argument("--output_dir", required=True)
    p.add_argument("--val_ratio", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no_call_reply", default=None, help="assistant text for RL rows without gold calls")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    dialogues, skipped = [], Counter()
    for path in args.input:
        fmt = args.format or ("rl" if path.endswith(".parquet") else "sharegpt")
        try:
            records = read_records(path)
        except (InputError, FileNotFoundError) as exc:
            logger.error("cannot read the input: %s", exc)
            p.exit(2, f"{p.prog}: error: cannot read the input: {exc}\n")
        d, s = convert(records, fmt, args.no_call_reply)
        dialogues += d
        skipped += s
    paths = write_sft(dialogues, args.output_dir, args.val_ratio, args.seed)
    report = {"inputs": args.input, "written": len(dialogues), "skipped": dict(skipped), "outputs": paths}
    with open(os.path.join(args.output_dir, "sft_report.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    logger.info("%d dialogues -> %s; skipped %s", len(dialogues), paths, dict(skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
