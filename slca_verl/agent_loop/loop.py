"""``slca_tool_agent``: verl's ``ToolAgentLoop`` with per-sample SGLS tools and per-token segment ids.

Enable it (verl 0.9.1, v1 trainer)::

    actor_rollout_ref.rollout.agent.default_agent_loop=slca_tool_agent   # or the dataset column agent_name
    actor_rollout_ref.rollout.agent.agent_loop_config_path=pkg_path/slca_verl/config/agent_loop.yaml
    reward.custom_reward_function.path=pkg://slca_verl.agent_loop.reward
    reward.custom_reward_function.name=compute_score
    algorithm.adv_estimator=slca_grpo trainer.v1.trainer_mode=slca_sync

What it adds to verl's state machine (PENDING → GENERATING ⇄ PROCESSING_TOOLS → TERMINATED), which it reuses as is:

- **per-sample tools**: the row's own schemas (``extra_info.tool_schemas``, ``tools`` or the ground truth's) are
  offered to the chat template and every call is answered by one SGLS tool object with those schemas. A row without
  schemas, a call to a tool the row does not have, or a call that cannot be parsed gets an ``Error: …`` tool
  response and a counted metric — never a fallback to other tools;
- **segment ids**: each assistant turn's tokens are TOOL (the turn wrote a ``<tool_call>`` outside ``<think>``) or
  SUMMARY (it did not); tool responses and boundary tokens are OBSERVATION. An episode cut by the length or turn
  limit on a tool-call turn has no summary;
- **reward pieces**: the assistant turns' texts and the tool responses go to the reward through
  ``extra_fields["slca_trajectory"]`` (read by :func:`slca_verl.agent_loop.reward.compute_score`);
- **reward layout**: the output is an :class:`SLCAAgentLoopOutput`, whose ``as_dict`` (v1 rollout) writes
  ``slca_segment_ids`` and a segment-level ``rm_scores``;
- **metrics** per trajectory in ``extra_fields["slca_agent_metrics"]`` (see :data:`METRIC_KEYS`).
"""

from __future__ import annotations

import contextvars
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import register
from verl.experimental.agent_loop.tool_agent_loop import (
    AgentData,
    AgentState,
    ToolAgentLoop,
)
from verl.tools.schemas import ToolResponse

from slca_verl.agent_loop.output import (
    SLCAAgentLoopOutput,
    resolve_layout,
    segment_ids_for_turns,
)
from slca_verl.agent_loop.parser import FormatToolParser, SLCAHermesToolParser, parsed_record
from slca_verl.agent_loop.tools import (
    get_sgls_tool,
    row_tool_schemas,
    tool_names,
)
from slca_verl.estimators.segments import SUMMARY, TOOL
from slca_verl.estimators.slca_grpo import SlcaSettings
from slca_verl.sgls.client import ServiceDown
from slca_verl.toolcall.formats import get_format, parse_error_response
from slca_verl.toolcall.rows import plain
from slca_verl.toolcall.text import truncate
from slca_verl.trainer.reward_layout import credit_layout

logger = logging.getLogger(__name__)

AGENT_NAME = "slca_tool_agent"

#: Per-trajectory metrics, in ``extra_fields["slca_agent_metrics"]`` (same keys on every row).
METRIC_KEYS = (
    "turns",  # assistant turns that produced trained tokens
    "tool_calls",  # calls answered (one per call object; malformed blocks count as one call)
    "redundant_calls",  # calls identical (name + canonical arguments) to an earlier call of the trajectory
    "invalid_calls",  # malformed + no_schema + unknown_tool + validation_error
    "malformed_calls",  # unreadable <tool_call> blocks, non-object arguments, unmatched tags
    "unknown_tool_calls",  # a tool the row does not offer
    "no_schema_calls",  # any call in a row without tool schemas
    "validation_errors",  # rejected by SGLS against the schema (missing / wrong arguments)
    "simulator_errors",  # the simulator failed (not the policy's fault)
    "internal_errors",  # the loop itself raised while answering a call (a bug): the call got an error response
    "dropped_calls",  # parallel calls beyond max_parallel_calls (not executed)
    "has_summary",  # 1 when the episode ends on a turn without a tool call
    "has_tool_segment",  # 1 when some trained turn made a tool call
    "tool_tokens",  # trained tokens of tool-call turns (abstention_credit's decision token not counted)
    "summary_tokens",  # trained tokens labelled SUMMARY in slca_segment_ids
    "decision_tokens",  # 1 when abstention_credit labelled the first reply token of a tool-less rollout TOOL
)

