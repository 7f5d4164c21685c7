"""HierR's per-turn step rewards (``algorithm.slca.credit=turn``) pay for progress on the gold, not for a turn's
position: hand-computed values on each gold form, the attacks on step rewards (none may gain over the honest
episode), and the telescoping property on random gold and turns.

Returns here are what the per-turn estimator credits: the sum of an episode's step rewards. Default weights 0.10 fmt /
0.25 name / 0.15 key / 0.20 value / 0.30 parallel; extra_step_reward -0.25 (CHARGE below: a turn that makes no
progress, and a turn that leaves what it worked on short of full marks, pays it); step_pass 0.5."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slca_verl.rewards import HierRConfig
from slca_verl.rewards.execution import (
    ExecutionWeights,
    execution_components,
    execution_reward,
    unmeasured_components,
)
from slca_verl.rewards.hierr import gold_progress, score_trajectory_sync, step_rewards
from slca_verl.rewards.parsing import parse_ground_truth, parse_tool_calls, strip_think

TOOLS = ["weather", "book", "search"]
EXTRA = HierRConfig().extra_step_reward
SHORT = EXTRA  # the charge on a turn that makes progress but leaves its unit below full marks
BROKEN = "<tool_call>\nnot json\n</tool_call>"
REPLY = "Done: everything you asked for is booked."


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def block(*calls) -> str:
    """One hermes ``<tool_call>`` block; several calls make one list block (a parallel step)."""
    return "<tool_call>\n" + json.dumps(list(calls) if len(calls) > 1 else calls[0]) + "\n</tool_call>"


W, W_LYON = call("weather", city="Paris"), call("weather", city="Lyon")
B, B_LYON = call("book", city="Paris"), call("book", city="Lyon")
X = call("search", q="hotels")  # an allowed tool no gold below needs


def truth(gold, tools=TOOLS, **extra):
    return {
        "allowed_tools": tools,
        "gold_tool_calls": gold,
        "question_content": "Weather in Paris, then book.",
        **extra,
    }


NESTED = truth([[W], [B]])
PARALLEL = truth([[W, B]])
FLAT1, NAMES1 = truth([W]), truth(["weather"])
FLAT2, NAMES2 = truth([W, B]), truth(["weather", "book"])
NO_CALLS = truth([])


def rewards(turns, ground_truth, cfg=None):
    """step_rewards of assistant turns (text), each parsed as the agent loop parses it."""
    cfg = cfg or HierRConfig()
    gt = parse_ground_truth(ground_truth)
    parsed = [parse_tool_calls(strip_think(t), gt.allowed_tools) for t in turns]
    return step_rewards(parsed, gt, cfg.weights, cfg.extra_step_reward, cfg.step_pass)


def episode_return(turns, ground_truth):
    return sum(rewards(turns, ground_truth))


# ---------------------------------------------------------------------------------------------- hand-computed values


def test_nested_gold_pays_each_turn_its_progress_on_the_step_it_targets():
    # step 2 with the wrong city: 0.10 fmt + 0.25 name + 0.15 key + 0 value + 0.30 parallel = 0.80, short of full
    # marks, so charged; the retry that fixes it earns the rest of the step (0.20), not a charge for a turn past the
    # gold's length
    assert rewards([block(W), block(B_LYON), block(B), REPLY], NESTED) == pytest.approx([1.0, 0.8 + SHORT, 0.2])
    # a turn calling step 2's tool while step 1 is undone makes no progress, and neither does a tool the gold lacks
    assert rewards([block(B)], NESTED) == [EXTRA]
    assert rewards([block(X), block(W), block(B)], NESTED) == pytest.approx([EXTRA, 1.0, 1.0])
    # a block that does not parse makes no progress; the turn after it is scored on step 1
    assert rewards([BROKEN, block(W)], NESTED) == pytest.approx([EXTRA, 1.0])
    # the very call of step 2 made too early is spent: made again once step 1 is done, it is a repeat (property (b)
    # below: a repeated turn never raises the return), so the early call cost its charge and the later one another
    assert rewards([block(B), block(W), block(B)], NESTED) == pytest.approx([EXTRA, 1.0, EXTRA])
    # a turn without a call attempt has no step reward
    assert rewards([REPLY], NESTED) == []


def test_a_parallel_step_is_done_only_in_one_turn_and_below_the_pass_mark_the_next_step_waits():
    half = 0.10 + 0.25 * (2 / 3) + 0.15 * 0.5 + 0.20 * 0.5  # name F1 2/3, one of two gold calls matched, parallel 0
    assert rewards([block(W), block(W, B)], PARALLEL) == pytest.approx([half + SHORT, 1.0 - half])
    # both calls already made, one per turn: the block that joins them repeats them and adds nothing
    assert rewards([block(W), block(B), block(W, B)], PARALLEL) == pytest.approx([half + SHORT, EXTRA, EXTRA])
    two_steps = truth([[W, B], [X]])
    # half of step 1 (0.44 < step_pass 0.5) leaves it undone: step 2's search makes no progress
    assert rewards([block(W), block(X)], two_steps) == pytest.approx([half + SHORT, EXTRA])
    # the whole step unlocks step 2
    assert rewards([block(W, B), block(X)], two_steps) == pytest.approx([1.0, 1.0])


def test_step_pass_is_a_setting():
    # step 1 at 0.80 passes the default mark, so the right step 2 is paid; with full marks asked it waits for step 1
    assert rewards([block(W_LYON), block(B)], NESTED) == pytest.approx([0.8 + SHORT, 1.0])
    strict = HierRConfig.from_kwargs({"step_pass": 1.0})
    assert strict.step_pass == 1.0
    assert rewards([block(W_LYON), block(B)], NESTED, strict) == pytest.approx([0.8 + SHORT, EXTRA])
    assert rewards([block(W_LYON), block(W), block(B)], NESTED, strict) == pytest.approx([0.8 + SHORT, 0.2, 1.0])
    with pytest.raises(ValueError, match="step_pass"):
        HierRConfig.from_kwargs({"step_pass": "half"})


def test_flat_gold_is_a_set_of_calls_each_paid_once():
    per = 0.10 + 0.25 + 0.15  # a call with the right name and keys, wrong value: parallel not measured (renormalised)
    assert rewards([block(B_LYON), block(B), block(W)], FLAT2) == pytest.approx(
        [per / 0.70 + SHORT, 1 - per / 0.70, 1.0]
    )
    # both calls in one turn, in either order: both units at once
    assert rewards([block(B, W)], FLAT2) == pytest.approx([2.0])
    # the same call twice in one turn fills one unit; a gold that holds the call twice is paid for both copies
    assert rewards([block(W, W)], FLAT2) == pytest.approx([1.0])
    assert rewards([block(W, W)], truth([W, W])) == pytest.approx([2.0])
    assert rewards([block(W), block(W)], truth([W, W])) == pytest.approx([1.0, 1.0])


def test_names_only_gold_matches_calls_by_name_and_scores_format_and_name():
    # key and value are not measured: (0.10 fmt + 0.25 name) / 0.35 = 1 for any arguments
    assert rewards([block(W_LYON), block(B)], NAMES2) == pytest.approx([1.0, 1.0])
    # a broken block beside the call: fmt 1/2, (0.05 + 0.25) / 0.35; a clean new call later earns the rest
    first = (0.10 * 0.5 + 0.25) / 0.35
    assert rewards([BROKEN + "\n" + block(W), block(W_LYON)], NAMES2) == pytest.approx([first + SHORT, 1.0 - first])
    # the very same call again is a repeat: no progress
    assert rewards([BROKEN + "\n" + block(W), block(W)], NAMES2) == pytest.approx([first + SHORT, EXTRA])


def test_flat_or_names_gold_of_one_call_is_one_step():
    # scored as nested gold of one step: a parallel block of two calls loses name F1 and parallel
    two = 0.10 + 0.25 * (2 / 3) + 0.15 + 0.20
    assert rewards([block(W, B)], FLAT1) == pytest.approx([two + SHORT])
    assert rewards([block(W_LYON)], NAMES1) == pytest.approx([1.0])  # (0.10 + 0.25 + 0.30) / 0.65
    assert rewards([block(W_LYON), block(W)], FLAT1) == pytest.approx([0.8 + SHORT, 0.2])


def test_every_call_on_a_row_without_gold_calls_is_charged():
    assert rewards([block(W), REPLY], NO_CALLS) == [EXTRA]
    assert rewards([BROKEN, block(X), REPLY], NO_CALLS) == [EXTRA, EXTRA]
    assert rewards([REPLY], NO_CALLS) == []


# -------------------------------------------- a corrected call earns less than the right call first time

# (case, gold, the right call first time, a wrong call then its correction, the wrong call alone)
CORRECTIONS = [
    ("wrong city, one call", FLAT1, [block(W)], [block(W_LYON), block(W)], [block(W_LYON)]),
    (
        "wrong city in step 1",
        NESTED,
        [block(W), block(B)],
        [block(W_LYON), block(W), block(B)],
        [block(W_LYON), block(B)],
    ),
    (
        "wrong city in step 2",
        NESTED,
        [block(W), block(B)],
        [block(W), block(B_LYON), block(B)],
        [block(W), block(B_LYON)],
    ),
    ("one wrong call of a parallel step", PARALLEL, [block(W, B)], [block(W, B_LYON), block(W, B)], [block(W, B_LYON)]),
    (
        "wrong city, flat gold of two",
        FLAT2,
        [block(B), block(W)],
        [block(B_LYON), block(B), block(W)],
        [block(B_LYON), block(W)],
    ),
    ("a broken block beside the right call", FLAT1, [block(W)], [BROKEN + "\n" + block(W)], [BROKEN]),
]


@pytest.mark.parametrize("gold,right,corrected,gave_up", [c[1:] for c in CORRECTIONS], ids=[c[0] for c in CORRECTIONS])
def test_a_corrected_call_returns_at_least_the_charge_less_than_the_right_call_first_time(
    gold, right, corrected, gave_up
):
    """Right first time > wrong then corrected > wrong and given up: the return of a corrected episode is at least
    the redundant-call charge (-extra_step_reward) below the right call's, and still above giving up, so neither
    being wrong first nor stopping after a wrong call pays. Before the fix a wrong city then its correction returned
    [0.8, 0.2] = 1.0, the right call's return, and the correcting turn took the whole advantage."""
    right_first = episode_return(right + [REPLY], gold)
    fixed = episode_return(corrected + [REPLY], gold)
    assert right_first - fixed >= -EXTRA - 1e-9, (right_first, fixed)
    assert fixed > episode_return(gave_up + [REPLY], gold)


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_coder", "kimi"])
def test_the_correction_charge_reaches_the_row_in_any_format(fmt):
    """End to end through score_trajectory (the row's step_rewards) in hermes and two of verl's other formats: the
    wrong call is charged, the correction earns the rest of the step."""
    from slca_verl.toolcall.formats import get_format

    gt = truth([[W]], tools=["weather"], tool_schemas=[{"name": "weather", "parameters": {"type": "object"}}])

    def row(*calls):
        turns = [get_format(fmt).render_calls([c]) for c in calls] + [REPLY]
        out = score_trajectory_sync(turns, ["{}"] * len(calls), gt, call_format=fmt)
        return json.loads(out["step_rewards"])

    assert row(W) == pytest.approx([1.0])
    assert row(W_LYON, W) == pytest.approx([0.8 + SHORT, 0.2])
    assert sum(row(W)) - sum(row(W_LYON, W)) == pytest.approx(-EXTRA)


