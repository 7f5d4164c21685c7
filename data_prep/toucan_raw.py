"""Raw Toucan-1.5M (Apache-2.0) -> verl RL parquet, one row per user turn, streamed shard by shard.

    python -m data_prep.toucan_raw --input Toucan-1.5M/Qwen3 --output_dir data/toucan_raw \\
        [--min_question_quality 4] [--min_response_quality 4] [--min_quality completeness=4 order_correctness=1] \\
        [--subsets single-turn-original,multi-turn] [--batch_size 256] [--quiet]

``--input`` is one parquet file, a folder of parquet shards (name order) or a local Hugging Face dataset folder
(``data_prep.hf_local``; a snapshot root such as ``Toucan-1.5M/``, with the shards in config sub-folders).
Columns read: ``uuid, subset_name, messages, available_tools, question_quality_assessment,
response_quality_assessment`` (``metadata``, the largest, is never read).

Message layout, from the upstream generator (TheAgentArk/Toucan: ``datagen/completion_openai_agent.py``,
``convert_openai_agent_result_to_messages``; ``datagen/step4.3_process_completion.py`` reads calls back the same
way; the Qwen-Agent fork's ``llm/function_calling.py`` checks the same pairing). ``messages`` is a JSON list of:

- ``{"role": "system", "content": ...}``: the model's tool declaration; replaced by our tool-listing prompt;
- ``{"role": "user", "content": ...}``;
- ``{"role": "assistant", "content": "", "reasoning_content": ...}``: reasoning only; left out of the prompt;
- ``{"role": "assistant", "content": "", "function_call": {"name", "arguments": JSON text, "call_id"}}``: ONE call
  per message; parallel calls are consecutive such messages, followed by their results;
- ``{"role": "function", "name": ..., "content": ...}``: a tool result;
- ``{"role": "assistant", "content": text}``: the answer.

Also read: OpenAI ``tool_calls`` lists, ``role: "tool"`` results, and the ``tool_call`` / ``tool_response`` roles of
upstream's ms-swift converter (``data/ms_swift_format_converter.ipynb``). A call name missing from
``available_tools`` is matched to the one tool named ``<server>-<name>`` (upstream prefixes tool names with the
server for some configs, not their calls); the report counts these under ``notes.calls_matched_by_server_prefix``.

Decomposition (the authors' ``split_turns``, ``data/convert_toucan_to_verl_v2.py``): one row per user turn, its
prompt the dialogue up to that turn (earlier calls as ``<tool_call>`` assistant text, results as ``role: "tool"``),
its gold the steps up to the next user turn: a run of call messages with no result, text or user turn between
them is one parallel step. ``subset_name`` is kept as the row's subset. An irrelevance trajectory's rows have gold
``[]``; one that calls a tool anyway is rejected (``irrelevance_with_call``).

Quality filters, on the upstream LLM ratings (1-5; ``datagen/README.MD`` step 2.3 and ``step4.3``):
``question_quality_assessment`` holds ``{dimension: {"reasoning", "score"}}`` for ``tool_selection_difficulty``,
``tool_selection_uniqueness``, ``question_quality``, ``scenario_realism``, ``verifiable``, ``stability`` (the
names after the first are read off the README's list); ``response_quality_assessment`` holds ``completeness`` and
``conciseness`` the same way, ``overall_score`` (their mean), ``desired_tools_used_percentage`` (0-1) and
``order_correctness`` (bool). ``--min_question_quality X``: ``question_quality`` score >= X
(``low_question_quality``); ``--min_response_quality X``: ``overall_score`` >= X (``low_response_quality``);
``--min_quality NAME=X``: any field of either column (a boolean counts as 0/1). A record without the rating a
filter needs is rejected as ``quality_assessment_missing``.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import pyarrow.parquet as pq

from data_prep import hf_local
from data_prep.calls import CallParseError, normalize_call
from data_prep.cli import build_parser, options_from_args
from data_prep.dialogue import Turn, add_turn_arguments, split_dialogue
from data_prep.report import Report
from data_prep.rows import Candidate, Rejection
from data_prep.schema import normalize_tools
from data_prep.stream import progress_enabled, run_streaming

logger = logging.getLogger(__name__)

SOURCE = "toucan_raw"
DATA_SOURCE = "toucan_toolcall"
COLUMNS = ["uuid", "subset_name", "messages", "available_tools", "question_quality_assessment",
           "response_quality_assessment"]
QUESTION, RESPONSE = "question_quality_assessment", "response_quality_assessment"
_RESULT_ROLES = {"function", "tool", "tool_response", "observation"}
__all__ = ["SOURCE", "QualityFilter", "ToucanRawConverter", "toucan_turns", "iter_input", "main"]


@dataclass(frozen=True)
class QualityFilter:
    """Keep a record only when ``field`` of its assessment ``column`` (either column when None) is >= ``minimum``."""

    field: str
    minimum: float
    column: str | None = None

    def reason(self, column: str) -> str:
        return "low_question_quality" if column == QUESTION else "low_response_quality"


def _as_json(value: Any) -> Any:
    if isinstance(value, str):
        return json.loads(value) if value.strip() else None
    return value


def _score(assessment: dict, field: str) -> float | None:
    value = assessment.get(field)
    if isinstance(value, dict):
        value = value.get("score")
    if value is None and field == "overall_score":  # upstream's mean of the two response ratings
        parts = [_score(assessment, d) for d in ("completeness", "conciseness")]
        value = sum(parts) / 2 if None not in parts else None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _text(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _literal(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        try:
            return ast.literal_eval(text)  # upstream's ms-swift converter writes str(dict)
        except (ValueError, SyntaxError) as exc:
            raise CallParseError(f"tool_call content is neither JSON nor a python literal: {text[:120]}") from exc


def _message_calls(msg: dict) -> list[dict] | None:
    """The calls one message makes (None when it makes none); raises CallParseError for an unreadable one."""
    if msg.get("function_call"):
        return [normalize_call(msg["function_call"])]
    if msg.get("tool_calls"):
        return [normalize_call(tc.get("function", tc) if isinstance(tc, dict) else tc) for tc in msg["tool_calls"]]
    if msg.get("role") == "tool_call":
        value = _literal(_text(msg.get("content")))
        return [normalize_call(v) for v in (value if isinstance(value, list) else [value])]
    return None


def toucan_turns(messages: list[dict]) -> list[Turn]:
    """Upstream messages -> turns; each parallel step becomes one assistant turn holding all its calls."""
    turns: list[Turn] = []
    step: Turn | None = None  # the assistant turn collecting the calls of the current step
    for msg in messages:
        if not isinstance(msg, dict):
            raise ValueError(f"message is a {type(msg).__name__}, not an object")
        role = msg.get("role")
        text = _text(msg.get("content")).strip()
        try:
            calls = _message_calls(msg)
        except CallParseError as exc:
            calls, error = [], str(exc)
        else:
            error = None
        if calls is not None:
            if step is None or text:
                step = Turn("assistant", text)
                turns.append(step)
            step.calls.extend(calls)
            step.call_error = step.call_error or error
            continue
        if role == "assistant" and not text:
            continue  # reasoning only: neither history nor a step boundary
        step = None
        if role in _RESULT_ROLES:
            turns.append(Turn("tool", _text(msg.get("content"))))
        elif role in ("user", "assistant", "system"):
            if not isinstance(msg.get("content"), str):
                raise ValueError(f"{role} message without text content: {str(msg)[:120]}")
            turns.append(Turn(role, msg["content"]))
        else:
            raise ValueError(f"message with unknown role {role!r}")
    return turns


class ToucanRawConverter:
    """``convert(record, index)`` for the streaming pipeline, with the CLI's filters."""

    def __init__(self, filters: Sequence[QualityFilter] = (), subsets: Iterable[str] | None = None,
                 drop_no_call_turns: bool = False):
        self.filters = list(filters)
        self.subsets = set(subsets) if subsets else None
        self.drop_no_call_turns = drop_no_call_turns
        self.matched_by_prefix = 0

    def __call__(self, record: Any, index: int) -> list[Candidate | Rejection]:
        if not isinstance(record, dict):
            return [Rejection("malformed_record", str(record)[:200], index)]
        subset = str(record.get("subset_name") or "")
        if self.subsets is not None and subset not in self.subsets:
            return [Rejection("subset_not_selected", f"subset {subset!r} not in --subsets", index)]
        rejection = self._quality(record, index)
        if rejection is not None:
            return [rejection]
        try:
            messages = _as_json(record.get("messages"))
        except json.JSONDecodeError as exc:
            return [Rejection("messages_malformed", f"messages is not JSON: {exc}", index)]
        if not isinstance(messages, list) or not messages:
            return [Rejection("messages_malformed", "messages is not a non-empty list", index)]
        if not record.get("available_tools"):
            return [Rejection("no_tools", "available_tools is empty", index)]
        tools = normalize_tools(record["available_tools"])
        turns = toucan_turns(messages)
        self._match_prefixed_names(turns, {t["function"]["name"] for t in tools})
        if "irrelevan" in subset.lower() and any(t.calls for t in turns):
            return [Rejection("irrelevance_with_call", "an irrelevance trajectory that calls a tool", index)]
        out = split_dialogue(turns, tools, DATA_SOURCE, index, self.drop_no_call_turns)
        for c in out:
            if isinstance(c, Candidate):
                c.subset = subset or None
                c.extra_ground_truth = {"gold_format": "nested"}
        return out

    def _quality(self, record: dict, index: int) -> Rejection | None:
        if not self.filters:
            return None
        assessments = {}
        for column in (QUESTION, RESPONSE):
            try:
                value = _as_json(record.get(column))
            except json.JSONDecodeError:
                value = None
            assessments[column] = value if isinstance(value, dict) else {}
        for f in self.filters:
            columns = [f.column] if f.column else [QUESTION, RESPONSE]
            found = next(((c, s) for c in columns if (s := _score(assessments[c], f.field)) is not None), None)
            if found is None:
                return Rejection("quality_assessment_missing", f"no {f.field} rating in {' or '.join(columns)}", index)
            column, score = found
            if score < f.minimum:
                return Rejection(f.reason(column), f"{f.field} {score:g} < {f.minimum:g}", index)
        return None

    def _match_prefixed_names(self, turns: list[Turn], names: set[str]) -> None:
        for turn in turns:
            for call in turn.calls:
                if call["name"] in names:
                    continue
                matches = [n for n in names if n.endswith("-" + call["name"])]
                if len(matches) == 1:
                    call["name"] = matches[0]
                    self.matched_by_prefix += 1