_STATE: contextvars.ContextVar[_Trajectory | None] = contextvars.ContextVar("slca_trajectory", default=None)
_warned_no_schema = False


@dataclass
class _Trajectory:
    """What the loop learns about one trajectory while verl's state machine runs it."""

    schemas: list[dict] | None
    schema_note: str  # the schemas' source, or why there are none
    scope: str
    names: set[str] = field(default_factory=set)
    turns: list[tuple[int, int]] = field(default_factory=list)  # (start, end) of each assistant turn's tokens
    tool_responses: list[str] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)  # earlier calls, as SGLS context
    seen: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=lambda: {k: 0 for k in METRIC_KEYS})
    parsed: list[dict | None] = field(default_factory=list)  # per turn, non-hermes formats: what the loop parsed


def _scalar(value: Any) -> Any:
    item = getattr(value, "item", None)
    return item() if callable(item) and getattr(value, "shape", None) == () else value


def check_reward_config(config: Any, reward_layout: str) -> None:
    """Refuse configurations where the segment reward layout cannot reach the trainer.

    Raises:
        ValueError: naming the setting to change.
    """
    if reward_layout == "scalar":
        return
    if not OmegaConf.select(config, "trainer.use_v1", default=True):
        raise ValueError(
            f"{AGENT_NAME}: reward_layout '{reward_layout}' needs verl's v1 trainer (trainer.use_v1=True): the legacy "
            "trainer puts the scalar score on the last token and never sees segment ids. Set trainer.use_v1=True, or "
            "reward_layout: scalar in the agent loop YAML (slca_grpo then falls back to response_mask runs)."
        )
    if OmegaConf.select(config, "reward.reward_model.enable", default=False) and not OmegaConf.select(
        config, "reward.reward_model.enable_resource_pool", default=False
    ):
        raise ValueError(
            f"{AGENT_NAME}: with reward.reward_model.enable=True and reward.reward_model.enable_resource_pool=False, "
            "verl's RewardLoopManager scores the batch after the rollout from token ids alone and overwrites "
            "rm_scores with one scalar per row, so the segment layout is lost. Set "
            "reward.reward_model.enable_resource_pool=True (reward computed during the rollout), or "
            "reward.reward_model.enable=False with the HierR custom_reward_function, or reward_layout: scalar."
        )


