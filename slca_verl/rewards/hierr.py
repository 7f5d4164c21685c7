"""HierR: the hierarchical reward of SLCA-GRPO for one rollout, with every part it was made of.

docs/method.md::

    R_tool = Σ_c w_c * c,   c ∈ {fmt, name_f1, key, value, parallel}                (slca_verl.rewards.execution)
    R_sum  = (rating - 1) / 4 from the judge; 0 without a tool response, with a reply under 10 characters,
             or when the judge fails (counted in ``judge_failed``). With ``judge_direct_replies`` a reply
             written without any call on a row whose gold has no calls is judged too (the judge sees no tool
             response and rates whether the reply answers or declines appropriately)
    score  = w_tool * R_tool + w_sum * R_sum                                         (both weights 1.0)

    no-call penalty: gold calls exist and the assistant made no call that parses (a bare, empty, unterminated or
        unreadable <tool_call> block is not a call) → score = -0.5, R_tool = 0, R_sum = -0.5 (on the summary segment)
    any other negative total (negative weights) is routed the same way: R_tool = 0, R_sum = score.

    success = 1[score / (w_tool + w_sum) >= tau]                                     (tau = 0.9)

    gold that cannot be read (a call without a name, arguments that are not an object, a step that is not a list,
    no gold_tool_calls, a ground truth that is not a dict): every component 0, gold_invalid = 1 and the reason, so
    the row teaches nothing instead of being scored as an irrelevance row.

The final reply judged is the text of the last assistant turn, after ``<think>`` stripping, when that turn wrote
no tool call (an episode cut on a tool-call turn has no summary). Tool-call tags are counted in assistant turns only,
so text inside tool responses can never count as a call.

No text a policy writes buys reward (docs/rewards.md, "What text cannot buy"):

- calls are parsed turn by turn, as the agent loop parses them (:func:`parse_turn_calls`): what ran is what is scored;
- the judge is asked only when a call that parses got a tool response: an error answer to a broken call unlocks
  nothing. On a row whose gold has no calls, a reply after calls is not judged (unless ``judge_after_unneeded_calls``,
  the authors' reward), so a call there, valid or not, never out-scores answering directly;
- decoded text (:func:`score_decoded`) holds ``<tool_response>`` runs that the policy may have written itself; when
  verl's turn count (``extra_info.num_turns``) shows more runs than the environment answered, or, without a count,
  a run is not what the agent loop that produced the text answers to the text before it (:func:`unanswerable_runs`;
  the loop: :func:`answering_loop`), the rollout is scored ``min(no_call_penalty, 0)`` on its summary segment with
  ``forged_tool_output`` = those runs.

Example (the agent loop knows its turns, so it skips re-parsing decoded text)::

    out = await score_trajectory(
        ['<tool_call>\\n{"name": "weather", "arguments": {"city": "Paris"}}\\n</tool_call>', "It is 21 °C in Paris."],
        ['{"temp_c": 21}'],
        {"allowed_tools": ["weather"], "gold_tool_calls": [[{"name": "weather", "arguments": {"city": "paris"}}]],
         "question_content": "Weather in Paris?"},
        judge=OfflineProxyJudge(),
    )
    out["score"], out["r_tool"], out["r_sum"]
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

from slca_verl.rewards.baseline_rewards import RLTRWeights, baseline_rewards
from slca_verl.rewards.components import RESULT_KEYS, empty_row, typed_row  # noqa: F401  (RESULT_KEYS re-exported)
from slca_verl.rewards.execution import (
    ExecutionWeights,
    execution_components,
    execution_reward,
    format_score,
    key_value_scores,
    loose_key,
    unmeasured_components,
)
from slca_verl.rewards.judge import Judge, Verdict
from slca_verl.rewards.parsing import (
    ParsedCalls,
    ToolCall,
    parse_ground_truth,
    split_decoded_response,
    strip_think,
)
from slca_verl.sgls.client import ServiceDown
from slca_verl.toolcall.formats import COERCED_ARGUMENTS, get_format, parse_error_response
from slca_verl.toolcall.hermes import merge_turns, parse_tool_calls

logger = logging.getLogger(__name__)

#: the project's agent loop (slca_verl.agent_loop.AGENT_NAME): it answers every call attempt, readable or not
SLCA_AGENT_LOOP = "slca_tool_agent"

# every row carries exactly the component table's keys (verl needs the same reward_extra_info keys on every row)


@dataclass(frozen=True)
class HierRConfig:
    """Every knob of HierR; defaults are the paper's."""

    weights: ExecutionWeights = field(default_factory=ExecutionWeights)
    w_tool: float = 1.0
    w_sum: float = 1.0
    no_call_penalty: float = -0.5
    # credit=turn: the step reward of a tool turn that makes no progress on the gold (a repeated call, a tool the gold
    # does not need, a call past the gold: it costs what a wrong tool name costs, so calling on never beats stopping)
    extra_step_reward: float = -0.25
    # credit=turn: the score at which a nested gold step counts as done, so a turn may be scored on the next one
    # (step_rewards: a call of the step's tools in the step's shape reaches it, half of a parallel step does not)
    step_pass: float = 0.5
    min_reply_chars: int = 10
    success_tau: float = 0.9
    accept_string_arguments: bool = False
    judge_direct_replies: bool = False
    judge_after_unneeded_calls: bool = False  # the authors' reward: judge a reply after calls the gold did not need
    rltr: RLTRWeights = field(default_factory=RLTRWeights)
    # the tool-call format of decoded text (verl's multi_turn.format); slca_tool_agent rollouts carry their own
    tool_call_format: str = "hermes"
    # the agent loop that produced decoded text, for the forgery check without verl's turn count (answering_loop):
    # None = the rollout's evidence in extra_info, else slca_tool_agent
    agent_loop: str | None = None

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> "HierRConfig":
        """Build from flat keys (verl's ``reward_kwargs``): ``w_tool``, ``no_call_penalty``, …, ``weights={fmt:…}``,
        ``rltr={repeat_penalty:…}``. Unknown top-level keys are ignored (they belong to the judge or to verl).

        Raises:
            ValueError: a value of the wrong type or not finite, or an unknown key under ``weights`` / ``rltr``,
                naming ``reward_kwargs.<key>`` (such a value used to make every row an "internal error" scored 0).
        """
        simple = {f.name for f in fields(cls)} - {"weights", "rltr", "tool_call_format", "agent_loop"}
        out = {
            k: _checked_setting(k, kwargs[k], cls.__dataclass_fields__[k].default)
            for k in simple
            if k in kwargs and kwargs[k] is not None
        }
        if kwargs.get("tool_call_format") is not None:
            try:
                out["tool_call_format"] = get_format(str(kwargs["tool_call_format"])).name
            except ValueError as e:
                raise ValueError(f"HierR: reward_kwargs.tool_call_format: {e}") from None
        if kwargs.get("agent_loop") is not None:
            loop = kwargs["agent_loop"]
            if not isinstance(loop, str) or not loop.strip():
                raise ValueError(
                    f"HierR: reward_kwargs.agent_loop={loop!r} must be an agent loop name ({SLCA_AGENT_LOOP} or "
                    "verl's tool_agent)"
                )
            out["agent_loop"] = loop.strip()
        for key, sub_cls in (("weights", ExecutionWeights), ("rltr", RLTRWeights)):
            if not kwargs.get(key):
                continue
            given = kwargs[key]
            if not isinstance(given, dict):
                raise ValueError(f"HierR: reward_kwargs.{key} must be a mapping, got {given!r}")
            known = {f.name: f.default for f in fields(sub_cls)}
            unknown = sorted(set(given) - set(known))
            if unknown:
                raise ValueError(f"HierR: unknown keys under reward_kwargs.{key}: {unknown}; known: {sorted(known)}")
            out[key] = sub_cls(**{k: _checked_setting(f"{key}.{k}", v, known[k]) for k, v in given.items()})
        return cls(**out)