def _parquet_files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    files = sorted(glob.glob(os.path.join(path, "*.parquet")))
    if not files:
        raise FileNotFoundError(f"no .parquet file under {os.path.abspath(path)} (expected raw Toucan-1.5M shards, "
                                "e.g. Toucan-1.5M/Qwen3/train-*.parquet, or a local Hugging Face dataset folder)")
    return files


def _parquet_batches(files: list[str], batch_size: int) -> Iterator[list[dict]]:
    for f in files:
        pf = pq.ParquetFile(f)
        columns = [c for c in COLUMNS if c in pf.schema_arrow.names]
        for batch in pf.iter_batches(batch_size=batch_size, columns=columns):
            yield batch.to_pylist()


def iter_input(path: str, batch_size: int) -> tuple[int, Iterator[list[dict]]]:
    """``(number of records, batches of records)`` for a parquet file, a folder of shards or an HF folder."""
    if not os.path.exists(path):
        raise hf_local.missing_input(path)
    if hf_local.detect(path):
        return hf_local.count_rows(path), hf_local.iter_hf_batches(path, batch_size, COLUMNS)
    files = _parquet_files(path)
    total = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    return total, _parquet_batches(files, batch_size)


def _quality_spec(text: str) -> QualityFilter:
    field, sep, minimum = text.partition("=")
    try:
        return QualityFilter(field.strip(), float(minimum))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=MIN (e.g. completeness=4), got {text!r}") from None


