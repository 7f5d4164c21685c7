"""Raw Toucan-1.5M (Apache-2.0) -> verl RL parquet, one row per user turn, streamed shard by shard.

    python -m data_prep.toucan_raw --input Toucan-1.5M/Qwen3 --output_dir data/toucan_raw \\
        [--min_question_quality 4] [--min_response_quality 4] [--min_quality completeness=4 order_correctness=1] \\
        [--irrelevance_quality question|reject] [--subsets single-turn-original,multi-turn] [--batch_size 256] \\
        [--quiet]

``--input`` is one parquet file, a folder of parquet shards (name order) or a local Hugging Face dataset folder
(``data_prep.hf_local``; a snapshot root such as ``Toucan-1.5M/``, with the shards in config sub-folders).
Columns read: ``uuid, subset_name, messages, available_tools, question_quality_assessment,
response_quality_assessment`` (``metadata``, the largest, is never read); the SFT config's ``tools`` column
stands in for ``available_tools`` when that is absent.

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

Also read: OpenAI ``tool_calls`` lists, ``role: "tool"`` results, and the SFT config of upstream's ms-swift
converter (``data/ms_swift_format_converter.ipynb``): a ``tools`` column (JSON text), ``tool_call`` messages whose
content is ``str(function_call)``, a python-literal dict read with the bounded ``ast.literal_eval`` (never
``eval``) into a real call, consecutive ``tool_call`` messages one parallel step, and ``tool_response`` results.

A call answered upstream with ``Tool <name> does not exists.`` (Qwen-Agent's refusal of an unknown name) never
ran: it stays in later prompts as the dialogue had it but leaves gold (``notes.gold_calls_dropped``); a user turn
whose every call was refused is rejected (``gold_calls_all_failed``). Any other call whose name is missing from
the tools is matched to the one tool named ``<server>-<name>`` (upstream prefixes tool names with the server for
some configs, not their calls), counted under ``notes.calls_matched_by_server_prefix``.

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
filter needs is rejected as ``quality_assessment_missing``, except irrelevance records, whose response assessment
upstream leaves empty: their filters read ``question_quality`` with the same thresholds (``low_question_quality``;
counted in ``notes.irrelevance_gated_on_question_quality``), or with ``--irrelevance_quality reject`` they are
rejected as ``irrelevance_response_unrated``.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import pyarrow.parquet as pq

from data_prep import hf_local
from data_prep.calls import CallParseError, normalize_call
from data_prep.cli import build_parser, options_from_args
from data_prep.conversion_report import Report
from data_prep.dialogue import Turn, add_turn_arguments, split_dialogue
from data_prep.row_builder import Candidate, Rejection
from data_prep.stream import progress_enabled, run_streaming
from data_prep.tool_schema import normalize_tools
from slca_verl.toolcall import limits

logger = logging.getLogger(__name__)

SOURCE = "toucan_raw"
DATA_SOURCE = "toucan_toolcall"
COLUMNS = [
    "uuid",
    "subset_name",
    "messages",
    "available_tools",
    "tools",
    "question_quality_assessment",
    "response_quality_assessment",
]
QUESTION, RESPONSE = "question_quality_assessment", "response_quality_assessment"
_RESULT_ROLES = {"function", "tool", "tool_response", "observation"}
#: Qwen-Agent's answer to a call whose name is not one of its tools (``fncall_agent._call_tool``): the call never ran.
_NO_SUCH_TOOL = re.compile(r"\s*Tool (?P<name>.+?) does not exists?\.?\s*", re.S)
#: ``--irrelevance_quality``: how records of the irrelevance subset, whose response assessment is empty upstream,
#: meet a response-quality filter.
IRRELEVANCE_QUALITY = ("question", "reject")
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
    """A ``tool_call`` message's content: JSON, or the python literal upstream's ms-swift converter writes
    (``str(function_call)``: ``{'name': 'x', 'arguments': '{"city": "Paris"}', 'call_id': ...}``), read with the
    bounded ``ast.literal_eval`` of :mod:`slca_verl.toolcall.limits` (never ``eval``)."""
    try:
        return limits.loads(text, "tool_call content")
    except json.JSONDecodeError:
        pass
    try:
        return limits.literal_eval(text, "tool_call content")
    except (ValueError, SyntaxError, TypeError) as exc:
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
    """Upstream messages -> turns; each parallel step (consecutive call messages: ``function_call`` assistant
    messages or ``tool_call`` messages) becomes one assistant turn holding all its calls."""
    turns: list[Turn] = []
    step: Turn | None = None  # the assistant turn collecting the calls of the current step
    for msg in messages:
        if not isinstance(msg, dict):
            raise ValueError(f"message is a {type(msg).__name__}, not an object")
        role = msg.get("role")
        text = "" if role == "tool_call" else _text(msg.get("content")).strip()  # its content is the call itself
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

    def __init__(
        self,
        filters: Sequence[QualityFilter] = (),
        subsets: Iterable[str] | None = None,
        drop_no_call_turns: bool = False,
        irrelevance_quality: str = "question",
    ):
        if irrelevance_quality not in IRRELEVANCE_QUALITY:
            raise ValueError(f"irrelevance_quality must be one of {IRRELEVANCE_QUALITY}, got {irrelevance_quality!r}")
        self.filters = list(filters)
        self.subsets = set(subsets) if subsets else None
        self.drop_no_call_turns = drop_no_call_turns
        self.irrelevance_quality = irrelevance_quality
        self.matched_by_prefix = 0  # calls renamed to their server-prefixed tool (each one ran upstream)
        self.failed_upstream = 0  # calls upstream refused (no such tool): kept in prompts, left out of gold
        self.gated_on_question = 0  # irrelevance records whose response filters read the question rating

    def notes(self) -> dict[str, Any]:
        """The converter's counts for the report's ``notes``."""
        return {
            "calls_matched_by_server_prefix": self.matched_by_prefix,
            "gold_calls_dropped": {"failed_upstream_no_such_tool": self.failed_upstream},
            "irrelevance_gated_on_question_quality": self.gated_on_question,
        }

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
        column = "available_tools" if record.get("available_tools") else "tools"  # the SFT config: "tools"
        if not record.get(column):
            return [Rejection("no_tools", "available_tools (or the SFT config's tools) is empty", index)]
        tools = normalize_tools(record[column])
        turns = toucan_turns(messages)
        self._resolve_names(turns, {t["function"]["name"] for t in tools})
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
        subset = str(record.get("subset_name") or "")
        unrated = "irrelevan" in subset.lower() and not any(
            _score(assessments[RESPONSE], k) is not None for k in assessments[RESPONSE]
        )
        if unrated:  # upstream never rates the response of an irrelevance record
            return self._irrelevance_quality(assessments[QUESTION], index)
        for f in self.filters:
            columns = [f.column] if f.column else [QUESTION, RESPONSE]
            found = next(((c, s) for c in columns if (s := _score(assessments[c], f.field)) is not None), None)
            if found is None:
                return Rejection("quality_assessment_missing", f"no {f.field} rating in {' or '.join(columns)}", index)
            column, score = found
            if score < f.minimum:
                return Rejection(f.reason(column), f"{f.field} {score:g} < {f.minimum:g}", index)
        return None

    def _irrelevance_quality(self, question: dict, index: int) -> Rejection | None:
        """The filters of an irrelevance record without a response rating: each is read off the question's
        ``question_quality`` (same threshold) by default; ``--irrelevance_quality reject`` rejects the record."""
        if self.irrelevance_quality == "reject":
            return Rejection(
                "irrelevance_response_unrated",
                "irrelevance record: upstream has no response rating to filter on (--irrelevance_quality reject)",
                index,
            )
        self.gated_on_question += 1
        score = _score(question, "question_quality")
        if score is None:
            return Rejection(
                "quality_assessment_missing", "irrelevance record without a question_quality rating", index
            )
        for f in self.filters:
            own = _score(question, f.field) if f.column in (None, QUESTION) else None
            field, value = (f.field, own) if own is not None else ("question_quality", score)
            if value < f.minimum:
                return Rejection(
                    "low_question_quality", f"{field} {value:g} < {f.minimum:g} (irrelevance record)", index
                )
        return None

    def _resolve_names(self, turns: list[Turn], names: set[str]) -> None:
        """Calls upstream refused leave gold; a call name missing from the tools is renamed to the one tool named
        ``<server>-<name>`` only when the call ran upstream.

        Qwen-Agent answers a call whose name is not one of its tools with ``Tool <name> does not exists.``; that
        call did nothing (the model then usually calls the prefixed tool), so it stays in the prompt history as the
        dialogue had it but is not a step to imitate. Renaming it would write gold ``[[X], [X]]`` for ``[[X]]``.
        """
        for turn, results in _calls_with_results(turns):
            kept = []
            for call, result in zip(turn.calls, results):
                refused = (
                    result is not None
                    and (m := _NO_SUCH_TOOL.fullmatch(result))
                    and m.group("name").strip() == call["name"]
                )
                if refused:
                    self.failed_upstream += 1
                    continue
                kept.append(call)
                if call["name"] in names:
                    continue
                matches = [n for n in names if n.endswith("-" + call["name"])]
                if len(matches) == 1:
                    call["name"] = matches[0]
                    self.matched_by_prefix += 1
            if len(kept) != len(turn.calls):
                turn.gold_calls = kept


def _calls_with_results(turns: list[Turn]) -> Iterator[tuple[Turn, list[str | None]]]:
    """Each assistant turn with calls, and the text of each call's result (None when there is none): the results
    follow their step in the calls' order, as upstream writes them."""
    for i, turn in enumerate(turns):
        if turn.role != "assistant" or not turn.calls:
            continue
        results: list[str | None] = []
        j = i + 1
        while j < len(turns) and turns[j].role == "tool" and len(results) < len(turn.calls):
            results.append(turns[j].content)
            j += 1
        yield turn, results + [None] * (len(turn.calls) - len(results))