def _checked_setting(key: str, value: Any, default: Any) -> Any:
    """``value`` as the type of ``default`` (an int is a valid float), or a ValueError naming the key."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"HierR: reward_kwargs.{key}={value!r} must be true or false")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"HierR: reward_kwargs.{key}={value!r} must be a number")
    if isinstance(default, int):
        if value != int(value):
            raise ValueError(f"HierR: reward_kwargs.{key}={value!r} must be an integer")
        return int(value)
    if not math.isfinite(value):
        raise ValueError(f"HierR: reward_kwargs.{key}={value!r} must be finite")
    return float(value)


def empty_result(reason: str) -> dict:
    """All-zero row with a reason (for input that cannot be scored at all): the component table's empty values."""
    return empty_row(reason)


def final_reply(assistant_texts: list[str], call_format: str = "hermes", last_attempted: bool = False) -> str:
    """The summary candidate: the last assistant turn, ``<think>`` stripped, if it wrote no tool call (none of the
    format's call markers, and ``last_attempted`` false: the loop's own parse of that turn) ; else ""."""
    if not assistant_texts or last_attempted:
        return ""
    last = strip_think(assistant_texts[-1])
    if get_format(call_format).has_call_attempt(last):
        return ""
    return last.strip()


def parsed_from_records(records: list[dict | None], allowed: set[str] | None) -> ParsedCalls:
    """The agent loop's per-turn parses (``slca_trajectory.parsed_turns``, non-hermes formats) merged as HierR's
    :class:`ParsedCalls`: one block per call, each turn's calls one parallel step, the loop's error entries kept, a call
    of a tool the gold does not allow made an error (HierR's rule for every format). A turn without a record (cut by the
    length limit before it was parsed) adds nothing; a record that is not the loop's shape is one error."""
    merged = ParsedCalls(denominator=0, steps=[])
    for record in records:
        if record is None:
            continue
        try:
            opens, closes = int(record["open"]), int(record["close"])
            calls = [(str(c["name"]), dict(c["arguments"])) for c in record["calls"]]
            errors = [str(e) for e in record["errors"]]
        except (KeyError, TypeError, ValueError):
            merged.errors.append("unreadable agent-loop parse record")
            merged.denominator += 1
            continue
        step = []
        for name, arguments in calls:
            if allowed is not None and name not in allowed:
                merged.errors.append(f"unknown tool {name[:64]!r}")
            else:
                step.append(ToolCall(name=name, arguments=arguments))
        merged.blocks += [[c] for c in step]
        merged.steps += [step] if step else []
        merged.errors += errors
        merged.open_tags += opens
        merged.close_tags += closes
        merged.denominator += max(opens, closes, len(calls) + len(errors))
    return merged