# ---------------------------------------- the attacks (give up, skip a step, repeat a call, call another tool)

# (what the attack does, gold, honest turns, attack turns); before: the positional rule's returns, honest vs attack
ATTACKS = [
    (
        "give up after a wrong call instead of correcting it",
        NESTED,  # before 1.55 vs 1.80
        [block(W), block(B_LYON), block(B)],
        [block(W), block(B_LYON)],
    ),
    (
        "after a failed step 1, skip to step 2 instead of redoing it",
        NESTED,  # before 0.15 vs 1.00
        [BROKEN, block(W), block(B)],
        [BROKEN, block(B)],
    ),
    (
        "after a wrong step 1, skip to step 2 instead of fixing it",
        NESTED,  # before 0.95 vs 1.80
        [block(W_LYON), block(W), block(B)],
        [block(W_LYON), block(B)],
    ),
    ("repeat the call on flat gold", FLAT1, [block(W)], [block(W), block(W)]),  # before 1.00 vs 2.00
    ("repeat the call twice on flat gold", FLAT1, [block(W)], [block(W), block(W), block(W)]),  # 1.00 vs 3.00
    ("call another allowed tool on flat gold", FLAT1, [block(W)], [block(W), block(X)]),  # 1.00 vs 2.00
    ("repeat the call on names-only gold", NAMES1, [block(W)], [block(W), block(W)]),  # 1.00 vs 2.00
    (
        "call every allowed tool on names-only gold",
        NAMES1,  # before 1.00 vs 3.00
        [block(W)],
        [block(W), block(B), block(X)],
    ),
    (
        "repeat a call on flat gold of two calls",
        FLAT2,  # before 2.00 vs 3.00
        [block(W), block(B)],
        [block(W), block(W), block(B)],
    ),
    (
        "call another allowed tool on flat gold of two calls",
        FLAT2,  # before 2.00 vs 3.00
        [block(W), block(B)],
        [block(W), block(B), block(X)],
    ),
    (
        "repeat a call with other arguments on names-only gold",
        NAMES2,  # before 2.00 vs 3.00
        [block(W), block(B)],
        [block(W), block(B), block(B_LYON)],
    ),
    ("repeat the last step on nested gold", NESTED, [block(W), block(B)], [block(W), block(B), block(B)]),
    ("split a parallel step across turns", PARALLEL, [block(W, B)], [block(W), block(B)]),  # before 1.00 vs 0.19
]


