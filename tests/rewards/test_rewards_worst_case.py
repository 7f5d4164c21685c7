"""HierR's time is linear in the calls of one rollout: 20,000 calls in one rollout are scored within 10 s of CPU time.

The rollout shape that was quadratic is many calls of one tool with the same argument names: counting repeats for the
step rewards compared each call with every earlier one (500 calls 0.18 s, 1,000 0.75 s, 2,000 2.8 s, 4,000 10.2 s,
20,000 not done in 60 s; ~250 s by the square). The bound is CPU time of the scoring thread (``time.thread_time``:
not wall time, which another job on the machine stretches, nor the process's, which counts the background threads
earlier tests of the session leave running: Ray's, TransferQueue's, HTTP servers'), with Python's garbage collector
paused while it runs (a cyclic collection walks every object the session holds, so its cost grew with the tests run
before). It sits between the linear code (0.6-1.0 s alone on AVX-512 and AVX2 EPYCs; 2.45 s once, inside the
default tier on an AVX2 one, before the collector was paused) and the quadratic one, 25 times over the bound, so the
processor does not decide it; docs/bad_inputs.md ("Worst-case times") holds it.
"""

import asyncio
import gc
import json
import time

import pytest

from slca_verl.rewards import score_decoded, score_trajectory

N = 20_000
BOUND_S = 10.0
W = {"name": "get_weather", "arguments": {"city": "Paris"}}
GT = {"allowed_tools": ["get_weather"], "gold_tool_calls": [[W]], "question_content": "Weather in Paris?"}
CALL = "<tool_call>\n" + json.dumps(W) + "\n</tool_call>"
ENV = '\nuser\n<tool_response>\n{"temp_c": 21}\n</tool_response>\nassistant\n'
REPLY = "It is 21 degrees in Paris."


def cpu_seconds(coroutine_fn) -> tuple[float, dict]:
    gc.collect()
    gc.disable()  # the session's heap, not the scoring, would set a cyclic collection's cost
    try:
        start = time.thread_time()  # asyncio.run runs the scoring in this thread
        out = asyncio.run(coroutine_fn())
        return time.thread_time() - start, out
    finally:
        gc.enable()


@pytest.mark.parametrize(
    "shape",
    ["20,000 calls in one turn", "20,000 turns of one call, decoded, no turn count"],
)
def test_twenty_thousand_calls_in_one_rollout_are_scored_within_the_bound(shape):
    if shape.startswith("20,000 calls in one turn"):

        def run():
            return score_trajectory(["\n".join([CALL] * N), REPLY], ['{"temp_c": 21}'] * N, GT)

    else:  # every turn answered by the environment: the forgery check reads each turn too

        def run():
            return score_decoded(ENV.join([CALL] * N) + ENV + REPLY, GT)

    seconds, out = cpu_seconds(run)
    assert out["num_calls"] == N and out["forged_tool_output"] == 0 and out["reason"] == ""
    assert seconds < BOUND_S, f"{shape}: {seconds:.2f} s of CPU time (bound {BOUND_S} s)"