async def turn_parses(
    assistant_texts: list[str],
    call_format: str,
    allowed: set[str] | None,
    accept_string_arguments: bool,
    tools: Any = None,
    parsed_turns: list | None = None,
) -> list[ParsedCalls]:
    """Each assistant turn's own parse, read as the loop reads it (``<think>`` stripped per turn; the loop's records
    for non-hermes formats when it sent them)."""
    if call_format != "hermes":
        fmt = get_format(call_format)
        records = list(parsed_turns) if parsed_turns is not None else [None] * len(assistant_texts)
        records += [None] * (len(assistant_texts) - len(records))
        # a turn the loop did not parse (the episode ended on it) is parsed here, as the loop would have
        out = []
        for r, t in zip(records, assistant_texts):
            if r is not None:
                out.append(parsed_from_records([r], allowed))
                continue
            parsed = await fmt.parse(t, tools=tools, allowed=allowed, accept_string_arguments=accept_string_arguments)
            parsed.steps = [parsed.calls] if parsed.calls else []  # one call per block: the turn's calls are its step
            out.append(parsed)
        return out
    return [
        parse_tool_calls(strip_think(t), allowed, accept_string_arguments=accept_string_arguments)
        for t in assistant_texts
    ]


def step_rewards(
    turns: list[ParsedCalls], gt, weights: ExecutionWeights, extra_step_reward: float = 0.0, step_pass: float = 0.5
) -> list[float]:
    """The step reward of each tool turn (a turn with a call attempt), for ``slca_grpo``'s ``credit=turn``: the
    progress the turn makes on the gold, so an episode's step rewards sum to what it achieved, whatever the order.

    Args:
        turns: `(list[ParsedCalls])` each assistant turn's own parse, in order (turns without a call attempt are
            skipped: they get no step reward).
        gt: `(GroundTruth)` the row's parsed ground truth.
        weights: `(ExecutionWeights)` the execution weights.
        extra_step_reward: `(float)` the step reward of a turn that makes no progress (HierRConfig, -0.25).
        step_pass: `(float)` the score at which a nested step counts as done, so that the next step may be scored
            (HierRConfig, 0.5; 0 lets a turn target any step, above R_tool's maximum only the first step counts).

    Units: the gold is cut into units q, each worth at most R_tool's maximum (1 with the default weights):
        nested gold                       -> its steps S_q (parallel calls);
        flat / names-only gold of 1 call  -> that call as one step (as nested gold; names-only: key, value unmeasured);
        flat / names-only gold of N > 1   -> its calls g_q, unordered (no step structure: a call may satisfy any
                                             unit not yet satisfied).
    Each unit keeps best_q, the best score a turn has reached on it so far (0 at the start).

    Repeats: a call is new unless the episode already made an identical call (same name, same keys, values with the
    same ``loose_key``, the hashable form of loose equality; an earlier call of the same turn counts) as many times as
    the gold holds it, and at least once. Only new calls open a unit: a turn that repeats an earlier one makes no
    progress. Repeats are counted in a dict, so the whole computation is linear in the number of calls.

    Formula, for tool turn t with calls C_t, new calls N_t and valid-block share fmt_t (= fmt of the turn alone):
        steps:  f_t    = min{q : best_q < step_pass}, the last step if every step passed   (the frontier)
                s_q(t) = R_tool(C_t vs [S_q])   if names(N_t) ∩ names(S_q) ≠ ∅, else 0
                         (the execution formula over step q alone, every call of the turn counted)
                q*     = argmax_{q <= f_t} (s_q(t) - best_q)                (the earliest on ties)
                p_t    = max(0, s_{q*}(t) - best_{q*});   best_{q*} <- best_{q*} + p_t
        calls:  s(c, q) = R_tool({fmt: fmt_t, name_f1: 1, key, value: of c against g_q}) over the measured
                          components (parallel never; key, value not on names-only gold)
                          if c in N_t and c.name == g_q.name, else 0
                pairs (c, q) with gain s(c, q) - best_q > 0 taken greedily, largest gain first, each call and each
                unit at most once per turn; p_t = Σ gains;   best_q <- s(c, q) for each pair taken
        short_t = 1[p_t > 0 and a unit the turn advanced is left below full marks, best_q < R_max]
                  (R_max = R_tool's maximum over the unit's measured components: 1 with the default weights)
        r_t = p_t + extra_step_reward * short_t   if p_t > 0,   else extra_step_reward
        no gold calls (an irrelevance row): r_t = extra_step_reward for every tool turn.

    So Σ_t r_t = Σ_q best_q + extra_step_reward * #{t : p_t = 0 or short_t}: the return of an episode is what it
    achieved on each unit, less a charge per turn that added nothing (a repeated call, a tool the gold does not need,
    a call past the gold, a turn whose blocks do not parse, any call on a row without gold calls) and per turn that
    left what it worked on short of full marks (a wrong argument, a broken block beside the right call, half of a
    parallel step). A retry that fixes a failed step earns the rest of that step's score; giving up keeps only the
    partial score. So on one step: right first time 1.0 > a wrong call (0.80) corrected 0.80 - 0.25 + 0.20 = 0.75
    > the wrong call alone 0.55 > the wrong call repeated 0.30: being corrected costs the charge, giving up costs
    more. A step below ``step_pass`` is not done: a turn calling only a later step's tools (none of the undone
    step's) makes no progress.

    Why 0.5: a well-formed call of the step's tools reaches it even with every argument wrong (0.1 fmt + 0.25 names
    + 0.3 parallel = 0.65), half of a parallel step does not (the right one of its two calls alone: 0.44). So an
    attempted step is done and its arguments may still be fixed by a later turn, a skipped or split step is not. Full
    marks would charge a right later step whenever an earlier argument missed the loose comparison, teaching the
    policy to stop instead of going on (the charge for falling short lands on the turn that fell short, never on the
    next step's). The names gate keeps fmt and parallel (0.4 of the weight, earned by any
    well-formed call) from paying a call of an unrelated tool. A parallel step split across turns never earns more
    than making it in one turn: its turns together earn its best (at most what one full turn scores), and a turn
    holding only some of its calls scores below a full one, so the turns after the first are often charged.
    Forged tool output is handled by the caller (every step reward 0).

    Returns:
        `(list[float])` one step reward per tool turn, in order.
    """
    gains, _, short = gold_progress(turns, gt, weights, step_pass)
    charge = float(extra_step_reward)
    return [p + charge * s if p > _NO_PROGRESS else charge for p, s in zip(gains, short)]