def _parquet_files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    files = sorted(glob.glob(os.path.join(path, "*.parquet")))
    if not files:
        raise FileNotFoundError(
            f"no .parquet file under {os.path.abspath(path)} (expected raw Toucan-1.5M shards, "
            "e.g. Toucan-1.5M/Qwen3/train-*.parquet, or a local Hugging Face dataset folder)"
        )
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
    parser.add_argument(
        "--min_question_quality",
        type=float,
        default=None,
        help="keep records whose question_quality rating is at least this (1-5)",
    )
    parser.add_argument(
        "--min_response_quality",
        type=float,
        default=None,
        help="keep records whose response overall_score is at least this (1-5)",
    )
    parser.add_argument(
        "--min_quality",
        nargs="*",
        type=_quality_spec,
        default=[],
        metavar="NAME=MIN",
        help="keep records whose rating NAME (either assessment column) is at least MIN",
    )
    parser.add_argument(
        "--irrelevance_quality",
        choices=IRRELEVANCE_QUALITY,
        default="question",
        help="irrelevance records have no response rating upstream: gate them on their "
        "question_quality with the same thresholds (default), or reject them "
        "(irrelevance_response_unrated); only when a quality filter is given",
    )
    parser.add_argument("--subsets", default="", help="comma-separated subset_name values to keep (default: all)")
    parser.add_argument("--batch_size", type=int, default=256, help="records per parquet batch")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, warnings only")
    return parser


def main(argv: Sequence[str] | None = None) -> Report:
    args = build_raw_parser().parse_args(argv)
    level = "WARNING" if args.quiet else args.log_level.upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    named = [
        ("question_quality", args.min_question_quality, QUESTION),
        ("overall_score", args.min_response_quality, RESPONSE),
    ]
    filters = [QualityFilter(field, minimum, column) for field, minimum, column in named if minimum is not None]
    filters += args.min_quality
    convert = ToucanRawConverter(
        filters,
        [s.strip() for s in args.subsets.split(",") if s.strip()],
        args.drop_no_call_turns,
        args.irrelevance_quality,
    )
    opts = options_from_args(args)
    opts.progress = progress_enabled(not (args.no_progress or args.quiet))
    total, batches = iter_input(args.input, args.batch_size)
    return run_streaming(SOURCE, str(args.input), batches, total, convert, opts, late_notes=convert.notes)


if __name__ == "__main__":
    main()
