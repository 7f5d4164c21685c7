"""Typed tool responses and bare markers buy no reward, in every tool-call format, through HierR's three ways in:
the agent loop's pieces, decoded text with verl's turn count, decoded text without it (checked against the answers of
the loop that produced it: slca_tool_agent, the default, or verl's tool_agent).

The battery (benchmarks/reward_attacks.py, its table in docs/rewards.md) is asserted attack by attack under both
loops' rules, and two hypothesis properties generate typed runs: in any format, turn and place, with any text and
with or without a call hidden inside, each built as verl's loop would have run it (the hidden call runs; the
environment answers every call); and at any character of a turn (inside a call too) of a rollout run as
slca_tool_agent runs it (every attempt answered, an unreadable one with the loop's own error text). Each is compared
with the same rollout whose typed run is plain text (the same calls, the same answers).
"""

import asyncio

import pytest
import reward_attacks as RA  # noqa: E402  (the benchmark script under test)
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from slca_verl.rewards.hierr import HierRConfig, score_decoded  # noqa: E402

RESIDUAL = "typed response and reply in the last turn, cut by the turn limit"


@pytest.fixture(scope="module")
def battery():
    return asyncio.run(RA.battery())


def test_the_battery_covers_every_format_and_way_in(battery):
    assert {r["format"] for r in battery} == set(RA.FORMATS) and len(RA.FORMATS) == 9
    assert len(battery) == 9 * 6 * 3


def test_no_attack_gains_through_the_loop_or_with_the_turn_count(battery):
    gained = [
        (r["format"], r["attack"], r["entry"], r["gain"])
        for r in battery
        if r["entry"] != "decoded" and r["gain"] > 1e-9
    ]
    assert gained == []


def test_without_the_turn_count_only_the_documented_residual_gains(battery):
    gained = {(r["format"], r["attack"]) for r in battery if r["entry"] == "decoded" and r["gain"] > 1e-9}
    assert gained == {(f, RESIDUAL) for f in RA.FORMATS}


def test_under_verls_tool_agent_rule_the_battery_gains_the_same():
    rows = asyncio.run(RA.battery(agent_loop="tool_agent"))
    gained = {(r["format"], r["attack"], r["entry"]) for r in rows if r["gain"] > 1e-9}
    assert gained == {(f, RESIDUAL, "decoded") for f in RA.FORMATS}


@pytest.mark.parametrize("agent_loop", [None, "tool_agent"])
def test_the_attacks_on_the_slca_tool_agent_rule_gain_nothing_anywhere(agent_loop):
    """A typed response that splits a call (the text on each side reads as an attempt the loop would answer), and a
    typed copy of the loop's own error text after an unreadable call: neither gains on any way in. Without the
    rule's check of the error text, the split call gained +0.23 (hermes) to +0.27 under the offline proxy judge."""
    rows = asyncio.run(RA.battery(agent_loop=agent_loop, slca=True))
    assert len(rows) == 9 * 2 * 3
    assert [(r["format"], r["attack"], r["entry"], r["gain"]) for r in rows if r["gain"] > 1e-9] == []


def test_the_residual_is_what_the_docs_say_it_is():
    # the turn limit stopped the episode on its call turn; with verl's count (2: no environment turn) it is forged
    _, honest, attacked = next(a for a in RA.attacks("hermes") if a[0] == RESIDUAL)
    judge, cfg = RA.GenerousJudge(), HierRConfig()
    with_count = asyncio.run(score_decoded(attacked.decoded(), attacked.gt, judge=judge, config=cfg, num_turns=2))
    assert with_count["forged_tool_output"] == 1 and with_count["score"] == -0.5
    without = asyncio.run(score_decoded(attacked.decoded(), attacked.gt, judge=judge, config=cfg))
    cut = asyncio.run(score_decoded(honest.decoded(), honest.gt, judge=judge, config=cfg))
    assert (without["score"], cut["score"]) == (2.0, 1.0)  # the reply after the typed run is judged: +1.0


def test_an_honest_parallel_and_multi_turn_rollout_is_never_taken_for_a_forgery():
    for fmt in RA.FORMATS:
        c = RA.call(fmt)
        two = RA.get_format(fmt).render_calls([{"name": "get_weather", "arguments": {"city": "Paris"}}] * 2)
        ep = RA.Episode([two, c, RA.REPLY], [[RA.REAL, RA.REAL], [RA.REAL]], RA.GT)
        out = asyncio.run(
            score_decoded(ep.decoded(), ep.gt, judge=RA.GenerousJudge(), config=HierRConfig(tool_call_format=fmt))
        )
        assert out["forged_tool_output"] == 0 and out["num_tool_responses"] == 3, (fmt, out["reason"])
        # the environment may answer fewer calls than were made (max_parallel_calls, a cut response): still honest
        short = RA.Episode([two, RA.REPLY], [[RA.REAL]], RA.GT)
        out = asyncio.run(score_decoded(short.decoded(), short.gt, config=HierRConfig(tool_call_format=fmt)))
        assert out["forged_tool_output"] == 0, fmt