def gold_progress(
    turns: list[ParsedCalls], gt, weights: ExecutionWeights, step_pass: float = 0.5
) -> tuple[list[float], list[float], list[bool]]:
    """The progress p_t of each tool turn, the final best_q of each gold unit and short_t of each tool turn, as
    :func:`step_rewards` defines them (Σ_t p_t = Σ_q best_q). No gold calls: every p_t is 0 and there is no unit."""
    attempted = [t for t in turns if t.open_tags or t.close_tags or t.errors or t.calls]
    gold = gt.gold_calls
    if not gold:
        return [0.0] * len(attempted), [], [False] * len(attempted)
    unmeasured = unmeasured_components(gt.gold_format, len(gold))
    full = execution_reward(dict.fromkeys(("fmt", "name_f1", "key", "value", "parallel"), 1.0), weights, unmeasured)
    per_call = gt.gold_format != "nested" and len(gold) > 1
    units = [[c] for c in gold] if per_call else gt.gold_steps
    best = [0.0] * len(units)
    in_gold = Counter(_call_key(g) for g in gold)
    made: Counter = Counter()
    gains, short = [], []
    for turn in attempted:
        new = [c for c in turn.calls if _is_new(c, made, in_gold)]
        if per_call:
            gain, advanced = _call_progress(turn, new, units, best, weights, unmeasured)
        else:
            gain, advanced = _step_progress(turn, new, units, best, weights, unmeasured, step_pass)
        gains.append(gain)
        short.append(any(best[q] < full - _NO_PROGRESS for q in advanced))
    return gains, best, short