def build_raw_parser() -> argparse.ArgumentParser:
    parser = build_parser(SOURCE, __doc__.splitlines()[0])
    add_turn_arguments(parser)
    parser.add_argument("--min_question_quality", type=float, default=None,
                        help="keep records whose question_quality rating is at least this (1-5)")
    parser.add_argument("--min_response_quality", type=float, default=None,
                        help="keep records whose response overall_score is at least this (1-5)")
    parser.add_argument("--min_quality", nargs="*", type=_quality_spec, default=[], metavar="NAME=MIN",
                        help="keep records whose rating NAME (either assessment column) is at least MIN")
    parser.add_argument("--subsets", default="", help="comma-separated subset_name values to keep (default: all)")
    parser.add_argument("--batch_size", type=int, default=256, help="records per parquet batch")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, warnings only")
    return parser


def main(argv: Sequence[str] | None = None) -> Report:
    args = build_raw_parser().parse_args(argv)
    level = "WARNING" if args.quiet else args.log_level.upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    named = [("question_quality", args.min_question_quality, QUESTION),
             ("overall_score", args.min_response_quality, RESPONSE)]
    filters = [QualityFilter(field, minimum, column) for field, minimum, column in named if minimum is not None]
    filters += args.min_quality
    convert = ToucanRawConverter(filters, [s.strip() for s in args.subsets.split(",") if s.strip()],
                                 args.drop_no_call_turns)
    opts = options_from_args(args)
    opts.progress = progress_enabled(not (args.no_progress or args.quiet))
    total, batches = iter_input(args.input, args.batch_size)
    return run_streaming(SOURCE, str(args.input), batches, total, convert, opts,
                         late_notes=lambda: {"calls_matched_by_server_prefix": convert.matched_by_prefix})


if __name__ == "__main__":
    main()