@pytest.mark.parametrize("gold,honest,attack", [a[1:] for a in ATTACKS], ids=[a[0] for a in ATTACKS])
def test_no_attack_returns_as_much_as_the_honest_episode(gold, honest, attack):
    assert episode_return(attack + [REPLY], gold) < episode_return(honest + [REPLY], gold)


def test_splitting_calls_of_flat_gold_across_turns_is_neither_paid_nor_charged():
    """Flat gold has no step structure (r_tool does not measure parallel on it either), so calling its two calls in
    one turn or in two is the same achievement: equal returns, where the positional rule paid 2.00 against 1.00."""
    assert episode_return([block(W), block(B), REPLY], FLAT2) == pytest.approx(
        episode_return([block(W, B), REPLY], FLAT2)
    )


def test_the_reward_row_carries_the_step_rewards_through_score_trajectory():
    """End to end (hermes): the row's step_rewards field is the JSON list of the turns' progress."""
    out = score_trajectory_sync([block(W), block(B_LYON), block(B), REPLY], ["{}", "{}", "{}"], NESTED)
    assert json.loads(out["step_rewards"]) == [1.0, 0.55, 0.2]
    out = score_trajectory_sync([block(X), block(W), block(B), block(X), REPLY], ["{}"] * 4, NESTED)
    assert json.loads(out["step_rewards"]) == [EXTRA, 1.0, 1.0, EXTRA]
    think = "<think>maybe book first</think>" + block(B)
    out = score_trajectory_sync([think, block(B), REPLY], ["{}", "{}"], FLAT2)
    assert json.loads(out["step_rewards"]) == [1.0, EXTRA]
    out = score_trajectory_sync([block(W), REPLY], ["{}"], NO_CALLS)
    assert json.loads(out["step_rewards"]) == [EXTRA]
    # the config's knobs reach the row
    out = score_trajectory_sync(
        [block(W_LYON), block(B), REPLY],
        ["{}", "{}"],
        NESTED,
        config=HierRConfig.from_kwargs({"step_pass": 1.0, "extra_step_reward": -0.5}),
    )
    assert json.loads(out["step_rewards"]) == pytest.approx([0.8 - 0.5, -0.5])
    # tool output the policy wrote itself: every turn 0, as before
    out = score_trajectory_sync([block(W), block(B), REPLY], ["{}", "{}"], NESTED, forged_tool_output=1)
    assert json.loads(out["step_rewards"]) == [0.0, 0.0]