# a gain at or below this is float noise, not progress
_NO_PROGRESS = 1e-9


def _call_key(call: ToolCall) -> tuple:
    """A call's identity for repeats: its name and each argument's :func:`loose_key` (hashable, so repeats are
    counted in one pass over the calls, not by comparing every pair)."""
    return call.name, tuple(sorted((k, loose_key(v)) for k, v in call.arguments.items()))


def _is_new(call: ToolCall, made: Counter, in_gold: Counter) -> bool:
    """Whether ``call`` is not a repeat (see :func:`step_rewards`); counts it in ``made``. O(#arguments)."""
    key = _call_key(call)
    made[key] += 1
    return made[key] - 1 < max(1, in_gold[key])


def _step_progress(
    turn: ParsedCalls,
    new: list[ToolCall],
    steps: list[list[ToolCall]],
    best: list[float],
    weights: ExecutionWeights,
    unmeasured: frozenset,
    step_pass: float,
) -> tuple[float, list[int]]:
    """p_t for step units (and the unit it advanced): the turn scored against each step up to the frontier that its
    new calls name."""
    names = {c.name for c in new}
    frontier = next((q for q, b in enumerate(best) if b < step_pass - _NO_PROGRESS), len(steps) - 1)
    gains = [
        (execution_reward(execution_components(turn, [steps[q]]), weights, unmeasured) - best[q], q)
        for q in range(frontier + 1)
        if names & {g.name for g in steps[q]}
    ]
    gain, q = max(gains, key=lambda g: (g[0], -g[1]), default=(0.0, -1))  # the earliest step on ties
    if gain <= _NO_PROGRESS:
        return 0.0, []
    best[q] += gain
    return gain, [q]


def _call_progress(
    turn: ParsedCalls,
    new: list[ToolCall],
    units: list[list[ToolCall]],
    best: list[float],
    weights: ExecutionWeights,
    unmeasured: frozenset,
) -> tuple[float, list[int]]:
    """p_t for call units (and the units it advanced): each new call matched to the unit it improves most, each unit
    improved once."""
    fmt = format_score(turn)
    gains = []
    for i, call in enumerate(new):
        for q, (unit,) in enumerate(units):
            if call.name != unit.name:
                continue
            key, value = key_value_scores([call], [unit])
            comps = {"fmt": fmt, "name_f1": 1.0, "key": key, "value": value, "parallel": 0.0}
            score = execution_reward(comps, weights, unmeasured)
            if score - best[q] > _NO_PROGRESS:
                gains.append((score - best[q], i, q))
    total, used_calls, used_units = 0.0, set(), set()
    for gain, i, q in sorted(gains, key=lambda g: (-g[0], g[1], g[2])):
        if i in used_calls or q in used_units:
            continue
        used_calls.add(i)
        used_units.add(q)
        best[q] += gain
        total += gain
    return total, sorted(used_units)


