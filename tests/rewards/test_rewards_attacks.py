"""Typed tool responses and bare markers buy no reward, in every tool-call format, through HierR's three ways in:
the agent loop's pieces, decoded text with verl's turn count, decoded text without it.

The battery (benchmarks/reward_attacks.py, its table in docs/rewards.md) is asserted attack by attack, and a
hypothesis property generates typed runs in any format, turn and place, with any text and with or without a call
hidden inside, each built as verl's loop would have run it (the hidden call runs; the environment answers every
call), and compares each with the same rollout whose typed run is plain text (the same calls, the same answers).
"""

import asyncio

import pytest
import reward_attacks as RA  # noqa: E402  (the benchmark script under test)
from hypothesis import HealthCheck, given, settings
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