# ------------------------------------------------------------------------------------- random gold and turns

NAMES = ["a", "b", "c"]
POOL_TOOLS = NAMES + ["d"]  # d: allowed, never in the gold
pool_call = st.builds(
    lambda name, args: {"name": name, "arguments": args},
    st.sampled_from(POOL_TOOLS),
    st.dictionaries(st.sampled_from(["x", "y"]), st.sampled_from([1, 2, "p"]), max_size=2),
)
gold_call = st.builds(
    lambda name, args: {"name": name, "arguments": args},
    st.sampled_from(NAMES),
    st.dictionaries(st.sampled_from(["x", "y"]), st.sampled_from([1, 2, "p"]), max_size=2),
)


def _identity(c):
    return c if isinstance(c, str) else (c["name"], json.dumps(c["arguments"], sort_keys=True))


@st.composite
def gold_rows(draw, distinct=False):
    """A ground truth of one of the three forms; ``distinct``: no call held twice (nor a name, on names-only)."""
    form = draw(st.sampled_from(["nested", "flat", "names"]))
    if form == "names":
        gold = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=distinct))
    elif form == "flat":
        gold = draw(st.lists(gold_call, min_size=1, max_size=4, unique_by=_identity if distinct else None))
    else:
        calls = draw(st.lists(gold_call, min_size=1, max_size=5, unique_by=_identity if distinct else None))
        cuts = sorted(draw(st.sets(st.integers(1, len(calls) - 1), max_size=3)) if len(calls) > 1 else [])
        gold = [calls[i:j] for i, j in zip([0, *cuts], [*cuts, len(calls)])]
    return truth(gold, tools=POOL_TOOLS, gold_format=form)