async def score_trajectory(
    assistant_texts: list[str],
    tool_responses: list[str],
    ground_truth: Any,
    *,
    judge: Judge | None = None,
    config: HierRConfig | None = None,
    question: str | None = None,
    forged_tool_output: int = 0,
    call_format: str | None = None,
    parsed_turns: list[dict | None] | None = None,
) -> dict:
    """HierR reward of one rollout given its pieces (see the module docstring for the formulas).

    Args:
        assistant_texts: the assistant turns in order (raw text, ``<think>`` allowed).
        tool_responses: every tool response text in order (flat).
        ground_truth: the authors' dict (or its JSON string; numpy arrays tolerated).
        judge: preference judge; None gives R_sum = 0 (``judge_used`` = 0).
        config: weights and penalties.
        question: overrides ``ground_truth["question_content"]`` for the judge.
        forged_tool_output: tool-response runs known not to come from the environment (:func:`score_decoded`
            counts them); > 0 scores the rollout ``min(no_call_penalty, 0)`` and asks no judge.
        call_format: the turns' tool-call format (verl's ``multi_turn.format``); None: ``config.tool_call_format``.
        parsed_turns: the agent loop's parse of each turn (non-hermes formats): scored instead of re-reading the
            text, so the calls scored are the calls the loop ran.

    Returns:
        dict with the keys of :data:`RESULT_KEYS`, all JSON-serialisable scalars; ``reason`` is "" when the input was
        fine, else what was wrong (bad ground truth, invalid tool-call blocks, judge failure).
    """
    try:
        cfg = config or HierRConfig()
        return await _score(
            assistant_texts,
            tool_responses,
            ground_truth,
            judge,
            cfg,
            question,
            int(forged_tool_output),
            call_format or cfg.tool_call_format,
            parsed_turns,
        )
    except ServiceDown:  # the judge is gone (not this rollout's fault): the run stops naming it
        raise
    except Exception as e:  # last line of defence: a reward must never raise inside a training step
        logger.exception("HierR could not score a rollout")
        return empty_result(f"internal error: {type(e).__name__}: {str(e)[:200]}")


async def _score(
    assistant_texts,
    tool_responses,
    ground_truth,
    judge,
    cfg: HierRConfig,
    question,
    forged,
    call_format: str = "hermes",
    parsed_turns: list | None = None,
) -> dict:
    assistant_texts = [t if isinstance(t, str) else str(t) for t in (assistant_texts or [])]
    tool_responses = [t if isinstance(t, str) else str(t) for t in (tool_responses or [])]
    gt = parse_ground_truth(ground_truth)
    reasons = list(gt.reasons)
    if gt.reasons and gt.reasons[0].startswith("ground_truth is a"):
        return {**empty_result(reasons[0]), "gold_invalid": 1}
    if gt.gold_errors:  # scoring it as an irrelevance row would reward not calling: 0 for every rollout instead
        return {**empty_result("unreadable gold: " + "; ".join(gt.gold_errors[:3])[:400]), "gold_invalid": 1}

    call_format = get_format(call_format).name  # an unknown name raises: scored 0 with the reason, below
    last_attempted = False
    turns = await turn_parses(
        assistant_texts, call_format, gt.allowed_tools, cfg.accept_string_arguments, gt.tool_schemas, parsed_turns
    )
    # one parse per turn, merged (each non-hermes turn's calls one parallel step)
    parsed = merge_turns(turns, steps=call_format != "hermes")
    if parsed_turns is not None and call_format != "hermes" and turns:
        last = turns[-1]  # the loop's parse of the last turn: a marker its special tokens hid from the text counts
        last_attempted = bool(last.open_tags or last.close_tags or last.errors or last.blocks)
    per_step = step_rewards(turns, gt, cfg.weights, cfg.extra_step_reward, cfg.step_pass)
    reasons += parsed.errors[:3] + (
        [f"… {len(parsed.errors) - 3} more invalid blocks"] if len(parsed.errors) > 3 else []
    )
    gold = gt.gold_calls
    pred = parsed.calls
    # a call that does not parse is not a call: tags alone (bare, empty, unterminated, unreadable) never dodge it
    no_call = bool(gold) and not pred

    comps = execution_components(parsed, gt.gold_steps)
    unmeasured = unmeasured_components(gt.gold_format, len(gold))
    comps.update({c: 0.0 for c in unmeasured})  # reported as 0: the gold cannot tell (docs/rewards.md, gold forms)
    baselines = baseline_rewards(parsed, gold, no_call=no_call, no_call_penalty=cfg.no_call_penalty, rltr=cfg.rltr)
    overlap = sum((Counter(p.name for p in pred) & Counter(g.name for g in gold)).values())

    verdict, judge_used = Verdict(0), 0
    reply = final_reply(assistant_texts, call_format, last_attempted)
    if forged:  # tool output the policy wrote itself: scored as low as making no call, never judged
        comps = {k: 0.0 for k in comps}
        per_step = [0.0] * len(per_step)
        floor = min(cfg.no_call_penalty, 0.0)
        r_tool, r_sum, score = 0.0, floor, floor
        reasons.append(f"{forged} tool-response run(s) not written by the environment")
    elif no_call:
        comps = {k: 0.0 for k in comps}
        r_tool, r_sum, score = 0.0, cfg.no_call_penalty, cfg.no_call_penalty
    else:
        r_tool = execution_reward(comps, cfg.weights, unmeasured)
        # the judge needs a call that parsed and was answered; after calls the gold did not need, only with the
        # authors' judge_after_unneeded_calls (so a call there never pays more than answering directly)
        after_calls = bool(pred) and bool(tool_responses) and (bool(gold) or cfg.judge_after_unneeded_calls)
        # judge_direct_replies: on an irrelevance row a reply without any call attempt is judged too (docs/rewards.md)
        attempted = parsed.open_tags or parsed.close_tags
        direct = cfg.judge_direct_replies and not gold and not attempted and not tool_responses
        if judge is not None and (after_calls or direct) and len(reply) >= cfg.min_reply_chars:
            judge_used = 1
            verdict = await judge.rate(question if question is not None else gt.question, tool_responses, reply)
            if verdict.failed:
                reasons.append(verdict.reason)
        r_sum = verdict.r_sum
        score = cfg.w_tool * r_tool + cfg.w_sum * r_sum
        if score < 0:  # docs/method.md: a negative total goes to the summary segment
            r_tool, r_sum = 0.0, score
    norm = cfg.w_tool + cfg.w_sum
    row = {
        "score": float(score),
        "r_tool": float(r_tool),
        "r_sum": float(r_sum),
        **{k: float(v) for k, v in comps.items()},
        "no_call": int(no_call),
        "redundant_calls": int(len(pred) - overlap),
        "num_calls": len(pred),
        "num_gold_calls": len(gold),
        "num_tool_responses": len(tool_responses),
        "forged_tool_output": forged,
        "format_valid": int(parsed.fully_valid),
        "judge_rating": int(verdict.rating),
        "judge_failed": int(verdict.failed),
        "judge_used": judge_used,
        "judge_noise": float(verdict.noise),
        "r_sum_clean": float(verdict.r_sum_clean if judge_used else r_sum),
        "success": int(norm > 0 and score / norm >= cfg.success_tau - 1e-12),
        **{k: float(v) for k, v in baselines.items()},
        "gold_invalid": 0,
        "gold_format": gt.gold_format,
        "step_rewards": json.dumps([round(float(r), 6) for r in per_step]),
        "reason": "; ".join(dict.fromkeys(r for r in reasons if r))[:500],
    }
    return typed_row(row)