@register(AGENT_NAME)
class SLCAToolAgentLoop(ToolAgentLoop):
    """Segment-aware multi-turn tool agent over SGLS (see the module docstring).

    Keyword arguments (from the agent loop YAML; each ``None`` keeps verl's ``rollout.multi_turn`` value):
        reward_layout: reward layout name (``slca`` for slca_grpo, ``scalar`` for grpo, or a registered one).
        sgls: inline SGLS config (``backend``, ``base_urls``, ``model``, ``cache_scope`` …, see sgls_tool.yaml).
        sgls_config_path: verl tool YAML whose SGLSTool ``config`` block to use (``pkg://`` allowed).
        max_assistant_turns, max_user_turns, max_parallel_calls, max_tool_response_length (characters),
        tool_response_truncate_side (left | right | middle): verl's multi-turn limits.
        render_tools_in_prompt: ``auto`` (give the row's schemas to the chat template unless the system prompt
            already lists ``<tools>``), ``true`` or ``false``.

    Example (a test or script; verl builds it the same way through hydra)::

        loop = SLCAToolAgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=tok,
                                 processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data),
                                 hf_model_type="qwen3", sgls={"backend": "offline"})
        out = await loop.run({"temperature": 1.0}, raw_prompt=messages, extra_info=row["extra_info"], uid="g0")
        out.segment_ids, out.extra_fields["slca_agent_metrics"]
    """

    def __init__(
        self,
        *args,
        reward_layout: str = "slca",
        sgls: dict | None = None,
        sgls_config_path: str | None = None,
        max_assistant_turns: int | None = None,
        max_user_turns: int | None = None,
        max_parallel_calls: int | None = None,
        max_tool_response_length: int | None = None,
        tool_response_truncate_side: str | None = None,
        render_tools_in_prompt: Any = "auto",
        tools: Any = None,
        **kwargs,
    ):
        super().__init__(*args, tools=tools, **kwargs)
        for name, value in (
            ("max_assistant_turns", max_assistant_turns),
            ("max_user_turns", max_user_turns),
            ("max_parallel_calls", max_parallel_calls),
            ("max_tool_response_length", max_tool_response_length),
            ("tool_response_truncate_side", tool_response_truncate_side),
        ):
            if value is not None:
                setattr(self, name, value)
        self.call_format = get_format(self.tool_parser_name)  # an unknown format fails here, naming the key
        if self.tool_parser_name == "hermes":
            self.tool_parser = SLCAHermesToolParser(self.tokenizer)
        elif self.call_format.name != "hermes":  # verl's parser of that format, with this project's checks on top
            self.tool_parser = FormatToolParser(self.tokenizer, self.call_format, self.tool_parser)
        # algorithm.slca.*, read as the estimator reads them (a bad value fails here too, naming the key)
        settings = SlcaSettings.from_config(OmegaConf.select(self.config, "algorithm", default=None))
        credit = settings.credit
        # +algorithm.slca.credit=turn: the estimator's per-turn mode needs each turn's step reward on that turn
        if credit_layout(reward_layout, credit) != reward_layout:
            reward_layout = credit_layout(reward_layout, credit)
            logger.info("%s: reward layout %s (algorithm.slca.credit=turn)", AGENT_NAME, reward_layout)
        resolve_layout(reward_layout)  # an unknown name fails here, not after the first rollout
        check_reward_config(self.config, reward_layout)
        self.reward_layout = reward_layout
        # +algorithm.slca.abstention_credit: the estimator's option, carried out here (see label_decision_token)
        # (not with credit=turn, which credits a direct reply's decision itself: the token would read as a tool turn)
        self.abstention_credit = settings.abstention_credit  # false under credit=turn (SlcaSettings)
        self.render_tools_in_prompt = render_tools_in_prompt
        self.sgls_tool = get_sgls_tool(plain(sgls), sgls_config_path, tools.tools if tools else None)

    # ------------------------------------------------------------------ verl hooks

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> SLCAAgentLoopOutput:
        global _warned_no_schema
        schemas, note = row_tool_schemas(kwargs)
        if schemas is None and not _warned_no_schema:
            _warned_no_schema = True
            logger.warning("%s: a row has no tool schemas (%s); its calls get error responses", AGENT_NAME, note)
        uid = _scalar(kwargs.get("uid"))
        traj = _Trajectory(
            schemas=schemas,
            schema_note=note,
            scope=self.sgls_tool.scope_key(group_id=None if uid is None else str(uid)),
            names=set(tool_names(schemas)) if schemas else set(),
        )
        if isinstance(self.tool_parser, FormatToolParser):
            self.tool_parser.row_tools = schemas
        token = _STATE.set(traj)
        try:
            output = await super().run(sampling_params, **kwargs)
        finally:
            _STATE.reset(token)
        return self._finish(output, traj)

    async def _handle_pending_state(self, agent_data: AgentData, sampling_params: dict[str, Any]) -> AgentState:
        traj = _STATE.get()
        agent_data._active_tools = {name: self.sgls_tool for name in traj.names}
        agent_data._active_tool_schemas = traj.schemas if self._render_tools(agent_data.messages, traj) else None
        return await super()._handle_pending_state(agent_data, sampling_params)

    async def _handle_generating_state(
        self, agent_data: AgentData, sampling_params: dict[str, Any], ignore_termination: bool = False
    ) -> AgentState:
        traj = _STATE.get()
        start = len(agent_data.response_mask)
        own = isinstance(self.tool_parser, FormatToolParser)
        if own:
            self.tool_parser.last_parsed = None  # a turn cut by the length limit is never parsed
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        traj.turns.append((start, len(agent_data.response_mask)))
        if own:
            last = self.tool_parser.last_parsed
            traj.parsed.append(parsed_record(last) if last is not None else None)
        if state == AgentState.PROCESSING_TOOLS and self.max_parallel_calls:
            traj.counts["dropped_calls"] += max(0, len(agent_data.tool_calls) - self.max_parallel_calls)
        return state

    async def _handle_processing_tools_state(self, agent_data: AgentData) -> AgentState:
        traj = _STATE.get()
        n_messages, n_tokens = len(agent_data.messages), len(agent_data.response_mask)
        state = await super()._handle_processing_tools_state(agent_data)
        if len(agent_data.response_mask) > n_tokens:  # the responses made it into the context (not cut by length)
            for message in agent_data.messages[n_messages:]:
                if message.get("role") == "tool":
                    content = message.get("content")
                    traj.tool_responses.append(content if isinstance(content, str) else json.dumps(content))
        return state

    def _build_assistant_message(self, content: str, agent_data: AgentData) -> dict[str, Any]:
        calls = agent_data.tool_calls
        agent_data.tool_calls = [c for c in calls if not getattr(c, "error", None)]
        try:
            return super()._build_assistant_message(content, agent_data)
        finally:
            agent_data.tool_calls = calls

    async def _call_tool(self, tool_call, tools_kwargs: dict[str, Any], agent_data: AgentData):
        """Answer one call through SGLS with the row's schemas; errors become tool responses, never exceptions.

        Defence in depth: whatever answering one call raises (a bug here or in SGLS) ends as an error response
        counted in ``internal_errors``, so one trajectory's bad call can never fail verl's gather of the batch."""
        traj = _STATE.get()
        traj.counts["tool_calls"] += 1
        try:
            return await self._answer_call(tool_call, traj)
        except ServiceDown:  # the simulator is gone (every call failing for max_outage_s): stop, naming it
            raise
        except Exception as e:
            logger.exception("%s: answering a call of %r raised", AGENT_NAME, getattr(tool_call, "name", None))
            traj.counts["internal_errors"] += 1
            return (
                ToolResponse(text=f"Error: the tool call failed ({type(e).__name__})."),
                0.0,
                {"sgls_status": "error"},
            )

    async def _answer_call(self, tool_call, traj: _Trajectory):
        error = getattr(tool_call, "error", None)
        if error:
            return self._reject(traj, "malformed_calls", parse_error_response(error))
        name = tool_call.name
        key = json.dumps([name, tool_call.arguments], ensure_ascii=False)
        try:
            arguments = json.loads(tool_call.arguments)
            key = json.dumps([name, arguments], sort_keys=True, ensure_ascii=False)
        except (TypeError, ValueError) as e:
            arguments, error = None, f"Error: the arguments of '{name}' are not valid JSON ({e})."
        if key in traj.seen:
            traj.counts["redundant_calls"] += 1
        traj.seen.add(key)
        if traj.schemas is None:
            return self._reject(
                traj,
                "no_schema_calls",
                f"Error: no tools are available for this request, so '{name}' cannot be called "
                f"(the dataset row has no tool schemas: {traj.schema_note}).",
            )
        if name not in traj.names:
            return self._reject(
                traj, "unknown_tool_calls", f"Error: unknown tool '{name}'. Available tools: {sorted(traj.names)}."
            )
        if error:
            return self._reject(traj, "malformed_calls", error)
        res = await self.sgls_tool.call(
            name, arguments, tool_schemas=traj.schemas, scope=traj.scope, context=list(traj.history)
        )
        if res.status == "validation_error":
            traj.counts["validation_errors"] += 1
            traj.counts["invalid_calls"] += 1
        elif res.status == "simulator_error":
            traj.counts["simulator_errors"] += 1
        traj.history.append({"name": name, "arguments": arguments, "response": res.text})
        text = truncate(res.text, self.max_tool_response_length, self.tool_response_truncate_side)
        return ToolResponse(text=text), 0.0, {"sgls_status": res.status}

    # ------------------------------------------------------------------ helpers

    def _render_tools(self, messages: list[dict], traj: _Trajectory) -> bool:
        if not traj.schemas:
            return False
        mode = self.render_tools_in_prompt
        if isinstance(mode, bool):
            return mode
        if str(mode).lower() in ("true", "false"):
            return str(mode).lower() == "true"
        system = next((m for m in messages if m.get("role") == "system"), None)
        return not (system and isinstance(system.get("content"), str) and "<tools>" in system["content"])

    @staticmethod
    def _reject(traj: _Trajectory, counter: str, text: str):
        traj.counts[counter] += 1
        traj.counts["invalid_calls"] += 1
        return ToolResponse(text=text), 0.0, {"sgls_status": "rejected"}

    def _finish(self, output, traj: _Trajectory) -> SLCAAgentLoopOutput:
        """Classify turns from the trained tokens, write segment ids, reward pieces and metrics."""
        mask, response = output.response_mask, output.response_ids
        L = len(mask)
        kinds, texts, parsed = [], [], []
        records = traj.parsed if traj.parsed else [None] * len(traj.turns)
        for (start, end), record in zip(traj.turns, records):
            ids = [response[p] for p in range(start, min(end, L)) if mask[p]]
            if not ids:  # a turn entirely past the response length was never trained
                continue
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            # a format whose markers are special tokens loses them in this text: the parse of the turn tells
            attempt = bool(record and (record["open"] or record["close"])) or self.call_format.has_call_attempt(text)
            kinds.append((start, end, TOOL if attempt else SUMMARY))
            texts.append(text)
            parsed.append(record)
        segment_ids = segment_ids_for_turns(mask, kinds)
        counts = traj.counts
        counts["turns"] = len(texts)
        counts["tool_tokens"] = segment_ids.count(TOOL)
        counts["summary_tokens"] = segment_ids.count(SUMMARY)
        counts["has_summary"] = int(counts["summary_tokens"] > 0)
        counts["has_tool_segment"] = int(counts["tool_tokens"] > 0)
        counts["decision_tokens"] = int(self.abstention_credit and label_decision_token(segment_ids))
        extra = dict(output.extra_fields)
        extra["slca_trajectory"] = {
            "assistant_texts": texts,
            "tool_responses": list(traj.tool_responses),
            "format": self.call_format.name,
        }
        if traj.parsed:  # not hermes: HierR scores the calls the loop parsed and ran, not a re-read of the text
            extra["slca_trajectory"]["parsed_turns"] = parsed
        extra["slca_agent_metrics"] = dict(counts)
        fields = {k: getattr(output, k) for k in output.model_fields_set}
        fields["extra_fields"] = extra
        return SLCAAgentLoopOutput(**fields, segment_ids=segment_ids, reward_layout=self.reward_layout)


def label_decision_token(segment_ids: list[int]) -> bool:
    """``algorithm.slca.abstention_credit``: in a rollout without a tool segment, label the first reply token — where
    the policy chose to answer instead of writing ``<tool_call>`` — TOOL, in place. The ``slca`` layout then puts
    the rollout's r_tool on it, so the rollout takes part in the tool normalisation and its execution advantage
    lands on its decision, as a caller's does on its ``<tool_call>`` tokens. A one-token reply stays as it is (its
    only token carries r_sum). Returns whether a token was relabelled.
    """
    if TOOL in segment_ids or segment_ids.count(SUMMARY) < 2:
        return False
    segment_ids[segment_ids.index(SUMMARY)] = TOOL
    return True