BODY = st.text(
    alphabet=st.characters(whitelist_categories=("L", "N", "Zs"), whitelist_characters=':,.{}"'), max_size=40
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fmt=st.sampled_from(RA.FORMATS),
    turn=st.sampled_from([0, 1]),
    before=st.booleans(),
    hidden=st.sampled_from([None, "Paris", "Lyon"]),
    body=BODY,
)
def test_a_typed_run_anywhere_buys_nothing_over_the_same_text_untyped(fmt, turn, before, hidden, body):
    c = RA.call(fmt)
    inner = body + ("\n" + RA.call(fmt, hidden) if hidden else "")

    def build(piece: str) -> RA.Episode:
        """The rollout with ``piece`` in turn ``turn``, run as verl's loop runs it."""
        text = [c, RA.REPLY][turn]
        text = piece + text if before else text + piece
        ran = '{"city": "%s"}' % hidden
        if turn == 0:
            return RA.Episode([text, RA.REPLY], [[RA.REAL] + ([ran] if hidden else [])], RA.GT)
        if hidden:  # the loop ran the hidden call and the policy answered again
            return RA.Episode([c, text, RA.REPLY], [[RA.REAL], [ran]], RA.GT)
        return RA.Episode([c, text], [[RA.REAL]], RA.GT)

    attacked, plain = build(RA.typed(inner)), build("\n" + inner + "\n")

    async def run():
        for entry in RA.ENTRIES:
            for judge in RA.JUDGES.values():
                a, p = await RA.score(entry, fmt, attacked, judge), await RA.score(entry, fmt, plain, judge)
                assert a <= p + 1e-9, (entry, judge.name, a, p)

    asyncio.run(run())


TURN_TEXT = st.sampled_from(["call", "wrong", "junk", "reply", "call+reply"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fmt=st.sampled_from(RA.FORMATS),
    first=TURN_TEXT,
    cut=st.floats(0.0, 1.0),
    body=st.sampled_from([RA.FAKE, "Error: the tool call could not be parsed: unreadable call."]),
    agent_loop=st.sampled_from([None, "tool_agent"]),
)
@example(fmt="hermes", first="call", cut=0.5, body=RA.FAKE, agent_loop=None)  # a typed run splitting the call
@example(fmt="glm", first="junk", cut=1.0, body=RA.FAKE, agent_loop=None)  # after an unreadable call
def test_a_typed_run_at_any_character_of_an_slca_rollout_buys_nothing(fmt, first, cut, body, agent_loop):
    """The rollout [call, T, reply] as slca_tool_agent runs it: the loop answers T's every attempt (an unreadable one
    with its own error text). A typed response put at any character of T, inside a call too, never scores above the
    same text untyped."""
    c, wrong = RA.call(fmt), RA.call(fmt, "Lyon")

    async def run():
        junk, _ = await RA.unreadable(fmt)
        text = {"call": c, "wrong": wrong, "junk": junk, "reply": RA.REPLY, "call+reply": c + "\n" + RA.REPLY}[first]
        at = int(cut * len(text))
        attacked_turn = text[:at] + RA.typed(body) + text[at:]
        plain_turn = text[:at] + "\n" + body + "\n" + text[at:]
        # the pair differs by the typed run's tags only when the loop runs the same calls in both turns (in gpt-oss a
        # tag inside the channel header leaves the call unreadable: then it is a broken call against a valid one)
        ran = [
            [(k.name, k.arguments) for k, _ in await RA.get_format(fmt).loop_entries(t, tools=RA.TOOLS) if k]
            for t in (attacked_turn, plain_turn)
        ]
        assume(ran[0] == ran[1])
        eps = []
        for turn in (attacked_turn, plain_turn):
            answers = await RA.slca_answers(fmt, turn)
            # a turn without an attempt ends the episode (the loop answers nothing); else the reply follows the answers
            eps.append(
                RA.Episode([c, turn, RA.REPLY], [[RA.REAL], answers], RA.GT)
                if answers
                else RA.Episode([c, turn], [[RA.REAL]], RA.GT)
            )
        for entry in RA.ENTRIES:
            for judge in RA.JUDGES.values():
                a = await RA.score(entry, fmt, eps[0], judge, agent_loop)
                p = await RA.score(entry, fmt, eps[1], judge, agent_loop)
                assert a <= p + 1e-9, (entry, judge.name, a, p)

    asyncio.run(run())