async def score_decoded(
    solution_str: str,
    ground_truth: Any,
    *,
    judge: Judge | None = None,
    config: HierRConfig | None = None,
    question: str | None = None,
    num_turns: Any = None,
    agent_loop: str | None = None,
    tools: Any = None,
) -> dict:
    """HierR reward of a decoded multi-turn response (assistant turns and rendered tool responses in one string).

    Args:
        num_turns: verl's ``extra_info["num_turns"]`` (messages of the episode: user turns + assistant turns + 1, so
            ``(num_turns - 1) // 2`` environment turns; 2 for a single-turn rollout). Decoded text cannot tell a
            ``<tool_response>`` the environment sent from one the policy typed; more runs than environment turns
            means some were typed, and the rollout is scored as forged. None (verl's dapo, rate_limited and gdpo reward
            managers pass no count): each run is checked against what the agent loop answers to the text before it
            (:func:`unanswerable_runs`).
        agent_loop: the loop that produced the text (:func:`answering_loop`); None: ``config.agent_loop``, else
            ``slca_tool_agent``.
        tools: the row's tool schemas as the loop read them (verl's parsers of some formats need them); None: the
            ground truth's ``tool_schemas``.
    """
    cfg = config or HierRConfig()
    traj = split_decoded_response(solution_str)
    env_turns = _environment_turns(num_turns)
    if env_turns is not None:
        forged = max(0, traj.tool_response_runs - env_turns)
    else:
        if tools is None:
            tools = parse_ground_truth(ground_truth).tool_schemas
        loop = agent_loop or cfg.agent_loop or SLCA_AGENT_LOOP
        forged = await unanswerable_runs(traj, cfg.tool_call_format, loop, tools)
    return await score_trajectory(
        traj.assistant_texts,
        traj.tool_responses,
        ground_truth,
        judge=judge,
        config=config,
        question=question,
        forged_tool_output=forged,
    )