@st.composite
def turn_texts(draw):
    """One assistant turn: a reply, a broken block, calls in separate blocks, or a parallel list block."""
    kind = draw(st.sampled_from(["reply", "broken", "blocks", "parallel", "mixed"]))
    if kind == "reply":
        return REPLY
    if kind == "broken":
        return BROKEN
    calls = draw(st.lists(pool_call, min_size=1, max_size=3))
    if kind == "parallel":
        return block(*calls)
    text = "\n".join(block(c) for c in calls)
    return BROKEN + "\n" + text if kind == "mixed" else text


def _attempted(turns, gt):
    parsed = [parse_tool_calls(strip_think(t), gt.allowed_tools) for t in turns]
    return [p for p in parsed if p.open_tags or p.close_tags or p.errors or p.calls]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ground_truth=gold_rows(), turns=st.lists(turn_texts(), max_size=7), extra=st.floats(-1.0, -0.01, allow_nan=False)
)
def test_the_return_telescopes_to_the_best_reached_on_each_unit(ground_truth, turns, extra):
    """(a) Σ_t r_t = Σ_q best_q + extra_step_reward * #(turns with no progress or left short of full marks), every
    best_q a score some turn reached on that unit and at most R_tool's maximum; a turn is short only when it made
    progress (and left the unit it advanced below full marks then)."""
    gt = parse_ground_truth(ground_truth)
    weights = ExecutionWeights()
    got = rewards(turns, ground_truth, HierRConfig(extra_step_reward=extra))
    parsed = _attempted(turns, gt)
    progress, best, short = gold_progress(parsed, gt, weights)
    assert len(got) == len(progress) == len(parsed) == len(short)
    charged = sum(p <= 1e-9 or s for p, s in zip(progress, short))
    assert sum(got) == pytest.approx(sum(best) + extra * charged, abs=1e-9)
    assert all(p > 1e-9 for p, s in zip(progress, short) if s)
    assert all(p >= 0 for p in progress) and all(-1e-9 <= b <= 1 + 1e-9 for b in best)
    if not gt.gold_calls:
        assert got == [extra] * len(parsed)
    elif gt.gold_format == "nested" or len(gt.gold_calls) == 1:  # step units: a best is some turn's score on it
        unmeasured = unmeasured_components(gt.gold_format, len(gt.gold_calls))
        for step, b in zip(gt.gold_steps, best):
            reached = [execution_reward(execution_components(p, [step]), weights, unmeasured) for p in parsed]
            assert b == pytest.approx(0.0, abs=1e-9) or any(b == pytest.approx(r, abs=1e-9) for r in reached)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ground_truth=gold_rows(distinct=True), turns=st.lists(turn_texts(), min_size=1, max_size=6), data=st.data())
def test_repeating_an_earlier_turn_never_raises_the_return(ground_truth, turns, data):
    """(b) On gold that holds no call twice, a turn that repeats an earlier one makes no progress: the return drops
    by exactly extra_step_reward (a gold holding a call twice pays the second copy, tested by hand above)."""
    earlier = data.draw(st.sampled_from(turns))
    before = rewards(turns, ground_truth)
    after = rewards([*turns, earlier], ground_truth)
    if earlier == REPLY:  # not a tool turn: nothing appended
        assert after == before
        return
    assert after[:-1] == before and after[-1] == EXTRA
    assert sum(after) < sum(before)