def answering_loop(extra_info: Any, configured: str | None = None) -> str:
    """The agent loop whose answers decoded text is checked against when verl's turn count is missing.

    In order: the rollout's own evidence, which verl's naive, rate_limited and remote reward managers merge into
    ``extra_info`` from the loop's ``extra_fields`` (``slca_trajectory``: ``slca_tool_agent``; verl's ToolAgentLoop's
    ``turn_scores`` and ``tool_rewards`` without it: verl's ``tool_agent``); then ``reward_kwargs.agent_loop``; then
    ``slca_tool_agent``, the loop the rows data_prep writes ask for (``agent_name``) and every recipe runs. The dapo and
    gdpo managers pass no evidence: there the setting or the default decides.
    """
    if isinstance(extra_info, dict):
        if isinstance(extra_info.get("slca_trajectory"), dict):
            return SLCA_AGENT_LOOP
        if "turn_scores" in extra_info and "tool_rewards" in extra_info:
            return "tool_agent"
    return configured or SLCA_AGENT_LOOP


async def unanswerable_runs(traj, call_format: str, agent_loop: str = SLCA_AGENT_LOOP, tools: Any = None) -> int:
    """The tool-response runs of decoded text that the agent loop could not have sent, for text without verl's turn
    count.

    The loop answers a turn after the whole turn is written, reading the whole turn (a call the policy hid inside a
    typed ``<tool_response>`` included), with one response per entry it runs (at most ``max_parallel_calls``, the
    first ones). Which entries, in which order, depends on the loop:

    - ``slca_tool_agent``: every call attempt (:meth:`~slca_verl.toolcall.formats.ToolCallFormat.loop_entries`): each
      call it reads, any tool name (an unknown tool gets an error response), and each attempt it cannot read, answered
      with exactly ``parse_error_response(reason)``;
    - any other loop (verl's ``tool_agent``): only the calls its parser reads; an unreadable call ends the episode.
      Calls are counted as verl runs them: any name, string arguments accepted, arguments verl's kimi parser coerced to
      ``{}`` included, ``<think>`` included.

    A run is typed by the policy when it holds more responses than the text before it has entries, or (slca_tool_agent)
    when a response at an unreadable attempt's place is not the loop's error text for it: a typed run before the turn's
    real answer leaves that answer after text with fewer entries than responses, and a typed run that splits a call
    leaves the loop's error text for the whole call where the text before it reads another error. What this cannot
    see: a typed run in the last turn of an episode cut by the turn or length limit (nothing answered that turn, so
    nothing after it disagrees), and, under the slca_tool_agent rule, the same in an episode that verl's tool_agent
    ended on an unreadable call (set ``reward_kwargs.agent_loop=tool_agent`` for its rollouts); verl's turn count
    closes both.
    """
    try:
        fmt = get_format(call_format)
    except ValueError:
        return 0  # scored 0 with the reason by score_trajectory
    bad, pos = 0, 0
    for text, size in zip(traj.assistant_texts, traj.run_sizes):
        responses, pos = traj.tool_responses[pos : pos + size], pos + size
        if agent_loop == SLCA_AGENT_LOOP:
            entries = await fmt.loop_entries(text, tools=tools)
            bad += size > len(entries) or any(
                call is None and response != parse_error_response(reason)
                for (call, reason), response in zip(entries, responses)
            )
            continue
        visible = text.replace("<think>", " ").replace("</think>", " ")
        parsed = await fmt.parse(visible, allowed=None, accept_string_arguments=True)
        runnable = len(parsed.calls) + sum(e.endswith(COERCED_ARGUMENTS) for e in parsed.errors)
        bad += size > runnable
    return bad


def _environment_turns(num_turns: Any) -> int | None:
    """Environment turns of a verl episode from its ``num_turns`` (None when it is not a usable count)."""
    try:
        n = int(num_turns.item() if hasattr(num_turns, "item") else num_turns)
    except (TypeError, ValueError, OverflowError):
        return None
    return max(0, (n - 1) // 2) if n >= 1 else None


def score_trajectory_sync(*args, **kwargs) -> dict:
    """:func:`score_trajectory` for code without an event loop (scripts, benchmarks)."""
    return asyncio.run(score_trajectory(*args, **kwargs))
